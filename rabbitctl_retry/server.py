"""Pure. What rr knows of a RabbitMQ server, as plain values: which server it is, what it does
by default, which deprecated features it permits, and which of its nodes hold a queue.

The pure core (``topology/``, ``doctor/``), the transport (its AMQP adapter reads the version
and identity, its management API the rest) and the emulator (which plays a server of a given
version) share these values, so none of them imports another for them
(docs/architecture.md, "Layers").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from rabbitctl_retry.releases import (
    QUORUM_DEFAULT_DELIVERY_LIMIT as QUORUM_DEFAULT_DELIVERY_LIMIT,  # the rows' own constant
)
from rabbitctl_retry.releases import ServerRelease, release_of

# --- which server -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ServerVersion:
    """The broker's version, read from the connection's server properties."""

    major: int
    minor: int
    patch: int = 0

    @classmethod
    def parse(cls, text: str) -> ServerVersion:
        """``"3.10.8"`` -> ``ServerVersion(3, 10, 8)``; unknown parts are 0."""
        numbers: list[int] = []
        for part in text.split(".")[:3]:
            digits = ""
            for char in part:
                if not char.isdigit():
                    break
                digits += char
            numbers.append(int(digits) if digits else 0)
        while len(numbers) < 3:
            numbers.append(0)
        return cls(numbers[0], numbers[1], numbers[2])

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}.{self.patch}"

    @property
    def release(self) -> tuple[int, int, int]:
        """``(major, minor, patch)``, as the pure core takes a version."""
        return self.major, self.minor, self.patch

    @property
    def behaviour(self) -> ServerRelease:
        """What this server does where releases differ: the row of its release line
        (``releases.py``, :func:`~rabbitctl_retry.releases.release_of`)."""
        return release_of(self.release)

    @property
    def quorum_default_delivery_limit(self) -> int | None:
        """The ``x-delivery-limit`` this server gives a quorum queue declared without one
        (:data:`QUORUM_DEFAULT_DELIVERY_LIMIT` from RabbitMQ 4.0), or None (no limit)."""
        return self.behaviour.default_quorum_delivery_limit

    @property
    def nack_returns_uncounted(self) -> bool:
        """Whether a quorum queue takes a message back from ``basic.nack(requeue=true)``
        without counting a delivery: from RabbitMQ 4.3 (only ``x-acquired-count`` grows).
        Older servers count it, as they count a channel's close (docs/reference/dlq.md, "Inspecting
        without taking")."""
        return not self.behaviour.nack_requeue_counts_delivery

    @property
    def takes_unlimited_delivery_limit(self) -> bool:
        """Whether ``x-delivery-limit = -1`` means no limit: from RabbitMQ 4.0. RabbitMQ 3.10
        accepts -1 and drops (or dead-letters) every message at its first return (measured
        on 3.10.8), so rr never declares it there (docs/reference/topology.md, "[queues.NAME]")."""
        return self.behaviour.takes_unlimited_delivery_limit


@dataclass(frozen=True, slots=True)
class ServerIdentity:
    """Which server a connection reached, as it says when the connection opens (its server
    properties ``product``, ``version`` and ``cluster_name``), or as its management API's
    ``/api/overview`` says; ``rr doctor`` and ``rr declare`` check that both name the same
    one (docs/reference/cli.md, "rr doctor")."""

    version: ServerVersion
    product: str | None = None
    cluster_name: str | None = None
    """``rabbit@mq1``, or the name an operator gave the cluster; None when not told."""


# --- what it does by default ------------------------------------------------------------------

UNLIMITED_DELIVERY_LIMIT = -1
"""The ``x-delivery-limit`` (and policy ``delivery-limit``) that means no limit on RabbitMQ
4.0 and later."""

TRANSIENT_QUEUES_FEATURE = "transient_nonexcl_queues"
"""The deprecated feature a queue declared with ``durable = false`` uses (rr declares no
exclusive queue): permitted by default on 4.0.5 and 4.3.6 (docs/reference/topology.md)."""


# --- what its management API tells -----------------------------------------------------------

OVERVIEW_PATH = "/api/overview"
"""Where the management API says which server it answers for."""
DEPRECATED_FEATURES_PATH = "/api/deprecated-features"
"""Where the management API lists the deprecated features (RabbitMQ 3.13 and later)."""


