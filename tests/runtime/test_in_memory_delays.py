"""In-memory delayed copies (runtime/delays.py InMemoryDelays): a due copy stays until the
broker has it, whatever happens to the publish that was to send it."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from rabbitctl_retry.errors import TransportError
from rabbitctl_retry.ops.copies.sent import CONFIRMED, SendResult, classified
from rabbitctl_retry.retry.policy import Copy, CopyPurpose
from rabbitctl_retry.runtime.delays import InMemoryDelays
from rabbitctl_retry.transport.base import Delivery, Properties


class ManualTimer:
    def __init__(self, clock: ManualClock, due_s: float, callback: Callable[[], None]) -> None:
        self.clock, self.due_s, self.callback, self.cancelled = clock, due_s, callback, False

    def cancel(self) -> None:
        self.cancelled = True


class ManualClock:
    """Timers fire only when the test moves the clock (:meth:`advance`)."""

    def __init__(self) -> None:
        self.now_s = 0.0
        self.timers: list[ManualTimer] = []

    def now(self) -> object:
        raise NotImplementedError

    def call_later(self, delay_s: float, callback: Callable[[], None]) -> ManualTimer:
        timer = ManualTimer(self, self.now_s + delay_s, callback)
        self.timers.append(timer)
        return timer

    async def sleep(self, seconds: float) -> None:
        raise NotImplementedError

    def advance(self, seconds: float) -> None:
        self.now_s += seconds
        due = [t for t in self.timers if t.due_s <= self.now_s and not t.cancelled]
        self.timers = [t for t in self.timers if t not in due]
        for timer in due:
            timer.callback()


class RecordingPublisher:
    """Stands where a CopyPublisher goes: records each copy's body, or fails as told."""

    def __init__(self, fail_with: BaseException | None = None) -> None:
        self.published: list[bytes] = []
        self.fail_with = fail_with

    async def publish(self, copy: Copy, original: Delivery, *, confirm: bool = True) -> SendResult:
        await asyncio.sleep(0)
        if isinstance(self.fail_with, TransportError):
            return classified(self.fail_with)  # what the real publisher answers
        if self.fail_with is not None:
            raise self.fail_with  # a bug: raised, not answered
        self.published.append(original.body)
        return CONFIRMED


def copy_of(body: bytes) -> tuple[Copy, Delivery]:
    copy = Copy(exchange="", routing_key="work", headers={}, purpose=CopyPurpose.RETRY)
    return copy, Delivery(body=body, properties=Properties(message_id=body.decode()))


def delays_with(clock: ManualClock, publisher: RecordingPublisher) -> InMemoryDelays:
    delays = InMemoryDelays(clock)
    delays.attach(publisher)  # type: ignore[arg-type]
    return delays


async def settle_tasks() -> None:
    for _ in range(10):
        await asyncio.sleep(0)


def one_copy_due(clock: ManualClock, publisher: RecordingPublisher) -> InMemoryDelays:
    """Delays holding copy m1 of 1 s, the clock moved to when it is due (its publish task
    made, not started)."""
    delays = delays_with(clock, publisher)
    delays.schedule(*copy_of(b"m1"), queue="work", delay_ms=1000)
    clock.advance(1.0)
    return delays


async def published_once_reconnected(
    delays: InMemoryDelays, clock: ManualClock, publisher: RecordingPublisher
) -> list[bytes]:
    """Attach ``publisher`` (a connection is back), let a minute pass; what it published."""
    delays.attach(publisher)  # type: ignore[arg-type]
    clock.advance(60)
    await settle_tasks()
    return publisher.published


async def test_a_due_copy_is_published_and_forgotten() -> None:
    clock, publisher = ManualClock(), RecordingPublisher()
    delays = delays_with(clock, publisher)
    delays.schedule(*copy_of(b"m1"), queue="work", delay_ms=1000)
    clock.advance(0.9)
    await settle_tasks()
    assert publisher.published == []
    clock.advance(0.1)
    await settle_tasks()
    assert publisher.published == [b"m1"]
    assert len(delays) == 0


async def test_a_publish_cancelled_before_it_started_is_tried_again() -> None:
    """The connection goes (attach(None) cancels the publishes under way) in the same loop
    iteration as the copy fell due: its publish never ran a line. The copy must still go out
    once a connection is back (it stayed pending for good: a lost retry)."""
    clock, publisher = ManualClock(), RecordingPublisher()
    delays = one_copy_due(clock, publisher)
    delays.attach(None)
    await settle_tasks()
    assert (publisher.published, len(delays)) == ([], 1)
    assert await published_once_reconnected(delays, clock, publisher) == [b"m1"]
    assert len(delays) == 0


async def test_a_publish_cancelled_while_it_waits_is_tried_again() -> None:
    clock, publisher = ManualClock(), RecordingPublisher()
    delays = one_copy_due(clock, publisher)
    await asyncio.sleep(0)  # started, waiting inside publish
    delays.attach(None)
    await settle_tasks()
    assert (publisher.published, len(delays)) == ([], 1)
    assert await published_once_reconnected(delays, clock, publisher) == [b"m1"]
    assert len(delays) == 0


