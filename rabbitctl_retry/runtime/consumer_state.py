"""Pure. The lifecycle of one queue's consumer (``rr run``): its consumer, what a delivery
for a consumer the broker cancelled means, what its watcher does when the broker closes the
channel or cancels the consumer, the backoff of its restarts, and its stop. Events in,
decisions out; no I/O, no clock, no event loop.

A handler that says a dependency is down (``Outcome.pause``, ``pause_on``) pauses the
consumer: rr cancels it (``basic.cancel``; the deliveries it already has are handled as
usual) and, the pause over, consumes again on the same channel (a new one if it closed
meanwhile). A pause asked for while paused moves the resume time to the later of the two
(a pause never shortens); one asked for while the consumer is not consuming (being restarted,
stopping) is not taken. A stop during a pause stops at once (docs/reference/handlers.md, "Pausing a
queue").

``runtime/consumer.py`` (deliveries) and ``runtime/consumer_watch.py`` (channel, consumer,
restarts, pauses) carry the decisions out on the transport port (every delivery recorded in
its channel's settle window first, ``ops/settler.py``), and
``tests/unit/test_consumer_state.py`` drives them through random orders of events::

    OPENING ── consume-ok ──► CONSUMING ── the broker cancels it ──► CANCELLED
                                 ▲   │                                   │ the watcher: cancel
                     consume-ok  │   │ the channel closes                │ it too, ack one by
                                 │   ▼                                   ▼ one, consume again
                              RESTARTING ◄── the watcher: a new channel ─┘
                              (recover, consume; after a failure, back off)

    CONSUMING ── a handler pauses ──► PAUSED ── the pause is over: the watcher ──► RESTARTING
                                      (rr cancels the consumer; a later pause may extend it)

    any ── stop ──► STOPPING (no consume; deliveries in flight finish) ── close ──► CLOSED
    any ── the connection is gone ──► CLOSED

Every delivery is either handled (once) or, when it is for a consumer the broker cancelled,
given back unhandled (``basic.nack``, docs/reference/runtime.md, "Handlers": "On RabbitMQ 4.3"). A
consumer that the broker confirms once the stop was asked for is cancelled at once: a stop
takes no new deliveries.
"""

from __future__ import annotations

from enum import Enum

from rabbitctl_retry.runtime.backoff import Backoff

RESTART_BACKOFF = Backoff(initial_s=0.5, max_s=30.0)
"""Between attempts to consume again (``Watch``)."""


class ConsumerPhase(Enum):
    OPENING = "opening"
    """The first channel and consumer are being set up."""
    CONSUMING = "consuming"
    """Its consumer takes deliveries."""
    CANCELLED = "cancelled"
    """The broker cancelled the consumer (its queue deleted, its node down, RabbitMQ 4.3's
    consumer timeout); the channel may still be open. The watcher takes over."""
    RESTARTING = "restarting"
    """The watcher re-declares what the consumer needs and consumes again, with backoff."""
    PAUSED = "paused"
    """A handler paused the queue: rr cancelled the consumer (deliveries in flight finish) and
    its watcher consumes again at :attr:`ConsumerState.resume_at_s`."""
    STOPPING = "stopping"
    """A stop was asked for: nothing more is consumed; deliveries in flight finish."""
    CLOSED = "closed"
    """Drained and closed, or its connection is gone."""


class Watch(Enum):
    """What the watcher does when it wakes."""

    STOP = "stop"
    """Stop watching: the consumer stops, or its connection is gone (the service reconnects)."""
    REOPEN = "reopen"
    """The channel closed (its unsettled deliveries went back to the queue): open a new one and
    consume again."""
    RECONSUME = "reconsume"
    """The broker cancelled the consumer: cancel it too (:meth:`ConsumerState.own_cancel`),
    ack one by one from now on, and consume again on the same channel."""
    PAUSE = "pause"
    """A handler paused the queue: wait until :attr:`ConsumerState.resume_at_s` (it may
    move), then :meth:`ConsumerState.resumed`."""


