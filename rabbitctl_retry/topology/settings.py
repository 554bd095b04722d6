"""Pure. Where a queue's settings live (an ``x-`` argument, rr's policy, a property of the
queue) and what a difference between the file and the broker means for each
(docs/how-to/migrate-to-quorum.md, "Changing a topology").

With ``settings = "policy"`` the settings that have a policy key (:data:`POLICY_KEYS`) go
into one policy per queue, wait queues included, owned by rr: named ``rr.<queue>``
(:func:`policy_name`), with a pattern that finds that queue alone (:func:`policy_pattern`),
``apply-to`` ``queues`` and the priority :data:`RR_POLICY_PRIORITY`. The rest (the type,
``x-max-priority``, ``x-single-active-consumer``, ``x-quorum-initial-group-size``,
durability, ...) stays in the declare.

Each setting of a queue is classified (:class:`Change`):

==============  ==============================================================================
``unchanged``   the broker holds the file's value
``planned``     the queue is new, or (for a policy-held setting) rr's policy for it is
``live``        held by rr's policy, which holds another value (or a key the file no longer
                sets): ``rr declare`` puts the policy, and the existing queue takes it at once
``migration``   the type, durability, an ``x-`` argument that differs, or a key moving
                between an argument and a policy on an existing queue: RabbitMQ changes none
                of them on an existing queue, which must be rebuilt (a conflict)
==============  ==============================================================================

Of several policies matching a queue, only the one of the highest priority applies, and its
keys are not merged with a lower one's (measured on 3.10.8, 4.0.5 and 4.3.6): so another
policy that matches a queue rr holds in a policy is a conflict at rr's priority or above
(rr's settings would not apply) and a warning below it (its keys stop applying to that
queue): :func:`rival_policies`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from rabbitctl_retry.fields import FieldValue
from rabbitctl_retry.server import Policy, PolicyValue
from rabbitctl_retry.topology.inequivalence import display_value

RR_POLICY_PREFIX = "rr."
"""The name of every policy rr owns starts so: ``rr.`` and the queue's name."""

RR_POLICY_PRIORITY = 100
"""The priority of rr's policies. RabbitMQ applies only the highest-priority policy that
matches a queue, alone (its keys are not merged with a lower one's; measured). Policies made
by hand commonly sit at 0 to 10 and match many queues (``.*``): at 100, rr's per-queue policy
wins over them, so the file decides its queues; a policy an operator deliberately puts above
it (100 or more) would take the queue away from rr's settings, and ``rr declare`` refuses
that as a conflict rather than declaring settings that would not apply."""

POLICY_APPLY_TO = "queues"
"""rr's policies apply to queues of every type (``classic_queues`` and ``quorum_queues``
exist only from RabbitMQ 4.0; the pattern finds one queue anyway)."""

POLICY_KEYS: Mapping[str, str] = {
    "x-dead-letter-exchange": "dead-letter-exchange",
    "x-dead-letter-routing-key": "dead-letter-routing-key",
    "x-dead-letter-strategy": "dead-letter-strategy",
    "x-delivery-limit": "delivery-limit",
    "x-message-ttl": "message-ttl",
    "x-expires": "expires",
    "x-max-length": "max-length",
    "x-max-length-bytes": "max-length-bytes",
    "x-overflow": "overflow",
    "x-delayed-retry-type": "delayed-retry-type",
    "x-delayed-retry-min": "delayed-retry-min",
    "x-delayed-retry-max": "delayed-retry-max",
}
"""The ``x-`` arguments rr sets that a policy can hold instead, and their policy keys
(docs/reference/topology.md, "Policies and arguments"). Every other argument stays in the
declare."""

ARGUMENT_OF: Mapping[str, str] = {key: argument for argument, key in POLICY_KEYS.items()}

NONE = "(none)"
"""How an absent value is shown."""


def policy_name(queue: str) -> str:
    """The name of rr's policy for ``queue``: ``rr.`` and the queue's name."""
    return RR_POLICY_PREFIX + queue


def policy_pattern(queue: str) -> str:
    """A pattern that finds ``queue`` alone: anchored, every special character escaped (a
    policy's pattern is a regular expression searched in the name: ``a.b`` finds ``aXb``)."""
    return "^" + re.escape(queue) + "$"


def split_arguments(
    arguments: Mapping[str, FieldValue],
) -> tuple[dict[str, FieldValue], dict[str, PolicyValue]]:
    """``arguments`` as (what stays in the declare, the policy's definition)."""
    declared: dict[str, FieldValue] = {}
    definition: dict[str, PolicyValue] = {}
    for name, value in arguments.items():
        key = POLICY_KEYS.get(name)
        if key is not None and isinstance(value, str | int):
            definition[key] = value
        else:
            declared[name] = value
    return declared, definition


def rr_policy(queue: str, definition: Mapping[str, PolicyValue]) -> Policy:
    """rr's policy for ``queue`` with ``definition``."""
    return Policy.of(
        policy_name(queue),
        policy_pattern(queue),
        definition,
        priority=RR_POLICY_PRIORITY,
        apply_to=POLICY_APPLY_TO,
    )


