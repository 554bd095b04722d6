"""Pure. What ``rr migrate`` rebuilds, the queues it holds messages in meanwhile, and where a
rerun goes on from (docs/how-to/migrate-to-quorum.md, "Migrating a queue").

A plan (``topology/plan.py``) marks a queue ``migration`` when RabbitMQ cannot change it in
place (its type, its durability, an ``x-`` argument). ``rr migrate`` rebuilds such a queue
together with its wait queues, as one :class:`Rebuild`:

=========  ===============================================================================
step       what it does on the broker
=========  ===============================================================================
hold       declare the holding queue ``<queue>.rr-migrating`` (durable, classic:
           ``x-queue-type`` and rr's marks only) and one holding wait queue
           ``<wait queue>.rr-migrating`` per wait queue (durable, classic, rr's marks, the
           wait queue's ``x-message-ttl``, dead-lettering expired copies to the holding
           queue: while the queue is rebuilt, a copy whose wait ends lands there, not nowhere)
redirect   bind the holding queue with each of the queue's bindings in the file, then unbind
           the queue (a message published through an exchange between the two lands in both:
           the one window of duplicates)
drain      move every wait queue's messages to its holding wait queue, then the queue's to
           the holding queue, with publisher confirms before acks (the transfer engine),
           until all of them are empty
delete     delete the queue and the wait queues being rebuilt (only when empty)
declare    put rr's policies and declare them as the file says
restore    bind the queue with its bindings, then unbind the holding queue
refill     move each holding wait queue's messages back to its wait queue (their wait starts
           again: later than asked, never earlier) and the holding queue's to the queue
clean      delete the holding queues (only when empty)
=========  ===============================================================================

When only wait queues are rebuilt (the queue stays), their holding wait queues dead-letter to
the queue itself, and there is no holding queue, redirect or restore.

Every step is idempotent, and where a run stands is read from the broker, not kept by rr
(:func:`phase`): a subject (the queue, or a rebuilt wait queue) still as it was means the
run is *before* the rebuild; none left as it was, but a holding queue present, means
*after* it; neither means done. So a run killed at any step is finished by running the same
command again.

A queue is rr's holding queue by what rr declares it with, never by its name
(:func:`is_rr_holding`, docs/how-to/migrate-to-quorum.md, "Holding queues"): the marker
``x-rr-holding-for`` (the queue it stands in for: only the management API shows it, as
RabbitMQ does not compare an argument it does not know on a re-declare) and
``x-max-length`` = :data:`HOLDING_MAX_LENGTH` with ``x-overflow = "reject-publish"``
(compared on a re-declare, so AMQP alone reads them). A queue of that name without them is
another's: a conflict, nothing changed.

Nothing is put back into a rebuilt queue that it cannot keep (:func:`shortfalls`): the
messages of the whole rebuild end in the queue, so its length limits, in messages and in
bytes, and an overflow rule that drops, are weighed against them before any step.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from rabbitctl_retry.dlq.target import drops_on_overflow
from rabbitctl_retry.fields import FieldValue
from rabbitctl_retry.topology.expand import (
    CLASSIC_ARGUMENTS,
    BindingEntity,
    Desired,
    QueueEntity,
)
from rabbitctl_retry.topology.plan import Operation, OpKind, Plan, Status

HOLDING_SUFFIX = ".rr-migrating"
"""Appended to a queue's name for the queue that holds its messages during a rebuild."""

MAX_NAME_BYTES = 255
"""AMQP 0-9-1's limit on a queue name (a short string)."""


HOLDING_MARK = "x-rr-holding-for"
"""The argument rr declares a holding queue with: the name of the queue it stands in for.
RabbitMQ keeps it and the management API shows it, but a re-declare does not compare it
(measured on 3.10.8, 4.0.5 and 4.3.6): AMQP cannot read it."""

HOLDING_MAX_LENGTH = int.from_bytes(b"rr-hold", "big")
"""``x-max-length`` of every holding queue: 32,213,686,696,242,276 (the bytes of
``rr-hold`` read as a number), a length no queue reaches, with ``x-overflow =
"reject-publish"`` (were it reached, the queue would refuse, not drop). RabbitMQ compares
both on a re-declare, so AMQP reads them where the management API is not given; no other
application would pick this number."""

HOLDING_OVERFLOW = "reject-publish"


def holding_name(queue: str) -> str:
    """The holding queue of ``queue``: ``refunds`` -> ``refunds.rr-migrating``."""
    return queue + HOLDING_SUFFIX


