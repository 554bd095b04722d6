"""Pure. One transfer's state (``rr dlq replay``, ``rr dlq move``) and what each event means
for it: events in, decisions out; no I/O, no clock, no event loop.

``ops/transfer.py`` carries the decisions out on the transport port and tells the machine what
happened (its module doc says how a run goes, docs/reference/dlq.md what it promises);
``tests/unit/test_transfer_state.py`` drives the machine through random orders of events.

The run is in one :class:`Phase`, which only moves forward. Each message it reads is in one
:class:`Stage` until its outcome is final::

    read ── Skip, Fail, Stop ──────────────────────────────────────────► done (it stays)
      │ │ Discard (no copy: rr dlq purge --where) ──────────────────► ACK_UNSENT (below)
      │ Send
      ▼
    WAITING ── its turn, but the run was interrupted or stopped ───────► done (not sent)
      │ its turn
      ▼
    PUBLISHING ── refused, unencodable ────────────────────────────────► done (failed)
      │        ── cut (the channel or connection failed under it) ──────► done (possible
      │ confirmed                                                          duplicate)
      ▼
    ACK_UNSENT ── the ack frame is written ─► ACK_UNKNOWN ── round trip ─► done (sent)

A message is acked only once its copy is confirmed, at most once; one the run does not ack is
*held*: it goes back to its queue when the channel closes. If the run is interrupted, what may
now be in two places is exactly the copies still PUBLISHING (or cut) and the confirmed copies
whose ack is not known to be processed (ACK_UNSENT, ACK_UNKNOWN, or confirmed after the
interruption): the report marks those, and nothing else (docs/how-to/after-an-outage.md,
"Interrupted").
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum, IntEnum

from rabbitctl_retry.dlq.choice import Choice, Discard, Fail, Send, Skip, Stop
from rabbitctl_retry.dlq.reasons import REASONS, Reasons
from rabbitctl_retry.dlq.report import (
    TransferKind,
    TransferOutcome,
    TransferReport,
    TransferResult,
    limit_reached,
)
from rabbitctl_retry.dlq.results import TransferResults
from rabbitctl_retry.errors import AccessRefused, BrokerUnreachable, PublishFailed, TransportError
from rabbitctl_retry.ops.copies.sent import SendResult, Sent
from rabbitctl_retry.ops.settlement import AckFrame, SettleFrame


class Phase(IntEnum):
    """Where a run is; it only ever moves forward."""

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


class Stage(Enum):
    """Where one message the run read is (the module doc's diagram)."""

    WAITING = "waiting"
    """To be sent: its copy waits for its turn (its --rate slot, the first copy's answer)."""
    PUBLISHING = "publishing"
    """Its copy is out, not answered yet."""
    ACK_UNSENT = "ack unsent"
    """Its copy is confirmed; its ack is not written yet."""
    ACK_UNKNOWN = "ack unknown"
    """Its ack is written; the broker may not have processed it yet."""
    DONE = "done"
    """Its outcome is final."""


STOPPED_ON_REQUEST = "stopped on request"
"""``TransferReport.stopped`` of a run ended through ``TransferOptions.stop``."""

NOT_FINISHED = "not finished"
"""The reason of a message whose copy still waited for its turn when the report was made."""


@dataclass(frozen=True, slots=True)
class Verdict:
    """What the shell does after an event (any combination)."""

    advance: bool = False
    """The progress bar moves one."""
    send: bool = False
    """The message's copy goes out: wait for its turn (after :meth:`TransferState.delivered`),
    publish it (after :meth:`TransferState.turn_came`)."""
    ack: bool = False
    """Ack the message: its copy is confirmed."""
    hold: bool = False
    """The message stays unacked: every later ack goes out on its own (a multiple ack must
    never cover it)."""
    fresh_consumer: bool = False
    """Half the window is held: cancel the consumer and consume again (a fresh window)."""


NOTHING = Verdict()
SEND = Verdict(advance=True, send=True)
PUBLISH = Verdict(send=True)
ACK = Verdict(ack=True)
DISCARD = Verdict(advance=True, ack=True)
_ATTEMPTS = (Send, Discard, Fail)
"""The choices --limit counts."""
_HOLDS = {
    (advance, fresh): Verdict(advance=advance, hold=True, fresh_consumer=fresh)
    for advance in (False, True)
    for fresh in (False, True)
}


@dataclass(slots=True)
class _Letter:
    """One message the run read, and what became of it so far."""

    message_id: str | None
    to: str | None = None
    stage: Stage = Stage.DONE
    outcome: TransferOutcome = TransferOutcome.FAILED
    reason: str | None = None
    maybe_duplicate: bool = False


class TransferState:
    """The state of one source queue's transfer (see the module doc)."""

    def __init__(
        self,
        *,
        source: str,
        kind: TransferKind,
        window: int,
        limit: int | None = None,
        idle_s: float,
    ) -> None:
        self.source = source
        self.kind = kind
        self.reasons: Reasons = REASONS[kind]
        self._limit = limit
        self._hold_at = max(1, window // 2)
        """Held messages that make a fresh consumer take over."""
        self._idle_s = idle_s
        self.in_queue = 0
        """Messages the source held when the run started: the run reads no more."""
        self.phase = Phase.READING
        self.examined = 0
        """Messages read (sent, skipped or failed)."""
        self._attempted = 0
        """Messages sent or failed so far: what --limit counts."""
        self.stopped: str | None = None
        self.interrupted: TransportError | None = None
        self._closed_under_us = BrokerUnreachable(
            f"the connection to the broker closed during the {kind}"
        )
        self._letters: deque[_Letter] = deque()
        """The messages read whose outcome is not final yet, or that follow one whose outcome
        is not: results keep the order read. At most the window and the copies waiting."""
        self._results = TransferResults()
        """The final results of the messages read before those in ``_letters``."""
        self._duplicates = 0
        """Possible duplicates among ``_results``."""
        self._reported = False
        # delivery tag -> message, for every message not done, one map per stage
        self._waiting: dict[int, _Letter] = {}
        self._publishing: dict[int, _Letter] = {}
        self._acks_unsent: dict[int, _Letter] = {}
        self._acks_unknown: dict[int, _Letter] = {}
        self._held = 0
        """Messages held by the current consumer."""
        self._replacing = False
        """A fresh consumer is taking over."""

    # -- what the shell asks ---------------------------------------------------------------

    @property
    def reads_next(self) -> bool:
        """The next delivery is read (and needs a choice), not just held."""
        return self.phase is Phase.READING and self.examined < self.in_queue

    @property
    def in_flight(self) -> int:
        """Copies to be sent or under way: the run waits for them."""
        return len(self._waiting) + len(self._publishing)

    @property
    def finished(self) -> bool:
        """Nothing more is read, and no copy is under way."""
        return self.phase is not Phase.READING and self.in_flight == 0

    @property
    def aborting(self) -> bool:
        """Halted or interrupted: copies waiting for their --rate slot need not wait."""
        return self.phase >= Phase.HALTED

    def stage_of(self, tag: int) -> Stage:
        """Where the message of delivery ``tag`` is (``DONE`` for one not in flight)."""
        for letters in (self._waiting, self._publishing, self._acks_unsent, self._acks_unknown):
            if tag in letters:
                return letters[tag].stage
        return Stage.DONE

    # -- events ----------------------------------------------------------------------------

    def started(self, in_queue: int) -> None:
        """The source held ``in_queue`` messages when the run started."""
        self.in_queue = in_queue

    def delivered(self, tag: int, message_id: str | None, choice: Choice | None) -> Verdict:
        """A delivery arrived; ``choice`` is the chooser's answer for it when
        :attr:`reads_next` was true, else ``None``."""
        if self.phase is not Phase.READING:
            return self._hold()
        if self.examined >= self.in_queue:
            # arrived after the run's start (perhaps a copy of ours): not this run's
            self._stop(None)
            return self._hold()
        assert choice is not None, "a delivery the run reads needs a choice"
        attempt = isinstance(choice, _ATTEMPTS)
        limit = self._limit
        if attempt and limit is not None and self._attempted >= limit:
            self._stop(limit_reached(limit))
            return self._hold()
        self.examined += 1
        advance = attempt or limit is None
        letter = _Letter(message_id)
        self._letters.append(letter)
        if attempt:
            self._attempted += 1
        match choice:
            case Send():
                letter.to = choice.to
                letter.stage = Stage.WAITING
                self._waiting[tag] = letter
                verdict = SEND
            case Discard():
                letter.outcome = TransferOutcome.SENT
                letter.stage = Stage.ACK_UNSENT
                self._acks_unsent[tag] = letter
                verdict = DISCARD
            case Skip():
                verdict = self._leave(letter, TransferOutcome.SKIPPED, choice.reason, advance)
            case Fail():
                letter.to = choice.to
                verdict = self._leave(letter, TransferOutcome.FAILED, choice.reason, advance)
            case Stop():
                self._stop(choice.reason)
                verdict = self._leave(letter, TransferOutcome.SKIPPED, choice.reason, advance)
        if self.examined >= self.in_queue:
            self._stop(None)
        elif attempt and limit is not None and self._attempted >= limit:
            self._stop(limit_reached(limit))
        return verdict

    def turn_came(self, tag: int) -> Verdict:
        """The copy of ``tag`` may go now (its --rate slot came, or the run aborted)."""
        letter = self._waiting.pop(tag)
        if self.interrupted is not None:
            return self._leave(letter, TransferOutcome.SKIPPED, self.reasons.not_sent_interrupted())
        if self.phase is Phase.HALTED:
            stopped = f"not {self.reasons.past}: the run was stopped"
            return self._leave(letter, TransferOutcome.SKIPPED, stopped)
        letter.stage = Stage.PUBLISHING
        self._publishing[tag] = letter
        return PUBLISH

    def answered(self, tag: int, sent: SendResult) -> Verdict:
        """What became of the copy of ``tag`` (``ops/copies/sent.py``): ack its message, or leave
        it and say why."""
        letter = self._publishing.pop(tag)
        error = sent.error
        match sent.outcome:
            case Sent.REFUSED if isinstance(error, AccessRefused):
                # alone in flight, and refused: it reached no queue; the channel is gone
                verdict = self._leave(
                    letter, TransferOutcome.FAILED, self.reasons.refused_copy(error)
                )
                self.interrupt(error)
                return verdict
            case Sent.REFUSED:
                assert isinstance(error, PublishFailed)
                assert letter.to is not None
                failure = self.reasons.publish_failure(error, letter.to)
                return self._leave(letter, TransferOutcome.FAILED, failure)
            case Sent.UNENCODABLE:
                return self._leave(
                    letter, TransferOutcome.FAILED, f"cannot publish its copy: {error}"
                )
            case Sent.CUT:
                assert isinstance(error, TransportError)
                verdict = self._unconfirmed(letter)
                self.interrupt(error)
                return verdict
        letter.outcome = TransferOutcome.SENT
        letter.reason = None
        if self.interrupted is not None:
            # confirmed, but the ack can no longer be sent: the message stays too
            letter.maybe_duplicate = True
            letter.reason = self.reasons.unconfirmed_ack()
            return self._hold()
        letter.stage = Stage.ACK_UNSENT
        self._acks_unsent[tag] = letter
        return ACK

    def cut(self, tag: int) -> Verdict:
        """The copy of ``tag`` will get no answer (the client cancelled its task: the channel
        closed under it, or the run ends)."""
        if (letter := self._publishing.pop(tag, None)) is not None:
            return self._unconfirmed(letter)
        if (letter := self._waiting.pop(tag, None)) is not None:
            return self._leave(letter, TransferOutcome.SKIPPED, self.reasons.not_sent_interrupted())
        return NOTHING

    def acks_written(self, frames: Sequence[SettleFrame]) -> bool:
        """These frames are in the connection's write queue (FIFO): a later round trip on
        the channel proves the broker processed them. ``True``: acks wait for that proof."""
        unsent = self._acks_unsent
        unknown = self._acks_unknown
        for frame in frames:
            if not isinstance(frame, AckFrame):
                continue
            covered = [t for t in unsent if t <= frame.tag] if frame.multiple else [frame.tag]
            for tag in covered:
                letter = unsent.pop(tag, None)
                if letter is not None:
                    letter.stage = Stage.ACK_UNKNOWN
                    unknown[tag] = letter
        return bool(unknown)

    def acks_to_check(self) -> list[int]:
        """The acks a round trip starting now would prove processed (none once interrupted:
        the report counts them as unknown)."""
        if self.interrupted is not None:
            return []
        return list(self._acks_unknown)

    def acks_processed(self, tags: Sequence[int]) -> None:
        """A round trip that started after :meth:`acks_to_check` answered ``tags`` returned:
        the broker processed those acks (a channel handles its frames in order)."""
        unknown = self._acks_unknown
        for tag in tags:
            letter = unknown.pop(tag, None)
            if letter is not None:
                letter.stage = Stage.DONE
        self._settle_done()

    def consumer_cancelled(self) -> bool:
        """The consumer a :attr:`Verdict.fresh_consumer` asked to replace is cancelled:
        ``True`` if a fresh one is to consume (the run still reads)."""
        if self.phase is not Phase.READING:
            return False
        self._held = 0
        return True

    def consumer_replaced(self) -> None:
        """The replacement is over (done, not needed, or failed)."""
        self._replacing = False

    def halt(self) -> None:
        """A stop was asked for (Ctrl-C): nothing more is read, copies waiting for their
        --rate slot are not sent, copies under way finish and their messages are acked."""
        if self.phase < Phase.HALTED:
            self._stop(STOPPED_ON_REQUEST)  # while still reading: the reason sticks
            self.phase = Phase.HALTED

    def quiet(self, examined_before: int) -> None:
        """No delivery came for the idle time since :attr:`examined` was ``examined_before``."""
        if self.examined == examined_before and self.in_flight == 0 and self.phase is Phase.READING:
            self._stop(
                f"no {self.reasons.item} came for {self._idle_s:g} s after "
                f"{self.examined:,} of {self.in_queue:,}: another consumer may be taking them"
            )

    def connection_lost(self) -> None:
        """The connection, or one of the run's channels, closed under it."""
        self.interrupt(self._closed_under_us)

    def acks_channel_lost(self) -> None:
        """The consuming channel closed while acks were written."""
        self.interrupt(BrokerUnreachable(f"the channel closed while acking {self.reasons.item}s"))

    def interrupt(self, error: TransportError) -> None:
        """The broker or the connection failed the run: nothing more is sent or acked."""
        if self.interrupted is None or (
            # the refusal that closed the confirm channel says more than that it closed
            isinstance(error, AccessRefused) and self.interrupted is self._closed_under_us
        ):
            self.interrupted = error
        self._stop(None)
        self.phase = Phase.INTERRUPTED

    # -- the report ------------------------------------------------------------------------

    def report(self, elapsed_s: float) -> TransferReport:
        """One result per message read, in the order read (module doc: what is marked as a
        possible duplicate). Made once, at the end: the results move into it."""
        assert not self._reported, "a transfer's report is made once"
        self._reported = True
        interrupted = self.interrupted is not None
        results = self._results
        duplicates = self._duplicates
        for letter in self._letters:
            outcome, reason, maybe_duplicate = letter.outcome, letter.reason, letter.maybe_duplicate
            if letter.stage is Stage.WAITING:
                reason = NOT_FINISHED
            elif interrupted and letter.stage is Stage.PUBLISHING:
                outcome, reason = TransferOutcome.FAILED, self.reasons.unconfirmed_copy(letter.to)
                maybe_duplicate = True
            elif interrupted and letter.stage in (Stage.ACK_UNSENT, Stage.ACK_UNKNOWN):
                reason, maybe_duplicate = self.reasons.unconfirmed_ack(), True
            elif letter.stage is Stage.PUBLISHING:
                reason = NOT_FINISHED
            duplicates += maybe_duplicate
            results.append(TransferResult(letter.message_id, letter.to, outcome, reason))
        self._letters.clear()
        return TransferReport(
            source=self.source,
            kind=self.kind,
            dry_run=False,
            results=results,
            in_queue=self.in_queue,
            examined=self.examined,
            stopped=self.stopped,
            interrupted=_interruption_text(self.interrupted) if interrupted else None,
            refused=isinstance(self.interrupted, AccessRefused),
            possible_duplicates=duplicates,
            elapsed_s=elapsed_s,
        )

    # -- inside ----------------------------------------------------------------------------

    def _leave(
        self, letter: _Letter, outcome: TransferOutcome, reason: str, advance: bool = False
    ) -> Verdict:
        """This message stays in its queue; its outcome is final."""
        letter.stage = Stage.DONE
        letter.outcome = outcome
        letter.reason = reason
        self._settle_done()
        return self._hold(advance)

    def _settle_done(self) -> None:
        """Move the results of the first messages read, while final, out of ``_letters``."""
        letters = self._letters
        while letters and letters[0].stage is Stage.DONE:
            letter = letters.popleft()
            self._duplicates += letter.maybe_duplicate
            self._results.append(
                TransferResult(letter.message_id, letter.to, letter.outcome, letter.reason)
            )

    def _unconfirmed(self, letter: _Letter) -> Verdict:
        """The copy was sent (or being sent) when the run was cut: it may have arrived."""
        letter.maybe_duplicate = True
        return self._leave(letter, TransferOutcome.FAILED, self.reasons.unconfirmed_copy(letter.to))

    def _hold(self, advance: bool = False) -> Verdict:
        """The delivery stays unacked: it goes back to the queue when the channel closes.

        A consumer whose window fills with held deliveries would get no more, so past half
        the window a fresh consumer (with a fresh window) takes over.
        """
        self._held += 1
        fresh = self.phase is Phase.READING and not self._replacing and self._held >= self._hold_at
        if fresh:
            self._replacing = True
        return _HOLDS[advance, fresh]

    def _stop(self, reason: str | None) -> None:
        if reason is not None and self.stopped is None and self.phase is Phase.READING:
            self.stopped = reason
        self.phase = max(self.phase, Phase.CLOSING)


def _interruption_text(error: TransportError | None) -> str:
    """What the report says cut the run: from the words ``connection closed`` on, if the
    error's message holds them after its start."""
    text = "" if error is None else error.message
    cut = text.find("connection closed")
    return text[cut:] if cut > 0 else text
