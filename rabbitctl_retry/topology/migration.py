"""Pure. What ``rr migrate`` rebuilds, the queues it holds messages in meanwhile, and where a
rerun goes on from (docs/topology.md, "Migrating a queue").

A plan (``topology/plan.py``) marks a queue ``migration`` when RabbitMQ cannot change it in
place (its type, its durability, an ``x-`` argument). ``rr migrate`` rebuilds such a queue
together with its wait queues, as one :class:`Rebuild`:

=========  ===============================================================================
step       what it does on the broker
=========  ===============================================================================
hold       declare the holding queue ``<queue>.rr-migrating`` (durable, classic: only
           ``x-queue-type``) and one holding wait queue ``<wait queue>.rr-migrating`` per wait
           queue (durable, classic, the wait queue's ``x-message-ttl``, dead-lettering
           expired copies to the holding queue: while the queue is rebuilt, a copy whose
           wait ends lands there, not nowhere)
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
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

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


def holding_name(queue: str) -> str:
    """The holding queue of ``queue``: ``refunds`` -> ``refunds.rr-migrating``."""
    return queue + HOLDING_SUFFIX


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
            arguments=CLASSIC_ARGUMENTS,
            role=f"holding queue of {self.name} (rr migrate)",
        )

    def holding_wait(self, wait: QueueEntity) -> QueueEntity:
        """``wait``'s holding wait queue: its copies wait as long, then go to the holding
        queue (or, when the queue stays, to the queue)."""
        target = holding_name(self.name) if self.rebuilt else self.name
        arguments: dict[str, FieldValue] = {
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
            if len(entity.name.encode()) > MAX_NAME_BYTES:
                return Refusal(
                    f"{entity.name[:60]!r}...: the name of a holding queue would be longer "
                    f"than {MAX_NAME_BYTES} bytes; rename the queue in the file"
                )
    return tuple(units)


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
    "HOLDING_SUFFIX",
    "Found",
    "Phase",
    "Rebuild",
    "Refusal",
    "Step",
    "apart_from",
    "holding_name",
    "phase",
    "rebuilds",
]
