"""Pure. Desired entities + what the broker holds -> a plan: one operation per entity.

What AMQP can observe is limited: a passive declare says whether a queue or exchange exists,
and re-declaring an existing one with the desired arguments (on a throwaway channel) either
passes (equivalent) or fails with PRECONDITION_FAILED naming one argument that differs. The
shell gathers those answers into :data:`Observation` values; this module only decides.

===============================  ===============  =======================================
entity / observation             status           applied?
===============================  ===============  =======================================
queue or exchange ``Absent``     ``planned``      declared (status becomes ``created``)
``Matches``                      ``unchanged``    re-declared (a no-op on the server)
``Differs``                      ``conflict``     nothing is applied at all
``Refused``                      ``conflict``     nothing is applied at all
uses a missing exchange          ``conflict``     (a binding or dead-letter exchange the
                                                  file names but does not declare)
binding, both ends ``Matches``   ``unchanged``    re-bound (queue.bind is idempotent)
binding, an end is new           ``planned``      bound
transient (non-durable) queue    ``conflict``     only where the server's deprecated-features
the server denies                                 table (its management API) denies
                                                  ``transient_nonexcl_queues``: its declare
                                                  would close the connection (541)
transient queue, RabbitMQ 4      as observed      declared; one warning for them all
(the table permits it, or is                      (:attr:`Plan.warnings`): a deprecated
not known)                                        feature, permitted by default on 4.0.5 and
                                                  4.3.6
queue with ``delay = "server"``  ``conflict``     on a server older than RabbitMQ 4.3, whatever
                                                  the queue's observation: older servers accept
                                                  ``x-delayed-retry-*`` and ignore it
new quorum queue, ``replicas``   ``conflict``     (only when the cluster's nodes are known:
more than the cluster's nodes                     a management URL, docs/how-to/run-on-a-cluster.md)
a setting is a ``migration``     ``conflict``     the queue must be rebuilt (each setting
(``topology/settings.py``)                        classified in :attr:`Operation.settings`)
existing queue, a setting        ``live``         rr's policy is put before any queue is
``live`` (rr's policy differs)                    declared (status becomes ``changed``)
``settings = "policy"``, another ``conflict``     at rr's priority or above (rr's settings
policy matches the queue                          would not apply); below: a warning
``settings = "policy"``, new     ``conflict``     when the policies were not read (no
queue, policies not read                          management API: ``rr run``)
quorum queue without a limit     as its other     kept as it is, re-declared without -1, and
exists without the ``-1`` rr     settings         one warning (:func:`keeps_server_limit`)
would give it (RabbitMQ 4)
===============================  ===============  =======================================

AMQP cannot list bindings, so a binding between two entities that already existed is
reported ``unchanged`` and re-asserted; if it was missing, applying creates it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import assert_never

from rabbitctl_retry.fields import FieldValue
from rabbitctl_retry.releases import first_release, release_of
from rabbitctl_retry.server import (
    QUORUM_DEFAULT_DELIVERY_LIMIT,
    TRANSIENT_QUEUES_FEATURE,
    Placement,
    Policy,
)
from rabbitctl_retry.topology.expand import (
    BindingEntity,
    Desired,
    Entity,
    ExchangeEntity,
    QueueEntity,
)
from rabbitctl_retry.topology.settings import (
    NONE as NO_VALUE,
)
from rabbitctl_retry.topology.settings import (
    Change,
    Setting,
    classify,
    outranked,
    policy_name,
    rival_policies,
    shadowed,
)


@dataclass(frozen=True, slots=True)
class Absent:
    """The broker has no entity of that name."""


@dataclass(frozen=True, slots=True)
class Matches:
    """It exists, and an equivalent re-declare was accepted."""


@dataclass(frozen=True, slots=True)
class Difference:
    """One argument (or property such as ``durable``) that differs on the broker."""

    key: str
    desired: str
    current: str
    current_value: FieldValue = None
    """The broker's value itself (None: it has none), where ``current`` is how it shows."""


@dataclass(frozen=True, slots=True)
class Differs:
    """It exists with other arguments: a re-declare would fail with PRECONDITION_FAILED."""

    differences: tuple[Difference, ...]
    detail: str = ""
    """The broker's own words, when the differences could not all be read."""


@dataclass(frozen=True, slots=True)
class Refused:
    """The broker cannot take it at all (an unknown exchange type, a locked queue)."""

    reason: str


Observation = Absent | Matches | Differs | Refused


class Status(StrEnum):
    CREATED = "created"
    UNCHANGED = "unchanged"
    PLANNED = "planned"
    LIVE = "live"
    """The queue exists, and rr's policy for it changes: applied without a redeclare."""
    CHANGED = "changed"
    """A ``live`` queue after the apply."""
    CONFLICT = "conflict"


