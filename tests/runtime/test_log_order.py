"""The decision's log line comes before what the next queue's handler logs of the same message
(docs/reference/runtime.md, "Logs"). A dead letter copy is delivered to the dead-letter queue's
consumer as soon as the server routes it, while its confirm (for a persistent message, once written)
may come later: rr used to log ``dead-lettered`` after the confirm, so the review handler's
line often came first (seen in scripts/demo.sh). The line is now written before the frames go
out. On RabbitMQ (every server) and the emulator."""

from __future__ import annotations

import logging

import pytest

from rabbitctl_retry import Message, Outcome
from rabbitctl_retry.retry.outcome import AnyOutcome
from rabbitctl_retry.runtime.handlers import Subscriber
from rabbitctl_retry.runtime.loader import HandlerSet
from rabbitctl_retry.runtime.service import RunOptions, Service
from rabbitctl_retry.topology.load import load_text
from rabbitctl_retry.transport.base import Properties
from tests.backends import Backend, publish
from tests.observe import depth

TOPOLOGY = """
[queues.work]
type = "{kind}"
max_attempts = 2
dead_letter = "work.dead"

[queues."work.dead"]
"""
MESSAGES = 10
DECISION_LINES = ("dead-lettered", "rejected to the queue's dead-letter route")

review = logging.getLogger("rr.test.review")


async def always_fails(msg: Message) -> AnyOutcome:
    return Outcome.retry()


async def reviewed(msg: Message) -> None:
    review.error("needs a person", extra={"rr": {"message_id": msg.message_id}})


@pytest.mark.parametrize("kind", ["classic", "quorum"])
async def test_dead_lettered_is_logged_before_the_dead_letter_queue_handles_it(
    backend: Backend, kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    service = Service(
        HandlerSet(
            module="order",
            subscribers=(
                Subscriber("work", always_fails, "order:always_fails"),
                Subscriber("work.dead", reviewed, "order:reviewed"),
            ),
        ),
        topology=load_text(TOPOLOGY.format(kind=kind)),
        connect=backend.connect,
        options=RunOptions(prefetch=10, shutdown_timeout_s=5),
        clock=backend.clock,
    )
    async with service.running():
        for number in range(1, MESSAGES + 1):
            await publish(
                backend, "work", b"x", Properties(message_id=f"m{number}", delivery_mode=2)
            )

        async def all_reviewed() -> bool:
            lines = [r for r in caplog.records if r.name == review.name]
            return len(lines) == MESSAGES and await depth(backend, "work.dead") == 0

        await backend.until(all_reviewed, "every message reviewed")
    order: dict[str, list[str]] = {}
    for record in caplog.records:
        fields = getattr(record, "rr", {})
        text = record.getMessage()
        if text in (*DECISION_LINES, "needs a person"):
            order.setdefault(fields["message_id"], []).append(text)
    assert len(order) == MESSAGES
    for message_id, lines in order.items():
        assert len(lines) == 2, (message_id, lines)
        assert lines[0] in DECISION_LINES, (message_id, lines)
