"""Pure. Classic queue mirroring on RabbitMQ 3.x, gone in 4.0.

RabbitMQ 4.0 removed classic queue mirroring (the deprecated feature ``classic_queue_mirroring``
is removed): a policy with an ``ha-*`` key is refused (4.0.5 measured: "[{<<"ha-mode">>,
<<"all">>}] are not recognised policy settings"), so the queues a 3.x ``ha-mode`` policy
mirrors keep one copy after the upgrade. On 3.x, with the management API, rr reads the
vhost's policies and the topology's queues (:class:`PoliciesRead`) and names each classic
queue whose applying policy mirrors it (:func:`mirroring_findings`).
"""

from __future__ import annotations

from rabbitctl_retry.doctor.facts import Finding, Level, ServerFacts, TableUnread, Unread
from rabbitctl_retry.doctor.versions import is_quorum
from rabbitctl_retry.server import (
    Policy,
)
from rabbitctl_retry.topology.effective import applying
from rabbitctl_retry.topology.expand import Desired
from rabbitctl_retry.topology.settings import rival_policies, shadowed

HA_MODE = "ha-mode"
"""The policy key that mirrors a classic queue on RabbitMQ 3.x; 4.0 refuses every ``ha-*``
key."""

_AFTER_4_0 = (
    "RabbitMQ 4.0 removed classic queue mirroring (it refuses ha-* policy keys; the "
    "deprecated feature classic_queue_mirroring is removed), so after the upgrade"
)
_MOVE = (
    'Move it to a quorum queue before the upgrade: type = "quorum" (with replicas) in the '
    "topology, then rr migrate TOPOLOGY rebuilds it with its messages (rr docs "
    'migrate-to-quorum "Migrating a queue")'
)


def _mirrors(policy: Policy | None) -> bool:
    return policy is not None and HA_MODE in policy.keys


def _ha_text(policy: Policy) -> str:
    return ", ".join(
        f"{key} = {value!r}" for key, value in policy.definition if key.startswith("ha-")
    )


def _mirrored(queue: str, said: str, policy: Policy) -> Finding:
    """``classic-mirroring``: ``queue`` (``said``: what it is, ending in a verb) is mirrored
    by ``policy``, which 4.0 ignores."""
    return Finding(
        "classic-mirroring",
        Level.WARNING,
        f"{queue!r} {said} mirrored by the policy {policy.name!r} ({_ha_text(policy)}): "
        f"{_AFTER_4_0} {queue!r} has one copy, on one node: losing that node loses its "
        f"messages. {_MOVE}",
        queue,
    )


def _mirroring_not_checked(unread: TableUnread) -> Finding:
    what = (
        "which queues classic queue mirroring (ha-mode policies) replicates, which RabbitMQ "
        "4.0 removes"
    )
    if unread.why is Unread.NOT_GIVEN:
        return Finding(
            "classic-mirroring-not-checked",
            Level.INFO,
            f"not checked: {what}: give --management-url (or $RR_MANAGEMENT_URL, or [broker] "
            "management_url) to read the vhost's policies",
        )
    if unread.why is Unread.MISMATCH:
        return Finding(
            "classic-mirroring-not-checked",
            Level.INFO,
            f"not checked: {what}: the management API answers for another server",
        )
    return Finding(
        "classic-mirroring-not-checked",
        Level.WARNING,
        f"not checked: {what}: {unread.detail}",
    )


def mirroring_findings(desired: Desired | None, facts: ServerFacts) -> list[Finding]:
    """RabbitMQ 3.x: each ``ha-mode`` policy of the vhost (``classic-mirroring-policy``,
    info), each classic queue of the topology it mirrors (``classic-mirroring``, a warning:
    safe on this server, but one copy after an upgrade to 4.0), and each queue of the topology
    whose rr policy outranks one (``classic-mirroring-shadowed``, a warning: it does not
    mirror, the warning ``rr declare``'s plan gives). Nothing on 4.x."""
    if not facts.version.behaviour.mirrors_classic_queues:
        return []
    read = facts.policies
    if isinstance(read, TableUnread):
        return [_mirroring_not_checked(read)]
    findings = [
        Finding(
            "classic-mirroring-policy",
            Level.INFO,
            f"the policy {policy.name!r} (pattern {policy.pattern!r}, priority "
            f"{policy.priority}, apply-to {policy.apply_to}) mirrors the classic queues it "
            f"applies to ({_ha_text(policy)}): {_AFTER_4_0} they keep one copy, on one node",
        )
        for policy in read.policies
        if _mirrors(policy)
    ]
    in_file = {queue.name for queue in desired.queues} if desired is not None else set()
    for name, kind in read.listed:
        if name in in_file or kind != "classic":
            continue
        policy = applying(read.policies, name, "classic", facts.version)
        if policy is not None and _mirrors(policy):
            where = ", not in the topology" if desired is not None else ""
            said = f"(a classic queue of the vhost{where}) is"
            findings.append(_mirrored(name, said, policy))
    if desired is None:
        return findings
    states = dict(read.queues)
    for queue in desired.queues:
        # The policy that applies is the pure rule's (topology/effective.py), not the queue's
        # ``policy`` in the API: that one lags a queue's declare by seconds (None meanwhile;
        # measured on 3.10.8). A queue rr has yet to declare takes rr's policy for it too.
        state = states.get(queue.name)
        if state is not None:
            if state.kind != "classic":
                continue
            candidates = read.policies
        else:
            if is_quorum(queue):
                continue
            candidates = (*read.policies, *((queue.policy,) if queue.policy else ()))
        policy = applying(candidates, queue.name, "classic", facts.version)
        if policy is not None and _mirrors(policy):
            findings.append(_mirrored(queue.name, "is a classic queue", policy))
        if queue.policy is not None:
            ha_rivals = [
                rival
                for rival in rival_policies(queue.name, "classic", read.policies).below
                if _mirrors(rival)
            ]
            if ha_rivals:
                findings.append(
                    Finding(
                        "classic-mirroring-shadowed",
                        Level.WARNING,
                        f"{shadowed(queue.name, ha_rivals)}: {queue.name!r} "
                        '(settings = "policy") is not mirrored once rr\'s policy is put '
                        "(rr declare's plan warns of it too). Move it to a quorum queue, or "
                        'keep its settings in arguments (settings = "arguments") while it '
                        "must stay mirrored",
                        queue.name,
                    )
                )
    return findings
