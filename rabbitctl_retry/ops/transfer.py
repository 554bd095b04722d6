"""The transfer engine: ``rr dlq replay`` and ``rr dlq move``, messages from one queue to others.

What happens to each message comes from a pure chooser (``dlq/choice.py``: the replay's in
``dlq/replay.py``, the move's in ``dlq/move.py``), and what each event of the run means (a
delivery, a copy's answer, acks written, a stop, a lost channel) from the run's pure state
machine (``ops/transfer_state.py``: its phases, each message's stage, the report); this
module carries both out on the transport port, the same way for both commands.

``basic.consume`` with a prefetch window (500) on one channel; each message's copy is
published ``mandatory`` on a confirm channel of the same connection, many in flight at
once (each delivery's callback awaits its own confirm), and the message is acked only
after its copy was confirmed. Acks are coalesced into ``basic.ack(multiple=true)`` over the
settled prefix of the channel and written in order by one settler (``ops/settler.py``).
A copy the broker returned (no such queue) or refused leaves its message unacked: it
goes back to the queue, in its place, when the run ends, as do skipped messages (by one
``basic.nack`` on RabbitMQ 4.3 and later, which a quorum queue does not count; else by the
channel's close: ``dlq/read_cost.py``).
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
nothing is in two places, and the CLI exits 77 (docs/how-to/after-an-outage.md, "When the broker
refuses").

``--limit N`` counts the messages attempted: every one the chooser sends or fails, whether
its copy is then confirmed or not (docs/explanation/guarantees.md, "How a replay runs").
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
import uuid
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from typing import TYPE_CHECKING, Any

from rabbitctl_retry.dlq.choice import Choice, Chooser, Discard, Fail, Send, Skip, Stop
from rabbitctl_retry.dlq.move import MovePlan, choose_move
from rabbitctl_retry.dlq.origin import contents_of
from rabbitctl_retry.dlq.rate import Pace
from rabbitctl_retry.dlq.read_cost import GiveBack, give_back_for
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
from rabbitctl_retry.dlq.results import TransferResults
from rabbitctl_retry.errors import TransportError
from rabbitctl_retry.ops.clock import Clock, WallClock
from rabbitctl_retry.ops.copies.properties import copy_properties
from rabbitctl_retry.ops.copies.sending import CopySender, Turn
from rabbitctl_retry.ops.copies.sent import SendResult
from rabbitctl_retry.ops.dlq import (
    IDLE_S,
    NO_PROGRESS,
    REPLAY_WINDOW,
    ProgressSink,
    scan_messages,
)
from rabbitctl_retry.ops.probe import depth_on, queue_missing
from rabbitctl_retry.ops.settlement import SettleFrame
from rabbitctl_retry.ops.settler import ChannelSettler
from rabbitctl_retry.ops.transfer_state import (
    STOPPED_ON_REQUEST,
    Phase,
    TransferState,
    Verdict,
)
from rabbitctl_retry.transport.base import Channel, Connection, Delivery

if TYPE_CHECKING:
    from rabbitctl_retry.telemetry.tracing import Tracing


@dataclass(slots=True, kw_only=True)
class TransferOptions:
    limit: int | None = None
    """Attempt at most this many messages (failed ones count; skipped ones do not)."""
    pace: Pace | None = None
    """``--rate`` and ``--ramp`` (``dlq/rate.py``); None: full speed."""
    window: int = REPLAY_WINDOW
    """The consumer's prefetch; with a rate, at most about one second's worth."""
    idle_s: float = IDLE_S
    clock: Clock = field(default_factory=WallClock)
    stop: asyncio.Event | None = None
    """Set it (the CLI does on Ctrl-C) to end the run early and cleanly: no more messages are
    read, copies waiting for their --rate slot are not sent, copies under way finish and their
    messages are acked."""
    only: Callable[[Delivery], Skip | Stop | None] | None = None
    """Asked of each message before the chooser: ``None`` lets the chooser answer, a
    :class:`Skip` or :class:`Stop` is the message's choice (``rr dlq edit``: the letters
    before the one read are skipped, and the run stops at it when it is not as it was read:
    ``dlq/same_id.py`` ``LetterPick``)."""
    confirmed: Callable[[int], None] | None = None
    """Told of each message done with: its copy confirmed by the broker (a discard: no copy),
    so its ack is on the way. The console's progress counts these (docs/reference/console.md, "What
    each page does"), where the progress sink counts the messages read; the CLI gives none."""
    tracing: Tracing | None = None
    """rr's tracing when on (``telemetry/switch.py``): each copy is published in a PRODUCER
    span, child of the letter's own ``traceparent``, and carries that span's trace context
    and a publish stamp (docs/reference/runtime.md, "Tracing and metrics")."""

    @property
    def effective_window(self) -> int:
        if self.pace is None:
            return self.window
        return max(1, min(self.window, math.ceil(self.pace.rate_per_s)))


