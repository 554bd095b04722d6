"""``rr run``'s sender: publishing the copies ``decide()`` asks for.

Copies go out ``mandatory`` on a confirm channel (``publish = "confirm"``, the default), so
``publish()`` returns only once RabbitMQ has the copy, and says what became of it in the
words every sender of rr uses (``ops/copies/sent.py``): confirmed, refused (returned: unroutable,
or nacked), cut (the channel or connection failed) or unencodable; the caller acks the
original only after a confirm. ``publish = "fast"`` uses a channel without confirms: faster,
but a lost or unroutable copy goes unnoticed. Concurrent publishes on the confirm channel
are pipelined: each waits for its own confirm, not for the others'.

A handler's outputs go out here too, always on the confirm channel (``publish_message``).

In-memory delayed copies (``delay = "memory"``) are held by ``runtime/delays.py`` and
published through this module's publisher.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from rabbitctl_retry.errors import TransportError
from rabbitctl_retry.ops.copies.properties import retry_copy_properties
from rabbitctl_retry.ops.copies.sending import outcome_of
from rabbitctl_retry.ops.copies.sent import SendResult, Sent, classified
from rabbitctl_retry.retry.policy import Copy
from rabbitctl_retry.transport.base import Channel, Connection, Delivery, Properties

OnSent = Callable[[str, float, int, bool], None]
"""Told each publish once its result is known: (destination, duration_s, body size in bytes,
failed), for the metrics of docs/reference/metrics.md, "Metrics"."""

if TYPE_CHECKING:
    from rabbitctl_retry.telemetry.tracing import Tracing


class CopyPublisher:
    """Publishes copies on one connection: one confirm channel and one fast channel at most.

    Each channel is opened on first use, under a lock, so a burst of concurrent publishes
    opens one channel, not one each (RabbitMQ closes a connection that opens more channels
    than its ``channel_max``); a channel that closed is re-opened once, by the first publish
    that finds it closed.
    """

    def __init__(
        self,
        connection: Connection,
        *,
        on_sent: OnSent | None = None,
        tracing: Tracing | None = None,
    ) -> None:
        self._connection = connection
        self._on_sent = on_sent
        self.tracing = tracing
        """rr's tracing when on (``telemetry/``): each copy carries the trace context of the
        span current when it is published (or the one captured for it) and a publish stamp."""
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

    async def publish(
        self,
        copy: Copy,
        original: Delivery,
        *,
        confirm: bool = True,
        context: object | None = None,
    ) -> SendResult:
        """Publish ``copy`` of ``original``; with ``confirm``, return once the broker has it.
        ``context``: the trace context it carries when tracing is on (else the current one).

        What became of it (``ops/copies/sent.py``): confirmed; refused (returned or nacked: it
        reached no queue); cut (the channel or connection failed, or no channel could be
        opened: the copy may or may not have arrived); unencodable (never sent).
        """
        started_s = time.perf_counter()
        try:
            channel = await self._channel(confirm)
        except TransportError as error:
            return self._told(classified(error), copy.exchange or copy.routing_key, started_s, 0)
        result = await outcome_of(
            channel.publish(
                original.body,
                exchange=copy.exchange,
                routing_key=copy.routing_key,
                properties=retry_copy_properties(
                    original.properties, copy, tracing=self.tracing, context=context
                ),
                mandatory=copy.mandatory,
            )
        )
        destination = copy.exchange or copy.routing_key
        return self._told(result, destination, started_s, len(original.body))

    async def publish_message(
        self, body: bytes, *, exchange: str, routing_key: str, properties: Properties
    ) -> SendResult:
        """Publish a message of rr's own making (a handler's output: ``runtime/outputs.py``):
        ``mandatory`` on the confirm channel, whatever the queue's ``publish`` mode; what
        became of it, as above."""
        started_s = time.perf_counter()
        destination = exchange or routing_key
        try:
            channel = await self._channel(True)
        except TransportError as error:
            return self._told(classified(error), destination, started_s, 0)
        if self.tracing is not None:
            properties = dataclasses.replace(
                properties, headers=self.tracing.stamp(properties.headers)
            )
        result = await outcome_of(
            channel.publish(
                body,
                exchange=exchange,
                routing_key=routing_key,
                properties=properties,
                mandatory=True,
            )
        )
        return self._told(result, destination, started_s, len(body))

    def _told(
        self, result: SendResult, destination: str, started_s: float, size_bytes: int
    ) -> SendResult:
        """``result``, told to ``on_sent`` first (when given)."""
        if self._on_sent is not None:
            failed = result.outcome is not Sent.CONFIRMED
            self._on_sent(destination, time.perf_counter() - started_s, size_bytes, failed)
        return result

    async def close(self) -> None:
        for channel in self._channels.values():
            await channel.close()
