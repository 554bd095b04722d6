"""One publish per message_id in flight on a confirm channel.

aiormq matches a ``basic.return`` to its publish by ``message_id``. With two publishes of the
same id in flight, a returned one's failure could land on the other, and the returned copy's
original would be acked — and lost. Every confirmed copy rr publishes (the runtime's retry and
dead-letter copies, ``rr dlq replay``) takes its id here first; the second copy of an id waits
for the first one's confirm.
"""

from __future__ import annotations

import asyncio


class MessageIdGuard:
    """Keeps two publishes with the same message_id from being in flight at once."""

    __slots__ = ("_busy",)

    def __init__(self) -> None:
        self._busy: dict[str, asyncio.Future[None] | None] = {}
        """message_id -> None while one publish holds it (a future once others wait)."""

    def try_acquire(self, message_id: str) -> bool:
        """Take ``message_id`` if nobody holds it (the common case: no await)."""
        if message_id in self._busy:
            return False
        self._busy[message_id] = None
        return True

    async def acquire(self, message_id: str) -> None:
        busy = self._busy
        while message_id in busy:
            waiter = busy[message_id]
            if waiter is None:
                waiter = busy[message_id] = asyncio.get_running_loop().create_future()
            await asyncio.shield(waiter)
        busy[message_id] = None

    def release(self, message_id: str) -> None:
        waiter = self._busy.pop(message_id, None)
        if waiter is not None and not waiter.done():
            waiter.set_result(None)
