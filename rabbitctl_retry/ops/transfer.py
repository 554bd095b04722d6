"""The transfer engine: ``rr dlq replay`` and ``rr dlq move``, messages from one queue to others.

What happens to each message comes from a pure chooser (``dlq/choice.py``: the replay's in
``dlq/replay.py``, the move's in ``dlq/move.py``); this module carries it out on the transport
port, the same way for both commands.

``basic.consume`` with a prefetch window (500) on one channel; each message's copy is
published ``mandatory`` on a confirm channel of the same connection, many in flight at
once (each delivery's callback awaits its own confirm), and the message is acked only
after its copy was confirmed. Acks are coalesced into ``basic.ack(multiple=true)`` over the
settled prefix of the channel and written in order by one settler (``ops/settler.py``).
A copy the broker returned (no such queue) or refused leaves its message unacked: it
goes back to the queue, in its place, when the channel closes, as do skipped messages.
A run reads at most the messages the queue held when it started, so copies that come back
are never read again; a replayed one carrying this run's id stops the run (the loop guard).

After each batch of acks one ``basic.qos`` round trip tells which acks the broker has
processed (a channel handles its frames in order). If the connection drops, the report
counts the messages that may now be in both places: copies in flight, and copies
confirmed whose ack the broker had not yet confirmed. Nothing else can be duplicated, and
nothing can be lost: a message is only ever removed after its copy was confirmed.

The run's first copy goes out alone: the others wait until the broker confirmed, returned or
refused it. A user without write permission is refused on that first publish (403
ACCESS_REFUSED closes the channel), so the run stops knowing that no copy arrived anywhere:
nothing is in two places, and the CLI exits 77 (docs/dlq.md, "When the broker refuses").

``--limit N`` counts the messages attempted: every one the chooser sends or fails, whether
its copy is then confirmed or not (docs/dlq.md, "How a replay runs").
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
import uuid
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import IntEnum
from functools import partial
from typing import Any

from rabbitctl_retry.dlq.choice import Choice, Chooser, Fail, Send, Skip, Stop
from rabbitctl_retry.dlq.move import MovePlan, choose_move
from rabbitctl_retry.dlq.reasons import REASONS, Reasons
from rabbitctl_retry.dlq.replay import ReplayPlan
from rabbitctl_retry.dlq.replay import choose as choose_replay
from rabbitctl_retry.dlq.report import (
    TransferKind,
    TransferOutcome,
    TransferReport,
    TransferResult,
    limit_reached,
)
from rabbitctl_retry.errors import (
    AccessRefused,
    BrokerUnreachable,
    PublishFailed,
    TransportError,
)
from rabbitctl_retry.ops.clock import Clock, WallClock
from rabbitctl_retry.ops.copying import copy_properties
from rabbitctl_retry.ops.dlq import (
    IDLE_S,
    NO_PROGRESS,
    REPLAY_WINDOW,
    ProgressSink,
    read_messages,
)
from rabbitctl_retry.ops.probe import depth_on, queue_missing
from rabbitctl_retry.ops.sending import CopySender
from rabbitctl_retry.ops.sent import SendResult, Sent
from rabbitctl_retry.ops.settlement import AckFrame, SettleFrame
from rabbitctl_retry.ops.settler import ChannelSettler
from rabbitctl_retry.transport.base import Channel, Connection, Delivery


class Phase(IntEnum):
    """Where a run is; it only ever moves forward (:meth:`Transfer._advance`)."""

    READING = 0
    """Messages are read and copied."""
    CLOSING = 1
    """No more messages are read (the end, --limit, the loop guard, idle); copies already
    under way finish and their messages are acked."""
    HALTED = 2
    """Stopped on request (Ctrl-C): copies waiting for their --rate slot are not sent."""
    INTERRUPTED = 3
    """The connection or a channel failed, or the broker refused: nothing more is sent or
    acked."""


STOPPED_ON_REQUEST = "stopped on request"
"""``TransferReport.stopped`` of a run ended through ``TransferOptions.stop``."""

_NOT_FINISHED = "not finished"


@dataclass(slots=True)
class _Slot:
    """One examined message's result, filled in when it is known."""

    message_id: str | None
    to: str | None = None
    outcome: TransferOutcome = TransferOutcome.FAILED
    reason: str | None = _NOT_FINISHED
    maybe_duplicate: bool = False


