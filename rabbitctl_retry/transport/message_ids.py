"""How a ``basic.return`` finds its publish, and one publish per such key in flight.

RabbitMQ returns a ``mandatory`` message it could not route with its exchange, routing key,
properties and body, and nothing else: a client must tell from these which of its publishes
came back. rr matches a return by :func:`return_key`: the message id when the message has one,
else its exchange, routing key and body. rr never adds a message id of its own (a copy of a
message without one has none; docs/explanation/attempts.md, "What a copy keeps").

With two publishes of the same key in flight on a confirm channel, a returned one's failure
could land on the other, and the returned copy's original would be acked, and lost. Every
confirmed publish rr makes (the runtime's retry and dead-letter copies, ``rr dlq replay``,
``move``, ``import``) takes its key here first (:class:`MessageIdGuard`); the second publish of
a key waits for the first one's confirm.
"""

from __future__ import annotations

import asyncio
from collections.abc import Hashable


def return_key(message_id: str | None, exchange: str, routing_key: str, body: bytes) -> Hashable:
    """What a return of this message is matched to its publish by: its ``message_id``, or
    without one its exchange, routing key and body (module doc)."""
    if message_id is not None:
        return message_id
    return (exchange, routing_key, body)


class MessageIdGuard:
    """Keeps two publishes with the same :func:`return_key` from being in flight at once."""

    __slots__ = ("_busy",)

    def __init__(self) -> None:
        self._busy: dict[Hashable, asyncio.Future[None] | None] = {}
        """key -> None while one publish holds it (a future once others wait)."""

    def try_acquire(self, key: Hashable) -> bool:
        """Take ``key`` if nobody holds it (the common case: no await)."""
        if key in self._busy:
            return False
        self._busy[key] = None
        return True

    async def acquire(self, key: Hashable) -> None:
        busy = self._busy
        while key in busy:
            waiter = busy[key]
            if waiter is None:
                waiter = busy[key] = asyncio.get_running_loop().create_future()
            await asyncio.shield(waiter)
        busy[key] = None

    def release(self, key: Hashable) -> None:
        waiter = self._busy.pop(key, None)
        if waiter is not None and not waiter.done():
            waiter.set_result(None)
