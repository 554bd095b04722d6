"""Keeps one queue's consumer consuming: its channel, its consumer, its restarts, its pauses.

:class:`ConsumerWatch` opens the consumer's channel and consumes, then watches the channel
and the consumer: if the broker closes the channel (a channel error) or cancels the consumer
(its queue was deleted, or RabbitMQ 4.3's consumer timeout), it logs why, re-declares what the
consumer needs (``recover``), opens a new channel (or, after a cancel, cancels the old
consumer itself and acks one by one from then on) and consumes again, with backoff. If the
connection closes, the service reconnects; deliveries in flight went back to their queues.

A handler that says a dependency is down (``Outcome.pause``, a ``pause_on`` mapping) pauses
the queue: :meth:`ConsumerWatch.pause` cancels the consumer before the message goes back
(``basic.nack``), and the watcher consumes again once the pause is over, on the consumer's
clock (docs/reference/handlers.md, "Pausing a queue").

What each of these events means (and the stop's) is decided by the consumer's pure lifecycle
(``runtime/consumer_state.py``); this module carries it out. The deliveries themselves are
``runtime/consumer.py``'s.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Awaitable, Callable

from rabbitctl_retry.errors import RrError, TransportError
from rabbitctl_retry.ops.clock import Clock, first_of, sleep_unless
from rabbitctl_retry.ops.settler import ChannelSettler
from rabbitctl_retry.retry.policy import Decision
from rabbitctl_retry.runtime.consumer_state import ConsumerState, Watch
from rabbitctl_retry.runtime.stats import RuntimeStats
from rabbitctl_retry.transport.base import Channel, Connection, Delivery

log = logging.getLogger("rr.runtime")

Recover = Callable[[], Awaitable[None]]
"""Re-declares (or checks) what a consumer needs before it consumes again."""
OnDelivery = Callable[[ChannelSettler, Delivery], Awaitable[None]]
"""Handles one delivery of the channel whose settle window is the settler."""


async def nothing_to_recover() -> None:
    return None


class ConsumerWatch:
    """One queue's channel and consumer, started again whenever the broker takes them away
    or a pause ends."""

    def __init__(
        self,
        *,
        queue: str,
        connection: Connection,
        clock: Clock,
        prefetch: int,
        state: ConsumerState,
        stats: RuntimeStats,
        on_delivery: OnDelivery,
        recover: Recover = nothing_to_recover,
    ) -> None:
        self._queue = queue
        self._connection = connection
        self._clock = clock
        self._prefetch = prefetch
        self._state = state
        """The consumer's lifecycle (``runtime/consumer_state.py``): what the events mean."""
        self._stats = stats
        self._on_delivery = on_delivery
        self._recover = recover
        self.channel: Channel | None = None
        """The channel the consumer consumes on now."""
        self.settler: ChannelSettler | None = None
        """The settle window of :attr:`channel` (``ops/settler.py``)."""
        self._cancelled = asyncio.Event()
        """Set while the state wants the watcher (the broker cancelled the consumer)."""
        self.stopping = asyncio.Event()
        """Set once the state is stopping."""
        self._paused = asyncio.Event()
        """Set while the state is paused (the watcher waits for the pause to end)."""
        self._watcher: asyncio.Future[None] | None = None

    @property
    def watching(self) -> bool:
        """Its watcher runs: it starts the consumer again when the broker takes it away."""
        return self._watcher is not None and not self._watcher.done()

    async def start(self) -> None:
        """Open a channel and consume; then watch the channel and the consumer."""
        await self._open()
        self._watcher = asyncio.ensure_future(self._watch())

    async def _open(self) -> None:
        channel = await self._connection.channel()
        settler = ChannelSettler(channel, singles_threshold=self._prefetch // 2)
        self.channel, self.settler = channel, settler
        await channel.qos(self._prefetch)
        await self._consume(channel, settler)

    async def _consume(self, channel: Channel, settler: ChannelSettler) -> None:
        tag = await channel.consume(
            self._queue,
            functools.partial(self._on_delivery, settler),
            on_cancel=self._on_server_cancel,
        )
        if not self._state.consuming(tag) and not channel.is_closed:
            # a stop came while the broker set it up: it takes no deliveries
            with contextlib.suppress(TransportError):
                await channel.cancel(tag)
        self.observe()

    def observe(self) -> None:
        """Wake whoever waits for what the state now says."""
        state = self._state
        if state.watcher_wanted:
            self._cancelled.set()
        else:
            self._cancelled.clear()
        if state.paused:
            self._paused.set()
        else:
            self._paused.clear()
        if state.stopping:
            self.stopping.set()

    def _on_server_cancel(self, consumer_tag: str) -> None:
        self._state.server_cancelled(consumer_tag)
        self.observe()

    async def _after_server_cancel(self, channel: Channel) -> None:
        """RabbitMQ 4.3 keeps a quorum queue consumer it cancelled for its consumer timeout,
        and hands it messages again once the timed-out delivery is acked; rr's client drops
        those (and a later ``basic.ack(multiple=true)`` would ack them unhandled). So cancel
        it ourselves, and ack what waits behind the timed-out delivery one by one from now
        on, before the server times it out too (docs/reference/runtime.md, "Handlers": "On RabbitMQ
        4.3")."""
        tag = self._state.own_cancel()
        if tag is not None and not channel.is_closed:
            with contextlib.suppress(RrError):
                await channel.cancel(tag)
        if self.settler is not None and self.settler.channel is channel:
            self.settler.force_singles = True
            await self.settler.flush()

    async def _watch(self) -> None:
        """Start the consumer again whenever the broker closes its channel or cancels it."""
        while not self._state.stopping:
            channel = self.channel
            assert channel is not None
            await first_of(
                channel.wait_closed(),
                self._cancelled.wait(),
                self.stopping.wait(),
                self._paused.wait(),
            )
            watch = self._state.woke(
                channel_closed=channel.is_closed, connection_closed=self._connection.is_closed
            )
            self.observe()
            if watch is Watch.STOP:
                return
            if watch is Watch.PAUSE:
                await self._sit_out_the_pause()
                continue
            fields: dict[str, object] = {"queue": self._queue}
            if watch is Watch.REOPEN:
                fields["reason"] = f"the channel closed: {channel.close_reason}"
                if self.settler is not None:
                    self.settler.forget()
                    fields["in_flight"] = self.settler.given_back  # back in the queue
            else:
                self._stats.consumer_cancels += 1
                fields["reason"] = (
                    "the broker cancelled the consumer (its queue deleted, its node down, or "
                    "a delivery held past the consumer timeout)"
                )
            self._stats.consumer_restarts += 1
            log.warning("consumer stopped; starting it again", extra={"rr": fields})
            if watch is Watch.RECONSUME:
                await self._after_server_cancel(channel)
            await self._restart()

    async def _sit_out_the_pause(self) -> None:
        """Wait until the pause is over (it may be extended meanwhile), then consume again."""
        state = self._state
        while state.paused and state.resume_at_s is not None:
            left_s = state.resume_at_s - self._clock.now().timestamp()
            if left_s <= 0:
                break
            await sleep_unless(self._clock, left_s, self.stopping)
        if self._connection.is_closed:
            return  # the service reconnects; the next loop of _watch stops
        channel = self.channel
        closed = channel is None or channel.is_closed
        watch = state.resumed(channel_closed=closed)
        self.observe()
        if watch is Watch.STOP:
            return
        if closed and self.settler is not None:
            self.settler.forget()  # what it held went back to the queue with it
        await self._restart(resuming=True)

    async def pause(self, decision: Decision) -> None:
        """A handler paused the queue: cancel the consumer (before the message goes back, so
        it is not handed to this consumer again at once), or move the resume time."""
        delay_ms = decision.delay_ms or 0
        state = self._state
        if not state.pause(self._clock.now().timestamp() + delay_ms / 1000):
            self.observe()
            return
        self._stats.pauses += 1
        failure = decision.failure
        log.warning(
            "pausing the queue",
            extra={
                "rr": {
                    "queue": self._queue,
                    "resume_in_s": delay_ms / 1000,
                    **(
                        {"error_type": failure.type, "error": failure.message}
                        if failure is not None
                        else {}
                    ),
                }
            },
        )
        await self._cancel(state.own_cancel())

    async def _cancel(self, tag: str | None) -> None:
        """``basic.cancel`` of the consumer ``tag`` (once the state said so), on a channel
        still open."""
        self.observe()
        current = self.channel
        if tag is not None and current is not None and not current.is_closed:
            with contextlib.suppress(TransportError):
                await current.cancel(tag)

    async def _restart(self, *, resuming: bool = False) -> None:
        state = self._state
        while not state.stopping and not self._connection.is_closed:
            try:
                await self._recover()
                if state.stopping:
                    return  # a stop came while recovering: consume no more
                channel, settler = self.channel, self.settler
                if channel is None or settler is None or channel.is_closed:
                    await self._open()
                else:
                    await self._consume(channel, settler)
            except RrError as error:
                delay_s = state.restart_failed()
                log.warning(
                    "could not consume again; trying again",
                    extra={
                        "rr": {"queue": self._queue, "error": str(error), "retry_in_s": delay_s}
                    },
                )
                await sleep_unless(self._clock, delay_s, self.stopping)
                continue
            if not state.stopping:
                said = "resuming the queue after its pause" if resuming else "consuming again"
                log.info(said, extra={"rr": {"queue": self._queue}})
            return

    async def stop_consuming(self) -> None:
        """basic.cancel: no new deliveries; in-flight ones go on."""
        await self._cancel(self._state.stop())

    def abandon(self) -> None:
        """The connection is gone: stop watching (deliveries in flight went back)."""
        self._state.closed()
        self.observe()
        if self.settler is not None:
            self.settler.forget()

    async def close(self) -> None:
        """Settle what is settled, close the channel, and wait for the watcher to end."""
        self._state.stop()
        self.observe()
        if self.settler is not None:
            await self.settler.drain()
            self.settler.forget()
        if self.channel is not None:
            await self.channel.close()
        self._state.closed()
        if self._watcher is not None:
            await asyncio.gather(self._watcher, return_exceptions=True)
