"""The management port on the emulated server: :class:`EmulatedManagementApi`.

It implements :class:`~rabbitctl_retry.transport.management.ManagementApi` and answers what
RabbitMQ's management API answers for a one-node server of the emulator's version, for what
rr reads of it: the overview (version, product, cluster name), the nodes and their resource
alarms, where a queue lives and a quorum queue's members online (:class:`EmulatedCluster`:
the cluster a test makes the twin state), the deprecated-features table, and the policies it
sets (applied by the emulator as the server applies them: emulator/policies.py)
(docs/reference/testing.md, "The management API"). The contract suite
runs the same scenario on RabbitMQ 4.3.6's API and on this twin
(``tests/contract/test_management_api.py``).

Made by ``Emulator.management(url, vhost=...)`` (a
:class:`~rabbitctl_retry.transport.management.ManagementConnector`); the URL is only shown,
never reached.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Protocol

from rabbitctl_retry.emulator.snapshots import QueueSnapshot
from rabbitctl_retry.errors import censor_url
from rabbitctl_retry.server import (
    DeprecatedFeature,
    NodeResources,
    Placement,
    Policy,
    QueueActivity,
    QueueConsumer,
    QueueHealth,
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
    table = version.behaviour.deprecated_features_table
    if table == "none":
        return None
    return FEATURES_4_0 if table == "names" else FEATURES_4_3


Resource = Literal["memory", "disk"]
"""A resource a node raises an alarm for: ``mem_alarm``, ``disk_free_alarm``."""

MEM_LIMIT_BYTES = 1_000_000_000
MEM_USED_BYTES = 100_000_000
DISK_FREE_LIMIT_BYTES = 50_000_000
"""RabbitMQ's default ``disk_free_limit`` (measured on 3.10.8 and 4.3.6)."""
DISK_FREE_BYTES = 10_000_000_000


@dataclass
class EmulatedCluster:
    """What the twin states of the cluster around the emulated node, for ``rr doctor``'s
    checks (docs/reference/testing.md, "The management API"): more nodes, some stopped, resource
    alarms, the rate a queue's depth grows at. Only the twin's answers change: the emulator
    itself stays one node that runs, without alarms (it blocks no publisher)."""

    names: list[str] = field(default_factory=lambda: [NODE])
    stopped: set[str] = field(default_factory=set)
    alarms: set[tuple[str, Resource]] = field(default_factory=set)
    depth_rates: dict[str, float] = field(default_factory=dict)
    """A queue's ``messages_details.rate`` as the twin states it (else 0.0: the emulator
    samples no depth)."""

    def add_nodes(self, *names: str) -> None:
        """More nodes in ``/api/nodes``; a quorum queue gets a member on each, up to its
        ``x-quorum-initial-group-size``, the emulated node first."""
        self.names.extend(name for name in names if name not in self.names)

    def stop(self, name: str) -> None:
        """``name`` no longer runs: not ``running``, no alarms stated, its members offline."""
        if name == NODE:
            raise ValueError(f"{NODE} is the node the emulator runs: it cannot stop")
        if name not in self.names:
            raise ValueError(f"no node {name!r}: add it first")
        self.stopped.add(name)

    def start(self, name: str) -> None:
        self.stopped.discard(name)

    def raise_alarm(self, resource: Resource, node: str = NODE) -> None:
        """``node`` states ``mem_alarm`` (memory used above its limit) or
        ``disk_free_alarm`` (free disk below its limit) until :meth:`clear_alarm`."""
        self.alarms.add((node, resource))

    def clear_alarm(self, resource: Resource, node: str = NODE) -> None:
        self.alarms.discard((node, resource))

    def resources(self, name: str) -> NodeResources:
        if name in self.stopped:
            return NodeResources(name, running=False)
        memory, disk = ((name, resource) in self.alarms for resource in ("memory", "disk"))
        return NodeResources(
            name,
            running=True,
            mem_alarm=memory,
            disk_free_alarm=disk,
            mem_used_bytes=MEM_LIMIT_BYTES + MEM_USED_BYTES if memory else MEM_USED_BYTES,
            mem_limit_bytes=MEM_LIMIT_BYTES,
            disk_free_bytes=DISK_FREE_LIMIT_BYTES // 2 if disk else DISK_FREE_BYTES,
            disk_free_limit_bytes=DISK_FREE_LIMIT_BYTES,
        )

    def members(self, group_size: object) -> tuple[str, ...]:
        """A quorum queue's members: a node each, up to ``group_size`` (an integer
        ``x-quorum-initial-group-size``; else every node), sorted."""
        size = len(self.names)
        if isinstance(group_size, int) and not isinstance(group_size, bool) and group_size > 0:
            size = min(size, group_size)
        return tuple(sorted(self.names[:size]))


