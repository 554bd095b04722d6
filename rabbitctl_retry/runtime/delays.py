"""In-memory delayed copies (``delay = "memory"``): held while their delay runs, then
published, and kept until the broker confirmed them.

Each copy has exactly one owner at a time, named by its state, so no copy is ever published
by two owners at once (a stop that walked the copies while their timers still ran published
some twice)::

    WAITING      its delay runs (a timer of the clock)
    READY        due: it waits for a publish slot, or for a connection
    PUBLISHING   one publish task has it
    BACKING_OFF  its publish failed (a refusal, no answer): a timer makes it READY again

A due copy is published ``mandatory`` on the connection's confirm channel; at most
:data:`PUBLISH_WINDOW` publishes are under way at once (pipelined: each waits for its own
confirm, not for the others'). A publish that fails is tried again with backoff (1 s
doubling to 30 s); when the connection goes (:meth:`InMemoryDelays.attach` with ``None``)
the publishes under way are cancelled and their copies wait for the next connection, where
every due copy goes at once.

A stop calls :meth:`InMemoryDelays.hurry`: every copy is due now, and a copy scheduled
after that too. What is still here when the stop is over is handed to the service
(:meth:`InMemoryDelays.take_all`), which saves it to a file (``runtime/pending.py``). Only a
crash of the process loses copies: they live in its memory (docs/explanation/guarantees.md, "What is
guaranteed").
"""

from __future__ import annotations

import asyncio
import enum
import functools
import logging
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rabbitctl_retry.errors import PublishFailed, TransportError
from rabbitctl_retry.ops.clock import Clock, Timer
from rabbitctl_retry.ops.copies.publisher import CopyPublisher
from rabbitctl_retry.ops.copies.sent import SendResult, Sent
from rabbitctl_retry.retry.policy import Copy
from rabbitctl_retry.runtime.backoff import Backoff
from rabbitctl_retry.transport.base import Delivery

if TYPE_CHECKING:
    from rabbitctl_retry.telemetry.tracing import Tracing

log = logging.getLogger("rr.runtime")

RETRY_BACKOFF = Backoff(initial_s=1.0, max_s=30.0)
"""How a due copy whose publish failed is tried again."""
PUBLISH_TIMEOUT_S = 30.0
"""A publish with no answer by then (a connection that died without a word) counts as
failed, and the copy is tried again."""
PUBLISH_WINDOW = 256
"""Publishes of due copies under way at once: a stop with thousands pending pipelines them,
and memory stays bounded."""


class State(enum.Enum):
    WAITING = "waiting"
    READY = "ready"
    PUBLISHING = "publishing"
    BACKING_OFF = "backing off"


