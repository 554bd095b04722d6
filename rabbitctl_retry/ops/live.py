"""``rr topology show --live``: each queue's settings as the broker applies them, read through
the management port (``transport/management.py``): the queue's arguments, the policy and the
operator policy that apply to it, and what the queue does with them (the measured rules of
``topology/effective.py``; docs/topology.md, "Changing a topology")."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rabbitctl_retry.server import Policy
from rabbitctl_retry.topology.effective import EffectiveSetting, QueueKind, effective_rows
from rabbitctl_retry.topology.expand import Desired
from rabbitctl_retry.transport.management import ManagementConnector
from rabbitctl_retry.urls import parse_management_url


@dataclass(frozen=True, slots=True, kw_only=True)
class LiveQueue:
    """One queue of the file on the broker: absent (``exists`` false), or its settings."""

    name: str
    exists: bool
    policy: str | None = None
    """The policy that applies to it (rr's own, or another), by name."""
    operator_policy: str | None = None
    settings: tuple[EffectiveSetting, ...] = ()


async def live_settings(
    desired: Desired, *, management_url: str, vhost: str, management: ManagementConnector
) -> tuple[LiveQueue, ...]:
    """Each queue of ``desired`` as the management API of ``management_url`` states it in
    ``vhost``, its settings resolved as the server of its version resolves them."""
    parse_management_url(management_url)
    api = management(management_url, vhost=vhost)
    version = (await api.overview()).version
    policies = {p.name: p for p in await api.policies()}
    operator_policies = {p.name: p for p in await api.policies(operator=True)}
    found = []
    for queue in desired.queues:
        state = await api.queue_state(queue.name)
        if state is None:
            found.append(LiveQueue(name=queue.name, exists=False))
            continue
        kind: QueueKind = "quorum" if state.kind == "quorum" else "classic"
        policy = _named(policies, state.policy)
        operator_policy = _named(operator_policies, state.operator_policy)
        arguments = {
            key: value
            for key, value in state.arguments.items()
            if isinstance(value, str | int | float | bool)
        }
        found.append(
            LiveQueue(
                name=queue.name,
                exists=True,
                policy=state.policy,
                operator_policy=state.operator_policy,
                settings=effective_rows(arguments, kind, policy, operator_policy, version),
            )
        )
    return tuple(found)


def _named(policies: dict[str, Policy], name: str | None) -> Policy | None:
    return None if name is None else policies.get(name)


__all__: Sequence[str] = ["LiveQueue", "live_settings"]