def holding_fits(queue: str) -> bool:
    """Whether ``queue``'s holding queue can exist: its name (``queue`` and
    :data:`HOLDING_SUFFIX`) is at most :data:`MAX_NAME_BYTES` bytes. A queue of 243 to 255
    bytes is a valid queue whose holding queue is not: it cannot be rebuilt, and no holding
    queue of it is on a broker to be looked for."""
    return len(holding_name(queue).encode("utf-8", "surrogatepass")) <= MAX_NAME_BYTES


def holding_marks(queue: str) -> dict[str, FieldValue]:
    """The arguments that make ``queue``'s holding queue rr's (see the module doc)."""
    return {
        HOLDING_MARK: queue,
        "x-max-length": HOLDING_MAX_LENGTH,
        "x-overflow": HOLDING_OVERFLOW,
    }


def is_rr_holding(
    queue: str, arguments: Mapping[str, object] | None, *, marker_visible: bool
) -> bool:
    """Whether the holding queue of ``queue``, declared with ``arguments``, is rr's.

    ``marker_visible``: the arguments are the management API's, all of them; else they are
    what AMQP reads (the ones RabbitMQ compares on a re-declare), without the marker. None
    (the broker would not say) is not rr's."""
    if arguments is None:
        return False
    length = arguments.get("x-max-length")
    compared = (
        isinstance(length, int)
        and not isinstance(length, bool)
        and length == HOLDING_MAX_LENGTH
        and arguments.get("x-overflow") == HOLDING_OVERFLOW
    )
    if not marker_visible:
        return compared
    return compared and arguments.get(HOLDING_MARK) == queue


def foreign_holdings(
    desired: Desired, owned: Mapping[str, bool | None], *, only: Sequence[str] = ()
) -> tuple[str, ...]:
    """The queues of the file whose holding queue exists but is not rr's (``owned``: queue ->
    whether its holding queue is rr's, None when there is none), in file order; with
    ``only`` (``--queue``), those of the listed queues and their wait queues."""
    return tuple(
        queue.name
        for queue in desired.queues
        if owned.get(queue.name) is False
        and (not only or queue.name in only or queue.wait_of in only)
    )


def not_rr_holding(queues: Sequence[str]) -> str:
    """Why rr leaves the holding queues of ``queues`` alone, and how to go on
    (docs/how-to/migrate-to-quorum.md, "Holding queues")."""
    names = ", ".join(repr(holding_name(queue)) for queue in queues)
    return (
        f"{names}: named as rr names its holding queues, but not declared by rr (no "
        f"{HOLDING_MARK}, no x-max-length = {HOLDING_MAX_LENGTH}): another application's, or "
        "left by an rr from before these marks in a stopped run; rr neither takes nor deletes "
        "it, and nothing was changed. Finish such a run with the rr that started it; move "
        'another\'s queue out of the way (rr docs migrate-to-quorum "Holding queues")'
    )


class Step(StrEnum):
    HOLD = "hold"
    REDIRECT = "redirect"
    DRAIN = "drain"
    DELETE = "delete"
    DECLARE = "declare"
    RESTORE = "restore"
    REFILL = "refill"
    CLEAN = "clean"


BEFORE_STEPS = (Step.HOLD, Step.REDIRECT, Step.DRAIN, Step.DELETE)
AFTER_STEPS = (Step.DECLARE, Step.RESTORE, Step.REFILL, Step.CLEAN)


class Phase(StrEnum):
    BEFORE = "before"
    """A subject is still as it was: the run starts at ``hold``."""
    AFTER = "after"
    """Every subject is gone or rebuilt, a holding queue is left: the run goes on at
    ``declare``."""
    DONE = "done"


class Found(StrEnum):
    """A queue on the broker, against the file."""

    ABSENT = "absent"
    OLD = "old"
    """It exists with other settings than the file's (a re-declare would be refused)."""
    AS_FILE = "as-file"


