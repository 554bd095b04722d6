"""The refunds service of service.py written as handler classes, the guide's manual style: the
same behaviour, one class per queue (docs/reference/handlers.md, "Handler classes").

A class marked ``@subscriber`` is created by rr with no arguments when the module loads, and
its ``handle`` method is called per delivery with the same parameters a function handler
takes: the decoded message, ``Message``, ``State[T]``. A handler that needs something given
to it at creation is registered as an instance instead (``review_payouts`` below).

The state is service.py's: ``open_clients`` is imported, so it is this module's
``@on_startup`` hook too.

Run it:  rr run examples/refunds/service_classes.py --topology examples/refunds/topology.toml
"""

from __future__ import annotations

import json
import logging

from service import (
    BACKOFF_S,
    RETRY_HEADER,
    Processor,
    Refund,
    Refusal,
    ReviewDesk,
    acked,
    log,
    open_clients,
    send_receipt,
)

from rabbitctl_retry import Message, Outcome, Outputs, State, subscriber

__all__ = ["PayoutReview", "ProcessRefund", "RefundReview", "SendPayout", "open_clients"]


@subscriber("refunds")
class ProcessRefund:
    """Refunds wait out a busy processor in the broker's wait queue, refunds.retry; a refund
    paid publishes its receipt."""

    async def handle(
        self, refund: Refund, msg: Message, processor: State[Processor], out: Outputs
    ) -> Outcome:
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
class SendPayout:
    """Payouts live in a quorum queue, which counts their deliveries itself."""

    async def handle(self, payout: Refund, msg: Message, processor: State[Processor]) -> Outcome:
        match processor.refund(payout.card):
            case None:
                acked(msg, "payout sent")
                return Outcome.ack()
            case Refusal.BUSY | Refusal.UNAVAILABLE:
                return Outcome.retry()
            case Refusal.DECLINED:
                return Outcome.drop()


@subscriber("refunds.dead")
class RefundReview:
    """A refund that used up its attempts: a person looks at the delivery itself, headers and
    all (a sync ``handle``, run in a worker thread)."""

    def handle(self, msg: Message, desk: State[ReviewDesk]) -> None:
        deliveries = msg.headers.get(RETRY_HEADER, "1")
        refund_id = json.loads(msg.body)["id"]
        desk.reviewed.append({"queue": "refunds.dead", "id": refund_id, "deliveries": deliveries})
        acked(msg, "refund needs a person to look at it", logging.ERROR, deliveries=deliveries)


class PayoutReview:
    """A payout the quorum queue moved here: RabbitMQ's own x-death says why. Created with
    its log level, so registered as an instance."""

    def __init__(self, level: int) -> None:
        self.level = level

    async def handle(self, msg: Message, desk: State[ReviewDesk]) -> None:
        death = msg.deaths[0] if msg.deaths else None
        reason = death.reason if death else None
        desk.reviewed.append({"queue": "payouts.dead", "id": msg.json()["id"], "reason": reason})
        acked(msg, "payout needs a person to look at it", self.level, reason=reason)


review_payouts = subscriber("payouts.dead")(PayoutReview(logging.ERROR))
