"""A virtual clock: time moves only when told to.

``now_s`` starts at a fixed, epoch-like instant (so timestamps the broker writes, such as the
``time`` of an ``x-death`` entry, are real datetimes) and changes only through
:meth:`VirtualClock.advance`, :meth:`VirtualClock.fire_next` and :meth:`VirtualClock.set`.
Timers registered with :meth:`VirtualClock.call_at` fire in time order (ties in the order
they were registered), each one with ``now_s`` set to its own due time.

Every instant is snapped to whole microseconds (:func:`on_grid`). Near the start instant a
float second has a resolution of about 0.2 µs, so ``advance(0.1)`` twice would otherwise
stop short of a 200 ms TTL that the server, living in real time, has long expired. The
server's own times are whole milliseconds (TTLs, ``x-delay``): the grid loses nothing.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Callable
from datetime import UTC, datetime

DEFAULT_START_S = 1_700_000_000.0
"""2023-11-14T22:13:20Z: where every emulator's clock starts unless told otherwise."""

GRID_DECIMALS = 6
"""Instants are whole microseconds."""


def on_grid(when_s: float) -> float:
    """``when_s`` on the clock's microsecond grid: sums that should meet, do
    (``on_grid(t + 0.1 + 0.1) == on_grid(t + 0.2)``)."""
    return round(when_s, GRID_DECIMALS)


class TimerHandle:
    """A pending :meth:`VirtualClock.call_at`; :meth:`cancel` makes it a no-op."""

    __slots__ = ("_callback", "cancelled", "when_s")

    def __init__(self, when_s: float, callback: Callable[[], object]) -> None:
        self.when_s = when_s
        self._callback: Callable[[], object] | None = callback
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True
        self._callback = None

    def _run(self) -> None:
        callback = self._callback
        self._callback = None
        if callback is not None and not self.cancelled:
            callback()


class VirtualClock:
    """Paused time with timers. Never goes backwards."""

    def __init__(self, start_s: float = DEFAULT_START_S) -> None:
        self._now_s = on_grid(float(start_s))
        self._heap: list[tuple[float, int, TimerHandle]] = []
        self._order = itertools.count()
        self.sleepers = 0
        """Coroutines inside :meth:`sleep` right now (they wait for the clock, not for work)."""

    @property
    def now_s(self) -> float:
        return self._now_s

    def now(self) -> datetime:
        """``now_s`` as an aware UTC datetime."""
        return datetime.fromtimestamp(self._now_s, tz=UTC)

    def call_at(self, when_s: float, callback: Callable[[], object]) -> TimerHandle:
        """Run ``callback`` once the clock reaches ``when_s`` (at once on the next fire if due)."""
        when_s = on_grid(when_s)
        handle = TimerHandle(when_s, callback)
        heapq.heappush(self._heap, (when_s, next(self._order), handle))
        return handle

    def call_later(self, delay_s: float, callback: Callable[[], object]) -> TimerHandle:
        return self.call_at(self._now_s + delay_s, callback)

    def next_due_s(self) -> float | None:
        """When the earliest live timer is due, or None when there is none."""
        heap = self._heap
        while heap and heap[0][2].cancelled:
            heapq.heappop(heap)
        return heap[0][0] if heap else None

    def fire_next(self, until_s: float) -> bool:
        """Fire the earliest timer due at or before ``until_s``; False when there is none.

        The clock moves to the timer's due time first (never backwards: a timer registered in
        the past fires at the current time).
        """
        due_s = self.next_due_s()
        if due_s is None or due_s > on_grid(until_s):
            return False
        _, _, handle = heapq.heappop(self._heap)
        self._now_s = max(self._now_s, due_s)
        handle._run()
        return True

    def set(self, when_s: float) -> None:
        """Move the clock to ``when_s`` without firing anything."""
        when_s = on_grid(when_s)
        if when_s < self._now_s:
            raise ValueError(f"the clock never goes backwards ({when_s} < {self._now_s})")
        self._now_s = when_s

    def advance(self, seconds: float) -> None:
        """Move forward by ``seconds``, firing every timer that falls due, in time order."""
        if seconds < 0:
            raise ValueError(f"cannot advance by a negative amount ({seconds} s)")
        target_s = on_grid(self._now_s + seconds)
        while self.fire_next(target_s):
            pass
        self._now_s = max(self._now_s, target_s)

    def sleep(self, seconds: float) -> asyncio.Future[None]:
        """Sleep in virtual time: done once the clock has been advanced past ``seconds``.

        The timer is set now, when called (not a loop turn later, when first awaited), and
        the clock counts a sleeper until the future is done or cancelled."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def wake() -> None:
            if not future.done():
                future.set_result(None)

        handle = self.call_later(max(0.0, seconds), wake)
        self.sleepers += 1

        def woke(_: asyncio.Future[None]) -> None:
            self.sleepers -= 1
            handle.cancel()

        future.add_done_callback(woke)
        return future