class Change(StrEnum):
    """What a difference in one setting means (table in the module docstring)."""

    UNCHANGED = "unchanged"
    PLANNED = "planned"
    LIVE = "live"
    MIGRATION = "migration"


class Holder(StrEnum):
    """Where a setting lives on the broker."""

    PROPERTY = "property"
    """``durable``: a property of the declare."""
    ARGUMENT = "argument"
    """An ``x-`` argument of the declare."""
    POLICY = "policy"
    """A key of rr's policy."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Setting:
    """One setting of a queue, classified: ``key`` (``x-delivery-limit``, ``delivery-limit``,
    ``durable``), the file's and the broker's values as shown, and why."""

    key: str
    held_by: Holder
    desired: str
    current: str
    change: Change
    reason: str


REBUILD = (
    "RabbitMQ cannot change it on an existing queue: the queue must be rebuilt (rr migrate "
    'TOPOLOGY rebuilds it with its messages: rr docs migrate-to-quorum "Migrating a queue")'
)


def show(value: object) -> str:
    """A value as the plan shows it."""
    if value is None:
        return NONE
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int | float | bytes | list | dict):
        return display_value(value)
    return str(value)


def _migration_reason(key: str, desired: str, current: str, policy_keys: Iterable[str]) -> str:
    if key == "durable":
        return f"durability: {REBUILD}"
    if key == "x-queue-type":
        return f"the queue's type: {REBUILD}"
    policy_key = POLICY_KEYS.get(key)
    if policy_key is not None and policy_key in policy_keys and desired == NONE:
        return (
            f"an argument on the broker, the policy key {policy_key} in the file: {REBUILD} "
            "(an argument stays for the queue's life)"
        )
    if policy_key is not None and current == NONE:
        return f"an argument in the file, not on the broker's queue: {REBUILD}"
    return f"an x- argument: {REBUILD}"


def classify(
    *,
    arguments: Mapping[str, FieldValue],
    durable: bool,
    policy: Policy | None,
    policy_mode: bool,
    exists: bool,
    differences: Sequence[tuple[str, str, str]] = (),
    current_policy: Policy | None = None,
    policies_read: bool = True,
) -> tuple[Setting, ...]:
    """Every setting of one queue, classified.

    Args:
        arguments: the declare's ``x-`` arguments.
        durable: the declare's durability.
        policy: rr's policy for the queue (``settings = "policy"`` and some setting to hold),
            else None.
        policy_mode: the queue's settings go in a policy (``settings = "policy"``).
        exists: the queue exists on the broker.
        differences: what the broker said differs in the declare: ``(key, file, broker)``.
        current_policy: the policy of rr's name for the queue on the broker, if any.
        policies_read: False when the broker's policies could not be read (no management
            API): a policy-held setting of an existing queue is then shown as not read.
    """
    differing = {key: (desired, current) for key, desired, current in differences}
    policy_keys = policy.keys if policy is not None else {}
    rows: list[Setting] = []
    wanted: list[tuple[str, Holder, str]] = [("durable", Holder.PROPERTY, show(durable))]
    wanted += [(key, Holder.ARGUMENT, show(value)) for key, value in sorted(arguments.items())]
    for key, holder, desired in wanted:
        if not exists:
            rows.append(_row(key, holder, desired, NONE, Change.PLANNED, "the queue is new"))
        elif key in differing:
            file_value, broker_value = differing.pop(key)
            reason = _migration_reason(key, file_value, broker_value, policy_keys)
            rows.append(_row(key, holder, file_value, broker_value, Change.MIGRATION, reason))
        else:
            rows.append(_row(key, holder, desired, desired, Change.UNCHANGED, ""))
    for key, (file_value, broker_value) in differing.items():
        # an argument the broker's queue has and the declare does not
        holder = (
            Holder.PROPERTY if key in {"durable", "exclusive", "auto_delete"} else (Holder.ARGUMENT)
        )
        reason = _migration_reason(key, file_value, broker_value, policy_keys)
        rows.append(_row(key, holder, file_value, broker_value, Change.MIGRATION, reason))
    if policy is not None:
        rows += _policy_rows(policy, exists, current_policy, policies_read)
    elif policy_mode and current_policy is not None:
        rows += [
            _dropped(key, value, f"rr's policy {current_policy.name} is deleted")
            for key, value in current_policy.definition
        ]
    elif current_policy is not None and exists:
        rows.append(
            _row(
                current_policy.name,
                Holder.POLICY,
                NONE,
                _definition_text(current_policy),
                Change.MIGRATION,
                "rr's policy holds this queue's settings on the broker, the file puts them in "
                f'x- arguments (settings = "arguments"): {REBUILD}',
            )
        )
    return tuple(rows)


def _policy_rows(
    policy: Policy, exists: bool, current: Policy | None, policies_read: bool
) -> list[Setting]:
    rows = []
    have = current.keys if current is not None else {}
    for key, value in policy.definition:
        desired = show(value)
        if not exists:
            rows.append(_row(key, Holder.POLICY, desired, NONE, Change.PLANNED, "the queue is new"))
        elif not policies_read:
            rows.append(
                _row(
                    key,
                    Holder.POLICY,
                    desired,
                    "(not read)",
                    Change.UNCHANGED,
                    "the policies were not read (no management API)",
                )
            )
        elif current is None:
            rows.append(
                _row(
                    key,
                    Holder.POLICY,
                    desired,
                    NONE,
                    Change.PLANNED,
                    f"rr's policy {policy.name} is new",
                )
            )
        elif key not in have or have[key] != value or type(have[key]) is not type(value):
            rows.append(
                _row(
                    key,
                    Holder.POLICY,
                    desired,
                    show(have.get(key)),
                    Change.LIVE,
                    f"held by rr's policy {policy.name}: the live queue takes it at once",
                )
            )
        else:
            rows.append(_row(key, Holder.POLICY, desired, desired, Change.UNCHANGED, ""))
    if current is not None and exists and policies_read:
        for key, value in current.definition:
            if key not in policy.keys:
                rows.append(_dropped(key, value, f"dropped from rr's policy {policy.name}"))
        for key, desired_value, current_value in (
            ("pattern", policy.pattern, current.pattern),
            ("priority", policy.priority, current.priority),
            ("apply-to", policy.apply_to, current.apply_to),
        ):
            if desired_value != current_value:
                rows.append(
                    _row(
                        f"policy {key}",
                        Holder.POLICY,
                        show(desired_value),
                        show(current_value),
                        Change.LIVE,
                        f"rr's policy {policy.name} was changed on the broker: put back",
                    )
                )
    return rows


def _definition_text(policy: Policy) -> str:
    return ", ".join(f"{key}={show(value)}" for key, value in policy.definition)


def _row(
    key: str, held_by: Holder, desired: str, current: str, change: Change, reason: str
) -> Setting:
    return Setting(
        key=key, held_by=held_by, desired=desired, current=current, change=change, reason=reason
    )


def _dropped(key: str, value: FieldValue, what_becomes_of_it: str) -> Setting:
    """A key of rr's policy on the broker that the file no longer has."""
    return _row(
        key,
        Holder.POLICY,
        NONE,
        show(value),
        Change.LIVE,
        f"no longer in the file: {what_becomes_of_it}",
    )