@dataclass(frozen=True, slots=True, kw_only=True)
class Rebuild:
    """One queue and its wait queues, rebuilt together (see the module doc)."""

    queue: QueueEntity
    """The queue as the file declares it."""
    rebuilt: bool
    """Whether the queue itself is rebuilt (else only some of its wait queues are)."""
    waits: tuple[QueueEntity, ...] = ()
    """Its wait queues as the file declares them."""
    rebuilt_waits: tuple[str, ...] = ()
    """The names of the wait queues that are rebuilt."""
    bindings: tuple[BindingEntity, ...] = ()
    """The queue's bindings in the file."""
    reasons: Mapping[str, tuple[str, ...]] | None = None
    """Queue name -> the settings that make it a rebuild (empty when a run goes on)."""

    @property
    def name(self) -> str:
        return self.queue.name

    @property
    def subjects(self) -> tuple[str, ...]:
        """The queues deleted and declared again."""
        return ((self.name,) if self.rebuilt else ()) + self.rebuilt_waits

    @property
    def drained(self) -> tuple[QueueEntity, ...]:
        """The wait queues emptied into holding wait queues: every one when the queue is
        rebuilt (each dead-letters back to it by name), else the rebuilt ones."""
        if self.rebuilt:
            return self.waits
        return tuple(wait for wait in self.waits if wait.name in self.rebuilt_waits)

    @property
    def holding(self) -> QueueEntity | None:
        """The holding queue, when the queue itself is rebuilt."""
        if not self.rebuilt:
            return None
        return QueueEntity(
            name=holding_name(self.name),
            arguments={**holding_marks(self.name), **CLASSIC_ARGUMENTS},
            role=f"holding queue of {self.name} (rr migrate)",
        )

    def holding_wait(self, wait: QueueEntity) -> QueueEntity:
        """``wait``'s holding wait queue: its copies wait as long, then go to the holding
        queue (or, when the queue stays, to the queue)."""
        target = holding_name(self.name) if self.rebuilt else self.name
        arguments: dict[str, FieldValue] = {
            **holding_marks(wait.name),
            "x-dead-letter-exchange": "",
            "x-dead-letter-routing-key": target,
        }
        ttl_ms = wait.setting("x-message-ttl")
        if ttl_ms is not None:
            arguments["x-message-ttl"] = ttl_ms
        arguments.update(CLASSIC_ARGUMENTS)
        return QueueEntity(
            name=holding_name(wait.name),
            arguments=arguments,
            role=f"holding wait queue of {wait.name} (rr migrate)",
        )

    @property
    def holding_queues(self) -> tuple[QueueEntity, ...]:
        """Every queue the run declares for itself, the holding queue first."""
        first = (self.holding,) if self.holding is not None else ()
        return first + tuple(self.holding_wait(wait) for wait in self.drained)


@dataclass(frozen=True, slots=True)
class Refill:
    """A queue the rebuild declares again, and the queues whose messages end in it."""

    target: QueueEntity
    sources: tuple[str, ...]


def refills(rebuild: Rebuild) -> tuple[Refill, ...]:
    """Where the messages of ``rebuild`` end: a rebuilt queue takes everything of the rebuild
    (its own, and its wait queues' and holding queues': a waiting copy comes back to it once
    its wait ends); a rebuilt wait queue takes its own and its holding wait queue's."""
    moved: list[Refill] = []
    if rebuild.rebuilt:
        names = [rebuild.name, *(wait.name for wait in rebuild.waits)]
        names += [entity.name for entity in rebuild.holding_queues]
        moved.append(Refill(rebuild.queue, tuple(names)))
    for wait in rebuild.waits:
        if wait.name in rebuild.rebuilt_waits:
            moved.append(Refill(wait, (wait.name, holding_name(wait.name))))
    return tuple(moved)


def weighs_bytes(rebuild: Rebuild) -> bool:
    """Whether a queue ``rebuild`` refills has a limit in bytes (its messages must be
    weighed: :func:`shortfalls`)."""
    return any(
        _limit(refill.target.setting("x-max-length-bytes")) is not None
        for refill in refills(rebuild)
    )


def _limit(value: FieldValue) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return None


def limits_of(queue: QueueEntity) -> dict[str, FieldValue]:
    """``queue``'s length limits and overflow rule as the file gives them (an argument or
    rr's policy), as ``x-`` arguments."""
    names = ("x-max-length", "x-max-length-bytes", "x-overflow")
    return {name: queue.setting(name) for name in names if queue.setting(name) is not None}


