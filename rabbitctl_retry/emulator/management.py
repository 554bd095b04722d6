"""The management port on the emulated server: :class:`EmulatedManagementApi`.

It implements :class:`~rabbitctl_retry.transport.management.ManagementApi` and answers what
RabbitMQ's management API answers for a one-node server of the emulator's version, for what
rr reads of it: the overview (version, product, cluster name), the nodes, where a queue lives,
the deprecated-features table, and the policies it sets (applied by the emulator as the server
applies them: emulator/policies.py) (docs/testing.md, "The management API"). The contract suite
runs the same scenario on RabbitMQ 4.3.6's API and on this twin
(``tests/contract/test_management_api.py``).

Made by ``Emulator.management(url, vhost=...)`` (a
:class:`~rabbitctl_retry.transport.management.ManagementConnector`); the URL is only shown,
never reached.
"""

from __future__ import annotations

from typing import Protocol

from rabbitctl_retry.emulator.snapshots import QueueSnapshot
from rabbitctl_retry.errors import censor_url
from rabbitctl_retry.server import (
    DeprecatedFeature,
    Placement,
    Policy,
    QueueActivity,
    QueueState,
    ServerIdentity,
    ServerVersion,
    Unstated,
)
from rabbitctl_retry.topology.effective import QueueKind, applying

NODE = "rabbit@emulator"
"""The emulated server's one node; also its cluster's name (a cluster named by RabbitMQ's
default takes a node's name)."""

PRODUCT = "RabbitMQ"

FEATURES_4_3: tuple[DeprecatedFeature, ...] = (
    DeprecatedFeature("amqp_address_v1", permitted=False, phase="denied_by_default"),
    DeprecatedFeature("amqp_filter_set_bug", permitted=False, phase="denied_by_default"),
    DeprecatedFeature("classic_queue_mirroring", permitted=False, phase="removed"),
    DeprecatedFeature("global_qos", permitted=False, phase="denied_by_default"),
    DeprecatedFeature(
        "management_metrics_collection", permitted=True, phase="permitted_by_default"
    ),
    DeprecatedFeature("queue_master_locator", permitted=False, phase="denied_by_default"),
    DeprecatedFeature("ram_node_type", permitted=False, phase="removed"),
    DeprecatedFeature("transient_nonexcl_queues", permitted=True, phase="permitted_by_default"),
)
"""RabbitMQ 4.3.6's table with its default configuration and the management plugin enabled
(measured: ``GET /api/deprecated-features``)."""

FEATURES_4_0 = Unstated(
    (
        "amqp_address_v1",
        "classic_queue_mirroring",
        "global_qos",
        "management_metrics_collection",
        "queue_master_locator",
        "ram_node_type",
        "transient_nonexcl_queues",
    )
)
"""RabbitMQ 4.0.5's: the features its ``rabbitmqctl list_deprecated_features`` lists
(measured) and ``management_metrics_collection``, which its management agent declares, without
their state."""


def deprecated_features_of(
    version: ServerVersion,
) -> tuple[DeprecatedFeature, ...] | Unstated | None:
    """What the management API of ``version`` answers for its deprecated features: 3.10.8's
    has no such table (406 to rr), 4.0.5's lists them without their state, 4.3.6's with
    it; a version between two of them answers as the older one."""
    if version.major < 4:
        return None
    if version.release < (4, 3, 0):
        return FEATURES_4_0
    return FEATURES_4_3


class Emulated(Protocol):
    """What the twin reads of the emulator that made it
    (:class:`~rabbitctl_retry.emulator.emulator.Emulator`); a protocol, so that this module does not
    import the module that imports it."""

    server_version: ServerVersion

    def has_queue(self, name: str) -> bool: ...

    def queue_names(self) -> list[str]: ...

    def queue(self, name: str) -> QueueSnapshot: ...

    def put_policy(self, policy: Policy, *, operator: bool = False) -> None: ...

    def delete_policy(self, name: str, *, operator: bool = False) -> None: ...

    def policies(self, *, operator: bool = False) -> tuple[Policy, ...]: ...

    def publish_rate(self, exchange: str) -> float | None: ...

    def consumer_prefetches(self, queue: str) -> tuple[int, ...]: ...