class OpKind(StrEnum):
    DECLARE_QUEUE = "declare_queue"
    DECLARE_EXCHANGE = "declare_exchange"
    BIND = "bind"


@dataclass(frozen=True, slots=True, kw_only=True)
class Operation:
    """One line of the plan."""

    op: OpKind
    name: str
    arguments: Mapping[str, FieldValue] = field(default_factory=dict)
    status: Status
    detail: str | None = None
    entity: Entity
    """What to declare when the plan is applied."""
    settings: tuple[Setting, ...] = ()
    """A queue's settings, each classified (``topology/settings.py``)."""
    put_policy: Policy | None = None
    """rr's policy to put before any queue is declared (new or changed), if any."""
    drop_policy: str | None = None
    """rr's policy to delete (the file no longer sets anything a policy holds), if any."""
    rebuild: tuple[str, ...] = ()
    """The settings (``x-queue-type``, ``durable``, ...) that make the queue a ``migration``:
    ``rr migrate`` rebuilds it (``topology/migration.py``); empty when none does."""
    blocked: bool = False
    """A conflict no rebuild resolves (a refused entity, a missing exchange, a rival policy,
    a setting the server cannot take): ``rr migrate`` refuses the file as ``rr declare``
    does."""
    broker_type: str | None = None
    """A queue's type on the broker (``classic``, ``quorum``, ``stream``), as the observation
    shows it (:func:`broker_queue_type`); None for a queue it does not hold, one it would not
    show, and for anything else."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Plan:
    operations: tuple[Operation, ...]
    placements: Mapping[str, Placement] = field(default_factory=dict)
    """Queue name -> where it lives, after an apply with a management URL; else empty."""
    warnings: tuple[str, ...] = ()
    """What the plan does but the operator should know (transient queues on RabbitMQ 4)."""

    @property
    def conflicts(self) -> tuple[Operation, ...]:
        return tuple(op for op in self.operations if op.status is Status.CONFLICT)

    @property
    def can_apply(self) -> bool:
        return not self.conflicts

    def applied(self) -> Plan:
        """The plan after a successful apply: ``planned`` became ``created``."""
        after = {Status.PLANNED: Status.CREATED, Status.LIVE: Status.CHANGED}
        return dataclasses.replace(
            self,
            operations=tuple(
                _with_status(op, after[op.status]) if op.status in after else op
                for op in self.operations
            ),
        )

    def placed(self, placements: Mapping[str, Placement]) -> Plan:
        """This plan with where each queue lives."""
        return dataclasses.replace(self, placements=dict(placements))


def _with_status(op: Operation, status: Status, detail: str | None = None) -> Operation:
    return dataclasses.replace(
        op, status=status, detail=detail if detail is not None else op.detail
    )


def _conflict(op: Operation, detail: str) -> Operation:
    """``op`` as a conflict no rebuild resolves; every reason it already had is kept."""
    if op.status is Status.CONFLICT and op.detail:
        detail = f"{op.detail}; {detail}"
    return dataclasses.replace(_with_status(op, Status.CONFLICT, detail), blocked=True)


def missing_exchange_detail(exchange: str, observation: Observation) -> str:
    """Why the file cannot use ``exchange`` (it does not declare it), as the plan says it."""
    return _missing_detail(exchange, observation)


def _missing_detail(exchange: str, observation: Observation) -> str:
    if isinstance(observation, Refused):
        return f"exchange {exchange!r}: {observation.reason}"
    return (
        f"exchange {exchange!r} is used by the file but neither declared in it nor present "
        "on the broker"
    )


ObservationKey = tuple[str, str]
"""``("queue", name)`` or ``("exchange", name)``."""


def describe_differences(differs: Differs) -> str:
    """``x-delivery-limit: file 4, broker 5; durable: file true, broker false``."""
    if not differs.differences:
        return differs.detail
    return "; ".join(f"{d.key}: file {d.desired}, broker {d.current}" for d in differs.differences)


def plan(
    desired: Desired,
    observed: Mapping[ObservationKey, Observation],
    *,
    server_version: tuple[int, int, int],
    cluster_nodes: Sequence[str] | None = None,
    deprecated_features: Mapping[str, bool] | None = None,
    policies: Sequence[Policy] | None = None,
) -> Plan:
    """Decide one operation per entity (table in the module docstring).

    Args:
        desired: the expansion of the topology.
        observed: what the broker said about each queue and exchange; a missing key counts
            as :class:`Absent`.
        server_version: the broker's release, ``(4, 3, 6)`` (transient non-exclusive queues
            are deprecated from RabbitMQ 4; only 4.3 and later hold retries back, ``delay =
            "server"``).
        cluster_nodes: the cluster's nodes, when known (a management URL was given): a new
            quorum queue may not ask for more replicas than there are nodes.
        deprecated_features: the server's deprecated-features table, feature name ->
            permitted, when read from its management API; None when not known. Only a table
            that denies ``transient_nonexcl_queues`` makes a transient queue a conflict.
    """
    operations: list[Operation] = []
    warnings: list[str] = []
    missing = {
        name: _missing_detail(name, observed.get(("exchange", name), Absent()))
        for name in desired.referenced_exchanges
        if not isinstance(observed.get(("exchange", name), Absent()), Matches)
    }
    for exchange in desired.exchanges:
        operations.append(
            _declare_op(OpKind.DECLARE_EXCHANGE, exchange, observed.get(exchange.key, Absent()))
        )
    for queue in desired.queues:
        observation = observed.get(queue.key, Absent())
        queue, observation, kept = keeps_server_limit(queue, observation)
        if kept:
            warnings.append(server_limit_warning(queue.name, server_version))
        operation = _declare_op(OpKind.DECLARE_QUEUE, queue, observation)
        operation, warning = _settings(operation, queue, observation, policies)
        if warning is not None:
            warnings.append(warning)
        server_delay = server_delay_problem(queue, server_version)
        if server_delay is not None:
            operation = _conflict(operation, server_delay)
        if not queue.durable and _denied(deprecated_features, TRANSIENT_QUEUES_FEATURE):
            operation = _conflict(operation, TRANSIENT_DENIED)
        too_many = replicas_problem(queue, cluster_nodes)
        if too_many is not None and operation.status is Status.PLANNED:
            operation = _conflict(operation, too_many)
        dead_letter_exchange = queue.setting("x-dead-letter-exchange")
        if isinstance(dead_letter_exchange, str) and dead_letter_exchange in missing:
            operation = _conflict(operation, missing[dead_letter_exchange])
        operations.append(operation)
    for binding in desired.bindings:
        operation = _bind_op(binding, observed)
        if binding.exchange in missing:
            operation = _conflict(operation, missing[binding.exchange])
        operations.append(operation)
    transient = transient_warning(desired, server_version, deprecated_features)
    if transient is not None:
        warnings.insert(0, transient)
    return Plan(operations=tuple(operations), warnings=tuple(warnings))


def keeps_server_limit(
    queue: QueueEntity, observation: Observation
) -> tuple[QueueEntity, Observation, bool]:
    """A quorum queue rr would declare with ``x-delivery-limit = -1`` that exists without it
    (declared by an earlier rr, or by hand) is taken as it is: no conflict, the same queue
    re-declared without the argument, and True (the plan warns). Anything else unchanged."""
    if not queue.lifts_delivery_limit or not isinstance(observation, Differs):
        return queue, observation, False
    kept = [
        d
        for d in observation.differences
        if not (d.key == "x-delivery-limit" and d.current == NO_VALUE)
    ]
    if len(kept) == len(observation.differences):
        return queue, observation, False
    arguments = {k: v for k, v in queue.arguments.items() if k != "x-delivery-limit"}
    entity = dataclasses.replace(queue, arguments=arguments, lifts_delivery_limit=False)
    rest: Observation = (
        Differs(tuple(kept), observation.detail) if kept or observation.detail else Matches()
    )
    return entity, rest, True


def server_limit_warning(queue: str, server_version: tuple[int, int, int]) -> str:
    """What a quorum queue kept with the server's default delivery limit risks."""
    release = ".".join(str(part) for part in server_version)
    return (
        f"{queue!r} exists without x-delivery-limit, so RabbitMQ {release} gives it a delivery "
        f"limit of {QUORUM_DEFAULT_DELIVERY_LIMIT}: a message returned that often is dropped "
        "(before RabbitMQ 4.3 every read of it by rr dlq inspect, export or groups counts "
        "one). rr declares such a queue with x-delivery-limit = -1 but changes no existing "
        'one: lift its limit with a policy (rr docs topology "Quorum queues without a '
        'limit"), or see rr doctor'
    )


