"""Typed handlers as docs/reference/handlers.md writes them: ``mypy --strict`` passes on this file
(tests/typechecks/test_mypy.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pydantic

from rabbitctl_retry import Message, Outcome, State, subscriber
from rabbitctl_retry.retry.outcome import AnyOutcome


@dataclass
class Refund:
    id: int
    amount: float


class Payout(pydantic.BaseModel):
    id: int


class Processor:
    def refund(self, refund_id: int) -> bool:
        return refund_id > 0


@subscriber("refunds")
async def process_refund(refund: Refund, processor: State[Processor], msg: Message) -> Outcome:
    if not processor.refund(refund.id):  # a Processor to mypy
        return Outcome.retry_after(30)
    if msg.attempt > 3:
        return Outcome.dead_letter("too many tries")
    return Outcome.ack()


@subscriber("payouts", timeout=5, on_decode_error="drop")
def send_payout(payout: Payout) -> None:
    assert payout.id > 0


@subscriber("raw")
async def raw(body: bytes, msg: Message) -> AnyOutcome | None:
    return None if body else Outcome.drop()


@subscriber("events")
async def events(data: dict[str, Any]) -> None: ...


@subscriber("refund-classes")
class Refunds:
    def __init__(self, processor: State[Processor]) -> None:
        self.processor = processor

    async def handle(self, refund: Refund) -> Outcome | None:
        return None if self.processor.refund(refund.id) else Outcome.retry()


# the decorator gives each back with its own type
same: None = send_payout(Payout(id=1))
made: Refunds = Refunds(Processor())