@dataclass(slots=True, kw_only=True)
class TransferOptions:
    limit: int | None = None
    """Attempt at most this many messages (failed ones count; skipped ones do not)."""
    rate_per_s: float | None = None
    window: int = REPLAY_WINDOW
    """The consumer's prefetch; with a rate, at most about one second's worth."""
    idle_s: float = IDLE_S
    clock: Clock = field(default_factory=WallClock)
    stop: asyncio.Event | None = None
    """Set it (the CLI does on Ctrl-C) to end the run early and cleanly: no more messages are
    read, copies waiting for their --rate slot are not sent, copies under way finish and their
    messages are acked."""

    @property
    def effective_window(self) -> int:
        if self.rate_per_s is None:
            return self.window
        return max(1, min(self.window, math.ceil(self.rate_per_s)))


def choice_of(choose: Chooser, delivery: Delivery, now: datetime, reasons: Reasons) -> Choice:
    """What ``choose`` says of ``delivery``; a message rr cannot read fails alone."""
    try:
        return choose(delivery.properties.headers, now, delivery.properties.undecodable)
    except Exception as error:  # a message rr cannot read must not stop the others
        return Fail(reasons.unreadable(error))


class Transfer:
    """One source queue's transfer on one connection (see the module doc)."""

    def __init__(
        self,
        connection: Connection,
        source: str,
        choose: Chooser,
        options: TransferOptions,
        progress: ProgressSink,
        kind: TransferKind,
    ) -> None:
        self._connection = connection
        self._source = source
        self._choose = choose
        self._kind = kind
        self._reasons = REASONS[kind]
        self._options = options
        self._window_size = options.effective_window
        self._progress = progress
        self._limit = options.limit
        self._clock = options.clock
        self._sender: CopySender | None = None
        self._settler: ChannelSettler | None = None
        self._slots: list[_Slot] = []
        self._consume: Channel | None = None
        self._confirm: Channel | None = None
        self._consumer_tag: str | None = None
        self._in_queue = 0
        self._examined = 0
        self._attempted = 0
        """Messages sent or failed so far: what --limit counts."""
        self._in_flight = 0
        self._phase = Phase.READING
        self._finished = asyncio.Event()
        self._abort = asyncio.Event()
        """Wakes copies waiting for their --rate slot: the run is interrupted or halted."""
        self._stopped: str | None = None
        self._interrupted: TransportError | None = None
        self._closed_under_us = BrokerUnreachable(
            f"the connection to the broker closed during the {kind}"
        )
        self._interrupted_text = ""
        self._held_here = 0
        """Messages held (unacked, not to be acked) by the current consumer."""
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

    async def run(self) -> TransferReport:
        started = time.perf_counter()
        connection = self._connection
        source = self._source
        self._consume = consume = await connection.channel()
        self._settler = ChannelSettler(
            consume, singles_threshold=self._window_size // 2, on_sent=self._mark_sent
        )
        try:
            info = await depth_on(connection, consume, source)
            self._in_queue = info.message_count
            # With --limit the bar counts the messages attempted, up to the limit; else every
            # message read, up to the depth.
            total = self._in_queue if self._limit is None else min(self._limit, self._in_queue)
            self._progress.begin(total, f"{self._reasons.doing} {source}")
            if self._in_queue:
                self._confirm = await connection.channel(confirms=True)
                self._sender = CopySender(
                    self._confirm, rate_per_s=self._options.rate_per_s, abort=self._abort
                )
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
        """Until every message of the run is read and its copy settled, the connection
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
                if stop is not None and stop.done() and self._phase < Phase.HALTED:
                    self._stop(STOPPED_ON_REQUEST)  # while still reading: the reason sticks
                    self._advance(Phase.HALTED)
                    self._abort.set()
                    continue
                if (
                    self._examined == before
                    and self._in_flight == 0
                    and self._phase is Phase.READING
                ):
                    self._stop(
                        f"no {self._reasons.item} came for {self._options.idle_s:g} s after "
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
        if self._phase is not Phase.READING:
            self._hold()
            return
        if self._examined >= self._in_queue:
            # Arrived after the run's start (perhaps a copy of ours): not this run's.
            self._stop(None)
            self._hold()
            return
        choice = choice_of(self._choose, delivery, self._clock.now(), self._reasons)
        attempt = isinstance(choice, Send | Fail)
        if attempt and self._limit is not None and self._attempted >= self._limit:
            self._stop(limit_reached(self._limit))
            self._hold()
            return
        self._examined += 1
        if attempt or self._limit is None:
            self._progress.advance()
        slot = _Slot(delivery.properties.message_id)
        self._slots.append(slot)
        last = self._examined >= self._in_queue
        if attempt:
            self._attempted += 1
        reached = attempt and self._limit is not None and self._attempted >= self._limit
        match choice:
            case Send():
                slot.to = choice.to
                self._in_flight += 1  # before any stop: the run waits for this copy
                if last:
                    self._stop(None)
                elif reached and self._limit is not None:
                    self._stop(limit_reached(self._limit))
                await self._send(delivery, choice, slot)
                return
            case Skip():
                self._leave(slot, TransferOutcome.SKIPPED, choice.reason)
            case Fail():
                slot.to = choice.to
                self._leave(slot, TransferOutcome.FAILED, choice.reason)
            case Stop():
                self._stop(choice.reason)
                self._leave(slot, TransferOutcome.SKIPPED, choice.reason)
        if last:
            self._stop(None)
        elif reached and self._limit is not None:
            self._stop(limit_reached(self._limit))

    def _leave(self, slot: _Slot, outcome: TransferOutcome, reason: str) -> None:
        """This message stays in its queue."""
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
            self._phase is Phase.READING
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
            if self._phase is Phase.READING:
                self._held_here = 0
                self._consumer_tag = await consume.consume(self._source, self._on_delivery)
        except TransportError as error:
            self._interrupt(error)
        finally:
            self._regenerating = False

    async def _send(self, delivery: Delivery, choice: Send, slot: _Slot) -> None:
        """Publish the copy (``_in_flight`` already counts it), then ack the message."""
        tag = delivery.delivery_tag
        sender = self._sender
        assert sender is not None
        with sender.turn() as turn:  # taken before any await: in delivery order
            try:
                await sender.wait(turn)
                if self._interrupted is not None:
                    self._leave(slot, TransferOutcome.SKIPPED, self._reasons.not_sent_interrupted())
                    return
                if self._phase is Phase.HALTED:
                    self._leave(
                        slot,
                        TransferOutcome.SKIPPED,
                        f"not {self._reasons.past}: the run was stopped",
                    )
                    return
                self._publishing[tag] = slot
                properties = (
                    delivery.properties
                    if choice.verbatim
                    else copy_properties(delivery.properties, choice.headers)
                )
                sent = await sender.publish(turn, delivery.body, choice.to, properties)
                self._publishing.pop(tag, None)
                self._settle(tag, slot, choice, sent)
            except asyncio.CancelledError:
                # the channel closed under us (the client library cancels its consumers' tasks)
                if self._publishing.pop(tag, None) is not None:
                    self._unconfirmed(slot)
                elif slot.reason == _NOT_FINISHED:
                    self._leave(slot, TransferOutcome.SKIPPED, self._reasons.not_sent_interrupted())
                raise
            finally:
                self._in_flight -= 1
                if self._phase is not Phase.READING and self._in_flight == 0:
                    self._finished.set()

    def _settle(self, tag: int, slot: _Slot, choice: Send, sent: SendResult) -> None:
        """What the copy's fate means for its message: ack it, or leave it and say why."""
        match sent.outcome:
            case Sent.REFUSED if isinstance(sent.error, AccessRefused):
                # alone in flight, and refused: it reached no queue; the channel is gone
                self._leave(slot, TransferOutcome.FAILED, self._reasons.refused_copy(sent.error))
                self._interrupt(sent.error)
            case Sent.REFUSED:
                assert isinstance(sent.error, PublishFailed)
                failure = self._reasons.publish_failure(sent.error, choice.to)
                self._leave(slot, TransferOutcome.FAILED, failure)
            case Sent.UNENCODABLE:
                failure = f"cannot publish its copy: {sent.error}"
                self._leave(slot, TransferOutcome.FAILED, failure)
            case Sent.CUT:
                assert isinstance(sent.error, TransportError)
                self._unconfirmed(slot)
                self._interrupt(sent.error)
            case Sent.CONFIRMED:
                slot.outcome = TransferOutcome.SENT
                slot.reason = None
                if self._interrupted is not None:
                    # confirmed, but the ack can no longer be sent: the message stays too
                    slot.maybe_duplicate = True
                    slot.reason = self._reasons.unconfirmed_ack()
                    self._hold()
                    return
                assert self._settler is not None
                self._acked_unsent[tag] = slot
                self._settler.ack(tag)

    def _unconfirmed(self, slot: _Slot) -> None:
        """The copy was sent (or being sent) when the run was cut: it may have arrived."""
        slot.maybe_duplicate = True
        self._leave(slot, TransferOutcome.FAILED, self._reasons.unconfirmed_copy(slot.to))

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
            self._interrupt(
                BrokerUnreachable(f"the channel closed while acking {self._reasons.item}s")
            )

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
        if reason is not None and self._stopped is None and self._phase is Phase.READING:
            self._stopped = reason
        self._advance(Phase.CLOSING)
        if self._in_flight == 0:
            self._finished.set()

    def _advance(self, phase: Phase) -> None:
        self._phase = max(self._phase, phase)

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
        self._advance(Phase.INTERRUPTED)

    def _report(self, elapsed_s: float) -> TransferReport:
        if self._interrupted is not None:
            for slot in (*self._acked_unsent.values(), *self._acks_unknown.values()):
                slot.maybe_duplicate = True
                slot.reason = self._reasons.unconfirmed_ack()
            for slot in self._publishing.values():
                slot.maybe_duplicate = True
                slot.outcome = TransferOutcome.FAILED
                slot.reason = self._reasons.unconfirmed_copy(slot.to)
        results = tuple(
            TransferResult(slot.message_id, slot.to, slot.outcome, slot.reason)
            for slot in self._slots
        )
        return TransferReport(
            source=self._source,
            kind=self._kind,
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


async def transfer(
    connection: Connection,
    source: str,
    choose: Chooser,
    options: TransferOptions | None = None,
    *,
    kind: TransferKind = TransferKind.REPLAY,
    progress: ProgressSink = NO_PROGRESS,
) -> TransferReport:
    """Carry out ``choose`` on every message ``source`` holds now (see the module doc).

    Returns the report; a dropped connection does not raise but ends the run with
    ``report.interrupted`` set. :class:`NotFound` when the source queue is missing.
    """
    run = Transfer(connection, source, choose, options or TransferOptions(), progress, kind)
    return await run.run()


async def dry_run(
    connection: Connection,
    source: str,
    choose: Chooser,
    options: TransferOptions | None = None,
    *,
    kind: TransferKind = TransferKind.REPLAY,
    progress: ProgressSink = NO_PROGRESS,
) -> TransferReport:
    """What :func:`transfer` would do, reading without taking; nothing moves.

    Each target queue is looked up (a passive declare): a missing one shows as a failure.
    """
    options = options or TransferOptions()
    reasons = REASONS[kind]
    started = time.perf_counter()
    choices: list[tuple[Delivery, Choice]] = []
    attempted = 0
    stopped: str | None = None

    def keep_going(delivery: Delivery) -> bool:
        nonlocal attempted, stopped
        choice = choice_of(choose, delivery, options.clock.now(), reasons)
        choices.append((delivery, choice))
        if isinstance(choice, Send | Fail):
            attempted += 1
            if options.limit is not None and attempted >= options.limit:
                stopped = limit_reached(options.limit)
                return False
        return True

    read = await read_messages(
        connection, source, keep_going=keep_going, progress=progress, idle_s=options.idle_s
    )
    if not read.complete:
        stopped = (
            f"no {reasons.item} came for {options.idle_s:g} s after {len(choices):,}: another "
            "consumer may be taking them"
        )
    exists: dict[str, str | None] = {}
    results: list[TransferResult] = []
    for delivery, choice in choices:
        message_id = delivery.properties.message_id
        match choice:
            case Send(to=to):
                if to not in exists:
                    exists[to] = await queue_missing(connection, to)
                problem = exists[to]
                if problem is None:
                    results.append(TransferResult(message_id, to, TransferOutcome.SENT))
                else:
                    failure = f"would fail: {problem}"
                    results.append(TransferResult(message_id, to, TransferOutcome.FAILED, failure))
            case Skip(reason=reason) | Stop(reason=reason):
                results.append(TransferResult(message_id, None, TransferOutcome.SKIPPED, reason))
            case Fail(reason=reason, to=to):
                results.append(TransferResult(message_id, to, TransferOutcome.FAILED, reason))
    return TransferReport(
        source=source,
        dry_run=True,
        kind=kind,
        results=tuple(results),
        in_queue=read.in_queue,
        examined=len(choices),
        stopped=stopped,
        elapsed_s=time.perf_counter() - started,
    )


async def replay_queue(
    connection: Connection,
    plan: ReplayPlan,
    options: TransferOptions | None = None,
    *,
    progress: ProgressSink = NO_PROGRESS,
) -> TransferReport:
    """``rr dlq replay`` of one dead-letter queue (``dlq/replay.py`` decides)."""
    choose: Chooser = partial(choose_replay, plan)
    return await transfer(connection, plan.source, choose, options, progress=progress)


async def move_queue(
    connection: Connection,
    plan: MovePlan,
    options: TransferOptions | None = None,
    *,
    progress: ProgressSink = NO_PROGRESS,
) -> TransferReport:
    """``rr dlq move`` of one queue (``dlq/move.py`` decides)."""
    choose: Chooser = partial(choose_move, plan)
    return await transfer(
        connection, plan.source, choose, options, kind=TransferKind.MOVE, progress=progress
    )


def new_run_id() -> str:
    """A fresh replay run id (the value of ``rr-replay-run``)."""
    return uuid.uuid4().hex


__all__ = [
    "STOPPED_ON_REQUEST",
    "Phase",
    "TransferOptions",
    "dry_run",
    "move_queue",
    "new_run_id",
    "replay_queue",
    "transfer",
]