MANAGEMENT_NEEDED = (
    'settings = "policy": rr\'s policy must be put before the queue is declared, and '
    "policies need the management HTTP API (AMQP cannot set them): give --management-url or "
    "[broker] management_url, and run rr declare"
)


def _settings(
    operation: Operation,
    queue: QueueEntity,
    observation: Observation,
    policies: Sequence[Policy] | None,
) -> tuple[Operation, str | None]:
    """``operation`` with the queue's settings classified (``topology/settings.py``): a
    ``migration`` is a conflict, a ``live`` change of an existing queue makes it ``live``;
    and the warning of the lower policies rr's outranks, if any."""
    if isinstance(observation, Refused):
        return operation, None
    exists = not isinstance(observation, Absent)
    differences = (
        [(d.key, d.desired, d.current) for d in observation.differences]
        if isinstance(observation, Differs)
        else []
    )
    own = policy_name(queue.name)
    current = next((p for p in policies or () if p.name == own), None)
    rows = classify(
        arguments=queue.arguments,
        durable=queue.durable,
        policy=queue.policy,
        policy_mode=queue.policy_mode,
        exists=exists,
        differences=differences,
        current_policy=current,
        policies_read=policies is not None,
    )
    changes = {row.change for row in rows}
    read = policies is not None  # else (rr run) the policies are neither known nor put
    put = queue.policy if read and queue.policy is not None and current != queue.policy else None
    drop = own if queue.policy_mode and queue.policy is None and current is not None else None
    status, detail = operation.status, operation.detail
    blocked = operation.blocked
    rebuild = tuple(row.key for row in rows if row.change is Change.MIGRATION)
    if status is Status.UNCHANGED and Change.LIVE in changes:
        status = Status.LIVE
    if status is Status.CONFLICT and Change.MIGRATION in changes:
        detail = f"{detail}; {REBUILD_DETAIL}"
    elif Change.MIGRATION in changes:
        keys = ", ".join(row.key for row in rows if row.change is Change.MIGRATION)
        status, detail = Status.CONFLICT, f"{keys}: {REBUILD_DETAIL}"
    warning = None
    if queue.policy_mode:
        if policies is None and not exists:
            status, blocked = Status.CONFLICT, True
            detail = MANAGEMENT_NEEDED if detail is None else f"{detail}; {MANAGEMENT_NEEDED}"
        kind = "quorum" if queue.arguments.get("x-queue-type") == "quorum" else "classic"
        rivals = rival_policies(queue.name, kind, policies or ())
        if rivals.above and queue.policy is not None:
            status, blocked = Status.CONFLICT, True
            problem = outranked(queue.name, rivals.above)
            detail = problem if detail is None else f"{detail}; {problem}"
        elif rivals.below and queue.policy is not None:
            warning = shadowed(queue.name, rivals.below)
    updated = dataclasses.replace(
        operation,
        status=status,
        detail=detail,
        settings=rows,
        put_policy=put,
        drop_policy=drop,
        rebuild=rebuild,
        blocked=blocked or (status is Status.CONFLICT and not rebuild),
    )
    return updated, warning