@dataclass(frozen=True, slots=True)
class DeprecatedFeature:
    """One row of the server's deprecated-features table (what ``rabbitmqctl
    list_deprecated_features`` lists)."""

    name: str
    """``transient_nonexcl_queues``, ``queue_master_locator``, ..."""
    permitted: bool
    """``state``: ``permitted`` (True) or ``denied`` (False) on this server now."""
    phase: str | None = None
    """``deprecation_phase``: ``permitted_by_default``, ``denied_by_default``,
    ``disconnected``, ``removed``; None when the answer has none."""


@dataclass(frozen=True, slots=True)
class Unstated:
    """A deprecated-features table without the ``state`` of any row: which features the
    server knows, not whether it permits them. RabbitMQ 4.0.5's answers so (measured: each
    row has a ``name`` and a ``deprecation_phase``, also for a feature its configuration
    denies), and its ``rabbitmqctl list_deprecated_features`` has no state column either."""

    names: tuple[str, ...]
    """The features listed, sorted."""


@dataclass(frozen=True, slots=True)
class Placement:
    """Which nodes hold a queue (from the management API, docs/how-to/run-on-a-cluster.md)."""

    leader: str | None
    """A quorum queue's leader; a classic queue's node."""
    members: tuple[str, ...]
    """A quorum queue's members; a classic queue's one node."""


@dataclass(frozen=True, slots=True)
class QueueState:
    """A queue as the management API states it (``GET /api/queues/VHOST/NAME``): its type,
    its arguments and the names of the policy and the operator policy that apply to it (None:
    none); docs/how-to/migrate-to-quorum.md, "Changing a topology"; and what its messages weigh."""

    kind: str
    """``classic``, ``quorum`` (or ``stream``)."""
    arguments: Mapping[str, object]
    policy: str | None = None
    operator_policy: str | None = None
    message_bytes: int | None = None
    """``message_bytes``: what its messages, ready and unacknowledged, weigh in bytes, as the
    queue counts them toward ``x-max-length-bytes`` (the bodies; a RabbitMQ 4.3 quorum queue
    adds their properties), as the server's statistics last sampled them; None when the API
    states none (docs/how-to/migrate-to-quorum.md, "Migrating a queue")."""


@dataclass(frozen=True, slots=True)
class QueueActivity:
    """What the management API states of a queue's traffic (``rr status``; docs/reference/cli.md,
    "rr status"): each count and rate None when the API states none (statistics not yet
    sampled, or switched off)."""

    name: str
    kind: str
    """``classic``, ``quorum`` or ``stream``."""
    ready: int | None
    """``messages_ready``."""
    unacked: int | None
    """``messages_unacknowledged``: delivered to a consumer, not yet acked."""
    prefetches: tuple[int, ...]
    """Each consumer's ``prefetch_count`` (0: unlimited), sorted."""
    publish_per_s: float | None
    """``message_stats.publish_details.rate``: messages in per second."""
    deliver_per_s: float | None
    """``message_stats.deliver_get_details.rate``: deliveries and gets per second."""


@dataclass(frozen=True, slots=True)
class QueueConsumer:
    """A consumer of a queue of the vhost as the management API states it (``rr doctor``,
    ``rr status``; docs/reference/cli.md, "Consumers that are not rr"): ``GET /api/consumers/VHOST``
    names its queue, tag and channel's connection, and ``GET /api/vhosts/VHOST/connections``
    that connection's client properties (the same shape on 4.3.6, measured). Nothing there
    says how a consumer settles what it takes (ack, reject, nack, requeue or not): the API
    keeps no count per consumer."""

    queue: str
    tag: str
    connection: str | None
    """The server's name of its connection: ``127.0.0.1:39600 -> 127.0.0.1:5675``; None when
    the API does not state it yet (4.3.6 states a new consumer's ``channel_details`` as ``{}``
    for a moment, until its channel's statistics are in: measured)."""
    ack_required: bool
    """False for a consumer that takes without acknowledging (``no_ack``, auto-ack)."""
    product: str | None = None
    """Its connection's client property ``product`` (``Pika Python Client Library``,
    ``py-amqp``, ``rr``), None when the client sent none."""
    version: str | None = None
    """``version`` (``product_version`` for py-amqp), None when not sent."""
    connection_name: str | None = None
    """The name the client gave its connection (client property ``connection_name``)."""