def capacity_problem(queue: QueueEntity, messages: int, message_bytes: int | None) -> str | None:
    """Why ``queue``, declared as the file says, cannot take back the ``messages`` of
    ``message_bytes`` bytes (None: not known) a rebuild puts into it; None when it can.

    Over ``x-max-length`` or ``x-max-length-bytes``, whatever the overflow rule: drop-head
    drops, reject-publish refuses (the run would stop half done), reject-publish-dlx
    dead-letters. A bytes limit with bytes not known refuses (only the management API
    weighs a queue). A limit with drop-head refuses whatever the numbers: the refill does
    not move into a queue that drops what it confirmed, as new messages may arrive meanwhile
    (``dlq/target.py``)."""
    if messages == 0:
        return None
    name = queue.name
    max_length = _limit(queue.setting("x-max-length"))
    max_bytes = _limit(queue.setting("x-max-length-bytes"))
    if max_length is not None and messages > max_length:
        return (
            f"{name} would hold at most {max_length:,} messages (x-max-length = {max_length}), "
            f"and the rebuild puts {messages:,} back into it"
        )
    if max_bytes is not None and message_bytes is None:
        return (
            f"{name} would hold at most {max_bytes:,} bytes (x-max-length-bytes = "
            f"{max_bytes}), and the {messages:,} messages the rebuild puts back into it cannot "
            "be weighed without the management API (--management-url)"
        )
    if max_bytes is not None and message_bytes is not None and message_bytes > max_bytes:
        return (
            f"{name} would hold at most {max_bytes:,} bytes (x-max-length-bytes = "
            f"{max_bytes}), and the rebuild puts {messages:,} messages of {message_bytes:,} "
            "bytes back into it"
        )
    drops = drops_on_overflow(limits_of(queue))
    if drops is not None:
        return (
            f"the rebuilt {name} {drops}; rr does not refill such a queue ({messages:,} "
            'messages to put back): give it x-overflow = "reject-publish" in the file, or '
            "empty it first"
        )
    return None


def shortfalls(
    rebuild: Rebuild,
    messages: Mapping[str, int],
    message_bytes: Mapping[str, int] | None,
) -> tuple[str, ...]:
    """Why the queues of ``rebuild`` cannot take back what it moves (:func:`capacity_problem`),
    given each queue's ``messages`` and ``message_bytes`` (None: not known); empty when they
    can."""
    problems: list[str] = []
    for refill in refills(rebuild):
        count = sum(messages.get(name, 0) for name in refill.sources)
        weight = (
            None
            if message_bytes is None
            else sum(message_bytes.get(name, 0) for name in refill.sources)
        )
        problem = capacity_problem(refill.target, count, weight)
        if problem is not None:
            held = ", ".join(
                f"{name} {messages[name]:,}" for name in refill.sources if messages.get(name)
            )
            problems.append(f"{problem} ({held})")
    return tuple(problems)


def refill_problem(queue: QueueEntity, *, in_queue: int, to_move: int) -> str | None:
    """Why the refill must not move ``to_move`` messages into ``queue`` (declared as the file
    says) that holds ``in_queue`` now, and what to do; None when it may. The plan weighed
    the numbers before the run; this is the refill's own check, as messages may have come
    since (through the exchanges, into the holding queue)."""
    if to_move == 0:
        return None
    drops = drops_on_overflow(limits_of(queue))
    if drops is not None:
        return (
            f"the rebuilt {queue.name} {drops}; rr does not move into it: give it x-overflow = "
            '"reject-publish" in the file and run rr migrate again (it rebuilds the queue once '
            "more)"
        )
    max_length = _limit(queue.setting("x-max-length"))
    if max_length is not None and in_queue + to_move > max_length:
        return (
            f"{queue.name} holds {in_queue:,} of at most {max_length:,} messages "
            f"(x-max-length), and {to_move:,} are to come back: run rr migrate again once it "
            "has room"
        )
    return None