class ConsumerState:
    """The state of one queue's consumer (see the module doc)."""

    __slots__ = (
        "_backoff",
        "_cancelled",
        "_failures",
        "_to_cancel",
        "consumer_tag",
        "in_flight",
        "phase",
        "resume_at_s",
    )

    def __init__(self, backoff: Backoff = RESTART_BACKOFF) -> None:
        self.phase = ConsumerPhase.OPENING
        self.consumer_tag: str | None = None
        """The consumer that takes deliveries now (``None`` while there is none)."""
        self._cancelled: set[str] = set()
        """Consumer tags of this consumer that the broker cancelled: what still arrives for
        them is given back unhandled."""
        self._to_cancel: str | None = None
        """The consumer the broker cancelled last, until rr cancels it too."""
        self.in_flight = 0
        """Deliveries being handled."""
        self._failures = 0
        """Attempts to consume again that failed in a row."""
        self._backoff = backoff
        self.resume_at_s: float | None = None
        """While paused: when to consume again (seconds of the consumer's clock)."""

    @property
    def stopping(self) -> bool:
        """A stop was asked for (or the connection is gone): no restart, no new consumer."""
        return self.phase is ConsumerPhase.STOPPING or self.phase is ConsumerPhase.CLOSED

    @property
    def watcher_wanted(self) -> bool:
        """The broker cancelled the consumer: the watcher must wake."""
        return self.phase is ConsumerPhase.CANCELLED

    @property
    def paused(self) -> bool:
        return self.phase is ConsumerPhase.PAUSED

    # -- the consumer ----------------------------------------------------------------------

    def consuming(self, consumer_tag: str) -> bool:
        """The broker confirmed a consumer (consume-ok); ``False``: cancel it at once (a stop
        came meanwhile)."""
        if self.stopping:
            return False
        if consumer_tag in self._cancelled:
            # the broker cancelled it before its consume-ok reached us: the watcher takes over
            self.phase = ConsumerPhase.CANCELLED
            self._to_cancel = consumer_tag
            return True
        self.consumer_tag = consumer_tag
        self.phase = ConsumerPhase.CONSUMING
        return True

    def server_cancelled(self, consumer_tag: str) -> None:
        """The broker cancelled ``consumer_tag`` (``basic.cancel`` from the server)."""
        self._cancelled.add(consumer_tag)
        if consumer_tag != self.consumer_tag:
            return
        self.consumer_tag = None
        if not self.stopping:
            self.phase = ConsumerPhase.CANCELLED
            self._to_cancel = consumer_tag

    # -- deliveries ------------------------------------------------------------------------

    def delivered(self, consumer_tag: str | None) -> bool:
        """A delivery arrived for ``consumer_tag``: ``True`` to handle it (it is in flight
        until :meth:`handled`), ``False`` to give it back unhandled (its consumer was
        cancelled by the broker: RabbitMQ 4.3 revives such a consumer)."""
        if consumer_tag in self._cancelled:
            return False
        self.in_flight += 1
        return True

    def handled(self) -> bool:
        """A delivery's handling is over; ``True`` if none is in flight now."""
        self.in_flight -= 1
        return self.in_flight == 0

    # -- a pause ---------------------------------------------------------------------------

    def pause(self, resume_at_s: float) -> bool:
        """A handler paused the queue until ``resume_at_s``; ``True`` if this starts a pause
        (the consumer to cancel is :meth:`own_cancel`'s), ``False`` if it extends one (to the
        later of the two times) or is not taken (no consumer: restarting, stopping)."""
        if self.phase is ConsumerPhase.PAUSED:
            assert self.resume_at_s is not None
            self.resume_at_s = max(self.resume_at_s, resume_at_s)
            return False
        if self.phase is not ConsumerPhase.CONSUMING:
            return False
        self.phase = ConsumerPhase.PAUSED
        self.resume_at_s = resume_at_s
        self._to_cancel, self.consumer_tag = self.consumer_tag, None
        return True

    def resumed(self, *, channel_closed: bool) -> Watch:
        """The pause is over (the watcher's clock reached :attr:`resume_at_s`): consume again,
        on a new channel if it closed meanwhile. ``Watch.STOP`` if a stop came."""
        if self.stopping:
            return Watch.STOP
        self.phase = ConsumerPhase.RESTARTING
        self.resume_at_s = None
        self._failures = 0
        self._to_cancel = None  # cancelled when the pause began
        return Watch.REOPEN if channel_closed else Watch.RECONSUME

    # -- the watcher -----------------------------------------------------------------------

    def woke(self, *, channel_closed: bool, connection_closed: bool) -> Watch:
        """The watcher woke: the channel closed, the broker cancelled the consumer, or a stop
        came."""
        if self.stopping or connection_closed:
            return Watch.STOP
        if self.phase is ConsumerPhase.PAUSED:
            return Watch.PAUSE
        self._failures = 0
        self.phase = ConsumerPhase.RESTARTING
        self.consumer_tag = None
        if channel_closed:
            self._to_cancel = None  # its consumers went with it
            return Watch.REOPEN
        return Watch.RECONSUME

    def own_cancel(self) -> str | None:
        """The consumer the broker cancelled, for rr to cancel too (once)."""
        tag, self._to_cancel = self._to_cancel, None
        return tag

    def restart_failed(self) -> float:
        """An attempt to consume again failed: how long to wait before the next one (s)."""
        self._failures += 1
        return self._backoff.delay_s(self._failures)

    # -- the stop --------------------------------------------------------------------------

    def stop(self) -> str | None:
        """A stop was asked for: the consumer to cancel (``basic.cancel``), if there is one."""
        tag, self.consumer_tag = self.consumer_tag, None
        if self.phase is ConsumerPhase.PAUSED:
            tag = self.own_cancel()  # paused before its basic.cancel went out
        if self.phase is not ConsumerPhase.CLOSED:
            self.phase = ConsumerPhase.STOPPING
        self.resume_at_s = None
        return tag

    def closed(self) -> None:
        """Drained and closed, or the connection is gone."""
        self.phase = ConsumerPhase.CLOSED
        self.consumer_tag = None
        self.resume_at_s = None
