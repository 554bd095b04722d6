"""Every row of docs/reference/runtime.md's outcome table through the real consumer runtime, on each
backend.

Exact numbers: how many deliveries the handler saw, with which headers, and which queue holds
the message afterwards.
"""

from __future__ import annotations

import asyncio
import json
import logging
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
from tests.backends import Backend, EmulatorBackend, publish
from tests.observe import depth, peek
from tests.topologies import GUIDE

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
    backend: Backend,
    topology: Topology,
    queue: str,
    handler: Any,
    options: RunOptions | None = None,
) -> AsyncIterator[Service]:
    service = Service(
        HandlerSet(module="test", subscribers=(Subscriber(queue, handler, f"test:{queue}"),)),
        topology=topology,
        connect=backend.connect,
        options=options or RunOptions(prefetch=10, shutdown_timeout_s=5),
        clock=backend.clock,
    )
    async with service.running():
        yield service


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
        await backend.elapse(0.3)
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
    assert headers["rr-handler"] == "test:refunds"  # the Subscriber's name: module:function
    assert headers[H] == "2"


@pytest.mark.parametrize("wait_queue_type", ["classic", "quorum"])
async def test_retry_after_waits_on_the_broker_and_dead_letters_after_five(
    backend: Backend, wait_queue_type: str
) -> None:
    """The copy waits in ``refunds.retry``: by default a classic queue like ``refunds``, or a
    quorum queue that dead-letters it back at least once (``wait_queue_type``)."""
    seen = Seen()
    topology = load_text(
        GUIDE.replace(
            'delay = "dlx-ttl"\n', f'delay = "dlx-ttl"\nwait_queue_type = "{wait_queue_type}"\n'
        )
    )
    assert topology.queues[0].effective_wait_queue_type.value == wait_queue_type
    async with running(
        backend, topology, "refunds", recording(seen, lambda m: Outcome.retry_after(1), backend)
    ):
        await publish(backend, "refunds", BODY, ORIGINAL)
        await backend.until(lambda: len(seen) >= 1, "the first delivery")
        # Between deliveries the copy waits in the broker's wait queue, not in the service.
        await backend.until(lambda: True, "settle")
        waiting = await _wait_for_messages(backend, "refunds.retry", 1)
        assert waiting[0].properties.expiration == "1000"
        # "1", unless a busy machine looked after the first second's wait: a later copy's
        # (the exact sequence of every delivery is asserted below)
        assert (waiting[0].properties.headers or {})[H] in {"1", "2", "3", "4"}
        for deliveries in range(2, 6):
            await backend.elapse(1.0)
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
        await backend.elapse(0.05)
    if len(found) < count:
        pytest.fail(f"{queue} holds {len(found)} messages, expected {count}")
    return found


async def test_retry_without_max_attempts_is_rabbitmqs_own_requeue(backend: Backend) -> None:
    seen = Seen()
    topology = load_text("[queues.plain]\n")

    def twice_then_ack(msg: Message) -> AnyOutcome | None:
        return Outcome.retry() if len(seen) < 3 else None

    async with running(backend, topology, "plain", recording(seen, twice_then_ack, backend)):
        await publish(backend, "plain", BODY, ORIGINAL)
        await backend.until(lambda: len(seen) >= 3, "three deliveries")
    assert seen.retry_headers == [None, None, None]
    assert seen.redelivered == [False, True, True]
    assert await depth(backend, "plain") == 0


async def test_classic_cap_without_dead_letter_rejects_the_last_attempt(backend: Backend) -> None:
    seen = Seen()
    topology = load_text("[queues.capped]\nmax_attempts = 3\n")
    async with running(
        backend, topology, "capped", recording(seen, lambda m: Outcome.retry(), backend)
    ):
        await publish(backend, "capped", BODY, ORIGINAL)
        await backend.until(lambda: len(seen) >= 3, "three deliveries")
        await backend.elapse(0.3)
    assert seen.retry_headers == [None, "1", "2"]
    assert await depth(backend, "capped") == 0