REBUILD_DETAIL = (
    "the queue must be rebuilt: RabbitMQ changes no type, durability or x- argument of an "
    "existing queue, and rr declare deletes nothing; rr migrate TOPOLOGY rebuilds it with "
    'its messages (rr docs migrate-to-quorum "Migrating a queue")'
)


TRANSIENT_DENIED = (
    "the server denies the deprecated feature transient_nonexcl_queues (read from its "
    "management API): RabbitMQ closes the connection on the declare of a transient "
    "(non-durable) non-exclusive queue (541 INTERNAL_ERROR); make it durable"
)


def _denied(deprecated_features: Mapping[str, bool] | None, feature: str) -> bool:
    return deprecated_features is not None and deprecated_features.get(feature) is False


def transient_warning(
    desired: Desired,
    server_version: tuple[int, int, int],
    deprecated_features: Mapping[str, bool] | None,
) -> str | None:
    """The one warning for the transient (non-durable) queues of ``desired`` that a server
    of ``server_version`` takes although the feature is deprecated, or None: from RabbitMQ 4
    when its deprecated-features table is not known, or wherever the table permits
    ``transient_nonexcl_queues`` (a table that denies it makes them conflicts instead; one
    that does not list it says they are no deprecated feature there)."""
    names = [queue.name for queue in desired.queues if not queue.durable]
    if not names or _denied(deprecated_features, TRANSIENT_QUEUES_FEATURE):
        return None
    if deprecated_features is None:
        if not release_of(server_version).transient_queues_deprecated:
            return None
        state = (
            "permitted by default on 4.0.5 and 4.3.6, but a server configured to deny it "
            "closes the connection on their declare (541; rr checks the server's setting "
            "when given its management URL, rr docs run-on-a-cluster)"
        )
    elif TRANSIENT_QUEUES_FEATURE in deprecated_features:
        state = "this server permits it (read from its management API)"
    else:
        return None
    shown = ", ".join(repr(name) for name in names)
    verb = "is" if len(names) == 1 else "are"
    return (
        f"{shown} {verb} transient (durable = false): transient non-exclusive queues are a "
        f"deprecated feature on RabbitMQ 4 (transient_nonexcl_queues), {state}; make "
        f"{'it' if len(names) == 1 else 'them'} durable"
    )


