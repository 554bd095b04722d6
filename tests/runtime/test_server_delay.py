"""``delay = "server"``: RabbitMQ 4.3's delayed retries of a quorum queue
(docs/explanation/attempts.md, "The quorum queue waits: `delay = "server"`").

On 4.3 rr makes no copy and declares no wait queue: every retry is a counted
``basic.reject(requeue=true)`` and the queue holds the message back ``min(delay_min x
x-delivery-count, delay_max)``; the server's own limit dead-letters the last one. On 3.10
and 4.0 (which accept the arguments and ignore them) ``rr run`` refuses to start and
declares nothing. On every server and on the emulator set to each version.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import AsyncIterator
from datetime import datetime

import pytest

from rabbitctl_retry import Message, Outcome
from rabbitctl_retry.errors import ConflictError, NotFound
from rabbitctl_retry.retry.outcome import AnyOutcome
from rabbitctl_retry.runtime.handlers import Subscriber
from rabbitctl_retry.runtime.loader import HandlerSet
from rabbitctl_retry.runtime.service import RunOptions, Service
from rabbitctl_retry.topology.load import load_text
from rabbitctl_retry.transport.base import Properties
from tests.backends import Backend, backend_of, backend_params, publish
from tests.contract.versions import expected
from tests.observe import depth, peek

TOPOLOGY = """
[queues.jobs]
type = "quorum"
max_attempts = 4
dead_letter = "jobs.dead"
delay = "server"
delay_min = "300ms"
delay_max = "700ms"
"""

WAITS_MS = [300, 600, 700]
"""The server's waits after the first, second and third failure: min(300 x count, 700)."""

IDS = [f"m{n}" for n in range(8)]


def _servers(*, with_delays: bool) -> list[object]:
    """Each chosen server and the emulator set to it, those with delayed retries (4.3 and
    later) or those without."""
    return [
        param
        for param in backend_params()
        if bool(expected(param.values[0][1], "delayed-retries")) is with_delays
    ]


@pytest.fixture
async def target(request: pytest.FixtureRequest) -> AsyncIterator[Backend]:
    async with backend_of(*request.param) as backend:
        yield backend


async def _until_waited(backend: Backend, queue: str, count: int) -> None:
    """Let time pass (the emulator's virtual clock, or the real one) until ``queue`` holds
    ``count`` messages: the waits are the server's, so the test moves time rather than only
    settling."""
    for _ in range(1200):
        if await depth(backend, queue) == count:
            return
        await backend.elapse(0.1)
        await backend.until(lambda: True, "settled")
    raise AssertionError(f"{queue} did not get {count} messages in 120 s")


def service_of(backend: Backend, handler: object) -> Service:
    return Service(
        HandlerSet(module="t", subscribers=(Subscriber("jobs", handler, "t:jobs"),)),  # type: ignore[arg-type]
        topology=load_text(TOPOLOGY),
        connect=backend.connect,
        options=RunOptions(prefetch=20, shutdown_timeout_s=1),
        clock=backend.clock,
    )


@pytest.mark.parametrize("target", _servers(with_delays=True), indirect=True)
async def test_the_quorum_queue_waits_and_its_limit_ends_the_loop(target: Backend) -> None:
    """Each id: four calls (attempts 1-4, x-delivery-count none, 1, 2, 3), never earlier than
    the server's schedule, then jobs.dead once (reason delivery_limit); nothing published to
    wait, no wait queue. Half the handlers ask for 30 s with retry_after: the server's
    schedule decides all the same."""
    backend = target
    calls: dict[str, list[tuple[int, int | None, datetime]]] = defaultdict(list)

    async def failing(msg: Message) -> AnyOutcome:
        message_id = msg.message_id or ""
        calls[message_id].append((msg.attempt, msg.delivery_count, backend.clock.now()))
        if int(message_id[1:]) % 2:
            return Outcome.retry_after(30)
        return Outcome.retry()

    service = service_of(backend, failing)
    async with service.running():
        for message_id in IDS:
            await publish(backend, "jobs", message_id.encode(), Properties(message_id=message_id))

        await _until_waited(backend, "jobs.dead", len(IDS))
    assert await depth(backend, "jobs") == 0
    assert sorted(calls) == IDS
    for message_id, seen in calls.items():
        assert [(attempt, count) for attempt, count, _ in seen] == [
            (1, None),
            (2, 1),
            (3, 2),
            (4, 3),
        ], message_id
        gaps_ms = [(b[2] - a[2]).total_seconds() * 1000 for a, b in itertools.pairwise(seen)]
        # never early (the server's timer; 2 % for the clock's resolution), however late a
        # busy machine makes it
        assert all(gap >= wait * 0.98 for gap, wait in zip(gaps_ms, WAITS_MS, strict=True)), (
            message_id,
            gaps_ms,
        )
    letters = await peek(backend, "jobs.dead")
    assert sorted(letter.properties.message_id or "" for letter in letters) == IDS
    for letter in letters:
        headers = letter.properties.headers or {}
        (death,) = headers["x-death"]  # type: ignore[misc]
        assert (death["queue"], death["reason"], death["count"]) == (  # type: ignore[index]
            "jobs",
            "delivery_limit",
            1,
        )
        assert "x-ruststream-retry-count" not in headers  # never a copy
    channel = await backend.channel()
    with pytest.raises(NotFound):
        await channel.queue_declare("jobs.retry", passive=True)


@pytest.mark.parametrize("target", _servers(with_delays=False), indirect=True)
async def test_older_servers_refuse_before_declaring_anything(target: Backend) -> None:
    """3.10 and 4.0 would ignore x-delayed-retry-* (every retry back at once): rr run stops
    at its declare with a conflict naming the version, and no queue exists afterwards."""
    backend = target

    async def never(msg: Message) -> AnyOutcome:
        raise AssertionError("nothing is consumed")

    service = service_of(backend, never)
    with pytest.raises(ConflictError) as refused:
        async with service.running():
            pass
    assert 'delay = "server" needs RabbitMQ 4.3 or later' in str(refused.value)
    assert f"this server is {backend.version}" in str(refused.value)
    channel = await backend.channel()
    for queue in ("jobs", "jobs.dead"):
        with pytest.raises(NotFound):
            await channel.queue_declare(queue, passive=True)
        channel = await backend.channel()