def policy_takes(policy: Policy, queue: str, queue_type: str) -> bool:
    """Whether ``policy`` applies to ``queue`` of ``queue_type`` (``classic``, ``quorum``)
    if it is the highest: its ``apply-to`` takes the type and its pattern finds the name (a
    pattern rr cannot read is taken to match: the server decides, rr warns)."""
    if policy.apply_to not in ("queues", "all", f"{queue_type}_queues"):
        return False
    try:
        return re.search(policy.pattern, queue) is not None
    except re.error:
        return True


@dataclass(frozen=True, slots=True)
class Rivals:
    """Other policies matching a queue rr holds in a policy."""

    above: tuple[Policy, ...]
    """At rr's priority or above: rr's policy would not apply (a conflict)."""
    below: tuple[Policy, ...]
    """Below it: their keys stop applying to the queue (a warning)."""


def rival_policies(queue: str, queue_type: str, policies: Iterable[Policy]) -> Rivals:
    """The policies other than rr's own for ``queue`` that match it."""
    own = policy_name(queue)
    matching = [
        policy
        for policy in policies
        if policy.name != own and policy_takes(policy, queue, queue_type)
    ]
    return Rivals(
        above=tuple(p for p in matching if p.priority >= RR_POLICY_PRIORITY),
        below=tuple(p for p in matching if p.priority < RR_POLICY_PRIORITY),
    )


def outranked(queue: str, rivals: Sequence[Policy]) -> str:
    """The conflict of a queue whose rr policy others outrank."""
    named = ", ".join(f"{p.name!r} (priority {p.priority})" for p in rivals)
    return (
        f"the policy {named} matches {queue!r} at or above the priority of rr's policy "
        f"{policy_name(queue)!r} ({RR_POLICY_PRIORITY}): RabbitMQ applies only the highest, so "
        "rr's settings would not apply; lower its priority below "
        f"{RR_POLICY_PRIORITY} or narrow its pattern"
    )


def shadowed(queue: str, rivals: Sequence[Policy]) -> str:
    """The warning for the lower policies that stop applying to a queue."""
    parts = []
    for rival in rivals:
        keys = ", ".join(key for key, _ in rival.definition) or "no keys"
        parts.append(f"{rival.name!r} (priority {rival.priority}: {keys})")
    return (
        f"rr's policy {policy_name(queue)!r} (priority {RR_POLICY_PRIORITY}) outranks "
        f"{', '.join(parts)} on queue {queue!r}: RabbitMQ does not merge policies, so those "
        "keys no longer apply to that queue"
    )