def server_delay_problem(queue: QueueEntity, server_version: tuple[int, int, int]) -> str | None:
    """Why ``queue``'s delayed retries (``x-delayed-retry-type``, ``delay = "server"``) would
    not work on a server of ``server_version``, or None."""
    if queue.setting("x-delayed-retry-type") is None or release_of(server_version).delayed_retries:
        return None
    release = ".".join(str(part) for part in server_version)
    needed = first_release("delayed_retries").name
    return (
        f'delay = "server" needs RabbitMQ {needed} or later (delayed retries of quorum '
        f"queues); this server is {release}, which would ignore x-delayed-retry-* and give "
        'every retry back at once: use delay = "dlx-ttl" or delay_tiers here'
    )


def replicas_problem(queue: QueueEntity, cluster_nodes: Sequence[str] | None) -> str | None:
    """Why ``queue``'s ``x-quorum-initial-group-size`` cannot be met by ``cluster_nodes``
    (RabbitMQ would give it fewer members without saying so), or None."""
    wanted = queue.arguments.get("x-quorum-initial-group-size")
    if cluster_nodes is None or not isinstance(wanted, int) or isinstance(wanted, bool):
        return None
    if wanted <= len(cluster_nodes):
        return None
    count = len(cluster_nodes)
    return (
        f"replicas = {wanted}, but the cluster has {count} node{'' if count == 1 else 's'} "
        f"({', '.join(cluster_nodes)}): RabbitMQ would give the queue {count} without saying so"
    )


def broker_queue_type(queue: QueueEntity, observation: Observation) -> str | None:
    """``queue``'s type on the broker, as its observation shows it: rr re-declares an existing
    queue with its ``x-queue-type`` (always sent, ``topology/expand.py``), so a queue the
    broker takes as it is (:class:`Matches`) is of the file's type, and one of another type
    is refused naming it (:class:`Differs`; RabbitMQ 3.10 says "none" for a queue declared
    without a type on a vhost without a default type, which is classic: measured). None when
    the queue is absent, or locked (exclusive to another connection)."""
    declared = queue.arguments.get("x-queue-type")
    match observation:
        case Matches():
            return declared if isinstance(declared, str) else None
        case Differs():
            for difference in observation.differences:
                if difference.key == "x-queue-type":
                    current = difference.current_value
                    return current if isinstance(current, str) else "classic"
            if observation.detail:  # the broker's words could not all be read
                return None
            return declared if isinstance(declared, str) else None
        case Absent() | Refused():
            return None
        case _:
            assert_never(observation)


def _declare_op(
    kind: OpKind, entity: QueueEntity | ExchangeEntity, observation: Observation
) -> Operation:
    match observation:
        case Absent():
            status, detail = Status.PLANNED, None
        case Matches():
            status, detail = Status.UNCHANGED, None
        case Differs() | Refused():
            status, detail = Status.CONFLICT, _conflict_detail(observation)
        case _:
            assert_never(observation)
    return Operation(
        op=kind,
        name=entity.name,
        arguments=entity.arguments,
        status=status,
        detail=detail,
        entity=entity,
        # an exchange is never rebuilt, nor is anything the broker refuses
        blocked=isinstance(observation, Refused)
        or (isinstance(observation, Differs) and kind is OpKind.DECLARE_EXCHANGE),
        broker_type=broker_queue_type(entity, observation)
        if isinstance(entity, QueueEntity)
        else None,
    )


def _conflict_detail(observation: Differs | Refused | Absent) -> str:
    match observation:
        case Differs():
            return "exists with other arguments: " + describe_differences(observation)
        case Refused():
            return observation.reason
        case Absent():
            return "does not exist"
        case _:
            assert_never(observation)


def _bind_op(binding: BindingEntity, observed: Mapping[ObservationKey, Observation]) -> Operation:
    ends = (
        observed.get(("queue", binding.queue), Absent()),
        observed.get(("exchange", binding.exchange), Absent()),
    )
    both_existed = all(isinstance(end, Matches) for end in ends)
    return Operation(
        op=OpKind.BIND,
        name=binding.name,
        arguments=binding.arguments,
        status=Status.UNCHANGED if both_existed else Status.PLANNED,
        detail=None,
        entity=binding,
    )
