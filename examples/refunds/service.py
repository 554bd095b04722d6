"""The refunds service of the retries guide, in Python, written as the guide's macro style:
each handler takes the decoded message and the service's state.

Refunds arrive in the classic queue ``refunds``, payouts in the quorum queue ``payouts``;
after five deliveries both end in their dead-letter queues (``topology.toml``). The payment
processor refuses in three ways, and each needs its own outcome:

* busy — past its rate limit: retrying now would be refused again, so wait out its 2 s window;
* unavailable — no answer: retry at once, up to the attempt cap;
* declined — the card account is closed: the next attempt gets the same answer, so drop it.

A refund paid publishes a :class:`Receipt` to the queue ``refunds.receipts``: an output
(docs/reference/runtime.md, "Publishing"), sent only when the handler acks and confirmed before the
refund is acked.

The processor is the service's state: ``open_clients`` (``@on_startup``) opens it once, and
each handler asks for it with ``State[Processor]`` (docs/reference/handlers.md, "The service's
state").
``service_classes.py`` is the same service written as handler classes, the guide's manual
style; ``test_service.py`` runs both on the same messages.

Every handled message gets one log line from rr run (retried, delayed, dead-lettered,
dropped: docs/reference/runtime.md, "Logs"), or, when it is acked, one from this service, with the
same fields (queue, message_id, attempt, outcome): scripts/demo.sh reads where each one ended from
them.

Run it:  rr run examples/refunds/service.py --topology examples/refunds/topology.toml
"""

from __future__ import annotations

import enum
import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from rabbitctl_retry import Message, Outcome, Outputs, State, on_startup, subscriber

BACKOFF_S = 2
"""How long a busy processor asks its callers to wait (its rate limit's window)."""

RETRY_HEADER = "x-ruststream-retry-count"

RECEIPTS = "refunds.receipts"
"""Where a refund paid publishes its receipt (topology.toml)."""

log = logging.getLogger("rr.example.refunds")


@dataclass(frozen=True)
class Refund:
    """A refund or a payout, as the producers send it (JSON)."""

    id: int
    card: str
    amount_cents: int = 0


@dataclass(frozen=True)
class Receipt:
    """What a refund paid publishes (JSON), with the message id ``receipt-<refund id>``."""

    refund: int
    amount_cents: int


def send_receipt(refund: Refund, out: Outputs) -> None:
    """The receipt of a refund paid: held until the handler acks (docs/reference/runtime.md,
    "Publishing"); its id is the same on every attempt, so a consumer can tell a second copy."""
    out.publish(
        Receipt(refund.id, refund.amount_cents), to=RECEIPTS, message_id=f"receipt-{refund.id}"
    )


class Refusal(enum.Enum):
    BUSY = "busy"
    UNAVAILABLE = "unavailable"
    DECLINED = "declined"


@dataclass
class Processor:
    """A stand-in payment processor. A card's answers can be scripted in ``script``, one per
    call (the last one repeats); the cards named "busy", "unavailable" and "declined" always
    get that refusal; every other card is accepted."""

    script: dict[str, list[Refusal | None]] = field(default_factory=dict)
    calls: list[str] = field(default_factory=list)

    def refund(self, card: str) -> Refusal | None:
        self.calls.append(card)
        answers = self.script.get(card)
        if answers:
            return answers.pop(0) if len(answers) > 1 else answers[0]
        try:
            return Refusal(card)
        except ValueError:
            return None


@dataclass
class ReviewDesk:
    """Where spent refunds and payouts wait for a person."""

    reviewed: list[dict[str, object]] = field(default_factory=list)


@dataclass
class Clients:
    """The service's state: what ``open_clients`` opens once, shared by every handler. A
    handler asks for the part it needs: ``State[Processor]``, ``State[ReviewDesk]``."""

    processor: Processor = field(default_factory=Processor)
    desk: ReviewDesk = field(default_factory=ReviewDesk)


processor = Processor()
"""A stand-in processor for the snippets of README.md and docs/reference/runtime.md that import one;
the service's own is in its state."""


def acked(msg: Message, what: str, level: int = logging.INFO, **more: object) -> None:
    """The line of a message this service acks (rr run logs every other outcome itself)."""
    fields = {"queue": msg.queue, "message_id": msg.message_id, "attempt": msg.attempt}
    log.log(level, what, extra={"rr": fields | {"outcome": "acked"} | more})


@on_startup
@asynccontextmanager
async def open_clients() -> AsyncIterator[Clients]:
    """Open the clients once, before consuming starts; close them after it stopped."""
    log.info("refunds service starting")
    yield Clients()
    log.info("refunds service stopped")


@subscriber("refunds")
async def process_refund(
    refund: Refund, msg: Message, processor: State[Processor], out: Outputs
) -> Outcome:
    """Refunds wait out a busy processor in the broker's wait queue, refunds.retry; a refund
    paid publishes its receipt."""
    match processor.refund(refund.card):
        case None:
            send_receipt(refund, out)
            acked(msg, "refund paid", receipt=f"receipt-{refund.id}")
            return Outcome.ack()
        case Refusal.BUSY:
            return Outcome.retry_after(BACKOFF_S)
        case Refusal.UNAVAILABLE:
            return Outcome.retry()
        case Refusal.DECLINED:
            log.warning("card declined, refund dropped", extra={"rr": {"refund": refund.id}})
            return Outcome.drop()


@subscriber("payouts")
async def send_payout(payout: Refund, msg: Message, processor: State[Processor]) -> Outcome:
    """Payouts live in a quorum queue, which counts their deliveries itself."""
    match processor.refund(payout.card):
        case None:
            acked(msg, "payout sent")
            return Outcome.ack()
        case Refusal.BUSY | Refusal.UNAVAILABLE:
            return Outcome.retry()
        case Refusal.DECLINED:
            return Outcome.drop()


@subscriber("refunds.dead")
def review_refund(msg: Message, desk: State[ReviewDesk]) -> None:
    """A refund that used up its attempts: a person looks at the delivery itself, headers and
    all (a sync handler)."""
    deliveries = msg.headers.get(RETRY_HEADER, "1")
    refund_id = json.loads(msg.body)["id"]
    desk.reviewed.append({"queue": "refunds.dead", "id": refund_id, "deliveries": deliveries})
    acked(msg, "refund needs a person to look at it", logging.ERROR, deliveries=deliveries)


@subscriber("payouts.dead")
async def review_payout(msg: Message, desk: State[ReviewDesk]) -> None:
    """A payout the quorum queue moved here: RabbitMQ's own x-death says why."""
    death = msg.deaths[0] if msg.deaths else None
    reason = death.reason if death else None
    desk.reviewed.append({"queue": "payouts.dead", "id": msg.json()["id"], "reason": reason})
    acked(msg, "payout needs a person to look at it", logging.ERROR, reason=reason)
