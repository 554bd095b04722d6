"""The emulator with a clock that moves while a test waits, for the tests that mix the
server's timers (virtual on the emulator) with rr's handler timeouts (always real seconds,
runtime/consumer.py): tests/runtime/test_consumer_timeout_43.py and
test_consumer_timeout_channel.py run on a server release and on :class:`TickingEmulator`
(their fixtures take ``tests/backends.py``'s ``backend_params``)."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import time

from tests.backends import Check, EmulatorBackend

TICK_S = 0.05
"""The least :class:`TickingEmulator` moves its clock between two looks."""
SETTLE_S = 0.05
"""How long (real time) :class:`TickingEmulator` lets the emulator settle while a handler hangs
for good (its call is a callback the emulator would wait for)."""
LOOKS = 2000
"""How many looks :meth:`TickingEmulator.until` takes before it fails (at least 100 virtual
seconds)."""


class TickingEmulator(EmulatorBackend):
    """The emulator (at 4.3 unless told otherwise) whose :meth:`until` moves the virtual clock
    between two looks, as time passes on a server while a test waits: by the real time the
    look took, at least :data:`TICK_S`. So the virtual clock never falls behind the real one,
    and a server timeout of T virtual seconds passes before an rr handler timeout of more
    than T real seconds however slow the machine (a CI run on a loaded machine moved 2
    virtual seconds in more than 5 real ones when each look moved a fixed 50 ms)."""

    def __init__(self, version: str = "4.3") -> None:
        super().__init__(version)

    async def until(self, check: Check, what: str) -> None:
        looked_s = time.monotonic()
        for _ in range(LOOKS):
            await self._settle()
            result = check()
            if await result if inspect.isawaitable(result) else result:
                return
            await self._settle()
            now_s = time.monotonic()
            self.emulator.clock.advance(max(TICK_S, now_s - looked_s))
            looked_s = now_s
        raise AssertionError(f"the emulator did not get to {what} in {LOOKS} looks")

    async def _settle(self) -> None:
        """Settle, except that a handler hung for good (a callback the emulator waits for)
        stops it after a moment of real time."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.emulator.settle(), SETTLE_S)
