"""A handler that says its dependency is down pauses its queue (docs/reference/handlers.md, "Pausing
a queue"): the message goes back (``basic.nack``), the consumer is cancelled for the pause and
consumes again by itself, and no message is lost or dead-lettered. On RabbitMQ 3.10, 4.0 and
4.3 and on the emulator set to each, classic and quorum queues.

What the handler sees after a pause is the server's (tests/broker/test_give_back_counts.py):
uncounted on classic queues and on 4.3's quorum queues; one attempt per pause on 3.10's and
4.0's quorum queues.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import pytest

from rabbitctl_retry import Message, subscriber
from rabbitctl_retry.cli.status_services import paused_in
from rabbitctl_retry.runtime.consumer_state import ConsumerPhase
from rabbitctl_retry.runtime.handlers import Subscriber
from rabbitctl_retry.runtime.loader import HandlerSet
from rabbitctl_retry.runtime.metrics import RunMetrics
from rabbitctl_retry.runtime.service import RunOptions, Service
from rabbitctl_retry.topology.load import load_text
from rabbitctl_retry.transport.base import Properties
from tests.backends import Backend, EmulatorBackend, backend_of, backend_params, publish
from tests.observe import depth, peek

TOPOLOGY = '[queues.work]\ntype = "{type}"\nmax_attempts = 5\ndead_letter = "work.dead"\n'
IDS = ["m1", "m2", "m3"]


class ProcessorDown(Exception):
    pass


@pytest.fixture(params=backend_params())
async def backend(request: pytest.FixtureRequest) -> AsyncIterator[Backend]:
    async with backend_of(*request.param) as opened:
        yield opened


@pytest.fixture
def rr_lines(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> pytest.LogCaptureFixture:
    monkeypatch.setattr(logging.getLogger("rr"), "propagate", True)
    caplog.set_level(logging.INFO, logger="rr")
    return caplog


def pause_of(backend: Backend) -> float:
    """The pause: 30 s of the emulator's clock; 2 s of real time on RabbitMQ."""
    return 30.0 if backend.name == "emulator" else 2.0


def expected_calls(version: str, queue_type: str) -> list[tuple[str, int]]:
    """(message id, attempt) of each call: calls 1 and 2 fail (two pauses), then all succeed."""
    if queue_type == "classic" or version == "4.3":  # given back uncounted, in its place
        return [("m1", 1), ("m1", 1), ("m1", 1), ("m2", 1), ("m3", 1)]
    # 3.10 and 4.0: counted; first again (on 3.10 too: its consumer was cancelled before the
    # nack, measured)
    return [("m1", 1), ("m1", 2), ("m1", 3), ("m2", 1), ("m3", 1)]


async def consumers(backend: Backend) -> int:
    channel = await backend.channel()
    return (await channel.queue_declare("work", passive=True)).consumer_count


@pytest.mark.parametrize("queue_type", ["classic", "quorum"])
async def test_a_paused_queue_resumes_by_itself_and_loses_nothing(
    backend: Backend, queue_type: str, rr_lines: pytest.LogCaptureFixture
) -> None:
    pause_s = pause_of(backend)
    calls: list[tuple[str, int]] = []

    @subscriber("work", pause_on={ProcessorDown: pause_s})
    async def charge(msg: Message) -> None:
        calls.append((msg.message_id or "", msg.attempt))
        if len(calls) <= 2:
            raise ProcessorDown("the processor is down")

    service = Service(
        HandlerSet(module="t", subscribers=(Subscriber("work", charge, "t:charge"),)),
        topology=load_text(TOPOLOGY.format(type=queue_type)),
        connect=backend.connect,
        options=RunOptions(prefetch=1, shutdown_timeout_s=5),
        clock=backend.clock,
    )
    async with service.running():
        for message_id in IDS:
            await publish(backend, "work", message_id.encode(), Properties(message_id=message_id))
        for pauses in (1, 2):
            await backend.until(lambda n=pauses: service.stats.pauses == n, f"pause {pauses}")
            await backend.until(lambda n=pauses: len(calls) == n, "one call per pause")

            async def no_consumer() -> bool:
                return await consumers(backend) == 0

            await backend.until(no_consumer, "the paused queue without a consumer")
            await backend.elapse(pause_s)
            # consuming again by itself: the next call is the proof (on the emulator the
            # next pause may have begun by the time the test looks at the queue)
            await backend.until(lambda n=pauses: len(calls) > n, "a call after the pause")
        await backend.until(lambda: len(calls) == 5, "every message handled")

        async def emptied() -> bool:
            return await depth(backend, "work") == 0

        await backend.until(emptied, "the queue emptied")

        async def consuming_again() -> bool:
            return await consumers(backend) == 1

        await backend.until(consuming_again, "the consumer back after the pauses")
        assert service.stats.pauses == 2
    assert calls == expected_calls(backend.version, queue_type)
    assert sorted({message_id for message_id, _ in calls}) == IDS
    assert await depth(backend, "work.dead") == 0
    assert await depth(backend, "work") == 0
    paused = [r for r in rr_lines.records if r.getMessage() == "pausing the queue"]
    resumed = [r for r in rr_lines.records if r.getMessage().startswith("resuming the queue")]
    assert len(paused) == 2
    assert len(resumed) == 2
    assert all(r.levelno == logging.WARNING for r in paused)
    fields = paused[0].rr  # type: ignore[attr-defined]
    assert fields["queue"] == "work"
    assert fields["resume_in_s"] == pause_s
    assert fields["error_type"].endswith("ProcessorDown")
    assert fields["error"] == "the processor is down"


