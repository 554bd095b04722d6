"""Mistakes ``mypy --strict`` finds in typed handlers (tests/typechecks/test_mypy.py expects
each error on its line)."""

from __future__ import annotations

from dataclasses import dataclass

from rabbitctl_retry import Message, Outcome
from rabbitctl_retry.runtime.handlers import subscriber
from rabbitctl_retry.runtime.state import State


@dataclass
class Refund:
    id: int


class Processor:
    def refund(self, refund_id: int) -> bool:
        return refund_id > 0


@subscriber(42)  # E: a queue is a str
async def not_a_queue(msg: Message) -> None: ...


@subscriber("refunds")
async def wrong_state(refund: Refund, processor: State[Processor]) -> None:
    processor.charge(refund.id)  # E: Processor has no charge
    count: int = processor  # E: a Processor is not an int
    del count


@subscriber("refunds")  # E: a handler returns an Outcome or None
def returns_int(msg: Message) -> int:
    return 1


@subscriber("refunds")  # E: an async one too
async def returns_text(msg: Message) -> str:
    return "ok"


@subscriber("refunds", timeout="5")  # E: seconds are a number
async def bad_timeout(msg: Message) -> Outcome:
    return Outcome.ack()
