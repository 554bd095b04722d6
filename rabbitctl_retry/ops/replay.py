"""The shell of ``rr dlq replay``: dead letters back to the queues they failed in.

Decisions come from the pure core (``dlq/replay.py``: target, filters, loop guard, the copy's
headers); this module carries them out on the transport port.

``basic.consume`` with a prefetch window (500) on one channel; each dead letter's copy is
published ``mandatory`` on a confirm channel of the same connection, many in flight at
once (each delivery's callback awaits its own confirm), and the dead letter is acked only
after its copy was confirmed. Acks are coalesced into ``basic.ack(multiple=true)`` over the
settled prefix of the channel and written in order by one settler (``ops/settler.py``).
A copy the broker returned (no such queue) or refused leaves its dead letter unacked: it
goes back to the queue, in its place, when the channel closes, as do skipped dead letters.
A run reads at most the messages the queue held when it started, so copies that come back
are never read again; one carrying this run's id stops the run (the loop guard).

After each batch of acks one ``basic.qos`` round trip tells which acks the broker has
processed (a channel handles its frames in order). If the connection drops, the report
counts the dead letters that may now be in both places: copies in flight, and copies
confirmed whose ack the broker had not yet confirmed. Nothing else can be duplicated, and
nothing can be lost: a dead letter is only ever removed after its copy was confirmed.

Two copies with the same ``message_id`` are never in flight at once: aiormq matches a
``basic.return`` to its publish by ``message_id``, and two in flight would let a returned
copy's failure land on the other one (and its dead letter be acked).

The run's first copy goes out alone: the others wait until the broker confirmed, returned or
refused it. A user without write permission is refused on that first publish (403
ACCESS_REFUSED closes the channel), so the run stops knowing that no copy arrived anywhere:
nothing is in two places, and the CLI exits 77 (docs/dlq.md, "When the broker refuses").

``--limit N`` counts the dead letters attempted: every one that matches ``--where``, whether
its copy is then confirmed or it fails (docs/dlq.md, "How a replay runs").
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
import uuid
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any

from rabbitctl_retry.dlq.rate import Pacer
from rabbitctl_retry.dlq.replay import KEPT_ON_REPLAY, Fail, Replay, ReplayPlan, Skip, Stop, choose
from rabbitctl_retry.dlq.report import ReplayOutcome, ReplayReport, ReplayResult, limit_reached
from rabbitctl_retry.errors import (
    AccessRefused,
    BrokerUnreachable,
    NotFound,
    PublishFailed,
    TransportError,
)
from rabbitctl_retry.ops.clock import Clock, WallClock
from rabbitctl_retry.ops.dlq import (
    IDLE_S,
    NO_PROGRESS,
    REPLAY_WINDOW,
    ProgressSink,
    missing_queue_error,
    queue_missing,
    read_messages,
)
from rabbitctl_retry.ops.settlement import AckFrame, SettleFrame
from rabbitctl_retry.ops.settler import ChannelSettler
from rabbitctl_retry.transport.base import Channel, Connection, Delivery, FieldTable, Properties
from rabbitctl_retry.transport.message_ids import MessageIdGuard


def replay_properties(original: Properties, headers: FieldTable) -> Properties:
    """A replayed copy's properties: the kept ones of the dead letter, and new headers."""
    kept: dict[str, Any] = {name: getattr(original, name) for name in KEPT_ON_REPLAY}
    return Properties(**kept, headers=headers)


STOPPED_ON_REQUEST = "stopped on request"
"""``ReplayReport.stopped`` of a run ended through ``ReplayOptions.stop``."""

_NOT_FINISHED = "not finished"
_NOT_SENT_INTERRUPTED = (
    "not replayed: the run was interrupted before its copy was sent; it is still in the "
    "dead-letter queue"
)


@dataclass(slots=True)
class _Slot:
    """One examined dead letter's result, filled in when it is known."""

    message_id: str | None
    to: str | None = None
    outcome: ReplayOutcome = ReplayOutcome.FAILED
    reason: str | None = _NOT_FINISHED
    maybe_duplicate: bool = False


