"""Pure. What a queue does when its arguments, a policy and an operator policy set one key:
the rules measured on RabbitMQ 3.10.8, 4.0.5 and 4.3.6 (docs/reference/topology.md, "Policies and
arguments"), shared by the emulator (``emulator/policies.py`` applies them) and by rr's own
display of each setting's effective value (``rr topology show --live``).

* Which policy applies to a queue (:func:`applying`): of those whose pattern (a regular
  expression, not anchored) finds the queue's name and whose ``apply-to`` takes its type, the
  one of the highest priority, alone.
* How a key resolves (:func:`rule`, :func:`merged`, :func:`resolve`): the smallest for the
  limits, the argument for the dead-letter keys, the policies for a quorum queue's overflow.
* Every setting of a queue, where each comes from and what applies (:func:`effective_rows`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from rabbitctl_retry.fields import FieldValue
from rabbitctl_retry.server import Policy, PolicyValue, ServerVersion

QueueKind = Literal["classic", "quorum"]
Rule = Literal["smallest", "argument", "policy"]


def applies_to(policy: Policy, kind: QueueKind, version: ServerVersion) -> bool:
    """Whether ``policy``'s ``apply-to`` takes a queue of ``kind``."""
    if policy.apply_to in ("queues", "all"):
        return True
    return version.behaviour.policy_apply_to_queue_types and policy.apply_to == f"{kind}_queues"


def applying(
    policies: Iterable[Policy], name: str, kind: QueueKind, version: ServerVersion
) -> Policy | None:
    """The policy that applies to the queue ``name`` of ``kind``: the matching one of the
    highest priority (of equal ones, the first by name), or None."""
    found = [
        policy
        for policy in policies
        if applies_to(policy, kind, version) and _finds(policy.pattern, name)
    ]
    if not found:
        return None
    return min(found, key=lambda policy: (-policy.priority, policy.name))


def _finds(pattern: str, name: str) -> bool:
    try:
        return re.search(pattern, name) is not None
    except re.error:
        return False


def rule(key: str, kind: QueueKind, version: ServerVersion) -> Rule:
    """How ``key``'s argument and policies resolve on a queue of ``kind`` (the table of
    docs/reference/topology.md, "Policies and arguments")."""
    if key == "overflow":
        return "policy" if kind == "quorum" else "argument"
    if key in ("dead-letter-exchange", "dead-letter-routing-key", "dead-letter-strategy"):
        return "argument"
    if key == "delayed-retry-type":
        return "policy"
    if key == "expires" and kind == "quorum" and version.behaviour.quorum_expires_from_policy:
        return "policy"
    return "smallest"


def merged(
    key: str, policy_value: PolicyValue | None, operator_value: PolicyValue | None
) -> PolicyValue | None:
    """A policy's and an operator policy's values of ``key`` as one: the smaller number (the
    larger for 4.3's ``delayed-retry-min``), else the operator policy's value."""
    if policy_value is None:
        return operator_value
    if operator_value is None:
        return policy_value
    if is_int(policy_value) and is_int(operator_value):
        if key == "delayed-retry-min":
            return max(int(policy_value), int(operator_value))
        if key == "delivery-limit":
            # only RabbitMQ 4 takes a negative delivery-limit in a policy: no limit
            return smallest_limit(int(policy_value), int(operator_value), unlimited_below_0=True)
        return min(int(policy_value), int(operator_value))
    return operator_value


def smallest_limit(first: int, second: int, *, unlimited_below_0: bool) -> int:
    """The limit that applies of two: the smaller; on RabbitMQ 4 a negative delivery limit is
    none at all, so the other applies (measured on 4.0.5 and 4.3.6: an argument of -1 under a
    policy of 3 dead-letters at the 4th return; an argument of 5 under a policy of -1 at the
    6th). RabbitMQ 3.10 compares the count with a negative one as with any other."""
    if unlimited_below_0:
        if first < 0:
            return second
        if second < 0:
            return first
    return min(first, second)


RuleOf = Callable[[str, QueueKind, ServerVersion], Rule]
Merge = Callable[[str, PolicyValue | None, PolicyValue | None], PolicyValue | None]


def resolve(
    arguments: Mapping[str, FieldValue],
    kind: QueueKind,
    policy: Policy | None,
    operator_policy: Policy | None,
    version: ServerVersion,
    *,
    rule_of: RuleOf = rule,
    merge: Merge = merged,
) -> dict[str, FieldValue]:
    """The queue's arguments as the queue acts on them once ``policy`` and ``operator_policy``
    apply (either may be None): each key of a policy resolved with the argument by
    ``rule_of`` (:func:`rule`), the two policies' values by ``merge`` (:func:`merged`)."""
    result: dict[str, FieldValue] = dict(arguments)
    policy_keys = policy.keys if policy is not None else {}
    operator_keys = operator_policy.keys if operator_policy is not None else {}
    for key in sorted({*policy_keys, *operator_keys}):
        value = merge(key, policy_keys.get(key), operator_keys.get(key))
        if value is None:
            continue
        name = f"x-{key}"
        argument = arguments.get(name)
        chosen: FieldValue = value
        if argument is not None:
            match rule_of(key, kind, version):
                case "argument":
                    chosen = argument
                case "smallest" if isinstance(argument, int) and is_int(argument):
                    chosen = (
                        smallest_limit(
                            argument,
                            int(value),
                            unlimited_below_0=key == "delivery-limit"
                            and version.behaviour.takes_unlimited_delivery_limit,
                        )
                        if is_int(value)
                        else argument
                    )
                case _:
                    chosen = value
        result[name] = chosen
    if "x-dead-letter-routing-key" in result and "x-dead-letter-exchange" not in result:
        del result["x-dead-letter-routing-key"]  # a routing key without an exchange: no use
    return result


def is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True, slots=True, kw_only=True)
class EffectiveSetting:
    """One setting of a live queue: what its argument, the policy and the operator policy that
    apply to it say, and what the queue does (``effective``; None: not set at all)."""

    key: str
    """The argument's name: ``x-delivery-limit``."""
    argument: FieldValue
    policy: PolicyValue | None
    operator_policy: PolicyValue | None
    effective: FieldValue


def effective_rows(
    arguments: Mapping[str, FieldValue],
    kind: QueueKind,
    policy: Policy | None,
    operator_policy: Policy | None,
    version: ServerVersion,
) -> tuple[EffectiveSetting, ...]:
    """Every setting of a queue (each argument, each key of the policies), sorted by name."""
    effective = resolve(arguments, kind, policy, operator_policy, version)
    policy_keys = policy.keys if policy is not None else {}
    operator_keys = operator_policy.keys if operator_policy is not None else {}
    names = {*arguments, *(f"x-{key}" for key in (*policy_keys, *operator_keys))}
    return tuple(
        EffectiveSetting(
            key=name,
            argument=arguments.get(name),
            policy=policy_keys.get(name.removeprefix("x-")),
            operator_policy=operator_keys.get(name.removeprefix("x-")),
            effective=effective.get(name),
        )
        for name in sorted(names)
    )
