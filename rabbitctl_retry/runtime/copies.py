"""Publishing the copies ``decide()`` asks for, and holding in-memory delayed ones.

Copies go out ``mandatory`` on a confirm channel (``publish = "confirm"``, the default), so
``publish()`` returns only once RabbitMQ has the copy and raises
:class:`~rabbitctl_retry.errors.PublishFailed` if it was returned (unroutable) or refused;
the caller acks the original only after that. ``publish = "fast"`` uses a channel without
confirms: faster, but a lost or unroutable copy goes unnoticed. Concurrent publishes on the
confirm channel are pipelined: each waits for its own confirm, not for the others'.

In-memory delayed copies (``delay = "memory"``) are kept until the broker confirmed them,
across reconnects; see :class:`InMemoryDelays` and docs/runtime.md.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from rabbitctl_retry.errors import TransportError
from rabbitctl_retry.ops.clock import Clock, Timer
from rabbitctl_retry.ops.copying import copy_properties
from rabbitctl_retry.retry.policy import Copy
from rabbitctl_retry.runtime.backoff import Backoff
from rabbitctl_retry.transport.base import Channel, Connection, Delivery, Properties

log = logging.getLogger("rr.runtime")

PERSISTENT = 2


def retry_copy_properties(original: Properties, copy: Copy) -> Properties:
    """A retry or dead-letter copy's properties: the copied ones of the original
    (``retry/properties.py``), the copy's headers, persistent, and the copy's own expiration;
    a verbatim copy's are the original's, as received."""
    if copy.verbatim:
        return original
    return copy_properties(
        original,
        copy.headers,
        delivery_mode=PERSISTENT,
        expiration=str(copy.expiration_ms) if copy.expiration_ms is not None else None,
    )


class CopyPublisher:
    """Publishes copies on one connection: one confirm channel and one fast channel at most.

    Each channel is opened on first use, under a lock, so a burst of concurrent publishes
    opens one channel, not one each (RabbitMQ closes a connection that opens more channels
    than its ``channel_max``); a channel that closed is re-opened once, by the first publish
    that finds it closed.
    """

    def __init__(self, connection: Connection) -> None:
        self._connection = connection
        self._channels: dict[bool, Channel] = {}
        self._opening = asyncio.Lock()
        self.channels_opened = 0
        """How many channels this publisher opened (1 per kind, plus re-opens)."""

    async def _channel(self, confirm: bool) -> Channel:
        current = self._channels.get(confirm)
        if current is not None and not current.is_closed:
            return current
        async with self._opening:
            current = self._channels.get(confirm)
            if current is None or current.is_closed:
                current = await self._connection.channel(confirms=confirm)
                self._channels[confirm] = current
                self.channels_opened += 1
        return current

    async def publish(self, copy: Copy, original: Delivery, *, confirm: bool = True) -> None:
        """Publish ``copy`` of ``original``; with ``confirm``, return once the broker has it.

        Raises :class:`~rabbitctl_retry.errors.PublishFailed` (returned or refused) or another
        :class:`~rabbitctl_retry.errors.TransportError` (the channel or connection failed: the
        copy may or may not have arrived).
        """
        channel = await self._channel(confirm)
        await channel.publish(
            original.body,
            exchange=copy.exchange,
            routing_key=copy.routing_key,
            properties=retry_copy_properties(original.properties, copy),
            mandatory=copy.mandatory,
        )

    async def close(self) -> None:
        for channel in self._channels.values():
            await channel.close()


_RETRY = Backoff(initial_s=1.0, max_s=30.0)
"""How a due in-memory copy that could not be published is tried again."""
PUBLISH_TIMEOUT_S = 30.0
"""A due copy's publish that has no answer by then (a connection that died without a word)
counts as failed, and the copy is tried again."""


@dataclass(slots=True)
class _Pending:
    copy: Copy
    original: Delivery
    queue: str
    timer: Timer | None = None
    failures: int = 0
    publishing: bool = False


class InMemoryDelays:
    """Copies of ``delay = "memory"``, published when their delay is over.

    A due copy stays here until the broker confirmed it: a publish that fails (the
    connection dropped, or the copy was refused) is tried again with backoff, on the next
    connection if need be. A graceful stop publishes every pending copy at once
    (:meth:`flush`). Only a crash of the process loses them (they live in its memory).
    """

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._pending: dict[int, _Pending] = {}
        self._next_id = 0
        self._publisher: CopyPublisher | None = None
        self._tasks: set[asyncio.Future[None]] = set()
        self.retried = 0
        """Publishes of due copies that failed and were scheduled again."""

    def attach(self, publisher: CopyPublisher | None) -> None:
        """Where due copies go (``None`` while reconnecting: they wait until attached).

        Detaching cancels the publishes under way: on a connection that is gone they could
        wait for ever (for room in its write queue); their copies are tried again."""
        self._publisher = publisher
        if publisher is None:
            for task in list(self._tasks):
                task.cancel()

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
        if pending is None or pending.publishing:
            return
        pending.timer = None
        pending.publishing = True
        task = asyncio.ensure_future(self._publish(key, pending))
        self._tasks.add(task)
        task.add_done_callback(lambda done: self._publish_ended(key, pending, done))

    async def _publish(self, key: int, pending: _Pending) -> None:
        publisher = self._publisher
        if publisher is None:
            # Reconnecting: keep it, and look again in a moment.
            pending.timer = self._clock.call_later(1.0, lambda: self._due(key))
            return
        try:
            async with asyncio.timeout(PUBLISH_TIMEOUT_S):
                await publisher.publish(pending.copy, pending.original)
        except (TransportError, TimeoutError) as error:
            self._again(key, pending, str(error) or "no answer")
            return
        self._pending.pop(key, None)
        if pending.failures:
            log.info("delayed copy published after all", extra={"rr": self._fields(pending)})

    def _publish_ended(self, key: int, pending: _Pending, task: asyncio.Future[None]) -> None:
        """Whatever ended the publish, a copy still pending and not waiting for a timer is
        tried again: one cancelled because the connection went (:meth:`attach`), even before
        its first line ran, or one that failed in a way not foreseen (logged)."""
        self._tasks.discard(task)
        pending.publishing = False
        error = None if task.cancelled() else task.exception()
        if key not in self._pending or pending.timer is not None:
            return
        if error is not None:
            log.error(
                "delayed copy not published (unexpected error); it is kept and tried again",
                exc_info=error,
                extra={"rr": self._fields(pending)},
            )
        self._again(key, pending, "the connection closed" if error is None else repr(error))

    def _again(self, key: int, pending: _Pending, error: str) -> None:
        """The publish failed: keep the copy and try again later (backoff)."""
        pending.failures += 1
        self.retried += 1
        if pending.failures == 1:
            log.warning(
                "delayed copy not published; it is kept and tried again",
                extra={"rr": self._fields(pending) | {"error": error}},
            )
        delay_s = _RETRY.delay_s(pending.failures)
        pending.timer = self._clock.call_later(delay_s, lambda: self._due(key))

    @staticmethod
    def _fields(pending: _Pending) -> dict[str, object]:
        return {
            "queue": pending.queue,
            "message_id": pending.original.properties.message_id,
            "attempts": pending.failures + 1,
        }

    async def flush(self) -> int:
        """Publish every pending copy now (graceful stop); return how many went.

        A copy that cannot be published now is logged as lost: the process is about to end.
        """
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        published = 0
        for key, pending in list(self._pending.items()):
            if pending.timer is not None:
                pending.timer.cancel()
                pending.timer = None
            publisher = self._publisher
            try:
                if publisher is None:
                    raise TransportError("not connected")
                await publisher.publish(pending.copy, pending.original)
            except TransportError as error:
                log.error(
                    "delayed copy lost: it could not be published before the process ends",
                    extra={"rr": self._fields(pending) | {"error": str(error)}},
                )
            else:
                published += 1
            self._pending.pop(key, None)
        return published