async def test_retry_after_in_memory_waits_in_the_service(backend: Backend) -> None:
    seen = Seen()
    topology = load_text('[queues.mem]\nmax_attempts = 3\ndead_letter = "mem.dead"\n')
    async with running(
        backend, topology, "mem", recording(seen, lambda m: Outcome.retry_after(0.5), backend)
    ):
        await publish(backend, "mem", BODY, ORIGINAL)
        await backend.until(lambda: len(seen) >= 1, "the first delivery")
        assert await depth(backend, "mem") == 0  # the copy is held by the service
        for deliveries in (2, 3):
            await backend.elapse(0.5)
            await backend.until(lambda n=deliveries: len(seen) >= n, f"delivery {deliveries}")
        dead = await _wait_for_messages(backend, "mem.dead", 1)
    assert seen.retry_headers == [None, "1", "2"]
    gaps = [later - earlier for earlier, later in zip(seen.times, seen.times[1:], strict=False)]
    assert all(gap >= 0.499 for gap in gaps), gaps
    assert (dead[0].properties.headers or {})[H] == "3"


async def test_a_graceful_stop_publishes_pending_in_memory_copies(backend: Backend) -> None:
    seen = Seen()
    topology = load_text('[queues.mem]\nmax_attempts = 3\ndead_letter = "mem.dead"\n')
    async with running(
        backend, topology, "mem", recording(seen, lambda m: Outcome.retry_after(3600), backend)
    ):
        await publish(backend, "mem", BODY, ORIGINAL)
        await backend.until(lambda: len(seen) >= 1, "the first delivery")
    waiting = await peek(backend, "mem")
    assert len(waiting) == 1
    assert (waiting[0].properties.headers or {})[H] == "1"
    assert waiting[0].properties.message_id == "m-1"


async def test_delay_tiers_pick_the_wait_queue(backend: Backend) -> None:
    seen = Seen()
    topology = load_text(
        '[queues.tiered]\nmax_attempts = 5\ndead_letter = "tiered.dead"\n'
        'delay_tiers = ["1s", "1m"]\n'
    )
    async with running(
        backend, topology, "tiered", recording(seen, lambda m: Outcome.retry_after(0.3), backend)
    ):
        await publish(backend, "tiered", BODY, ORIGINAL)
        await backend.until(lambda: len(seen) >= 1, "the first delivery")
        waiting = await _wait_for_messages(backend, "tiered.retry.1s", 1)
        assert waiting[0].properties.expiration == "300"
        assert await depth(backend, "tiered.retry.1m") == 0
        await backend.elapse(0.3)
        await backend.until(lambda: len(seen) >= 2, "the second delivery")
    assert seen.retry_headers[:2] == [None, "1"]


async def test_quorum_with_delayed_copies_still_ends_after_n_deliveries(backend: Backend) -> None:
    seen = Seen()
    topology = load_text(
        '[queues.pq]\ntype = "quorum"\nmax_attempts = 4\ndead_letter = "pq.dead"\n'
        'delay = "dlx-ttl"\n'
    )

    def delay_first_then_retry(msg: Message) -> AnyOutcome:
        return Outcome.retry_after(0.2) if msg.attempt == 1 else Outcome.retry()

    async with running(backend, topology, "pq", recording(seen, delay_first_then_retry, backend)):
        await publish(backend, "pq", BODY, ORIGINAL)
        await backend.until(lambda: len(seen) >= 1, "the first delivery")
        await backend.elapse(0.2)
        await backend.until(lambda: len(seen) >= 4, "four deliveries")
        dead = await _wait_for_messages(backend, "pq.dead", 1)
    assert seen.attempts == [1, 2, 3, 4]
    assert seen.retry_headers == [None, "1", "1", "1"]
    assert seen.delivery_counts == [None, None, 1, 2]
    death = (dead[0].properties.headers or {})["x-death"][0]  # type: ignore[index]
    assert (death["reason"], death["queue"]) == ("rejected", "pq")
    assert await depth(backend, "pq") == 0
    assert len(seen) == 4