@dataclass(slots=True, kw_only=True)
class ReplayOptions:
    limit: int | None = None
    """Attempt at most this many dead letters (failed ones count; skipped ones do not)."""
    rate_per_s: float | None = None
    window: int = REPLAY_WINDOW
    """The consumer's prefetch; with a rate, at most about one second's worth."""
    idle_s: float = IDLE_S
    clock: Clock = field(default_factory=WallClock)
    stop: asyncio.Event | None = None
    """Set it (the CLI does on Ctrl-C) to end the run early and cleanly: no more dead letters
    are read, copies waiting for their --rate slot are not sent, copies under way finish and
    their dead letters are acked."""

    @property
    def effective_window(self) -> int:
        if self.rate_per_s is None:
            return self.window
        return max(1, min(self.window, math.ceil(self.rate_per_s)))


_UNCONFIRMED_COPY = (
    "interrupted before the broker confirmed the copy: it may also have reached {to!r} "
    "(possible duplicate); the dead letter stays"
)
_UNCONFIRMED_ACK = (
    "replayed, but the connection closed before the broker confirmed the dead letter's ack: "
    "it may still be in the dead-letter queue (possible duplicate)"
)


class _Replayer:
    """One source queue's replay on one connection (see the module doc)."""

    def __init__(
        self,
        connection: Connection,
        plan: ReplayPlan,
        options: ReplayOptions,
        progress: ProgressSink,
    ) -> None:
        self._connection = connection
        self._plan = plan
        self._options = options
        self._window_size = options.effective_window
        self._progress = progress
        self._limit = options.limit
        self._clock = options.clock
        self._pacer = Pacer(options.rate_per_s) if options.rate_per_s else None
        self._ids = MessageIdGuard()
        self._settler: ChannelSettler | None = None
        self._slots: list[_Slot] = []
        self._consume: Channel | None = None
        self._confirm: Channel | None = None
        self._consumer_tag: str | None = None
        self._in_queue = 0
        self._examined = 0
        self._attempted = 0
        """Dead letters replayed or failed so far: what --limit counts."""
        self._in_flight = 0
        self._first_copy_taken = False
        self._first_copy_done = asyncio.Event()
        """Set once the run's first copy is confirmed, returned or refused: the others wait."""
        self._closing = False
        """No more dead letters are read (the end, --limit, the loop guard, idle, or an
        interruption); copies already under way still finish."""
        self._finished = asyncio.Event()
        self._abort = asyncio.Event()
        """Wakes copies waiting for their --rate slot: the run is interrupted or halted."""
        self._halted = False
        """Stopped on request: copies not yet sent stay behind."""
        self._stopped: str | None = None
        self._interrupted: TransportError | None = None
        self._closed_under_us = BrokerUnreachable(
            "the connection to the broker closed during the replay"
        )
        self._interrupted_text = ""
        self._held_here = 0
        """Dead letters held (unacked, not to be acked) by the current consumer."""
        self._regenerating = False
        self._tasks: set[asyncio.Future[None]] = set()
        self._acked_unsent: dict[int, _Slot] = {}
        """Dead letters whose copy was confirmed and whose ack is not sent yet."""
        self._acks_unknown: dict[int, _Slot] = {}
        """Acks sent, not yet known to be processed by the broker."""
        self._sync_lock = asyncio.Lock()
        self._publishing: dict[int, _Slot] = {}
        """Copies published and not yet confirmed."""

    # -- the run ---------------------------------------------------------------------------

    async def run(self) -> ReplayReport:
        started = time.perf_counter()
        connection = self._connection
        source = self._plan.source
        self._consume = consume = await connection.channel()
        self._settler = ChannelSettler(
            consume, singles_threshold=self._window_size // 2, on_sent=self._mark_sent
        )
        try:
            try:
                info = await consume.queue_declare(source, passive=True)
            except NotFound as error:
                raise missing_queue_error(error, source) from None
            self._in_queue = info.message_count
            self._progress.begin(self._in_queue, f"replaying {source}")
            if self._in_queue:
                self._confirm = await connection.channel(confirms=True)
                await consume.qos(self._window_size)
                self._consumer_tag = await consume.consume(source, self._on_delivery)
                try:
                    await self._wait()
                    await self._drain()
                except TransportError as error:
                    self._interrupt(error)
                    await self._settle_in_flight()
        finally:
            if self._confirm is not None:
                await self._confirm.close()
            await consume.close()
            for task in list(self._tasks):
                task.cancel()
        return self._report(time.perf_counter() - started)

    def _channel_gone(self) -> bool:
        return any(
            channel is not None and channel.is_closed for channel in (self._consume, self._confirm)
        )

    async def _wait(self) -> None:
        """Until every dead letter of the run is read and its copy settled, the connection
        drops, a stop is asked for, or no delivery comes for a while."""
        closed = asyncio.ensure_future(self._connection.wait_closed())
        asked = self._options.stop
        stop = asyncio.ensure_future(asked.wait()) if asked is not None else None
        try:
            while not self._finished.is_set():
                before = self._examined
                waiter = asyncio.ensure_future(self._finished.wait())
                watched = {waiter, closed}
                if stop is not None and not stop.done():
                    watched.add(stop)
                await asyncio.wait(
                    watched, timeout=self._options.idle_s, return_when="FIRST_COMPLETED"
                )
                waiter.cancel()
                if self._finished.is_set():
                    return
                if closed.done() or self._channel_gone():
                    self._interrupt(self._closed_under_us)
                    await self._settle_in_flight()
                    return
                if stop is not None and stop.done() and not self._halted:
                    self._halted = True
                    self._abort.set()
                    self._stop(STOPPED_ON_REQUEST)
                    continue
                if self._examined == before and self._in_flight == 0 and not self._closing:
                    self._stop(
                        f"no dead letter came for {self._options.idle_s:g} s after "
                        f"{self._examined:,} of {self._in_queue:,}: another consumer may be "
                        "taking them"
                    )
        finally:
            closed.cancel()
            if stop is not None:
                stop.cancel()

    async def _settle_in_flight(self) -> None:
        """After an interruption: give copies under way a moment to fail or confirm."""
        if self._in_flight:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._finished.wait(), 5.0)

    async def _drain(self) -> None:
        """Stop consuming, send the last acks, and wait until the broker processed them."""
        consume = self._consume
        assert consume is not None
        if self._interrupted is None and self._consumer_tag is not None:
            await consume.cancel(self._consumer_tag)
        if self._interrupted is not None:
            return
        await self._flush()
        await self._sync()

    # -- deliveries ------------------------------------------------------------------------

    async def _on_delivery(self, delivery: Delivery) -> None:
        tag = delivery.delivery_tag
        # First statement, before any await: tags enter the window in delivery order.
        assert self._settler is not None
        self._settler.delivered(tag)
        if self._closing:
            self._hold()
            return
        if self._examined >= self._in_queue:
            # Arrived after the run's start (perhaps a copy of ours): not this run's.
            self._stop(None)
            self._hold()
            return
        try:
            choice = choose(
                self._plan,
                delivery.properties.headers,
                self._clock.now(),
                delivery.properties.undecodable,
            )
        except Exception as error:  # a letter rr cannot read must not stop the others
            choice = Fail(f"cannot read this dead letter: {type(error).__name__}: {error}")
        attempt = isinstance(choice, Replay | Fail)
        if attempt and self._limit is not None and self._attempted >= self._limit:
            self._stop(limit_reached(self._limit))
            self._hold()
            return
        self._examined += 1
        self._progress.advance()
        slot = _Slot(delivery.properties.message_id)
        self._slots.append(slot)
        last = self._examined >= self._in_queue
        if attempt:
            self._attempted += 1
        reached = attempt and self._limit is not None and self._attempted >= self._limit
        match choice:
            case Replay():
                slot.to = choice.to
                self._in_flight += 1  # before any stop: the run waits for this copy
                if last:
                    self._stop(None)
                elif reached and self._limit is not None:
                    self._stop(limit_reached(self._limit))
                await self._replay(delivery, choice, slot)
                return
            case Skip():
                self._leave(slot, ReplayOutcome.SKIPPED, choice.reason)
            case Fail():
                slot.to = choice.to
                self._leave(slot, ReplayOutcome.FAILED, choice.reason)
            case Stop():
                self._stop(choice.reason)
                self._leave(slot, ReplayOutcome.SKIPPED, choice.reason)
        if last:
            self._stop(None)
        elif reached and self._limit is not None:
            self._stop(limit_reached(self._limit))

    def _leave(self, slot: _Slot, outcome: ReplayOutcome, reason: str) -> None:
        """This dead letter stays in its queue."""
        slot.outcome = outcome
        slot.reason = reason
        self._hold()

    def _hold(self) -> None:
        """The delivery stays unacked: it goes back to the queue when the channel closes.

        A multiple ack must never cover it, so every later ack goes out on its own; and a
        consumer whose window fills with held deliveries would get no more, so past half the
        window a fresh consumer (with a fresh window) takes over.
        """
        if self._settler is not None:
            self._settler.force_singles = True
        self._held_here += 1
        if (
            not self._closing
            and not self._regenerating
            and self._held_here >= max(1, self._window_size // 2)
        ):
            self._regenerating = True
            self._spawn(self._regenerate())

    async def _regenerate(self) -> None:
        consume = self._consume
        assert consume is not None
        try:
            if self._consumer_tag is not None:
                await consume.cancel(self._consumer_tag)
                self._consumer_tag = None
            if not self._closing:
                self._held_here = 0
                self._consumer_tag = await consume.consume(self._plan.source, self._on_delivery)
        except TransportError as error:
            self._interrupt(error)
        finally:
            self._regenerating = False

    async def _replay(self, delivery: Delivery, choice: Replay, slot: _Slot) -> None:
        """Publish the copy (``_in_flight`` already counts it), then ack the dead letter."""
        tag = delivery.delivery_tag
        message_id = delivery.properties.message_id
        guarded = False
        first = not self._first_copy_taken  # decided before any await: in delivery order
        self._first_copy_taken = True
        try:
            if self._pacer is not None:
                wait_s = self._pacer.reserve(asyncio.get_running_loop().time())
                if wait_s > 0:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._abort.wait(), wait_s)
            if not first and not self._first_copy_done.is_set():
                await self._first_copy_done.wait()
            if message_id is not None:
                if not self._ids.try_acquire(message_id):
                    await self._ids.acquire(message_id)
                guarded = True
            if self._interrupted is not None:
                self._leave(slot, ReplayOutcome.SKIPPED, _NOT_SENT_INTERRUPTED)
                return
            if self._halted:
                self._leave(slot, ReplayOutcome.SKIPPED, "not replayed: the run was stopped")
                return
            confirm = self._confirm
            assert confirm is not None
            self._publishing[tag] = slot
            try:
                await confirm.publish(
                    delivery.body,
                    routing_key=choice.to,
                    properties=delivery.properties
                    if choice.verbatim
                    else replay_properties(delivery.properties, choice.headers),
                    mandatory=True,
                )
            except PublishFailed as error:
                self._publishing.pop(tag, None)
                self._leave(slot, ReplayOutcome.FAILED, _publish_failure(error, choice.to))
                return
            except AccessRefused as error:
                self._publishing.pop(tag, None)
                if first:  # alone in flight, and refused: it reached no queue
                    self._leave(slot, ReplayOutcome.FAILED, _refused_copy(error))
                else:  # refused while others were in flight: any of them may have arrived
                    self._unconfirmed(slot)
                self._interrupt(error)
                return
            except TransportError as error:
                self._publishing.pop(tag, None)
                self._unconfirmed(slot)
                self._interrupt(error)
                return
            except Exception as error:  # the copy could not even be encoded: this letter only
                self._publishing.pop(tag, None)
                self._leave(slot, ReplayOutcome.FAILED, f"cannot publish its copy: {error}")
                return
            self._publishing.pop(tag, None)
            slot.outcome = ReplayOutcome.REPLAYED
            slot.reason = None
            if self._interrupted is not None:
                # confirmed, but the ack can no longer be sent: the dead letter stays too
                slot.maybe_duplicate = True
                slot.reason = _UNCONFIRMED_ACK
                self._hold()
                return
            assert self._settler is not None
            self._acked_unsent[tag] = slot
            self._settler.ack(tag)
        except asyncio.CancelledError:
            # the channel closed under us (the client library cancels its consumers' tasks)
            if self._publishing.pop(tag, None) is not None:
                self._unconfirmed(slot)
            elif slot.reason == _NOT_FINISHED:
                self._leave(slot, ReplayOutcome.SKIPPED, _NOT_SENT_INTERRUPTED)
            raise
        finally:
            if first:
                self._first_copy_done.set()
            if guarded and message_id is not None:
                self._ids.release(message_id)
            self._in_flight -= 1
            if self._closing and self._in_flight == 0:
                self._finished.set()

    def _unconfirmed(self, slot: _Slot) -> None:
        """The copy was sent (or being sent) when the run was cut: it may have arrived."""
        slot.maybe_duplicate = True
        self._leave(slot, ReplayOutcome.FAILED, _UNCONFIRMED_COPY.format(to=slot.to))

    # -- acks ------------------------------------------------------------------------------

    def _spawn(self, coroutine: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _flush(self) -> None:
        settler = self._settler
        if settler is None or self._interrupted is not None:
            return
        await settler.flush()
        if settler.closed:
            self._interrupt(BrokerUnreachable("the channel closed while acking dead letters"))

    def _mark_sent(self, frames: Sequence[SettleFrame]) -> None:
        """The settler put these frames in the connection's write queue (FIFO), so a later
        ``basic.qos`` round trip (``_sync``) proves the broker processed them."""
        for frame in frames:
            if not isinstance(frame, AckFrame):
                continue
            if frame.multiple:
                covered = [tag for tag in self._acked_unsent if tag <= frame.tag]
            else:
                covered = [frame.tag]
            for tag in covered:
                slot = self._acked_unsent.pop(tag, None)
                if slot is not None:
                    self._acks_unknown[tag] = slot
        if self._acks_unknown and not self._sync_lock.locked():
            self._spawn(self._sync())

    async def _sync(self) -> None:
        """One round trip on the consuming channel: the acks sent before it are processed
        (a channel handles its frames in order)."""
        consume = self._consume
        if consume is None:
            return
        async with self._sync_lock:
            sent = list(self._acks_unknown)
            if not sent or self._interrupted is not None:
                return
            try:
                await consume.qos(self._window_size)
            except TransportError as error:
                self._interrupt(error)
                return
            for tag in sent:
                self._acks_unknown.pop(tag, None)

    # -- stopping --------------------------------------------------------------------------

    def _stop(self, reason: str | None) -> None:
        if reason is not None and self._stopped is None and not self._closing:
            self._stopped = reason
        self._closing = True
        if self._in_flight == 0:
            self._finished.set()

    def _interrupt(self, error: TransportError) -> None:
        if self._interrupted is None or (
            # the refusal that closed the confirm channel says more than that it closed
            isinstance(error, AccessRefused) and self._interrupted is self._closed_under_us
        ):
            self._interrupted = error
            text = error.message
            cut = text.find("connection closed")
            self._interrupted_text = text[cut:] if cut > 0 else text
        self._abort.set()
        self._stop(None)

    def _report(self, elapsed_s: float) -> ReplayReport:
        if self._interrupted is not None:
            for slot in (*self._acked_unsent.values(), *self._acks_unknown.values()):
                slot.maybe_duplicate = True
                slot.reason = _UNCONFIRMED_ACK
            for slot in self._publishing.values():
                slot.maybe_duplicate = True
                slot.outcome = ReplayOutcome.FAILED
                slot.reason = _UNCONFIRMED_COPY.format(to=slot.to)
        results = tuple(
            ReplayResult(slot.message_id, slot.to, slot.outcome, slot.reason)
            for slot in self._slots
        )
        return ReplayReport(
            source=self._plan.source,
            dry_run=False,
            results=results,
            in_queue=self._in_queue,
            examined=self._examined,
            stopped=self._stopped,
            interrupted=self._interrupted_text if self._interrupted is not None else None,
            refused=isinstance(self._interrupted, AccessRefused),
            possible_duplicates=sum(1 for slot in self._slots if slot.maybe_duplicate),
            elapsed_s=elapsed_s,
        )


def _refused_copy(error: AccessRefused) -> str:
    return (
        f"the broker refused the copy ({error}): it reached no queue; the dead letter stays; "
        "rr's user needs write permission on the default exchange"
    )


def _publish_failure(error: PublishFailed, to: str) -> str:
    text = str(error)
    if "NO_ROUTE" in text or "returned" in text:
        return f"no queue {to!r} took the copy (the broker returned it); the dead letter stays"
    return f"the broker refused the copy ({text}); the dead letter stays"


async def replay_queue(
    connection: Connection,
    plan: ReplayPlan,
    options: ReplayOptions | None = None,
    *,
    progress: ProgressSink = NO_PROGRESS,
) -> ReplayReport:
    """Replay the dead letters of ``plan.source`` (see the module doc).

    Returns the report; a dropped connection does not raise but ends the run with
    ``report.interrupted`` set. :class:`NotFound` when the source queue is missing.
    """
    return await _Replayer(connection, plan, options or ReplayOptions(), progress).run()


async def dry_run(
    connection: Connection,
    plan: ReplayPlan,
    options: ReplayOptions | None = None,
    *,
    progress: ProgressSink = NO_PROGRESS,
) -> ReplayReport:
    """What :func:`replay_queue` would do, reading without taking; nothing moves.

    Each target queue is looked up (a passive declare): a missing one shows as a failure.
    """
    options = options or ReplayOptions()
    started = time.perf_counter()
    choices: list[tuple[Delivery, Replay | Skip | Fail | Stop]] = []
    attempted = 0
    stopped: str | None = None

    def keep_going(delivery: Delivery) -> bool:
        nonlocal attempted, stopped
        try:
            choice = choose(
                plan,
                delivery.properties.headers,
                options.clock.now(),
                delivery.properties.undecodable,
            )
        except Exception as error:  # as in the real run: this letter fails alone
            choice = Fail(f"cannot read this dead letter: {type(error).__name__}: {error}")
        choices.append((delivery, choice))
        if isinstance(choice, Replay | Fail):
            attempted += 1
            if options.limit is not None and attempted >= options.limit:
                stopped = limit_reached(options.limit)
                return False
        return True

    read = await read_messages(
        connection, plan.source, keep_going=keep_going, progress=progress, idle_s=options.idle_s
    )
    if not read.complete:
        stopped = (
            f"no dead letter came for {options.idle_s:g} s after {len(choices):,}: another "
            "consumer may be taking them"
        )
    exists: dict[str, str | None] = {}
    results: list[ReplayResult] = []
    for delivery, choice in choices:
        message_id = delivery.properties.message_id
        match choice:
            case Replay(to=to):
                if to not in exists:
                    exists[to] = await queue_missing(connection, to)
                problem = exists[to]
                if problem is None:
                    results.append(ReplayResult(message_id, to, ReplayOutcome.REPLAYED))
                else:
                    results.append(
                        ReplayResult(message_id, to, ReplayOutcome.FAILED, f"would fail: {problem}")
                    )
            case Skip(reason=reason) | Stop(reason=reason):
                results.append(ReplayResult(message_id, None, ReplayOutcome.SKIPPED, reason))
            case Fail(reason=reason, to=to):
                results.append(ReplayResult(message_id, to, ReplayOutcome.FAILED, reason))
    return ReplayReport(
        source=plan.source,
        dry_run=True,
        results=tuple(results),
        in_queue=read.in_queue,
        examined=len(choices),
        stopped=stopped,
        elapsed_s=time.perf_counter() - started,
    )


def new_run_id() -> str:
    """A fresh replay run id (the value of ``rr-replay-run``)."""
    return uuid.uuid4().hex


__all__ = [
    "STOPPED_ON_REQUEST",
    "ReplayOptions",
    "dry_run",
    "new_run_id",
    "replay_properties",
    "replay_queue",
]
