"""Every row of SPEC §3 through the real consumer runtime, on each backend.

Exact numbers: how many deliveries the handler saw, with which headers, and which queue holds
the message afterwards.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest

from rabbitctl_retry import Message, Outcome
from rabbitctl_retry.retry.outcome import AnyOutcome
from rabbitctl_retry.runtime.handlers import Subscriber
from rabbitctl_retry.runtime.loader import HandlerSet
from rabbitctl_retry.runtime.service import RunOptions, Service
from rabbitctl_retry.topology.load import load_text
from rabbitctl_retry.topology.model import Topology
from rabbitctl_retry.transport.base import Properties
from tests.runtime.backends import Backend, depth, peek, publish

H = "x-ruststream-retry-count"


@dataclass
class Seen:
    """What the handler saw on each delivery."""

    retry_headers: list[object] = field(default_factory=list)
    delivery_counts: list[int | None] = field(default_factory=list)
    attempts: list[int] = field(default_factory=list)
    times: list[float] = field(default_factory=list)
    redelivered: list[bool] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.attempts)


def recording(seen: Seen, outcome: Callable[[Message], AnyOutcome | None], backend: Backend) -> Any:
    async def handler(msg: Message) -> AnyOutcome | None:
        seen.retry_headers.append(msg.headers.get(H))
        seen.delivery_counts.append(msg.delivery_count)
        seen.attempts.append(msg.attempt)
        seen.times.append(backend.clock.now().timestamp())
        seen.redelivered.append(msg.redelivered)
        return outcome(msg)

    return handler


@asynccontextmanager
async def running(
    backend: Backend, topology: Topology, queue: str, handler: Any
) -> AsyncIterator[Service]:
    service = Service(
        HandlerSet(module="test", subscribers=(Subscriber(queue, handler, f"test:{queue}"),)),
        topology=topology,
        connect=backend.connect,
        options=RunOptions(prefetch=10, shutdown_timeout_s=5),
        clock=backend.clock,
    )
    task = asyncio.ensure_future(service.run())
    ready = asyncio.ensure_future(service.wait_ready())
    await asyncio.wait({task, ready}, return_when=asyncio.FIRST_COMPLETED)
    if task.done():
        ready.cancel()
        task.result()
    try:
        yield service
    finally:
        service.stop()
        await task


GUIDE = """
[queues.refunds]
max_attempts = 5
dead_letter = "refunds.dead"
delay = "dlx-ttl"