async def _in_time(backend: Backend, predicate: Callable[[], bool], what: str) -> None:
    """Let (real or virtual) time pass until ``predicate()`` holds; at most 60 s of it."""
    waited_s = 0.0
    while not predicate():
        if waited_s > 60:
            pytest.fail(f"timed out waiting for {what}")
        await backend.elapse(0.05)
        waited_s += 0.05


def _runtime_logs(caplog: pytest.LogCaptureFixture, level: str) -> list[str]:
    return [
        r.getMessage() for r in caplog.records if r.levelname == level and r.name == "rr.runtime"
    ]


async def test_a_returned_copy_holds_the_original_until_its_route_is_back(
    backend: Backend, caplog: pytest.LogCaptureFixture
) -> None:
    """The dead-letter queue is gone: the copy comes back (unroutable). The original is held,
    not handled again, and the copy is tried again with backoff; once the queue exists again
    the copy goes through. One error line for the whole run of refusals."""
    caplog.set_level(logging.INFO, logger="rr")
    seen = Seen()
    topology = load_text('[queues.src]\nmax_attempts = 1\ndead_letter = "src.dead"\n')
    async with running(
        backend, topology, "src", recording(seen, lambda m: Outcome.retry(), backend)
    ) as service:
        connection = await backend.connect()
        channel = await connection.channel()
        await channel.queue_delete("src.dead")  # the dead-letter copy now has no route
        await publish(backend, "src", BODY, ORIGINAL)
        await _in_time(backend, lambda: service.stats.copies_refused >= 3, "three refusals")
        await channel.queue_declare("src.dead")
        await connection.close()
        dead = await _wait_for_messages(backend, "src.dead", 1)
    assert len(seen) == 1
    assert seen.redelivered == [False]
    assert [d.properties.message_id for d in dead] == ["m-1"]
    assert await depth(backend, "src") == 0
    assert _runtime_logs(caplog, "ERROR") == [
        "copy refused; the original is held and the copy tried again with backoff"
    ]
    assert "copies accepted again" in _runtime_logs(caplog, "INFO")


async def test_a_copy_refused_past_the_hold_limit_sends_the_original_back(
    backend: Backend, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="rr")
    seen = Seen()
    topology = load_text('[queues.src]\nmax_attempts = 1\ndead_letter = "src.dead"\n')
    options = RunOptions(prefetch=10, shutdown_timeout_s=5, copy_hold_max_s=1.0)
    async with running(
        backend, topology, "src", recording(seen, lambda m: Outcome.retry(), backend), options
    ):
        connection = await backend.connect()
        channel = await connection.channel()
        await channel.queue_delete("src.dead")
        await connection.close()
        await publish(backend, "src", BODY, ORIGINAL)
        await _in_time(backend, lambda: len(seen) >= 2, "the original, delivered again")
    assert seen.redelivered[:2] == [False, True]
    assert seen.retry_headers[:2] == [None, None]
    assert await depth(backend, "src") == 1  # back in its queue after the stop
    assert _runtime_logs(caplog, "ERROR") == [
        "copy refused; the original is held and the copy tried again with backoff"
    ]
    assert "copy still refused; the original goes back to its queue" in _runtime_logs(
        caplog, "WARNING"
    )


async def test_a_refused_copy_holds_its_original_for_the_whole_hold_limit() -> None:
    """The default hold is 60 s (docs/reference/runtime.md): tries after 0.5, 1, 2, 4, 8, 16 and
    28.5 s (the last one cut to end the hold), then the original goes back and the handler runs
    again. (The last wait used to be skipped: the original went back after 31.5 s.)"""
    backend = EmulatorBackend()
    seen = Seen()
    topology = load_text('[queues.src]\nmax_attempts = 1\ndead_letter = "src.dead"\n')
    try:
        async with running(
            backend, topology, "src", recording(seen, lambda m: Outcome.retry(), backend)
        ) as service:
            channel = await backend.channel()
            await channel.queue_delete("src.dead")
            await publish(backend, "src", BODY, ORIGINAL)
            for _ in range(200):
                if len(seen) >= 2:
                    break
                await backend.elapse(0.5)
            refused = service.stats.copies_refused
    finally:
        await backend.close()
    assert seen.redelivered[:2] == [False, True]
    assert 60 <= seen.times[1] - seen.times[0] < 60.5
    assert refused == 8 + 1  # the first hold's tries, and the redelivery's first


