"""The transfer's state machine (ops/transfer_state.py) driven through random orders of the
events the real world allows, checked against a model of the broker and of what the run
promises (docs/how-to/after-an-outage.md, "Interrupted"; the module doc of ops/transfer.py).

The world: a source queue with the messages the run found at its start (and some that arrive
later), one consumer with a prefetch window (replaced when the machine asks), the settle
window and the wire (frames written and not yet processed, ``basic.qos`` round trips), one
confirm channel with the first copy alone, copies answered in any order (confirmed, returned,
nacked, unencodable, refused access, cut), the consuming channel or the whole connection lost
at any moment (what was written and not processed is lost; a copy under way may or may not
have arrived), stops asked for, idle timeouts, ``--limit``. The run then ends as the shell
ends it (``Transfer._wait`` and ``_drain``), and the report is checked against what the
broker holds.
"""

from __future__ import annotations

import random
from collections import Counter, deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from hypothesis import given, settings
from hypothesis import strategies as st

from rabbitctl_retry.dlq.choice import Choice, Discard, Fail, Send, Skip, Stop
from rabbitctl_retry.dlq.report import TransferKind, TransferOutcome, TransferReport
from rabbitctl_retry.errors import (
    AccessRefused,
    BrokerUnreachable,
    ChannelClosed,
    PublishFailed,
)
from rabbitctl_retry.ops.copies.sent import CONFIRMED, SendResult, Sent
from rabbitctl_retry.ops.settlement import AckFrame, SettleFrame, SettleWindow
from rabbitctl_retry.ops.transfer_state import (
    NOT_FINISHED,
    Phase,
    Stage,
    TransferState,
    Verdict,
)

TARGET = "target"

CHOICES = st.sampled_from(
    [Send(TARGET, {})] * 8 + [Skip("does not match --where"), Fail("no origin: pass --to")]
)
T = TypeVar("T")

LOOP_GUARD = Stop("replayed by this run: the loop guard")


class UnknownDeliveryTag(AssertionError):
    """The broker would close the channel: PRECONDITION_FAILED - unknown delivery tag."""


@dataclass
class Qos:
    """A ``basic.qos`` on the wire: the round trip that proves the acks before it."""

    tags: list[int]


