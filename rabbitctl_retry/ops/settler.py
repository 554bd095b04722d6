"""One ordered settlement path per channel: every ack and reject of a channel goes through here.

Decisions are recorded at once (:meth:`ChannelSettler.ack`, :meth:`ChannelSettler.reject`,
no await) and written by one flush at a time, under a lock: the flush pops the frames the
pure :class:`~rabbitctl_retry.ops.settlement.SettleWindow` allows and writes them in
that order before it pops more. Nothing else writes a settlement frame on the channel, so
the order the window chose is the order on the wire. (The client library's write queue is
small and bounded: two tasks that each wrote their own frame could overtake each other
there, and a later ``basic.ack(multiple=true)`` reaching the broker before an earlier
reject makes the broker close the channel for an "unknown delivery tag".)

A flush is scheduled once per turn of the event loop, so the acks of one turn go out as one
``basic.ack(multiple=true)``. If the channel closes, the window is forgotten: RabbitMQ has
returned every unsettled delivery to its queue, and nothing more is written.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from rabbitctl_retry.errors import RrError
from rabbitctl_retry.ops.settlement import AckFrame, NackFrame, SettleFrame, SettleWindow
from rabbitctl_retry.transport.base import Channel

SentListener = Callable[[Sequence[SettleFrame]], None]
"""Told the frames of each batch once they are in the connection's write queue."""


class ChannelSettler:
    """Settles the deliveries of one channel, in an order the broker accepts."""

    __slots__ = (
        "_channel",
        "_closed",
        "_lock",
        "_on_sent",
        "_scheduled",
        "_singles_threshold",
        "_tasks",
        "_window",
        "force_singles",
        "given_back",
    )

    def __init__(
        self,
        channel: Channel,
        *,
        singles_threshold: int,
        on_sent: SentListener | None = None,
    ) -> None:
        self._channel = channel
        self._window = SettleWindow()
        self._lock = asyncio.Lock()
        self._scheduled = False
        self._closed = False
        self._singles_threshold = max(1, singles_threshold)
        self._on_sent = on_sent
        self._tasks: set[asyncio.Future[None]] = set()
        self.force_singles = False
        """Ack every decided delivery at once, one by one, even behind an undecided one
        (for callers that leave some deliveries unsettled on purpose)."""
        self.given_back = 0
        """Deliveries unsettled when the channel went (:meth:`forget`): the broker gave them
        back to their queues."""

    @property
    def channel(self) -> Channel:
        return self._channel

    @property
    def closed(self) -> bool:
        """The channel failed or closed under a write: nothing more will be sent."""
        return self._closed

    @property
    def unsent(self) -> int:
        """Decisions recorded and not yet written."""
        return self._window.unsent

    @property
    def unsettled(self) -> int:
        """Deliveries whose settlement frame is not written yet (undecided, or decided)."""
        return len(self._window)

    def delivered(self, tag: int) -> None:
        """Record a delivery; call it first thing, in delivery order."""
        self._window.delivered(tag)

    def is_open(self, tag: int) -> bool:
        """``tag`` is delivered and nobody decided what to do with it yet."""
        return self._window.is_open(tag)

    def open_tags(self) -> list[int]:
        """Every delivered tag nobody decided what to do with yet, in delivery order."""
        return self._window.open_tags()

    def ack(self, tag: int) -> bool:
        """Ack ``tag`` (soon); ``False`` if it was already decided or is unknown."""
        if not self._window.ack(tag):
            return False
        self._schedule()
        return True

    def reject(self, tag: int, *, requeue: bool) -> bool:
        """Reject ``tag`` (soon); ``False`` if it was already decided or is unknown."""
        if not self._window.reject(tag, requeue=requeue):
            return False
        self._schedule()
        return True

    def give_back(self, tag: int) -> bool:
        """Give ``tag`` back unhandled, uncounted (``basic.nack`` with requeue, soon);
        ``False`` if it was already decided or is unknown."""
        if not self._window.give_back(tag):
            return False
        self._schedule()
        return True

    def _schedule(self) -> None:
        if self._scheduled or self._closed:
            return
        self._scheduled = True
        asyncio.get_running_loop().call_soon(self._start_flush)

    def _start_flush(self) -> None:
        task = asyncio.ensure_future(self.flush())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def flush(self) -> None:
        """Write every frame the window allows now; return once they are in the write queue."""
        self._scheduled = False
        async with self._lock:
            while not self._closed:
                if self._channel.is_closed:
                    # a frame written now would go nowhere: the broker gave these back
                    self.forget()
                    return
                window = self._window
                frames = window.frames(
                    singles=self.force_singles or window.pending_acks >= self._singles_threshold
                )
                if not frames:
                    return
                try:
                    for frame in frames:
                        await self._write(frame)
                except RrError:
                    self.forget()
                    return
                if self._on_sent is not None:
                    self._on_sent(frames)

    async def _write(self, frame: SettleFrame) -> None:
        if isinstance(frame, AckFrame):
            await self._channel.ack(frame.tag, multiple=frame.multiple)
        elif isinstance(frame, NackFrame):
            await self._channel.nack(frame.tag, requeue=True)
        else:
            await self._channel.reject(frame.tag, requeue=frame.requeue)

    async def drain(self) -> None:
        """Flush, with every ack sent one by one if need be (before a channel is closed)."""
        self.force_singles = True
        await self.flush()

    def forget(self) -> None:
        """The channel is gone: its unsettled deliveries are back in their queues."""
        self._closed = True
        self.given_back += self._window.forget()
