"""Pure. Policies and operator policies as RabbitMQ applies them to a queue, per server version
(measured on 3.10.8, 4.0.5 and 4.3.6: docs/reference/topology.md, "Policies and arguments").

* Which keys a policy or an operator policy takes (:func:`refusal`), and which ``apply-to``.
* Which policy applies to a queue (:func:`applying`): of those whose pattern (a regular
  expression, not anchored) finds the queue's name and whose ``apply-to`` takes its type, the
  one of the highest priority, alone.
* What the queue does (:func:`effective_arguments`): per key, its argument, the policy's value
  and the operator policy's value resolve to one, as the table of docs/reference/topology.md says:
  the smallest for the limits, the argument for the dead-letter keys, the policies for a quorum
  queue's overflow. The result is written as the queue's arguments would be, so the emulator
  reads it as it reads a declaration (``args.validate_queue``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from rabbitctl_retry.fields import FieldValue
from rabbitctl_retry.server import Policy, PolicyValue, ServerVersion
from rabbitctl_retry.topology import effective

QueueKind = effective.QueueKind

_NUMERIC = ("message-ttl", "max-length", "max-length-bytes", "expires", "delivery-limit")

_APPLY_TO_3 = ("queues", "exchanges", "all")
_APPLY_TO_4 = (*_APPLY_TO_3, "classic_queues", "quorum_queues", "streams")


def refusal(policy: Policy, version: ServerVersion, *, operator: bool) -> str | None:
    """Why the server of ``version`` refuses ``policy`` (RabbitMQ's words), or None."""
    behaviour = version.behaviour
    keys = behaviour.operator_policy_keys if operator else behaviour.policy_keys
    apply_to = _APPLY_TO_4 if behaviour.policy_apply_to_queue_types else _APPLY_TO_3
    if policy.apply_to not in apply_to:
        allowed = ", ".join(f"'{name}'" for name in apply_to[:-1])
        return (
            f"Validation failed\n\napply-to '{policy.apply_to}' unrecognised; should be "
            f"{allowed} or '{apply_to[-1]}'\n"
        )
    try:
        re.compile(policy.pattern)
    except re.error:
        return f'Validation failed\n\n<<"{policy.pattern}">> is not a valid regular expression'
    if not policy.definition:
        return "Validation failed\n\nno policy provided\n"
    unknown = sorted(key for key, _ in policy.definition if key not in keys)
    if unknown:
        named = ", ".join(repr(key) for key in unknown)
        return f"Validation failed\n\n[{named}] are not recognised policy settings\n"
    definition = policy.keys
    for key in (*_NUMERIC, "delayed-retry-min", "delayed-retry-max"):
        value = definition.get(key)
        # RabbitMQ 4 takes a negative delivery-limit: no limit (measured on 4.0.5 and 4.3.6)
        negative_allowed = key == "delivery-limit" and behaviour.takes_unlimited_delivery_limit
        if value is not None and (
            not effective.is_int(value) or (int(value) < 0 and not negative_allowed)
        ):
            return f"Validation failed\n\n{key} must be a non-negative integer\n"
    kind = definition.get("delayed-retry-type")
    if kind not in (None, "disabled") and "delayed-retry-min" not in definition:
        return (
            "Validation failed\n\ndelayed-retry-min is required when delayed-retry-type is "
            f"{kind}\n"
        )
    return None


applying = effective.applying
"""The policy that applies to a queue (``topology/effective.py``)."""


Rule = effective.Rule


def rule(key: str, kind: QueueKind, version: ServerVersion) -> Rule:
    """How ``key``'s argument and policies resolve (``topology/effective.py``)."""
    return effective.rule(key, kind, version)


def merged(
    key: str, policy_value: PolicyValue | None, operator_value: PolicyValue | None
) -> PolicyValue | None:
    """A policy's and an operator policy's values of ``key`` as one
    (``topology/effective.py``)."""
    return effective.merged(key, policy_value, operator_value)


def effective_arguments(
    arguments: Mapping[str, FieldValue],
    kind: QueueKind,
    policy: Policy | None,
    operator_policy: Policy | None,
    version: ServerVersion,
) -> dict[str, FieldValue]:
    """The queue's arguments as the queue acts on them once ``policy`` and ``operator_policy``
    apply: the rules of ``topology/effective.py``, looked up here when called (so that the
    contract suite can show a wrong rule fails it, tests/contract/test_suite_can_fail.py)."""
    return effective.resolve(
        arguments,
        kind,
        policy,
        operator_policy,
        version,
        rule_of=lambda key, kind, version: rule(key, kind, version),
        merge=lambda key, policy_value, operator_value: merged(key, policy_value, operator_value),
    )


def queue_arguments(
    arguments: Mapping[str, FieldValue],
    name: str,
    kind: QueueKind,
    version: ServerVersion,
    policies: Mapping[bool, Mapping[str, Policy]],
) -> dict[str, FieldValue]:
    """Queue ``name``'s arguments once the policy and the operator policy that apply to it
    (of ``policies``: ``False`` the policies, ``True`` the operator policies) do."""
    return effective_arguments(
        arguments,
        kind,
        applying(policies[False].values(), name, kind, version),
        applying(policies[True].values(), name, kind, version),
        version,
    )


__all__ = ["applying", "effective_arguments", "merged", "queue_arguments", "refusal", "rule"]