async def test_a_publish_failing_in_an_unforeseen_way_is_tried_again() -> None:
    clock = ManualClock()
    failing = RecordingPublisher(fail_with=RuntimeError("a bug in a driver"))
    delays = one_copy_due(clock, failing)
    await settle_tasks()
    assert (failing.published, len(delays)) == ([], 1)
    assert await published_once_reconnected(delays, clock, RecordingPublisher()) == [b"m1"]
    assert len(delays) == 0


async def test_a_refused_publish_is_tried_again_with_backoff() -> None:
    clock = ManualClock()
    failing = RecordingPublisher(fail_with=TransportError("channel closed"))
    delays = one_copy_due(clock, failing)
    await settle_tasks()
    assert delays.retried == 1
    failing.fail_with = None
    clock.advance(0.5)
    await settle_tasks()
    assert failing.published == []  # the first retry waits a second
    clock.advance(1.0)
    await settle_tasks()
    assert failing.published == [b"m1"]


class GatedPublisher:
    """Stands where a CopyPublisher goes: each publish waits until the test opens the gate;
    records how many run at once and each copy's body."""

    def __init__(self) -> None:
        self.published: list[bytes] = []
        self.running = 0
        self.most_at_once = 0
        self.gate = asyncio.Event()

    async def publish(self, copy: Copy, original: Delivery, *, confirm: bool = True) -> SendResult:
        self.running += 1
        self.most_at_once = max(self.most_at_once, self.running)
        try:
            await self.gate.wait()
            self.published.append(original.body)
        finally:
            self.running -= 1
        return CONFIRMED


def scheduled(clock: ManualClock, publisher: object, count: int, **kw: int) -> InMemoryDelays:
    delays = InMemoryDelays(clock, **kw)
    delays.attach(publisher)  # type: ignore[arg-type]
    for number in range(count):
        delays.schedule(*copy_of(b"m%d" % number), queue="work", delay_ms=1000 + number)
    return delays


async def test_hurry_publishes_every_copy_now_pipelined_within_the_window() -> None:
    clock, publisher = ManualClock(), GatedPublisher()
    delays = scheduled(clock, publisher, 50, window=8)
    delays.hurry()
    await settle_tasks()
    assert publisher.most_at_once == 8  # pipelined, and never more than the window
    publisher.gate.set()
    await asyncio.wait_for(delays.wait_empty(), 5)
    assert sorted(publisher.published) == sorted(b"m%d" % n for n in range(50))
    assert publisher.most_at_once == 8


async def test_a_stop_while_copies_fall_due_publishes_each_exactly_once() -> None:
    """The stop's pass and the copies' own timers never both publish a copy (a stop that
    walked the copies while their timers ran published 1,083 of 3,794 twice)."""
    clock, publisher = ManualClock(), GatedPublisher()
    delays = scheduled(clock, publisher, 100, window=10)
    clock.advance(1.02)  # the first 21 fall due: 10 publishing, 11 ready
    await settle_tasks()
    delays.hurry()  # the stop: the other 79 are due now
    clock.advance(60)  # every timer that was armed would fire now
    await settle_tasks()
    publisher.gate.set()
    await asyncio.wait_for(delays.wait_empty(), 5)
    clock.advance(60)
    await settle_tasks()
    assert len(publisher.published) == 100
    assert len(set(publisher.published)) == 100


async def test_a_copy_scheduled_after_hurry_goes_at_once() -> None:
    clock, publisher = ManualClock(), RecordingPublisher()
    delays = scheduled(clock, publisher, 0)
    delays.hurry()
    delays.schedule(*copy_of(b"late"), queue="work", delay_ms=3_600_000)
    await settle_tasks()
    assert publisher.published == [b"late"]
    assert len(delays) == 0


async def test_a_new_connection_takes_the_copies_backing_off_at_once() -> None:
    clock = ManualClock()
    failing = RecordingPublisher(fail_with=TransportError("channel closed"))
    delays = scheduled(clock, failing, 3)
    clock.advance(1.01)
    await settle_tasks()
    assert delays.retried == 3  # each now waits a second before its next try
    fresh = RecordingPublisher()
    delays.attach(None)
    delays.attach(fresh)  # type: ignore[arg-type]
    await settle_tasks()
    assert sorted(fresh.published) == [b"m0", b"m1", b"m2"]
    clock.advance(60)
    await settle_tasks()
    assert len(fresh.published) == 3


async def test_take_all_hands_over_what_the_broker_did_not_confirm() -> None:
    clock, publisher = ManualClock(), GatedPublisher()
    delays = scheduled(clock, publisher, 5, window=2)
    delays.hurry()
    await settle_tasks()
    taken = delays.take_all()  # 2 publishing (unconfirmed), 3 ready
    assert sorted(p.original.body for p in taken) == [b"m0", b"m1", b"m2", b"m3", b"m4"]
    assert len(delays) == 0
    await asyncio.wait_for(delays.wait_empty(), 1)
    publisher.gate.set()
    clock.advance(60)
    await settle_tasks()
    assert publisher.published == []  # their publishes were cancelled
