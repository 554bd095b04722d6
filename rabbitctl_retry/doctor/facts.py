"""Pure. What ``rr doctor`` read of a server (:class:`ServerFacts`, handed in by
``ops/doctor.py``) and what it finds (:class:`Finding` at a :class:`Level`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from rabbitctl_retry.fields import FieldValue
from rabbitctl_retry.server import (
    DeprecatedFeature,
    NodeResources,
    Policy,
    QueueConsumer,
    QueueHealth,
    QueueState,
    ServerVersion,
)
from rabbitctl_retry.topology.plan import (
    Observation,
    ObservationKey,
    Plan,
)


class Level(StrEnum):
    INFO = "info"
    WARNING = "warning"
    UNSAFE = "unsafe"
    ERROR = "error"
    """The server is not well now (a resource alarm, a quorum queue without a majority, a
    consumer on a wait queue): not the topology's fault, but ``rr doctor`` exits 1."""


class Unread(StrEnum):
    """Why the deprecated-features table was not read."""

    NOT_GIVEN = "not-given"
    """No management URL was given."""
    MISSING = "missing"
    """The management API has no such table: it answered 404 or 406 (RabbitMQ 3.10.8's
    answers 406 to rr, which asks for JSON; measured)."""
    UNSTATED = "unstated"
    """The management API lists the deprecated features without saying which the server
    permits (RabbitMQ 4.0.5's: only each one's phase, measured)."""
    MISMATCH = "mismatch"
    """The management API answers for another server than the one rr reached over AMQP (its
    ``/api/overview`` names another cluster or version): none of its answers is used."""
    FAILED = "failed"
    """The management API could not be reached, refused the login, or answered something
    that is not the table."""


@dataclass(frozen=True, slots=True)
class TableUnread:
    """The deprecated-features table was not read, and why."""

    why: Unread = Unread.NOT_GIVEN
    detail: str = ""
    """What went wrong (``FAILED``): the error's message, censored."""


@dataclass(frozen=True, slots=True)
class PoliciesRead:
    """What the management API said of classic queue mirroring (RabbitMQ 3.x): the vhost's
    policies, and the state of each of the topology's queues (None: the server does not hold
    it). Operator policies are not read: RabbitMQ 3.x's take the numeric limits only, never an
    ``ha-*`` key (``emulator/policies.py``), and do not displace a policy."""

    policies: tuple[Policy, ...]
    queues: tuple[tuple[str, QueueState | None], ...] = ()
    listed: tuple[tuple[str, str], ...] = ()
    """Every queue of the vhost, name and type: those outside the topology are checked too."""


@dataclass(frozen=True, slots=True)
class QueueCounts:
    """What a passive declare of a topology's queue said (AMQP: no management API needed)."""

    name: str
    messages: int
    """Its ready messages (``message_count``)."""
    consumers: int
    """``consumer_count``."""
    limit_read: bool = False
    """Whether its ``x-delivery-limit`` was read (a quorum queue of the file without a limit
    of its own, whose limit the server decides: ``ops/doctor.py``)."""
    limit_argument: FieldValue | None = None
    """That ``x-delivery-limit`` as the queue holds it (None: not set), resolved with the
    policies that apply to it when ``policies_read``."""
    policies_read: bool = False
    """Whether the policies that apply to it were read (the management API)."""


@dataclass(frozen=True, slots=True)
class ClusterRead:
    """What the management API said of the cluster's health: every node, whether it runs and
    its resource alarms (``GET /api/nodes``), and every queue of the vhost with a quorum
    queue's members online and the rate its depth changes at."""

    nodes: tuple[NodeResources, ...]
    queues: tuple[QueueHealth, ...] = ()


@dataclass(frozen=True, slots=True)
class DeclareCheck:
    """What ``rr declare`` would make of the file on this server now: the plan of the file
    expanded for its release, from the same observation (``ops/declare.py`` ``observe``: a
    passive look at each queue and exchange, a redeclare of each that exists) and the same
    decisions (``topology/plan.py``) as ``rr declare``."""

    plan: Plan
    observed: Mapping[ObservationKey, Observation]
    referenced_exchanges: tuple[str, ...] = ()
    """The exchanges the file uses but does not declare: they must exist."""


@dataclass(frozen=True, slots=True)
class ServerFacts:
    """What ``rr doctor`` read from the server."""

    version: ServerVersion
    product: str = "RabbitMQ"
    url: str | None = None
    """The URL of the node rr reached (the first of several that answered), password
    censored."""
    cluster_name: str | None = None
    """The cluster's name, as the server said when the connection opened (None: not told)."""
    delayed_message_plugin: bool | None = None
    """Whether the ``x-delayed-message`` exchange type exists (``None``: not probed)."""
    deprecated_features: tuple[DeprecatedFeature, ...] | TableUnread = field(
        default_factory=TableUnread
    )
    """The server's deprecated-features table (its management API), or why it was not read."""
    policies: PoliciesRead | TableUnread = field(default_factory=TableUnread)
    """On RabbitMQ 3.x, the vhost's policies and the topology's queues (its management API),
    or why they were not read; not read on 4.x, which refuses ``ha-*`` policy keys."""
    queue_counts: tuple[QueueCounts, ...] | None = None
    """With a topology: what a passive declare said of each of its queues the server holds
    (a queue not listed is not declared); None without a topology."""
    cluster: ClusterRead | TableUnread = field(default_factory=TableUnread)
    """The nodes' alarms and the queues' members and depth rates (the management API), or
    why they were not read."""
    declare: DeclareCheck | TableUnread | None = None
    """With a topology: what ``rr declare`` would make of it now, or why that could not be
    checked (the server refused a look: a user without the configure permission); None
    without a topology."""
    default_queue_type: str | TableUnread | None = field(default_factory=TableUnread)
    """The vhost's default queue type (the management API), None when the API states none,
    or why it was not read."""
    consumers: tuple[QueueConsumer, ...] | TableUnread = field(default_factory=TableUnread)
    """Every consumer of the vhost with its client (the management API), or why they were
    not read."""

    @property
    def table(self) -> dict[str, DeprecatedFeature] | None:
        """The deprecated-features table by name, when it was read."""
        if isinstance(self.deprecated_features, TableUnread):
            return None
        return {feature.name: feature for feature in self.deprecated_features}


@dataclass(frozen=True, slots=True)
class Finding:
    code: str
    """Stable identifier for scripts: ``quorum-default-delivery-limit``, ..."""
    level: Level
    message: str
    queue: str | None = None