def choice_of(
    choose: Chooser,
    delivery: Delivery,
    now: datetime,
    reasons: Reasons,
    only: Callable[[Delivery], Skip | Stop | None] | None = None,
) -> Choice:
    """What ``choose`` says of ``delivery`` (or ``only``, when it answers first); a message rr
    cannot read fails alone. The chooser is handed the delivery's message id and body
    (``--where id=``/``text=``: ``dlq/origin.py`` ``Contents``)."""
    try:
        if only is not None and (answer := only(delivery)) is not None:
            return answer
        properties = delivery.properties
        contents = contents_of(properties.message_id, delivery.body, properties.undecodable)
        return choose(properties.headers, now, properties.undecodable, contents)
    except Exception as error:  # a message rr cannot read must not stop the others
        return Fail(reasons.unreadable(error))


class Transfer:
    """One source queue's transfer on one connection: the I/O around its
    :class:`~rabbitctl_retry.ops.transfer_state.TransferState` (see the module doc)."""

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
        self._choose = choose
        self._options = options
        self._progress = progress
        self._state = TransferState(
            source=source,
            kind=kind,
            window=options.effective_window,
            limit=options.limit,
            idle_s=options.idle_s,
        )
        self._sender: CopySender | None = None
        self._settler: ChannelSettler | None = None
        self._consume: Channel | None = None
        self._confirm: Channel | None = None
        self._consumer_tag: str | None = None
        self._finished = asyncio.Event()
        """Set once the state is finished (:attr:`TransferState.finished`)."""
        self._abort = asyncio.Event()
        """Wakes copies waiting for their --rate slot: the run is interrupted or halted."""
        self._tasks: set[asyncio.Future[None]] = set()
        self._sync_lock = asyncio.Lock()

    # -- the run ---------------------------------------------------------------------------

    async def run(self) -> TransferReport:
        started = time.perf_counter()
        connection = self._connection
        state = self._state
        source = state.source
        window = self._options.effective_window
        self._consume = consume = await connection.channel()
        self._settler = ChannelSettler(
            consume, singles_threshold=window // 2, on_sent=self._mark_sent
        )
        try:
            info = await depth_on(connection, consume, source)
            state.started(info.message_count)
            # With --limit the bar counts the messages attempted, up to the limit; else every
            # message read, up to the depth.
            limit = self._options.limit
            total = state.in_queue if limit is None else min(limit, state.in_queue)
            self._progress.begin(total, f"{state.reasons.doing} {source}")
            if state.in_queue:
                self._confirm = await connection.channel(confirms=True)
                self._sender = CopySender(self._confirm, pace=self._options.pace, abort=self._abort)
                await consume.qos(window)
                self._consumer_tag = await consume.consume(source, self._on_delivery)
                try:
                    await self._wait()
                    await self._drain()
                    await self._hand_back()
                except TransportError as error:
                    self._interrupt(error)
                    await self._settle_in_flight()
        finally:
            if self._confirm is not None:
                await self._confirm.close()
            await consume.close()
            for task in list(self._tasks):
                task.cancel()
        return state.report(time.perf_counter() - started)

    def _channel_gone(self) -> bool:
        return any(
            channel is not None and channel.is_closed for channel in (self._consume, self._confirm)
        )

    def _observe(self) -> None:
        """Wake whoever waits for what the state now says (nothing while it reads)."""
        state = self._state
        if state.phase is Phase.READING:
            return
        if state.finished:
            self._finished.set()
        if state.aborting:
            self._abort.set()

    def _interrupt(self, error: TransportError) -> None:
        self._state.interrupt(error)
        self._observe()

    async def _wait(self) -> None:
        """Until every message of the run is read and its copy settled, the connection
        drops, a stop is asked for, or no delivery comes for a while."""
        state = self._state
        closed = asyncio.ensure_future(self._connection.wait_closed())
        asked = self._options.stop
        stop = asyncio.ensure_future(asked.wait()) if asked is not None else None
        try:
            while not self._finished.is_set():
                before = state.examined
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
                    state.connection_lost()
                    self._observe()
                    await self._settle_in_flight()
                    return
                if stop is not None and stop.done():
                    state.halt()
                else:
                    state.quiet(before)
                self._observe()
        finally:
            closed.cancel()
            if stop is not None:
                stop.cancel()

    async def _settle_in_flight(self) -> None:
        """After an interruption: give copies under way a moment to fail or confirm."""
        if self._state.in_flight:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._finished.wait(), 5.0)

    async def _drain(self) -> None:
        """Stop consuming, send the last acks, and wait until the broker processed them."""
        consume = self._consume
        assert consume is not None
        if self._state.interrupted is None and self._consumer_tag is not None:
            await consume.cancel(self._consumer_tag)
        if self._state.interrupted is not None:
            return
        await self._flush()
        await self._sync()

    async def _hand_back(self) -> None:
        """After a clean end (every ack processed): on a server that does not count a
        ``basic.nack`` (RabbitMQ 4.3 and later), hand back the messages left unacked
        (skipped, failed, past ``--limit``) with one each, through the settler, and wait for a
        round trip, so that a quorum queue does not count them as the channel's close would
        (``dlq/read_cost.py``). If the channel is lost on the way, its close returns them."""
        consume, settler = self._consume, self._settler
        if (
            consume is None
            or settler is None
            or self._state.interrupted is not None
            or give_back_for(self._connection.server_version.release) is not GiveBack.NACK
        ):
            return
        held = settler.open_tags()
        if not held:
            return
        for tag in held:
            settler.give_back(tag)
        try:
            await settler.flush()
            await consume.qos(self._options.effective_window)
        except TransportError:
            return

    # -- deliveries ------------------------------------------------------------------------

    async def _on_delivery(self, delivery: Delivery) -> None:
        tag = delivery.delivery_tag
        # First statement, before any await: tags enter the window in delivery order.
        assert self._settler is not None
        self._settler.delivered(tag)
        state = self._state
        choice = (
            choice_of(
                self._choose,
                delivery,
                self._options.clock.now(),
                state.reasons,
                self._options.only,
            )
            if state.reads_next
            else None
        )
        verdict = state.delivered(tag, delivery.properties.message_id, choice)
        if verdict.advance:
            self._progress.advance()
        self._carry_out(tag, verdict)
        if verdict.send:
            assert isinstance(choice, Send)
            await self._send(delivery, choice)

    def _carry_out(self, tag: int, verdict: Verdict) -> None:
        """Do what the state decided for ``tag`` (its acks through the settler)."""
        settler = self._settler
        assert settler is not None
        if verdict.ack:  # after its copy's confirm (or a discard): never before
            settler.ack(tag)
            if self._options.confirmed is not None:
                self._options.confirmed(1)
        if verdict.hold:
            settler.force_singles = True  # a multiple ack must never cover a held delivery
        if verdict.fresh_consumer:
            self._spawn(self._replace_consumer())
        self._observe()

    async def _replace_consumer(self) -> None:
        """Cancel the consumer whose window is half held, and consume again (a fresh window)."""
        consume = self._consume
        assert consume is not None
        try:
            if self._consumer_tag is not None:
                await consume.cancel(self._consumer_tag)
                self._consumer_tag = None
            if self._state.consumer_cancelled():
                self._consumer_tag = await consume.consume(self._state.source, self._on_delivery)
        except TransportError as error:
            self._interrupt(error)
        finally:
            self._state.consumer_replaced()

    async def _send(self, delivery: Delivery, choice: Send) -> None:
        """Wait for the copy's turn, publish it, and tell the state what became of it."""
        tag = delivery.delivery_tag
        sender = self._sender
        state = self._state
        assert sender is not None
        with sender.turn() as turn:  # taken before any await: in delivery order
            try:
                await sender.wait(turn)
                verdict = state.turn_came(tag)
                if verdict.send:
                    sent = await self._publish(turn, delivery, choice)
                    verdict = state.answered(tag, sent)
            except BaseException:
                # the channel closed under us (the client library cancels its consumers' tasks)
                self._carry_out(tag, state.cut(tag))
                raise
            self._carry_out(tag, verdict)

    async def _publish(self, turn: Turn, delivery: Delivery, choice: Send) -> SendResult:
        """Publish the copy ``choice`` makes of ``delivery`` (in its span, tracing on)."""
        sender = self._sender
        assert sender is not None
        body = delivery.body if choice.body is None else choice.body
        tracing = self._options.tracing
        if choice.verbatim:
            return await sender.publish(turn, body, choice.to, delivery.properties)
        if tracing is None:
            properties = copy_properties(delivery.properties, choice.headers)
            return await sender.publish(turn, body, choice.to, properties)
        with tracing.producing(
            choice.to,
            message_id=delivery.properties.message_id,
            parent=delivery.properties.headers or {},
            operation=self._state.kind.value,
        ):
            properties = copy_properties(delivery.properties, choice.headers, tracing=tracing)
            return await sender.publish(turn, body, choice.to, properties)

    # -- acks ------------------------------------------------------------------------------

    def _spawn(self, coroutine: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _flush(self) -> None:
        settler = self._settler
        if settler is None or self._state.interrupted is not None:
            return
        await settler.flush()
        if settler.closed:
            self._state.acks_channel_lost()
            self._observe()

    def _mark_sent(self, frames: Sequence[SettleFrame]) -> None:
        """The settler put these frames in the connection's write queue (FIFO), so a later
        ``basic.qos`` round trip (``_sync``) proves the broker processed them."""
        if self._state.acks_written(frames) and not self._sync_lock.locked():
            self._spawn(self._sync())

    async def _sync(self) -> None:
        """One round trip on the consuming channel: the acks sent before it are processed
        (a channel handles its frames in order)."""
        consume = self._consume
        if consume is None:
            return
        async with self._sync_lock:
            sent = self._state.acks_to_check()
            if not sent:
                return
            try:
                await consume.qos(self._options.effective_window)
            except TransportError as error:
                self._interrupt(error)
                return
            self._state.acks_processed(sent)


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
    choices: list[tuple[str | None, Choice]] = []
    """(message id, choice) of each message read: a few small objects each."""
    attempted = 0
    stopped: str | None = None

    def keep_going(delivery: Delivery) -> bool:
        nonlocal attempted, stopped
        choice = choice_of(choose, delivery, options.clock.now(), reasons, options.only)
        choices.append((delivery.properties.message_id, choice))
        if isinstance(choice, Send | Discard | Fail):
            attempted += 1
            if options.limit is not None and attempted >= options.limit:
                stopped = limit_reached(options.limit)
                return False
        return True

    scan = await scan_messages(
        connection, source, keep_going, progress=progress, idle_s=options.idle_s
    )
    if not scan.complete:
        stopped = (
            f"no {reasons.item} came for {options.idle_s:g} s after {len(choices):,}: another "
            "consumer may be taking them"
        )
    exists: dict[str, str | None] = {}
    results = TransferResults()
    for message_id, choice in choices:
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
            case Discard():
                results.append(TransferResult(message_id, None, TransferOutcome.SENT))
            case Skip(reason=reason) | Stop(reason=reason):
                results.append(TransferResult(message_id, None, TransferOutcome.SKIPPED, reason))
            case Fail(reason=reason, to=to):
                results.append(TransferResult(message_id, to, TransferOutcome.FAILED, reason))
    return TransferReport(
        source=source,
        dry_run=True,
        kind=kind,
        results=results,
        in_queue=scan.in_queue,
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
    "TransferOptions",
    "dry_run",
    "move_queue",
    "new_run_id",
    "replay_queue",
    "transfer",
]
