"""Time for the runtime: the wall clock, or the emulator's virtual clock in tests.

The runtime reads time in two places only: ``rr-failed-at`` on dead-letter copies, and the
timers of in-memory delays (``delay = "memory"``). Both go through a :class:`Clock`, so on
the emulator a 30 s in-memory delay fires when the test advances the virtual clock.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any, Protocol


class Timer(Protocol):
    def cancel(self) -> None: ...


class Clock(Protocol):
    def now(self) -> datetime:
        """The current time, timezone-aware."""
        ...

    def call_later(self, delay_s: float, callback: Callable[[], None]) -> Timer:
        """Run ``callback`` once, ``delay_s`` seconds from now."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Return ``seconds`` from now (the emulator knows such a coroutine waits for time)."""
        ...


class WallClock:
    """The real clock and the running event loop's timers."""

    def now(self) -> datetime:
        return datetime.now(UTC)

    def call_later(self, delay_s: float, callback: Callable[[], None]) -> Timer:
        return asyncio.get_running_loop().call_later(delay_s, callback)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


async def sleep_unless(clock: Clock, delay_s: float, stop: asyncio.Event) -> None:
    """Wait ``delay_s`` seconds of ``clock``'s time, or until ``stop`` is set."""
    if stop.is_set():
        return
    waits: list[asyncio.Future[Any]] = [
        asyncio.ensure_future(clock.sleep(delay_s)),
        asyncio.ensure_future(stop.wait()),
    ]
    try:
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for wait in waits:
            wait.cancel()


async def first_of(*waits: Awaitable[object]) -> None:
    """Wait until one of ``waits`` is done; cancel the others."""
    futures = [asyncio.ensure_future(wait) for wait in waits]
    try:
        await asyncio.wait(futures, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for future in futures:
            future.cancel()