class Emulated(Protocol):
    """What the twin reads of the emulator that made it
    (:class:`~rabbitctl_retry.emulator.emulator.Emulator`); a protocol, so that this module does not
    import the module that imports it."""

    server_version: ServerVersion
    cluster: EmulatedCluster

    @property
    def default_queue_type(self) -> str | None: ...

    def queue_consumers(self) -> tuple[QueueConsumer, ...]: ...

    def has_queue(self, name: str) -> bool: ...

    def queue_names(self) -> list[str]: ...

    def queue(self, name: str) -> QueueSnapshot: ...

    def message_bytes(self, queue: str) -> int: ...

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
        return tuple(sorted(self._emulator.cluster.names))

    async def node_resources(self) -> tuple[NodeResources, ...]:
        """Every node of :class:`EmulatedCluster`, whether it runs, and its alarms."""
        cluster = self._emulator.cluster
        return tuple(cluster.resources(name) for name in sorted(cluster.names))

    async def placement(self, queue: str) -> Placement | None:
        """Where ``queue`` lives: a classic queue on the node, a quorum queue (or a stream)
        led by it, with a member on each node of :class:`EmulatedCluster` up to its
        ``x-quorum-initial-group-size``; None for a queue the emulator does not hold."""
        if not self._emulator.has_queue(queue):
            return None
        snapshot = self._emulator.queue(queue)
        if snapshot.kind != "quorum":
            return Placement(leader=NODE, members=(NODE,))
        members = self._emulator.cluster.members(
            snapshot.arguments.get("x-quorum-initial-group-size")
        )
        return Placement(leader=NODE, members=members)

    async def queue_health(self) -> tuple[QueueHealth, ...]:
        """Every queue the emulator holds: a quorum queue's members (:meth:`placement`) and
        the ones on a node that runs; the rate of its depth as
        :attr:`EmulatedCluster.depth_rates` states it, else 0.0."""
        cluster = self._emulator.cluster
        found = []
        for name in self._emulator.queue_names():
            snapshot = self._emulator.queue(name)
            members: tuple[str, ...] | None = None
            online: tuple[str, ...] | None = None
            if snapshot.kind == "quorum":
                members = cluster.members(snapshot.arguments.get("x-quorum-initial-group-size"))
                online = tuple(node for node in members if node not in cluster.stopped)
            found.append(
                QueueHealth(
                    name=name,
                    kind=snapshot.kind,
                    members=members,
                    online=online,
                    messages_per_s=cluster.depth_rates.get(name, 0.0),
                )
            )
        return tuple(found)

    async def queues(self) -> tuple[tuple[str, str], ...]:
        """Every queue the emulator holds, with its kind, sorted by name."""
        return tuple(
            (name, self._emulator.queue(name).kind) for name in self._emulator.queue_names()
        )

    async def queue_activity(self) -> tuple[QueueActivity, ...]:
        """Every queue the emulator holds with its ready and unacked messages and its
        consumers' prefetch counts, as they are now (the server's statistics lag by up to
        5 s); the emulator keeps no per-queue rates: both are 0.0 (docs/reference/testing.md, "The
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

    async def consumers(self) -> tuple[QueueConsumer, ...]:
        """Every consumer of the emulator's queues, with what its connection's client said
        of itself (rr's own client's properties unless the test connected with others:
        ``Emulator.connect(client_properties=...)``), sorted by queue and tag."""
        return tuple(
            sorted(self._emulator.queue_consumers(), key=lambda found: (found.queue, found.tag))
        )

    async def vhost_default_queue_type(self) -> str | None:
        """The emulated vhost's default queue type when it was made with one; else what
        RabbitMQ 4.0.5's and 4.3.6's APIs state for a vhost made without one, ``classic``
        (measured), and none on 3.10, whose declares compare a queue's type with none (3.10.8's
        API states ``undefined``, which rr reads as none: measured)."""
        given = self._emulator.default_queue_type
        if given is not None:
            return given
        return self._emulator.server_version.behaviour.vhost_default_queue_type

    async def queue_state(self, queue: str) -> QueueState | None:
        """``queue``'s kind, arguments and the policies that apply to it (the rules of
        ``topology/effective.py``, as the emulator applies them) and its messages' bodies in
        bytes, ready and unacknowledged (at once: the server's lag is not emulated); None for
        a queue the emulator does not hold."""
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
            message_bytes=self._emulator.message_bytes(queue),
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