[queues.payouts]
type = "quorum"
max_attempts = 5
dead_letter = "payouts.dead"
"""

ORIGINAL = Properties(
    message_id="m-1",
    correlation_id="c-1",
    content_type="application/json",
    headers={"x-tenant": "acme"},
)
BODY = json.dumps({"id": 1, "card": "4111"}).encode()


async def test_classic_retry_is_five_deliveries_then_the_dead_letter_queue(
    backend: Backend,
) -> None:
    seen = Seen()
    topology = load_text(GUIDE)
    async with running(
        backend, topology, "refunds", recording(seen, lambda m: Outcome.retry(), backend)
    ):
        await publish(backend, "refunds", BODY, ORIGINAL)
        await backend.until(lambda: len(seen) >= 5, "five deliveries")
        dead = await _wait_for_messages(backend, "refunds.dead", 1)
    assert seen.retry_headers == [None, "1", "2", "3", "4"]
    assert seen.attempts == [1, 2, 3, 4, 5]
    assert len(dead) == 1
    letter = dead[0]
    assert letter.body == BODY
    assert letter.properties.message_id == "m-1"
    assert letter.properties.correlation_id == "c-1"
    assert letter.properties.content_type == "application/json"
    assert letter.properties.delivery_mode == 2
    headers = letter.properties.headers or {}
    assert headers[H] == "5"
    assert headers["x-tenant"] == "acme"
    assert headers["rr-origin-queue"] == "refunds"
    assert isinstance(headers["rr-failed-at"], str)
    assert "x-death" not in headers
    assert await depth(backend, "refunds") == 0
    assert await depth(backend, "refunds.retry") == 0
    assert len(seen) == 5


async def test_quorum_retry_is_five_deliveries_then_the_server_dead_letters(
    backend: Backend,
) -> None:
    seen = Seen()
    topology = load_text(GUIDE)
    async with running(
        backend, topology, "payouts", recording(seen, lambda m: Outcome.retry(), backend)
    ):
        await publish(backend, "payouts", BODY, ORIGINAL)
        await backend.until(lambda: len(seen) >= 5, "five deliveries")
        dead = await _wait_for_messages(backend, "payouts.dead", 1)
    assert seen.delivery_counts == [None, 1, 2, 3, 4]
    assert seen.attempts == [1, 2, 3, 4, 5]
    assert seen.retry_headers == [None] * 5
    headers = dead[0].properties.headers or {}
    death = headers["x-death"][0]  # type: ignore[index]
    assert death["reason"] == "delivery_limit"
    assert death["queue"] == "payouts"
    assert death["count"] == 1
    assert H not in headers
    assert dead[0].body == BODY
    assert await depth(backend, "payouts") == 0
    assert len(seen) == 5


async def test_drop_on_classic_is_gone(backend: Backend) -> None:
    seen = Seen()
    topology = load_text(GUIDE)
    async with running(
        backend, topology, "refunds", recording(seen, lambda m: Outcome.drop(), backend)
    ):
        await publish(backend, "refunds", BODY, ORIGINAL)
        await backend.until(lambda: len(seen) >= 1, "one delivery")
        await backend.wait(0.3)
    assert len(seen) == 1
    assert await depth(backend, "refunds") == 0
    assert await depth(backend, "refunds.dead") == 0


async def test_drop_on_quorum_reaches_the_dead_letter_queue_as_rejected(backend: Backend) -> None:
    seen = Seen()
    topology = load_text(GUIDE)
    async with running(
        backend, topology, "payouts", recording(seen, lambda m: Outcome.drop(), backend)
    ):
        await publish(backend, "payouts", BODY, ORIGINAL)
        dead = await _wait_for_messages(backend, "payouts.dead", 1)
    assert len(seen) == 1
    death = (dead[0].properties.headers or {})["x-death"][0]  # type: ignore[index]
    assert (death["reason"], death["queue"], death["count"]) == ("rejected", "payouts", 1)


async def test_ack_and_none_remove_the_message(backend: Backend) -> None:
    seen = Seen()
    topology = load_text(GUIDE)
    async with running(backend, topology, "refunds", recording(seen, lambda m: None, backend)):
        for _ in range(3):
            await publish(backend, "refunds", BODY, ORIGINAL)
        await backend.until(lambda: len(seen) >= 3, "three deliveries")
    assert len(seen) == 3
    assert await depth(backend, "refunds") == 0


async def test_an_exception_retries_and_its_type_reaches_the_dead_letter(backend: Backend) -> None:
    seen = Seen()
    topology = load_text(
        GUIDE.replace(
            'max_attempts = 5\ndead_letter = "refunds.dead"',
            'max_attempts = 2\ndead_letter = "refunds.dead"',
        )
    )

    def explode(msg: Message) -> AnyOutcome:
        raise ConnectionError("processor did not answer")

    async with running(backend, topology, "refunds", recording(seen, explode, backend)):
        await publish(backend, "refunds", BODY, ORIGINAL)
        dead = await _wait_for_messages(backend, "refunds.dead", 1)
    assert len(seen) == 2
    headers = dead[0].properties.headers or {}
    assert headers["rr-error-type"] == "ConnectionError"
    assert headers["rr-error-message"] == "processor did not answer"
    assert headers[H] == "2"


async def test_retry_after_waits_on_the_broker_and_dead_letters_after_five(
    backend: Backend,
) -> None:
    seen = Seen()
    topology = load_text(GUIDE)
    async with running(
        backend, topology, "refunds", recording(seen, lambda m: Outcome.retry_after(1), backend)
    ):
        await publish(backend, "refunds", BODY, ORIGINAL)
        await backend.until(lambda: len(seen) >= 1, "the first delivery")
        # Between deliveries the copy waits in the broker's wait queue, not in the service.
        await backend.until(lambda: True, "settle")
        waiting = await _wait_for_messages(backend, "refunds.retry", 1)
        assert waiting[0].properties.expiration == "1000"
        assert (waiting[0].properties.headers or {})[H] == "1"
        for deliveries in range(2, 6):
            await backend.wait(1.0)
            await backend.until(lambda n=deliveries: len(seen) >= n, f"delivery {deliveries}")
        dead = await _wait_for_messages(backend, "refunds.dead", 1)
    assert seen.retry_headers == [None, "1", "2", "3", "4"]
    gaps = [later - earlier for earlier, later in zip(seen.times, seen.times[1:], strict=False)]
    assert all(gap >= 0.999 for gap in gaps), gaps
    assert (dead[0].properties.headers or {})[H] == "5"
    assert await depth(backend, "refunds.retry") == 0
    assert await depth(backend, "refunds") == 0


async def _wait_for_messages(backend: Backend, queue: str, count: int) -> list[Any]:
    found: list[Any] = []

    async def refresh() -> None:
        found[:] = await peek(backend, queue)

    loop_deadline = asyncio.get_running_loop().time() + 60
    while True:
        await refresh()
        if len(found) >= count or asyncio.get_running_loop().time() > loop_deadline:
            break
        await backend.wait(0.05)
    if len(found) < count:
        pytest.fail(f"{queue} holds {len(found)} messages, expected {count}")
    return found