async def test_fast_publish_mode_still_moves_the_copy(backend: Backend) -> None:
    seen = Seen()
    topology = load_text(
        '[queues.quick]\nmax_attempts = 2\ndead_letter = "quick.dead"\npublish = "fast"\n'
    )
    async with running(
        backend, topology, "quick", recording(seen, lambda m: Outcome.retry(), backend)
    ):
        await publish(backend, "quick", BODY, ORIGINAL)
        dead = await _wait_for_messages(backend, "quick.dead", 1)
    assert seen.retry_headers == [None, "1"]
    assert (dead[0].properties.headers or {})[H] == "2"


async def test_two_workers_share_a_queue_with_exact_attempt_counts(backend: Backend) -> None:
    topology = load_text('[queues.shared]\nmax_attempts = 5\ndead_letter = "shared.dead"\n')
    calls: list[tuple[int, object]] = []

    async def always_retry(msg: Message) -> AnyOutcome:
        calls.append((json.loads(msg.body)["n"], msg.headers.get(H)))
        return Outcome.retry()

    async with (
        running(backend, topology, "shared", always_retry),
        running(backend, topology, "shared", always_retry),
    ):
        for n in range(20):
            await publish(backend, "shared", json.dumps({"n": n}).encode(), ORIGINAL)
        await backend.until(lambda: len(calls) >= 100, "100 deliveries")
        dead = await _wait_for_messages(backend, "shared.dead", 20)
    assert len(calls) == 100
    for n in range(20):
        assert sorted(str(h) for m, h in calls if m == n) == ["1", "2", "3", "4", "None"]
    assert sorted(json.loads(d.body)["n"] for d in dead) == list(range(20))
    assert {(d.properties.headers or {})[H] for d in dead} == {"5"}


async def test_copies_sharing_a_message_id_keep_their_own_returns(backend: Backend) -> None:
    """Two messages with one message_id, handled at once: one copy is routable, the other
    is returned. Each outcome must reach its own original (aiormq matches returns to
    publishes by message_id; rr keeps one copy per id in flight). With no hold, the original
    of the returned copy goes back to its queue at once."""
    bodies: list[bytes] = []
    topology = load_text('[queues.dup]\nmax_attempts = 2\ndead_letter = "dup.dead"\n')
    both_in_flight = asyncio.Event()

    async def fail_first_two(msg: Message) -> AnyOutcome | None:
        bodies.append(msg.body)
        if len(bodies) == 2:
            both_in_flight.set()
        if len(bodies) <= 2:
            await both_in_flight.wait()  # so both copies are published at once
            return Outcome.retry()
        return None

    no_hold = RunOptions(prefetch=10, shutdown_timeout_s=5, copy_hold_max_s=0)
    async with running(backend, topology, "dup", fail_first_two, no_hold):
        connection = await backend.connect()
        channel = await connection.channel()
        await channel.queue_delete("dup.dead")  # the dead-letter copy will come back
        await connection.close()
        # "one" is retried (a routable copy); "two" is at its last attempt, and its
        # dead-letter copy is returned.
        await publish(backend, "dup", b"one", Properties(message_id="same-id"))
        await publish(backend, "dup", b"two", Properties(message_id="same-id", headers={H: "1"}))
        await backend.until(lambda: len(bodies) >= 4, "both messages delivered twice")
    assert sorted(bodies) == [b"one", b"one", b"two", b"two"]
    assert await depth(backend, "dup") == 0
