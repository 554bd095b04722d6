"""``rr topology show --live``: each queue's settings as the broker applies them, read through
the management port (``transport/management.py``): the queue's type, arguments, the policy
and the operator policy that apply to it, and what the queue does with them (the measured
rules of ``topology/effective.py``; docs/how-to/migrate-to-quorum.md, "Changing a topology"), beside
what the file gives it; and the vhost's default queue type."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rabbitctl_retry.fields import FieldValue
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
    kind: str | None = None
    """Its type on the broker (``classic``, ``quorum``, ``stream``), None when it does not
    exist."""
    file: tuple[tuple[str, FieldValue], ...] = ()
    """What the file gives it, by argument name (``x-queue-type``, ``x-delivery-limit``):
    its declare's arguments and rr's policy's keys."""

    def file_value(self, key: str) -> FieldValue:
        """The file's value of setting ``key``, None when the file does not set it."""
        return dict(self.file).get(key)

    @property
    def missing(self) -> tuple[str, ...]:
        """The settings the file gives the queue that nothing on the broker sets (no
        argument, no policy, no operator policy): all of them when it does not exist."""
        if not self.exists:
            return tuple(key for key, _ in self.file)
        found = {row.key for row in self.settings if row.effective is not None}
        return tuple(key for key, _ in self.file if key not in found)


@dataclass(frozen=True, slots=True)
class Live:
    """``rr topology show --live``: each queue of the file, and the vhost's default queue
    type as the management API states it (None: it states none)."""

    queues: tuple[LiveQueue, ...]
    default_queue_type: str | None = None


async def live_topology(
    desired: Desired, *, management_url: str, vhost: str, management: ManagementConnector
) -> Live:
    """:func:`live_settings`, and the vhost's default queue type."""
    queues = await live_settings(
        desired, management_url=management_url, vhost=vhost, management=management
    )
    default = await management(management_url, vhost=vhost).vhost_default_queue_type()
    return Live(queues, default)


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
        file = tuple(sorted(queue.settings_by_argument().items()))
        state = await api.queue_state(queue.name)
        if state is None:
            found.append(LiveQueue(name=queue.name, exists=False, file=file))
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
                settings=with_type(
                    effective_rows(arguments, kind, policy, operator_policy, version),
                    state.kind,
                ),
                kind=state.kind,
                file=file,
            )
        )
    return tuple(found)


def with_type(rows: tuple[EffectiveSetting, ...], kind: str) -> tuple[EffectiveSetting, ...]:
    """``rows`` with the queue's type (``kind``, as the API states it) as the effective
    ``x-queue-type``, added when its arguments do not hold one (a queue declared without it
    on a server that does not write it in: RabbitMQ 3.10)."""
    if any(row.key == "x-queue-type" for row in rows):
        return tuple(
            EffectiveSetting(
                key=row.key,
                argument=row.argument,
                policy=row.policy,
                operator_policy=row.operator_policy,
                effective=kind,
            )
            if row.key == "x-queue-type"
            else row
            for row in rows
        )
    typed = EffectiveSetting(
        key="x-queue-type", argument=None, policy=None, operator_policy=None, effective=kind
    )
    return tuple(sorted((*rows, typed), key=lambda row: row.key))


def _named(policies: dict[str, Policy], name: str | None) -> Policy | None:
    return None if name is None else policies.get(name)


__all__: Sequence[str] = ["Live", "LiveQueue", "live_settings", "live_topology", "with_type"]
