"""A handler that hangs (docs/reference/runtime.md, "Handlers"): past its timeout the call counts as
a failed attempt, so ``max_attempts`` ends the message in the dead-letter queue on every server
and queue type, and the messages behind it go on. On RabbitMQ (3.10, 4.0) and the emulator.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import pytest

from rabbitctl_retry import Message, Outcome
from rabbitctl_retry.retry.outcome import AnyOutcome
from rabbitctl_retry.runtime.handlers import Subscriber, subscriber
from rabbitctl_retry.runtime.loader import HandlerSet
from rabbitctl_retry.runtime.service import RunOptions, Service
from rabbitctl_retry.topology.load import load_text
from rabbitctl_retry.transport.base import Properties
from tests.backends import Backend, publish
from tests.observe import depth, peek

H = "x-ruststream-retry-count"
TOPOLOGY = '[queues.work]\ntype = "{type}"\nmax_attempts = 3\ndead_letter = "work.dead"\n'
QUEUE_TYPES = pytest.mark.parametrize("queue_type", ["classic", "quorum"])


@pytest.fixture
def released() -> Iterator[threading.Event]:
    """Set at the end of the test: the sync handlers that hung return, and their threads end."""
    event = threading.Event()
    yield event
    event.set()


async def serve_until_dead(
    backend: Backend, queue_type: str, handler: object, options: RunOptions
) -> list[object]:
    """Run ``handler`` on ``work``; publish ``stuck`` then ``fine``; return the dead letters
    once ``stuck`` is there."""
    service = Service(
        HandlerSet(module="t", subscribers=(Subscriber("work", handler, "t:hangs"),)),  # type: ignore[arg-type]
        topology=load_text(TOPOLOGY.format(type=queue_type)),
        connect=backend.connect,
        options=options,
        clock=backend.clock,
    )
    async with service.running():
        await publish(backend, "work", b"stuck", Properties(message_id="stuck"))
        await publish(backend, "work", b"fine", Properties(message_id="fine"))

        async def dead() -> bool:
            return await depth(backend, "work.dead") == 1

        await backend.until(dead, "the hanging message dead-lettered")
        letters = await peek(backend, "work.dead")
        assert service.stats.handler_timeouts == 3
    assert await depth(backend, "work") == 0
    return letters


@QUEUE_TYPES
async def test_an_async_handler_that_never_returns_is_dead_lettered_after_max_attempts(
    backend: Backend, queue_type: str
) -> None:
    calls: list[tuple[str | None, int]] = []

    async def hangs(msg: Message) -> AnyOutcome:
        calls.append((msg.message_id, msg.attempt))
        if msg.message_id == "stuck":
            await asyncio.Event().wait()
        return Outcome.ack()

    options = RunOptions(prefetch=10, shutdown_timeout_s=5, handler_timeout_s=1.0)
    letters = await serve_until_dead(backend, queue_type, hangs, options)
    assert [attempt for message_id, attempt in calls if message_id == "stuck"] == [1, 2, 3]
    assert [message_id for message_id, _ in calls].count("fine") == 1  # not held back
    (letter,) = letters
    headers = letter.properties.headers or {}  # type: ignore[attr-defined]
    if queue_type == "classic":  # rr's own dead-letter copy carries the failure
        assert headers["rr-error-type"] == "rr.HandlerTimeout"
        assert headers["rr-error-message"] == "t:hangs did not return within 1 s"
        assert headers[H] == "3"
    else:  # the server moved it after the third counted return
        assert headers["x-death"][0]["reason"] == "delivery_limit"


@QUEUE_TYPES
async def test_a_sync_handler_that_never_returns_is_dead_lettered_too(
    backend: Backend, queue_type: str, released: threading.Event
) -> None:
    """Its thread cannot be stopped: the call is failed and the thread left to return when
    it will (here at the end of the test)."""

    def hangs(msg: Message) -> AnyOutcome:
        if msg.message_id == "stuck":
            released.wait(60)
        return Outcome.ack()

    options = RunOptions(prefetch=10, shutdown_timeout_s=5, handler_timeout_s=1.0)
    letters = await serve_until_dead(backend, queue_type, hangs, options)
    assert [letter.properties.message_id for letter in letters] == ["stuck"]  # type: ignore[attr-defined]


def test_the_subscriber_timeout_wins_over_rr_runs() -> None:
    @subscriber("work", timeout=2.5)
    async def own(msg: Message) -> None: ...

    async def plain(msg: Message) -> None: ...

    assert Subscriber("work", own, "own").timeout_s == 2.5
    assert Subscriber("work", plain, "plain").timeout_s is None
    for bad in (0, -1, float("nan"), True, "5"):
        with pytest.raises(TypeError, match="timeout must be a number of seconds above 0"):
            subscriber("work", timeout=bad)  # type: ignore[arg-type]
