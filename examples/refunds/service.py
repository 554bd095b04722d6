"""The refunds service of the retries guide, in Python.

Refunds arrive in the classic queue ``refunds``, payouts in the quorum queue ``payouts``;
after five deliveries both end in their dead-letter queues (``topology.toml``). The payment
processor refuses in three ways, and each needs its own outcome:

* busy — past its rate limit: retrying now would be refused again, so wait out its 2 s window;
* unavailable — no answer: retry at once, up to the attempt cap;
* declined — the card account is closed: the next attempt gets the same answer, so drop it.

Every handled message gets one log line from rr run (retried, delayed, dead-lettered,
dropped: docs/runtime.md, "Logs"), or, when it is acked, one from this service, with the same
fields (queue, message_id, attempt, outcome): scripts/demo.sh reads where each one ended from
them.

Run it:  rr run examples/refunds/service.py --topology examples/refunds/topology.toml
"""

from __future__ import annotations

import enum
import json
import logging
from dataclasses import dataclass, field

from rabbitctl_retry import Message, Outcome, on_shutdown, on_startup, subscriber

BACKOFF_S = 2
"""How long a busy processor asks its callers to wait (its rate limit's window)."""

RETRY_HEADER = "x-ruststream-retry-count"

log = logging.getLogger("rr.example.refunds")


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


processor = Processor()
reviewed: list[dict[str, object]] = []


def acked(msg: Message, what: str, level: int = logging.INFO, **more: object) -> None:
    """The line of a message this service acks (rr run logs every other outcome itself)."""
    fields = {"queue": msg.queue, "message_id": msg.message_id, "attempt": msg.attempt}
    log.log(level, what, extra={"rr": fields | {"outcome": "acked"} | more})


@on_startup
def open_clients() -> None:
    log.info("refunds service starting")


@on_shutdown
def close_clients() -> None:
    log.info("refunds service stopped")


@subscriber("refunds")
async def process_refund(msg: Message) -> Outcome:
    """Refunds wait out a busy processor in the broker's wait queue, refunds.retry."""
    refund = msg.json()
    match processor.refund(refund["card"]):
        case None:
            acked(msg, "refund paid")
            return Outcome.ack()
        case Refusal.BUSY:
            return Outcome.retry_after(BACKOFF_S)
        case Refusal.UNAVAILABLE:
            return Outcome.retry()
        case Refusal.DECLINED:
            log.warning("card declined, refund dropped", extra={"rr": {"refund": refund["id"]}})
            return Outcome.drop()


@subscriber("payouts")
async def send_payout(msg: Message) -> Outcome:
    """Payouts live in a quorum queue, which counts their deliveries itself."""
    payout = msg.json()
    match processor.refund(payout["card"]):
        case None:
            acked(msg, "payout sent")
            return Outcome.ack()
        case Refusal.BUSY | Refusal.UNAVAILABLE:
            return Outcome.retry()
        case Refusal.DECLINED:
            return Outcome.drop()


@subscriber("refunds.dead")
def review_refund(msg: Message) -> None:
    """A refund that used up its attempts: a person looks at it (a sync handler)."""
    deliveries = msg.headers.get(RETRY_HEADER, "1")
    reviewed.append(
        {"queue": "refunds.dead", "id": json.loads(msg.body)["id"], "deliveries": deliveries}
    )
    acked(msg, "refund needs a person to look at it", logging.ERROR, deliveries=deliveries)


@subscriber("payouts.dead")
async def review_payout(msg: Message) -> None:
    """A payout the quorum queue moved here: RabbitMQ's own x-death says why."""
    death = msg.deaths[0] if msg.deaths else None
    reviewed.append(
        {
            "queue": "payouts.dead",
            "id": msg.json()["id"],
            "reason": death.reason if death else None,
        }
    )
    acked(msg, "payout needs a person to look at it", logging.ERROR, reason=death and death.reason)
