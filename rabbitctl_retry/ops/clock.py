"""Time for the runtime: the wall clock, or the emulator's virtual clock in tests.

The runtime reads time in two places only: ``rr-failed-at`` on dead-letter copies, and the
timers of in-memory delays (``delay = "memory"``). Both go through a :class:`Clock`, so on
the emulator a 30 s in-memory delay fires when the test advances the virtual clock.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Protocol


class Timer(Protocol):
    def cancel(self) -> None: ...


class Clock(Protocol):
    def now(self) -> datetime:
        """The current time, timezone-aware."""
        ...

    def call_later(self, delay_s: float, callback: Callable[[], None]) -> Timer:
        """Run ``callback`` once, ``delay_s`` seconds from now."""
        ...

    def sleep(self, seconds: float) -> Awaitable[None]:
        """Done ``seconds`` from now: its timer is set when called, through
        :meth:`call_later`, not a loop turn later when first awaited (the emulator knows
        whoever awaits it waits for time)."""
        ...


class WallClock:
    """The real clock and the running event loop's timers."""

    def now(self) -> datetime:
        return datetime.now(UTC)

    def call_later(self, delay_s: float, callback: Callable[[], None]) -> Timer:
        return asyncio.get_running_loop().call_later(delay_s, callback)

    def sleep(self, seconds: float) -> asyncio.Future[None]:
        return timer_future(self, seconds)


def timer_future(clock: Clock, delay_s: float) -> asyncio.Future[None]:
    """A future done ``delay_s`` seconds of ``clock``'s time from now. The timer is set at
    once, through ``clock.call_later``; cancelling the future cancels it."""
    future: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def wake() -> None:
        if not future.done():
            future.set_result(None)

    timer = clock.call_later(max(0.0, delay_s), wake)
    future.add_done_callback(lambda _: timer.cancel())
    return future


async def sleep_unless(clock: Clock, delay_s: float, stop: asyncio.Event) -> None:
    """Wait ``delay_s`` seconds of ``clock``'s time, or until ``stop`` is set.

    The sleep's timer is set before this coroutine first waits: a moment computed from
    ``clock.now()`` just before is met on the emulator's virtual clock too."""
    if stop.is_set():
        return
    await first_of(clock.sleep(delay_s), stop.wait())


async def first_of(*waits: Awaitable[object]) -> None:
    """Wait until one of ``waits`` is done; cancel the others."""
    futures = [asyncio.ensure_future(wait) for wait in waits]
    try:
        await asyncio.wait(futures, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for future in futures:
            future.cancel()