async def test_a_stop_during_a_pause_stops_at_once() -> None:
    """On the emulator's clock, which nothing moves: the stop does not wait for the pause."""
    backend = EmulatorBackend("4.3")
    calls: list[str] = []

    @subscriber("work", pause_on={ProcessorDown: 3600})
    async def charge(msg: Message) -> None:
        calls.append(msg.message_id or "")
        raise ProcessorDown("down")

    service = Service(
        HandlerSet(module="t", subscribers=(Subscriber("work", charge, "t:charge"),)),
        topology=load_text(TOPOLOGY.format(type="quorum")),
        connect=backend.connect,
        options=RunOptions(prefetch=1, shutdown_timeout_s=5),
        clock=backend.clock,
    )
    started = backend.clock.now()
    try:
        async with service.running():
            await publish(backend, "work", b"m1", Properties(message_id="m1"))
            await backend.until(lambda: service.stats.pauses == 1, "the pause")
            (consumer,) = service.consumers
            assert consumer.phase is ConsumerPhase.PAUSED
            metrics = RunMetrics()
            metrics.watch(service)
            page = metrics.page().decode()
            assert 'rr_paused{queue="work"} 1.0' in page
            assert "rr_pauses_total 1.0" in page
            assert paused_in(page) == {"work": started.timestamp() + 3600}
            assert metrics.health() == (200, "consuming\n")  # paused, not unwell
        assert backend.clock.now() == started
        assert consumer.phase is ConsumerPhase.CLOSED
        assert calls == ["m1"]
        assert await depth(backend, "work") == 1  # given back, uncounted (4.3)
    finally:
        await backend.close()


async def test_the_other_deliveries_of_a_paused_queue_finish_and_a_later_pause_extends_it(
    rr_lines: pytest.LogCaptureFixture,
) -> None:
    """The deliveries the consumer holds when the pause begins are handled; a second pause
    while paused moves the resume time out (one warning, one pause counted)."""
    backend = EmulatorBackend("4.3")
    calls: list[str] = []
    takes_s = {"m1": 1, "m2": 2, "m3": 11}
    """How long each first call takes, on the emulator's clock: m1 pauses at +1 s (resume at
    +31 s), m2 is acked at +2 s, m3 pauses again at +11 s (resume at +41 s)."""

    @subscriber("work", pause_on={ProcessorDown: 30})
    async def charge(msg: Message) -> None:
        calls.append(msg.message_id or "")
        if len(calls) > 3:
            return
        await backend.clock.sleep(takes_s[msg.message_id or ""])
        if msg.message_id != "m2":
            raise ProcessorDown("down")

    service = Service(
        HandlerSet(module="t", subscribers=(Subscriber("work", charge, "t:charge"),)),
        topology=load_text(TOPOLOGY.format(type="quorum")),
        connect=backend.connect,
        options=RunOptions(prefetch=10, shutdown_timeout_s=5),
        clock=backend.clock,
    )

    async def consuming() -> int:
        return await consumers(backend)

    try:
        async with service.running():
            for message_id in IDS:
                await publish(
                    backend, "work", message_id.encode(), Properties(message_id=message_id)
                )
            await backend.until(lambda: len(calls) == 3, "three deliveries held")
            await backend.elapse(1)
            assert service.stats.pauses == 1
            await backend.elapse(1)
            assert await depth(backend, "work") == 1  # m2 acked while paused, m1 back
            await backend.elapse(9)
            await backend.elapse(25)  # +36 s: past the first pause, not the second
            assert await consuming() == 0
            assert len(calls) == 3
            await backend.elapse(5)
            await backend.until(lambda: len(calls) == 5, "m1 and m3 handled after the pause")
        assert sorted(calls[3:]) == ["m1", "m3"]
        assert service.stats.pauses == 1
        assert [r.getMessage() for r in rr_lines.records].count("pausing the queue") == 1
        assert await depth(backend, "work") == 0
        assert await depth(backend, "work.dead") == 0
    finally:
        await backend.close()


async def test_on_a_counting_quorum_queue_each_pause_spends_an_attempt(backend: Backend) -> None:
    """RabbitMQ 3.10 and 4.0 count every give-back of a quorum queue: a message paused on
    often enough is dead-lettered by the server's delivery limit (max_attempts - 1), as a
    retry would have been (docs/reference/handlers.md, "Pausing a queue")."""
    if backend.version not in ("3.10", "4.0"):
        pytest.skip("4.3 does not count a basic.nack: a pause spends nothing there")
    pause_s = pause_of(backend)
    attempts: list[int] = []

    @subscriber("work", pause_on={ProcessorDown: pause_s})
    async def charge(msg: Message) -> None:
        attempts.append(msg.attempt)
        raise ProcessorDown("the processor is down")

    service = Service(
        HandlerSet(module="t", subscribers=(Subscriber("work", charge, "t:charge"),)),
        topology=load_text(TOPOLOGY.replace("5", "3").format(type="quorum")),
        connect=backend.connect,
        options=RunOptions(prefetch=1, shutdown_timeout_s=5),
        clock=backend.clock,
    )
    async with service.running():
        await publish(backend, "work", b"m1", Properties(message_id="m1"))
        for pauses in (1, 2):
            await backend.until(lambda n=pauses: service.stats.pauses == n, f"pause {pauses}")
            await backend.elapse(pause_s)
            await backend.until(lambda n=pauses: len(attempts) > n, "a call after the pause")

        async def dead() -> bool:
            return await depth(backend, "work.dead") == 1

        await backend.until(dead, "the message dead-lettered by the delivery limit")
        assert service.stats.pauses == 3
    assert attempts == [1, 2, 3]
    assert await depth(backend, "work") == 0
    (letter,) = await peek(backend, "work.dead")
    headers = letter.properties.headers or {}
    assert headers["x-death"][0]["reason"] == "delivery_limit"  # type: ignore[index,call-overload]