RR_CLIENT_PRODUCT = "rr"
"""The ``product`` rr's own AMQP client names itself with in its client properties
(``transport/native.py``; the aiormq adapter sends aiormq's): how the management API's
connections tell rr from other clients (docs/reference/cli.md, "Consumers that are not rr")."""

RR_CONNECTION_NAMES = ("rr", "rr run ")
"""The ``connection_name`` rr gives its connections when the URL names none: ``rr``, and
``rr run MODULE on HOST`` for ``rr run`` (``cli/_common.py``, ``cli/run.py``): with either
AMQP client, a connection so named is rr's."""


def is_rr_client(product: str | None, connection_name: str | None) -> bool:
    """Whether a connection with these client properties is one of rr's: rr's own client's
    ``product``, or a name rr gives its connections (docs/reference/cli.md, "Consumers that are not
    rr"). A URL that names the connection (``?name=``) with ``RR_AMQP_CLIENT=aiormq`` leaves
    neither: rr does not know it then."""
    if product == RR_CLIENT_PRODUCT:
        return True
    name = connection_name or ""
    return name == RR_CONNECTION_NAMES[0] or name.startswith(RR_CONNECTION_NAMES[1])


NODES_PATH = "/api/nodes"
"""The management API's nodes of the cluster, each with its name and, while it runs, its
resource alarms and the numbers behind them (docs/reference/cli.md, "rr doctor")."""


@dataclass(frozen=True, slots=True)
class NodeResources:
    """A node of the cluster as ``GET /api/nodes`` states it (measured on 3.10.8 and 4.3.6):
    whether it runs and, while it does, its memory and disk alarms with the numbers behind
    them; each None when the API states none (a node that does not run)."""

    name: str
    running: bool
    mem_alarm: bool | None = None
    """``mem_alarm``: memory use reached ``mem_limit``; publishers are blocked."""
    disk_free_alarm: bool | None = None
    """``disk_free_alarm``: free disk fell below ``disk_free_limit``; publishers are
    blocked."""
    mem_used_bytes: int | None = None
    mem_limit_bytes: int | None = None
    disk_free_bytes: int | None = None
    disk_free_limit_bytes: int | None = None


@dataclass(frozen=True, slots=True)
class QueueHealth:
    """A queue of the vhost as ``GET /api/queues/VHOST?columns=...`` states it for ``rr
    doctor`` (measured on 3.10.8 and 4.3.6): a quorum queue's ``members`` and the ones
    ``online``, and the rate its depth changes at; each None when the API states none (a
    classic queue has no members; 3.10.8 states a new quorum queue's depth only once its
    statistics are sampled)."""

    name: str
    kind: str
    members: tuple[str, ...] | None = None
    online: tuple[str, ...] | None = None
    messages_per_s: float | None = None
    """``messages_details.rate``: how fast its depth (``messages``) grows (above 0) or shrinks
    (below 0) per second, over the server's last samples (every 5 s)."""


# --- policies ---------------------------------------------------------------------------------

PolicyValue = str | int | bool
"""A value of a policy's definition (JSON: a text, an integer, a boolean)."""


@dataclass(frozen=True, slots=True)
class Policy:
    """A policy (or an operator policy) of one vhost, as the management API states it
    (docs/reference/topology.md, "Policies and arguments"): the queues (or exchanges) whose name the
    regular expression ``pattern`` finds (not anchored) take ``definition``'s keys; of several
    matching policies the one of the highest ``priority`` applies, alone."""

    name: str
    pattern: str
    definition: tuple[tuple[str, PolicyValue], ...]
    """The keys (``max-length``, ``dead-letter-exchange``) and their values, sorted by key."""
    priority: int = 0
    apply_to: str = "queues"
    """``queues``, ``exchanges``, ``all``; RabbitMQ 4 also ``classic_queues``,
    ``quorum_queues``, ``streams``."""

    @staticmethod
    def of(
        name: str,
        pattern: str,
        definition: Mapping[str, PolicyValue],
        *,
        priority: int = 0,
        apply_to: str = "queues",
    ) -> Policy:
        """A policy with ``definition`` given as a mapping."""
        return Policy(name, pattern, tuple(sorted(definition.items())), priority, apply_to)

    @property
    def keys(self) -> dict[str, PolicyValue]:
        """The definition as a mapping."""
        return dict(self.definition)