def phase(rebuild: Rebuild, found: Mapping[str, Found], holding_present: bool) -> Phase:
    """Where a run of ``rebuild`` stands, from what the broker holds (see the module doc):
    ``found`` says how each subject stands, ``holding_present`` whether any of its holding
    queues exists."""
    if any(found.get(name) is Found.OLD for name in rebuild.subjects):
        return Phase.BEFORE
    return Phase.AFTER if holding_present else Phase.DONE


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why ``rr migrate`` rebuilds nothing of the file."""

    reason: str


def rebuilds(
    plan: Plan,
    desired: Desired,
    *,
    held: Sequence[str] = (),
    only: Sequence[str] = (),
) -> tuple[Rebuild, ...] | Refusal:
    """The rebuilds ``plan`` calls for, in file order, or why none may run.

    Args:
        plan: the plan of the file against the broker.
        desired: the file's entities.
        held: the queues of the file whose holding queue exists on the broker (a run that
            stopped): rebuilt whatever the plan says of them, so that the run goes on.
        only: ``--queue``: just these queues (listed queues, by name).
    """
    unnamed = [
        op.name
        for op in plan.operations
        if op.op is OpKind.DECLARE_QUEUE
        and op.status is Status.CONFLICT
        and not holding_fits(op.name)
    ]
    if unnamed:  # whatever differs (a long name's 406 text is cut short): it cannot be rebuilt
        return Refusal(_no_holding_name(unnamed[0]))
    blocked = [op for op in plan.operations if op.status is Status.CONFLICT and op.blocked]
    if blocked:
        shown = "; ".join(f"{op.name}: {op.detail}" for op in blocked)
        return Refusal(f"conflicts no rebuild resolves ({shown}); nothing was changed")
    reasons = {
        op.name: op.rebuild
        for op in plan.operations
        if op.op is OpKind.DECLARE_QUEUE and op.status is Status.CONFLICT and op.rebuild
    }
    held_names = set(held)
    units: list[Rebuild] = []
    for queue in desired.queues:
        if queue.wait_of is not None:
            continue
        waits = tuple(q for q in desired.queues if q.wait_of == queue.name)
        rebuilt = queue.name in reasons or queue.name in held_names
        # a holding wait queue left by a run of the queue's own rebuild belongs to that run
        rebuilt_waits = tuple(
            w.name for w in waits if w.name in reasons or (w.name in held_names and not rebuilt)
        )
        if not rebuilt and not rebuilt_waits:
            continue
        units.append(
            Rebuild(
                queue=queue,
                rebuilt=rebuilt,
                waits=waits,
                rebuilt_waits=rebuilt_waits,
                bindings=tuple(b for b in desired.bindings if b.queue == queue.name),
                reasons={
                    name: reasons[name]
                    for name in (queue.name, *(w.name for w in waits))
                    if name in reasons
                },
            )
        )
    if only:
        known = {unit.name for unit in units}
        unknown = [name for name in only if name not in known]
        if unknown:
            listed = ", ".join(sorted(known)) or "none"
            return Refusal(
                f"--queue {', '.join(unknown)}: no rebuild of that queue in the file "
                f"(queues to rebuild: {listed})"
            )
        units = [unit for unit in units if unit.name in set(only)]
    for unit in units:
        for entity in unit.holding_queues:
            queue_name = entity.name.removesuffix(HOLDING_SUFFIX)
            if not holding_fits(queue_name):
                return Refusal(_no_holding_name(queue_name))
    return tuple(units)


def _no_holding_name(queue: str) -> str:
    size = len(queue.encode("utf-8", "surrogatepass"))
    return (
        f"queue {queue[:60]!r}... ({size} bytes) cannot be rebuilt: its holding queue's name "
        f"({HOLDING_SUFFIX!r} added) would be longer than {MAX_NAME_BYTES} bytes, the most AMQP "
        'carries; rename the queue in the file (rr docs migrate-to-quorum "Migrating a queue"); '
        "nothing was changed"
    )


def apart_from(plan: Plan, units: Sequence[Rebuild]) -> Plan:
    """``plan`` without what the rebuilds do, nor the rebuilds left for later (``--queue``):
    their queues' and wait queues' declarations and the bindings of those queues (re-binding
    an old queue would send messages to it again). What is left is applied first, as ``rr
    declare`` would: the exchanges the bindings need, new queues, live policy changes."""
    names = {unit.name for unit in units}
    names |= {op.name for op in plan.operations if op.status is Status.CONFLICT}
    queues = names | {wait.name for unit in units for wait in unit.waits}

    def kept(op: Operation) -> bool:
        if isinstance(op.entity, QueueEntity):
            return op.entity.name not in queues
        if isinstance(op.entity, BindingEntity):
            return op.entity.queue not in names
        return op.status is not Status.CONFLICT

    return Plan(operations=tuple(op for op in plan.operations if kept(op)), warnings=plan.warnings)


__all__ = [
    "AFTER_STEPS",
    "BEFORE_STEPS",
    "HOLDING_MARK",
    "HOLDING_MAX_LENGTH",
    "HOLDING_OVERFLOW",
    "HOLDING_SUFFIX",
    "Found",
    "Phase",
    "Rebuild",
    "Refill",
    "Refusal",
    "Step",
    "apart_from",
    "capacity_problem",
    "foreign_holdings",
    "holding_fits",
    "holding_marks",
    "holding_name",
    "is_rr_holding",
    "limits_of",
    "not_rr_holding",
    "phase",
    "rebuilds",
    "refill_problem",
    "refills",
    "shortfalls",
    "weighs_bytes",
]
