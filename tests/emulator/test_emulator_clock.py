"""The virtual clock, and moving time on the emulator."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest

from rabbitctl_retry.emulator import DEFAULT_START_S, Emulator, VirtualClock
from rabbitctl_retry.ops.clock import sleep_unless
from rabbitctl_retry.transport.base import Delivery, Properties


def test_time_stands_still_until_advanced() -> None:
    clock = VirtualClock()
    assert clock.now_s == DEFAULT_START_S
    assert clock.now() == datetime(2023, 11, 14, 22, 13, 20, tzinfo=UTC)
    clock.advance(1.5)
    assert clock.now_s == DEFAULT_START_S + 1.5


def test_timers_fire_in_time_order_each_at_its_own_time() -> None:
    clock = VirtualClock(start_s=100.0)
    fired: list[tuple[str, float]] = []
    clock.call_at(103.0, lambda: fired.append(("c", clock.now_s)))
    clock.call_at(101.0, lambda: fired.append(("a", clock.now_s)))
    clock.call_later(1.0, lambda: fired.append(("a2", clock.now_s)))  # same time: in order
    cancelled = clock.call_at(102.0, lambda: fired.append(("x", clock.now_s)))
    cancelled.cancel()
    clock.advance(2.5)
    assert fired == [("a", 101.0), ("a2", 101.0)]
    assert clock.now_s == 102.5
    clock.advance(10)
    assert fired[-1] == ("c", 103.0)
    assert clock.next_due_s() is None


def test_a_timer_set_by_a_timer_fires_in_the_same_advance() -> None:
    clock = VirtualClock(start_s=0.0)
    fired: list[float] = []
    clock.call_at(1.0, lambda: clock.call_later(1.0, lambda: fired.append(clock.now_s)))
    clock.advance(5)
    assert fired == [2.0]


def test_the_clock_never_goes_backwards() -> None:
    clock = VirtualClock(start_s=10.0)
    with pytest.raises(ValueError, match="backwards"):
        clock.set(9.0)
    with pytest.raises(ValueError, match="negative"):
        clock.advance(-1)


async def test_a_sleep_sets_its_timer_before_it_first_waits() -> None:
    """``sleep_unless`` registers its timer at once: when the clock moves before the loop
    turns again, the sleep still wakes at its virtual moment (5 s on), not 5 s after the
    moment its task happened to start (the pause of a queue relies on it)."""
    clock = VirtualClock(start_s=100.0)
    woke: list[float] = []

    async def sleeper() -> None:
        await sleep_unless(clock, 5, asyncio.Event())
        woke.append(clock.now_s)

    sleeping = asyncio.ensure_future(sleeper())
    await asyncio.sleep(0)  # its first step, up to its first wait
    assert clock.next_due_s() == 105.0
    assert clock.sleepers == 1
    clock.advance(5)  # before the loop turns again
    await sleeping
    assert woke == [105.0]
    assert clock.next_due_s() is None
    assert clock.sleepers == 0


async def test_a_stopped_sleep_cancels_its_timer() -> None:
    clock = VirtualClock(start_s=100.0)
    stop = asyncio.Event()
    sleeping = asyncio.ensure_future(sleep_unless(clock, 5, stop))
    await asyncio.sleep(0)
    stop.set()
    await sleeping
    assert clock.now_s == 100.0
    assert clock.next_due_s() is None
    assert clock.sleepers == 0


async def test_virtual_sleep_wakes_when_the_emulator_advances() -> None:
    emulator = Emulator()
    woke: list[float] = []

    async def sleeper() -> None:
        await emulator.clock.sleep(30)
        woke.append(emulator.clock.now_s - DEFAULT_START_S)

    emulator.track(sleeper())
    await asyncio.sleep(0)
    await emulator.advance(29.9)
    assert woke == []
    await emulator.advance(0.1)
    assert woke == [30.0]


async def test_advance_settles_between_timers() -> None:
    # a consumer acting on what one timer released sees the clock at that timer's time
    emulator = Emulator()
    channel = await emulator.connect().channel()
    await channel.queue_declare("work")
    await channel.queue_declare(
        "wait", arguments={"x-dead-letter-exchange": "", "x-dead-letter-routing-key": "work"}
    )
    seen: list[tuple[bytes, float]] = []

    async def consumer(delivery: Delivery) -> None:
        seen.append((delivery.body, emulator.clock.now_s - DEFAULT_START_S))
        await channel.ack(delivery.delivery_tag)

    await channel.consume("work", consumer)
    for body, ms in ((b"1s", "1000"), (b"5s", "5000")):
        await channel.publish(body, routing_key="wait", properties=Properties(expiration=ms))
    await emulator.advance(1)  # only the head is due: 1 s
    await channel.publish(b"late", routing_key="wait", properties=Properties(expiration="1000"))
    await emulator.advance(10)
    assert seen == [(b"1s", 1.0), (b"5s", 5.0), (b"late", 5.0)]


async def test_a_callback_asleep_on_the_clock_does_not_block_settling() -> None:
    emulator = Emulator()
    channel = await emulator.connect().channel()
    await channel.queue_declare("q")
    done: list[float] = []

    async def slow(delivery: Delivery) -> None:
        await emulator.clock.sleep(10)  # a handler waiting in virtual time
        await channel.ack(delivery.delivery_tag)
        done.append(emulator.clock.now_s - DEFAULT_START_S)

    await channel.consume("q", slow)
    await channel.publish(b"m", routing_key="q")
    await emulator.settle()
    assert done == []
    assert emulator.queue("q").unacked == 1
    await emulator.advance(10)
    assert done == [10.0]
    assert emulator.queue("q").unacked == 0


async def test_settle_waits_for_a_callback_working_in_a_thread() -> None:
    emulator = Emulator()
    channel = await emulator.connect().channel()
    await channel.queue_declare("q")

    async def threaded(delivery: Delivery) -> None:
        await asyncio.to_thread(lambda: sum(range(200_000)))
        await channel.ack(delivery.delivery_tag)

    await channel.consume("q", threaded)
    for _ in range(3):
        await channel.publish(b"m", routing_key="q")
    await emulator.settle()
    assert emulator.queue("q").unacked == 0


def test_small_steps_add_up_to_a_due_time() -> None:
    # 0.1 + 0.1 falls short of 0.2 in floats this far from zero; the clock's grid does not
    clock = VirtualClock()
    fired: list[float] = []
    clock.call_later(0.2, lambda: fired.append(clock.now_s))
    clock.advance(0.1)
    clock.advance(0.1)
    assert fired == [DEFAULT_START_S + 0.2]


async def test_a_ttl_expires_after_steps_that_add_up_to_it() -> None:
    emulator = Emulator()
    channel = await emulator.connect().channel()
    await channel.queue_declare("work")
    await channel.queue_declare(
        "wait", arguments={"x-dead-letter-exchange": "", "x-dead-letter-routing-key": "work"}
    )
    await channel.publish(b"m", routing_key="wait", properties=Properties(expiration="300"))
    await emulator.advance(0.1)
    await emulator.advance(0.2)
    assert [m.body for m in emulator.messages("work")] == [b"m"]