class EmulatedManagementApi:
    """The management API of an emulated one-node server. The emulator has one virtual host,
    which its connections reach whatever their URL names: so ``vhost`` names it too."""

    def __init__(self, emulator: Emulated, url: str, *, vhost: str) -> None:
        self._emulator = emulator
        self._shown = censor_url(url)
        self.vhost = vhost

    @property
    def shown(self) -> str:
        return self._shown

    async def overview(self) -> ServerIdentity:
        return ServerIdentity(
            version=self._emulator.server_version, product=PRODUCT, cluster_name=NODE
        )

    async def nodes(self) -> tuple[str, ...]:
        return (NODE,)

    async def placement(self, queue: str) -> Placement | None:
        """Where ``queue`` lives: a classic queue on the node, a quorum queue (or a stream)
        led by it, its only member; None for a queue the emulator does not hold."""
        if not self._emulator.has_queue(queue):
            return None
        return Placement(leader=NODE, members=(NODE,))

    async def queues(self) -> tuple[tuple[str, str], ...]:
        """Every queue the emulator holds, with its kind, sorted by name."""
        return tuple(
            (name, self._emulator.queue(name).kind) for name in self._emulator.queue_names()
        )

    async def queue_activity(self) -> tuple[QueueActivity, ...]:
        """Every queue the emulator holds with its ready and unacked messages and its
        consumers' prefetch counts, as they are now (the server's statistics lag by up to
        5 s); the emulator keeps no per-queue rates: both are 0.0 (docs/testing.md, "The
        management API")."""
        found = []
        for name in self._emulator.queue_names():
            snapshot = self._emulator.queue(name)
            found.append(
                QueueActivity(
                    name=name,
                    kind=snapshot.kind,
                    ready=snapshot.ready,
                    unacked=snapshot.unacked,
                    prefetches=self._emulator.consumer_prefetches(name),
                    publish_per_s=0.0,
                    deliver_per_s=0.0,
                )
            )
        return tuple(found)

    async def queue_state(self, queue: str) -> QueueState | None:
        """``queue``'s kind, arguments and the policies that apply to it (the rules of
        ``topology/effective.py``, as the emulator applies them); None for a queue the
        emulator does not hold."""
        if not self._emulator.has_queue(queue):
            return None
        snapshot = self._emulator.queue(queue)
        version = self._emulator.server_version
        kind: QueueKind = "quorum" if snapshot.kind == "quorum" else "classic"
        policy, operator_policy = (
            applying(self._emulator.policies(operator=operator), queue, kind, version)
            for operator in (False, True)
        )
        return QueueState(
            kind=snapshot.kind,
            arguments=dict(snapshot.arguments),
            policy=None if policy is None else policy.name,
            operator_policy=None if operator_policy is None else operator_policy.name,
        )

    async def deprecated_features(self) -> tuple[DeprecatedFeature, ...] | Unstated | None:
        return deprecated_features_of(self._emulator.server_version)

    async def policies(self, *, operator: bool = False) -> tuple[Policy, ...]:
        return self._emulator.policies(operator=operator)

    async def put_policy(self, policy: Policy, *, operator: bool = False) -> None:
        """Set ``policy``: the emulator applies it as the server of its version does
        (emulator/policies.py), to the existing queues at once."""
        self._emulator.put_policy(policy, operator=operator)

    async def delete_policy(self, name: str, *, operator: bool = False) -> None:
        self._emulator.delete_policy(name, operator=operator)

    async def publish_rate(self, exchange: str) -> float | None:
        """The emulator's publishes into ``exchange`` over its last 5 virtual seconds."""
        return self._emulator.publish_rate(exchange)
