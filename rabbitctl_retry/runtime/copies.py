"""Publishing the copies ``decide()`` asks for, and holding in-memory delayed ones.

Copies go out ``mandatory`` on a confirm channel (``publish = "confirm"``, the default), so
``publish()`` returns only once RabbitMQ has the copy and raises
:class:`~rabbitctl_retry.errors.PublishFailed` if it was returned (unroutable) or refused;
the caller acks the original only after that. ``publish = "fast"`` uses a channel without
confirms: faster, but a lost or unroutable copy goes unnoticed. Concurrent publishes on the
confirm channel are pipelined: each waits for its own confirm, not for the others'.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from rabbitctl_retry.errors import TransportError
from rabbitctl_retry.retry.policy import KEPT_PROPERTIES, Copy
from rabbitctl_retry.runtime.clock import Clock, Timer
from rabbitctl_retry.runtime.message_ids import MessageIdGuard
from rabbitctl_retry.transport.base import Channel, Connection, Delivery, Properties

log = logging.getLogger("rr.runtime")

PERSISTENT = 2


def copy_properties(original: Properties, copy: Copy) -> Properties:
    """The copy's properties: the kept ones of the original, the copy's headers, persistent."""
    kept = {name: getattr(original, name) for name in KEPT_PROPERTIES}
    return Properties(
        **kept,
        headers=dict(copy.headers),
        delivery_mode=PERSISTENT,
        expiration=str(copy.expiration_ms) if copy.expiration_ms is not None else None,
    )


class CopyPublisher:
    """Publishes copies on one connection, on a confirm channel and a fast one, opened lazily."""

    def __init__(self, connection: Connection) -> None:
        self._connection = connection
        self._confirm: Channel | None = None
        self._fast: Channel | None = None
        self._ids = MessageIdGuard()

    async def _channel(self, confirm: bool) -> Channel:
        current = self._confirm if confirm else self._fast
        if current is None or current.is_closed:
            current = await self._connection.channel(confirms=confirm)
            if confirm:
                self._confirm = current
            else:
                self._fast = current
        return current

    async def publish(self, copy: Copy, original: Delivery, *, confirm: bool = True) -> None:
        """Publish ``copy`` of ``original``; with ``confirm``, return once the broker has it."""
        channel = await self._channel(confirm)
        message_id = original.properties.message_id if confirm else None
        if message_id is not None and not self._ids.try_acquire(message_id):
            await self._ids.acquire(message_id)
        try:
            await channel.publish(
                original.body,
                exchange=copy.exchange,
                routing_key=copy.routing_key,
                properties=copy_properties(original.properties, copy),
                mandatory=copy.mandatory,
            )
        finally:
            if message_id is not None:
                self._ids.release(message_id)

    async def close(self) -> None:
        for channel in (self._confirm, self._fast):
            if channel is not None:
                await channel.close()


@dataclass(slots=True)
class _Pending:
    copy: Copy
    original: Delivery
    queue: str
    timer: Timer | None = None


class InMemoryDelays:
    """Copies of ``delay = "memory"``, published when their delay is over.

    At most once by design: they live in this process. A graceful stop publishes every
    pending copy at once (:meth:`flush`); a crash loses them.
    """

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._pending: dict[int, _Pending] = {}
        self._next_id = 0
        self._publisher: CopyPublisher | None = None
        self._tasks: set[asyncio.Future[None]] = set()

    def attach(self, publisher: CopyPublisher | None) -> None:
        """Where due copies go (``None`` while reconnecting: they wait until attached)."""
        self._publisher = publisher

    def __len__(self) -> int:
        return len(self._pending)

    def schedule(self, copy: Copy, original: Delivery, queue: str, delay_ms: int) -> None:
        key = self._next_id
        self._next_id += 1
        pending = _Pending(copy, original, queue)
        self._pending[key] = pending
        pending.timer = self._clock.call_later(delay_ms / 1000, lambda: self._due(key))

    def _due(self, key: int) -> None:
        pending = self._pending.get(key)
        if pending is None:
            return
        task = asyncio.ensure_future(self._publish(key, pending))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _publish(self, key: int, pending: _Pending) -> None:
        publisher = self._publisher
        if publisher is None:
            # Reconnecting: keep it; flush() or the next due check publishes it.
            pending.timer = self._clock.call_later(1.0, lambda: self._due(key))
            return
        try:
            await publisher.publish(pending.copy, pending.original)
        except TransportError as error:
            log.error(
                "delayed copy lost",
                extra={
                    "rr": {
                        "queue": pending.queue,
                        "message_id": pending.original.properties.message_id,
                        "error": str(error),
                    }
                },
            )
        self._pending.pop(key, None)

    async def flush(self) -> int:
        """Publish every pending copy now (graceful stop); return how many went."""
        published = 0
        for key, pending in list(self._pending.items()):
            if pending.timer is not None:
                pending.timer.cancel()
            await self._publish(key, pending)
            published += 1
        return published