@dataclass(slots=True, eq=False)
class PendingCopy:
    """One delayed copy rr holds: what to publish, of which delivery, for which queue."""

    copy: Copy
    original: Delivery
    queue: str
    state: State = State.WAITING
    timer: Timer | None = None
    failures: int = 0
    context: object | None = None
    """The trace context when it was scheduled (tracing on): the span of the attempt that
    asked for it, whose child the next attempt is (docs/reference/runtime.md, "Tracing and
    metrics")."""

    @property
    def message_id(self) -> str | None:
        return self.original.properties.message_id

    def disarm(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None


class InMemoryDelays:
    """The copies of ``delay = "memory"`` (module doc)."""

    def __init__(self, clock: Clock, *, window: int = PUBLISH_WINDOW) -> None:
        self._clock = clock
        self._window = max(1, window)
        self._pending: dict[int, PendingCopy] = {}
        self._ready: deque[int] = deque()
        self._tasks: dict[int, asyncio.Future[SendResult]] = {}
        self._next_key = 0
        self._publisher: CopyPublisher | None = None
        self._hurried = False
        self._empty = asyncio.Event()
        self._empty.set()
        self.retried = 0
        """Publishes of due copies that failed and were scheduled again."""
        self.published = 0
        """Copies the broker confirmed."""
        self.tracing: Tracing | None = None
        """rr's tracing when on: a copy keeps the trace context of its scheduling."""

    def __len__(self) -> int:
        return len(self._pending)

    def states(self) -> dict[State, int]:
        """How many copies are in each state (for logs and tests)."""
        counts = dict.fromkeys(State, 0)
        for pending in self._pending.values():
            counts[pending.state] += 1
        return counts

    # -- what the consumer and the service call ----------------------------------------------

    def schedule(self, copy: Copy, original: Delivery, queue: str, delay_ms: int) -> None:
        """Hold ``copy`` for ``delay_ms`` (not at all once :meth:`hurry` was called)."""
        key = self._next_key
        self._next_key += 1
        pending = PendingCopy(copy, original, queue)
        if self.tracing is not None:
            pending.context = self.tracing.current()
        self._pending[key] = pending
        self._empty.clear()
        if self._hurried:
            self._make_ready(key, pending)
            self._pump()
        else:
            pending.timer = self._clock.call_later(delay_ms / 1000, lambda: self._due(key))

    def attach(self, publisher: CopyPublisher | None) -> None:
        """Where due copies go; ``None`` while there is no connection.

        Detaching cancels the publishes under way (on a connection that is gone they could
        wait for ever for room in its write queue): their copies wait for the next
        connection. Attaching sends every due copy at once, those backing off included."""
        self._publisher = publisher
        if publisher is None:
            for task in list(self._tasks.values()):
                task.cancel()
            return
        for key, pending in self._pending.items():
            if pending.state is State.BACKING_OFF:
                pending.disarm()
                self._make_ready(key, pending)
        self._pump()

    def hurry(self) -> None:
        """The service stops: every copy is due now, and so is every copy scheduled later."""
        self._hurried = True
        for key, pending in self._pending.items():
            if pending.state is State.WAITING:
                pending.disarm()
                self._make_ready(key, pending)
        self._pump()

    async def wait_empty(self) -> None:
        """Return once the broker has confirmed every copy held."""
        await self._empty.wait()

    def take_all(self) -> list[PendingCopy]:
        """Give up every copy held (the service is done): their timers and publishes are
        cancelled; the caller keeps them (a publish cancelled here may still have reached
        the broker: a copy kept by the caller can be a duplicate, never a loss)."""
        taken = list(self._pending.values())
        for pending in taken:
            pending.disarm()
        for task in list(self._tasks.values()):
            task.cancel()
        self._pending.clear()
        self._ready.clear()
        self._empty.set()
        return taken

    # -- the states -----------------------------------------------------------------------

    def _due(self, key: int) -> None:
        """A timer fired: the delay is over, or a backoff."""
        pending = self._pending.get(key)
        if pending is None or pending.state not in (State.WAITING, State.BACKING_OFF):
            return
        pending.timer = None
        self._make_ready(key, pending)
        self._pump()

    def _make_ready(self, key: int, pending: PendingCopy) -> None:
        pending.state = State.READY
        self._ready.append(key)

    def _pump(self) -> None:
        """Start publishes while there is a connection, a free slot and a ready copy."""
        while self._publisher is not None and self._ready and len(self._tasks) < self._window:
            key = self._ready.popleft()
            pending = self._pending.get(key)
            if pending is None or pending.state is not State.READY:
                continue
            pending.state = State.PUBLISHING
            task = asyncio.ensure_future(self._publish(pending, self._publisher))
            self._tasks[key] = task
            task.add_done_callback(functools.partial(self._publish_ended, key))

    async def _publish(self, pending: PendingCopy, publisher: CopyPublisher) -> SendResult:
        async with asyncio.timeout(PUBLISH_TIMEOUT_S):
            if pending.context is None:  # tracing off
                return await publisher.publish(pending.copy, pending.original)
            return await publisher.publish(pending.copy, pending.original, context=pending.context)

    def _publish_ended(self, key: int, task: asyncio.Future[SendResult]) -> None:
        """Whatever ended the publish (a confirm, a failure, a cancellation before or while
        it ran), the copy is either gone (confirmed) or in a state with an owner again."""
        self._tasks.pop(key, None)
        pending = self._pending.get(key)
        if pending is not None and pending.state is State.PUBLISHING:
            if task.cancelled():
                # the connection went (attach(None)): wait for the next one
                self._make_ready(key, pending)
            elif (error := task.exception()) is not None:
                self._failed(key, pending, error)
            elif (sent := task.result()).outcome is Sent.CONFIRMED:
                self._confirmed(key, pending)
            else:
                assert sent.error is not None
                self._failed(key, pending, sent.error)
        self._pump()

    def _confirmed(self, key: int, pending: PendingCopy) -> None:
        del self._pending[key]
        self.published += 1
        if pending.failures:
            log.info("delayed copy published after all", extra={"rr": self._fields(pending)})
        if not self._pending:
            self._empty.set()

    def _failed(self, key: int, pending: PendingCopy, error: BaseException) -> None:
        """Keep the copy and try again later (backoff); log its first failure."""
        pending.failures += 1
        self.retried += 1
        if pending.failures == 1:
            if isinstance(error, PublishFailed | TransportError):
                reason = str(error)
            elif isinstance(error, TimeoutError):
                reason = f"no answer within {PUBLISH_TIMEOUT_S:g} s"
            else:  # a bug, or a driver's surprise: never the end of the copy
                reason = f"{type(error).__name__}: {error}"
            log.warning(
                "delayed copy not published; it is kept and tried again",
                extra={"rr": self._fields(pending) | {"error": reason}},
            )
        pending.state = State.BACKING_OFF
        delay_s = RETRY_BACKOFF.delay_s(pending.failures)
        pending.timer = self._clock.call_later(delay_s, lambda: self._due(key))

    @staticmethod
    def _fields(pending: PendingCopy) -> dict[str, object]:
        return {
            "queue": pending.queue,
            "message_id": pending.message_id,
            "attempts": pending.failures + 1,
        }