@dataclass
class World:
    """RabbitMQ, the channels and the shell's tasks around one :class:`TransferState`."""

    random: random.Random
    """Picks the next event, and what it says, among those the world allows (a seed drawn
    by hypothesis: fast, and each failure is replayed from it)."""
    choices: list[Choice]
    late: int
    prefetch: int
    limit: int | None
    state: TransferState = field(init=False)
    window: SettleWindow = field(default_factory=SettleWindow)
    force_singles: bool = False
    ready: deque[int] = field(default_factory=deque)
    """Messages in the source, not delivered (by number; the first ``len(choices)`` were
    there at the start)."""
    message_of: dict[int, int] = field(default_factory=dict)
    """Delivery tag -> message number."""
    consumer_of: dict[int, int] = field(default_factory=dict)
    next_tag: int = 1
    consumer: int = 1
    consuming: bool = True
    unacked: Counter[int] = field(default_factory=Counter)
    """Consumer -> its deliveries not acked at the broker (its prefetch window)."""
    outstanding: set[int] = field(default_factory=set)
    """Tags delivered and not acked at the broker."""
    removed: set[int] = field(default_factory=set)
    """Messages the broker removed from the source (acked)."""
    target: Counter[int] = field(default_factory=Counter)
    """Copies that reached the target, by message number."""
    wire: deque[SettleFrame | Qos] = field(default_factory=deque)
    reply: list[int] | None = None
    """The acks a round trip answered, on the way back."""
    syncs_asked: int = 0
    """Round trips the shell started (``_mark_sent``) and that have not begun."""
    sync_running: bool = False
    replacing: str | None = None
    """A fresh consumer is taking over: ``cancel`` (the old one's), then ``consume``."""
    waiting: list[int] = field(default_factory=list)
    """Copies waiting for their turn (the shell's tasks)."""
    publishing: list[int] = field(default_factory=list)
    """Copies out, not answered."""
    first_tag: int | None = None
    first_done: bool = False
    """The first copy was answered (or never sent): the others may go."""
    channel_open: bool = True
    confirms_open: bool = True
    noticed: bool = False
    """The shell found out that a channel closed."""
    halted: bool = False
    failing: str | None = None
    """How the next answer fails the confirm channel (``access``: the user lost its write
    permission; ``cut``: the channel closed), when the test says so."""
    refused_alone: bool = False
    """The first copy, alone in flight, was refused access."""
    first_interruption: str | None = None
    """What interrupted the run first, as the world saw it."""
    # what the test saw
    read: list[int] = field(default_factory=list)
    """Tags the machine read (examined), in order."""
    advances: int = 0
    acked: Counter[int] = field(default_factory=Counter)
    """Tag -> ack verdicts."""
    confirmed: set[int] = field(default_factory=set)
    published: set[int] = field(default_factory=set)
    in_doubt: set[int] = field(default_factory=set)
    """Tags whose copy was cut (answered so, or its task cancelled) while out."""
    known_processed: set[int] = field(default_factory=set)
    published_after_halt: int = 0

    def __post_init__(self) -> None:
        self.state = TransferState(
            source="dead",
            kind=TransferKind.REPLAY,
            window=self.prefetch,
            limit=self.limit,
            idle_s=5.0,
        )
        self.state.started(len(self.choices))
        self.ready.extend(range(len(self.choices) + self.late))

    # -- the events ------------------------------------------------------------------------

    def enabled(self, *, closing: bool) -> list[str]:
        """The events that may come next (a stop, a loss and an idle timeout come when the
        test says; while closing, an idle timeout may come at any time)."""
        events = ["quiet"] if closing else []
        if (
            not closing
            and self.consuming
            and self.channel_open
            and self.ready
            and self.unacked[self.consumer] < self.prefetch
        ):
            events.append("deliver")
        if any(self._may_take_turn(tag) for tag in self.waiting):
            events.append("turn")
        if self.publishing:
            events.append("answer")
        if not self.channel_open and (self.waiting or self.publishing):
            events.append("cut")
        if self.channel_open and len(self.window):
            events.append("flush")
        if self.channel_open and self.wire:
            events.append("process")
        if self.channel_open and self.reply is not None:
            events.append("reply")
        if self.syncs_asked and not self.sync_running:
            events.append("sync")
        if self.replacing is not None:
            events.append("replace")
        if not self.noticed and not (self.channel_open and self.confirms_open):
            events.append("notice")
        return events

    def pick(self, items: Sequence[T]) -> T:
        return items[self.random.randrange(len(items))]

    def step(self, event: str) -> None:
        getattr(self, f"_{event}")()

    def _may_take_turn(self, tag: int) -> bool:
        return tag == self.first_tag or self.first_done

    def _deliver(self) -> None:
        number = self.ready.popleft()
        tag = self.next_tag
        self.next_tag += 1
        self.message_of[tag] = number
        self.consumer_of[tag] = self.consumer
        self.unacked[self.consumer] += 1
        self.outstanding.add(tag)
        self.window.delivered(tag)
        examined = self.state.examined
        choice = self.choices[number % len(self.choices)] if self.state.reads_next else None
        verdict = self.state.delivered(tag, f"m{number}", choice)
        if self.state.examined > examined:
            self.read.append(tag)
        self._carry_out(tag, verdict)
        if verdict.send:
            self.waiting.append(tag)
            if self.first_tag is None:
                self.first_tag = tag

    def _turn(self) -> None:
        tag = self.pick([t for t in self.waiting if self._may_take_turn(t)])
        self.waiting.remove(tag)
        verdict = self.state.turn_came(tag)
        if verdict.send:
            self.publishing.append(tag)
            self.published.add(tag)
            if self.halted:
                self.published_after_halt += 1
        else:
            self._ended(tag)
        self._carry_out(tag, verdict)

    def _answer(self) -> None:
        tag = self.pick(self.publishing)
        self.publishing.remove(tag)
        alone = tag == self.first_tag
        if not self.confirms_open:
            kind = "cut"
        elif self.failing is not None:
            kind, self.failing = self.failing, None
        else:
            kinds = ["confirmed"] * 8 + ["returned", "unencodable"]
            kind = self.pick(kinds)
        number = self.message_of[tag]
        sent: SendResult
        if kind == "confirmed":
            sent = CONFIRMED
            self.target[number] += 1
            self.confirmed.add(tag)
        elif kind == "returned":
            sent = SendResult(Sent.REFUSED, PublishFailed("312 NO_ROUTE"))
        elif kind == "unencodable":
            sent = SendResult(Sent.UNENCODABLE, ValueError("cannot encode"))
        elif kind == "access" and alone:
            sent = SendResult(Sent.REFUSED, AccessRefused("403 ACCESS_REFUSED"))
            self.confirms_open = False
            self.refused_alone = True
            self._interrupted_by("access")
        else:  # the confirm channel failed under it, or refused another copy: cut
            sent = SendResult(Sent.CUT, ChannelClosed("the channel closed"))
            self.confirms_open = False
            self._in_doubt(tag)
            self._interrupted_by("cut")
        self._ended(tag)
        self._carry_out(tag, self.state.answered(tag, sent))

    def _cut(self) -> None:
        tag = self.pick(self.waiting + self.publishing)
        if tag in self.publishing:
            self.publishing.remove(tag)
            self._in_doubt(tag)
        else:
            self.waiting.remove(tag)
        self._ended(tag)
        self._carry_out(tag, self.state.cut(tag))

    def _in_doubt(self, tag: int) -> None:
        """A copy out when its channel failed: it may or may not have arrived."""
        self.in_doubt.add(tag)
        if self.pick((False, True)):
            self.target[self.message_of[tag]] += 1

    def _interrupted_by(self, how: str) -> None:
        if self.first_interruption is None:
            self.first_interruption = how

    def _ended(self, tag: int) -> None:
        if tag == self.first_tag:
            self.first_done = True

    def _flush(self) -> None:
        threshold = max(1, self.prefetch // 2)
        frames = self.window.frames(
            singles=self.force_singles or self.window.pending_acks >= threshold
        )
        if not frames:
            return
        self.wire.extend(frames)
        if self.state.acks_written(frames) and not self.sync_running:
            self.syncs_asked += 1

    def _process(self) -> None:
        item = self.wire.popleft()
        if isinstance(item, Qos):
            self.reply = item.tags
            return
        if item.tag not in self.outstanding:
            raise UnknownDeliveryTag(f"unknown delivery tag {item.tag}")
        assert isinstance(item, AckFrame), item
        covered = (
            [tag for tag in self.outstanding if tag <= item.tag] if item.multiple else [item.tag]
        )
        for tag in covered:
            assert tag in self.confirmed, f"tag {tag} acked, its copy not confirmed"
            self.outstanding.discard(tag)
            self.unacked[self.consumer_of[tag]] -= 1
            self.removed.add(self.message_of[tag])

    def _reply(self) -> None:
        assert self.reply is not None
        tags, self.reply = self.reply, None
        self.state.acks_processed(tags)
        self.known_processed.update(tags)
        self.sync_running = False

    def _sync(self) -> None:
        self.syncs_asked -= 1
        tags = self.state.acks_to_check()
        if not tags:
            return
        if not self.channel_open:  # basic.qos on a closed channel
            self.state.interrupt(ChannelClosed("the channel is closed"))
            self._interrupted_by("error")
            return
        self.sync_running = True
        self.wire.append(Qos(tags))

    def _replace(self) -> None:
        if self.replacing == "cancel":
            self.consuming = False  # basic.cancel-ok: no more deliveries for it
            if not self.channel_open:
                self.state.interrupt(ChannelClosed("the channel is closed"))
                self._interrupted_by("error")
                self._replaced()
            elif self.state.consumer_cancelled():
                self.replacing = "consume"
            else:
                self._replaced()
        else:
            self.consumer += 1
            self.consuming = self.channel_open
            self._replaced()

    def _replaced(self) -> None:
        self.replacing = None
        self.state.consumer_replaced()

    def _halt(self) -> None:
        self.halted = True
        self.state.halt()

    def _quiet(self) -> None:
        self.state.quiet(self.state.examined)

    def _lose(self) -> None:
        """The consuming channel closes, or the whole connection; what is on the wire and
        not processed is lost; deliveries not acked go back to the source."""
        self.channel_open = False
        if self.pick((False, True)):
            self.confirms_open = False
        self.wire.clear()
        self.reply = None
        self.sync_running = False
        self.consuming = False
        self.window.forget()

    def _notice(self) -> None:
        """The shell finds out (``_wait``, or a failed cancel, flush or round trip)."""
        self.noticed = True
        how = self.pick(("closed", "error", "acks"))
        self._interrupted_by(how)
        if how == "closed":
            self.state.connection_lost()
        elif how == "error":
            self.state.interrupt(BrokerUnreachable("connection closed: CONNECTION_FORCED"))
        else:
            self.state.acks_channel_lost()

    def _carry_out(self, tag: int, verdict: Verdict) -> None:
        if verdict.advance:
            self.advances += 1
        if verdict.ack:
            self.acked[tag] += 1
            assert tag in self.confirmed, f"ack of {tag} decided before its copy was confirmed"
            assert self.state.interrupted is None, "an ack decided after the interruption"
            if self.channel_open:
                assert self.window.ack(tag)
        if verdict.hold:
            self.force_singles = True
        if verdict.fresh_consumer:
            assert self.replacing is None, "a second replacement while one is under way"
            self.replacing = "cancel"

    # -- the end ---------------------------------------------------------------------------

    def end(self) -> TransferReport:
        """``Transfer._wait`` until finished or the loss is noticed, then ``_drain``, then the
        channels close."""
        for _ in range(10_000):
            if self.state.finished and (self.noticed or self.channel_open):
                break
            events = self.enabled(closing=True)
            self.step(self.pick(events))
        else:  # pragma: no cover - a run that never finishes
            raise AssertionError(f"the run never finished: {self.state.phase}")
        if self.state.interrupted is None:
            self.consuming = False  # basic.cancel
            self._flush()
            while self.wire or self.reply is not None or self.syncs_asked:
                if self.wire:
                    self._process()
                elif self.reply is not None:
                    self._reply()
                else:
                    self._sync()
            self.syncs_asked = 1  # the drain's own round trip
            self._sync()
            while self.wire:
                self._process()
            if self.reply is not None:
                self._reply()
        # the channels close: what is not acked goes back to the source
        self.channel_open = False
        self.outstanding.clear()
        return self.state.report(0.0)


@settings(max_examples=500, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    choices=st.integers(1, 60).flatmap(lambda n: st.lists(CHOICES, min_size=n, max_size=n)),
    guard_at=st.none() | st.integers(0, 39),
    late=st.integers(0, 3),
    prefetch=st.integers(1, 8),
    limit=st.none() | st.integers(0, 30),
    lose_at=st.none() | st.integers(0, 300),
    lose_busy=st.booleans(),
    halt_at=st.none() | st.integers(0, 300),
    fail_at=st.none() | st.tuples(st.integers(0, 300), st.sampled_from(["access", "cut"])),
    idle_at=st.sets(st.integers(0, 300), max_size=3),
)
def test_any_order_of_events_keeps_every_promise(
    seed: int,
    choices: list[Choice],
    guard_at: int | None,
    late: int,
    prefetch: int,
    limit: int | None,
    lose_at: int | None,
    lose_busy: bool,
    halt_at: int | None,
    fail_at: tuple[int, str] | None,
    idle_at: set[int],
) -> None:
    if guard_at is not None and guard_at < len(choices):
        choices[guard_at] = LOOP_GUARD
    world = World(random.Random(seed), choices, late, prefetch, limit)
    for step in range(400):
        if world.state.finished or world.noticed:
            break  # Transfer._wait returns
        before = world.state.phase
        # the loss comes at the first step from lose_at on with copies out (busy), or at once
        busy = bool(world.publishing) or not lose_busy
        if lose_at is not None and step >= lose_at and world.channel_open and busy:
            world.step("lose")
        if fail_at is not None and step == fail_at[0]:
            world.failing = fail_at[1]
        if step == halt_at:
            world.step("halt")
        if step in idle_at:
            world.step("quiet")
        events = world.enabled(closing=False)
        if not events:
            break
        world.step(world.pick(events))
        assert world.state.phase >= before, "the phase went back"
    all_delivered = not any(number < len(choices) for number in world.ready)
    left_alone = all_delivered and not (
        lose_at is not None
        or halt_at is not None
        or fail_at is not None
        or idle_at
        or limit is not None
        or LOOP_GUARD in choices
    )
    report = world.end()
    state = world.state
    if left_alone:  # no stop, no loss, no limit, no loop guard: it reads every message it
        # found, and stops for no reason (not even idle, once the last one is read)
        assert report.stopped is None
        assert report.interrupted is None
        assert report.examined == len(choices)
    interrupted = state.interrupted is not None
    results = report.results
    flagged = {
        tag
        for tag, result in zip(world.read, results, strict=True)
        if "possible duplicate" in (result.reason or "")
    }

    # every message read has exactly one result, in the order read, and the counts add up
    assert len(results) == report.examined == len(world.read) <= len(choices)
    assert [r.message_id for r in results] == [f"m{world.message_of[t]}" for t in world.read]
    assert report.sent + report.skipped + report.failed == report.examined
    assert report.possible_duplicates == len(flagged)
    assert all(result.reason != NOT_FINISHED for result in results)
    assert all(state.stage_of(tag) is Stage.DONE or interrupted for tag in world.read)
    # messages that arrived after the start are never read, nor moved
    late_ones = set(range(len(choices), len(choices) + late))
    assert not any(world.message_of[tag] in late_ones for tag in world.read)
    assert not late_ones & (world.removed | set(world.target))
    # --limit counts the messages sent or failed; the bar moves for those (or every one read)
    attempted = sum(
        1 for tag in world.read if isinstance(choices[world.message_of[tag]], Send | Fail)
    )
    if limit is not None:
        assert attempted <= limit
    assert world.advances == (report.examined if limit is None else attempted)

    # acked at most once, only after the copy was confirmed (also checked as it happens)
    assert world.confirmed | world.in_doubt <= world.published
    assert all(count == 1 for count in world.acked.values())
    assert set(world.acked) <= world.confirmed
    # copies: at most one per message; none for a message not sent
    assert all(count == 1 for count in world.target.values())

    # what may be in two places is exactly the copies cut or still out, and the confirmed
    # copies whose ack is not known to be processed
    if interrupted:
        expected = world.in_doubt | (world.confirmed - world.known_processed)
    else:
        expected = set()
        assert not world.in_doubt
        assert world.confirmed <= world.known_processed, "a finished run knows every ack"
    assert flagged == expected
    assert report.interrupted is not None if interrupted else report.interrupted is None

    # each result says where the message is
    for tag, result in zip(world.read, results, strict=True):
        number = world.message_of[tag]
        in_source = number not in world.removed
        in_target = world.target[number] == 1
        assert in_source or in_target, f"m{number} lost"
        if in_source and in_target:
            assert tag in flagged, f"m{number} in both places, not reported"
        if tag in flagged:
            continue
        if result.outcome is TransferOutcome.SENT:
            assert (in_source, in_target) == (False, True), (number, result)
        else:
            assert (in_source, in_target) == (True, False), (number, result)
    # messages not read stay where they are
    for tag, number in world.message_of.items():
        if tag not in world.read:
            assert number not in world.removed
            assert world.target[number] == 0

    # a stop on request sends no copy after it, and leaves nothing in two places
    assert world.published_after_halt == 0
    if world.halted and not interrupted:
        assert report.possible_duplicates == 0
    assert not interrupted or state.phase is Phase.INTERRUPTED
    # a refused first copy is the story (exit 77), unless another error came first
    refused = world.refused_alone and world.first_interruption in ("access", "closed")
    assert report.refused == refused
    assert interrupted == (world.first_interruption is not None)


def test_the_first_copy_refused_access_stops_the_run_with_nothing_in_two_places() -> None:
    state = TransferState(source="dead", kind=TransferKind.REPLAY, window=10, idle_s=5.0)
    state.started(3)
    for tag in (1, 2, 3):
        verdict = state.delivered(tag, f"m{tag}", Send(TARGET, {}))
        assert verdict.send
    assert state.turn_came(1).send
    refused = SendResult(Sent.REFUSED, AccessRefused("403 ACCESS_REFUSED"))
    assert state.answered(1, refused).hold
    state.connection_lost()  # the confirm channel closed: the refusal says more
    for tag in (2, 3):
        assert not state.turn_came(tag).send
    assert state.finished
    report = state.report(0.0)
    assert report.refused
    assert report.possible_duplicates == 0
    assert [r.outcome for r in report.results] == [
        TransferOutcome.FAILED,
        TransferOutcome.SKIPPED,
        TransferOutcome.SKIPPED,
    ]


def test_half_the_window_held_asks_for_one_fresh_consumer() -> None:
    state = TransferState(source="dead", kind=TransferKind.MOVE, window=4, idle_s=5.0)
    state.started(10)
    assert not state.delivered(1, "a", Skip("no")).fresh_consumer
    assert state.delivered(2, "b", Skip("no")).fresh_consumer
    assert not state.delivered(3, "c", Skip("no")).fresh_consumer  # one at a time
    assert state.consumer_cancelled()
    state.consumer_replaced()
    assert not state.delivered(4, "d", Skip("no")).fresh_consumer
    assert state.delivered(5, "e", Skip("no")).fresh_consumer


def test_a_cut_after_the_answer_changes_nothing() -> None:
    state = TransferState(source="dead", kind=TransferKind.REPLAY, window=10, idle_s=5.0)
    state.started(1)
    state.delivered(1, "m", Send(TARGET, {}))
    state.turn_came(1)
    assert state.answered(1, CONFIRMED).ack
    assert state.cut(1) == Verdict()


def test_a_discard_is_acked_at_once_and_counted_against_the_limit() -> None:
    """rr dlq purge --where: a matching message is acked with no copy, the others held."""
    state = TransferState(source="dead", kind=TransferKind.PURGE, window=10, limit=2, idle_s=5.0)
    state.started(4)
    first = state.delivered(1, "a", Discard())
    assert (first.ack, first.advance, first.send, first.hold) == (True, True, False, False)
    assert state.delivered(2, "b", Skip("does not match --where")).hold
    assert state.delivered(3, "c", Discard()).ack
    assert state.stage_of(1) is Stage.ACK_UNSENT
    assert state.finished  # the limit of 2 came; nothing is in flight
    assert state.delivered(4, "d", Discard()).hold  # past the limit: not read
    assert state.acks_written([AckFrame(3, multiple=False), AckFrame(1, multiple=False)])
    state.acks_processed(state.acks_to_check())
    report = state.report(0.1)
    assert [(r.message_id, r.outcome) for r in report.results] == [
        ("a", TransferOutcome.SENT),
        ("b", TransferOutcome.SKIPPED),
        ("c", TransferOutcome.SENT),
    ]
    assert report.stopped is not None
    assert report.possible_duplicates == 0


def test_a_discard_whose_ack_is_unknown_may_still_be_there() -> None:
    state = TransferState(source="dead", kind=TransferKind.PURGE, window=10, idle_s=5.0)
    state.started(2)
    state.delivered(1, "a", Discard())
    state.delivered(2, "b", Discard())
    state.acks_written([AckFrame(2, multiple=True)])
    state.connection_lost()
    report = state.report(0.1)
    assert report.possible_duplicates == 2
    assert all("a rerun purges it" in (r.reason or "") for r in report.results)
    assert all("possible duplicate" not in (r.reason or "") for r in report.results)
