"""Pure. What a RabbitMQ server means for a topology (``rr doctor``, docs/cli.md).

:func:`examine` takes what ``rr doctor`` read from the server (:class:`ServerFacts`) and,
optionally, the expansion of a topology file, and returns findings: ``info`` (how this server
behaves, worth knowing), ``warning`` (a check that could not be made although asked for, or
something that holds only if the queue's other consumers behave) or ``unsafe`` (the topology
would lose or refuse something on this server). ``rr doctor`` exits 1 when any finding is
unsafe.

Which deprecated features the server permits or denies is read from the server when it can be
(the management API's ``/api/deprecated-features``, ``transport/management.py``): AMQP does
not tell, and an operator may deny a feature its version permits by default. Without the
table (no management URL, an API without it, an API that failed) the findings on deprecated
features are assumed from the version and say so, with a ``deprecated-features-not-checked``
finding that says why; so they are when the API answers for another server than the one AMQP
reached (:func:`identity_mismatch`: a ``management-api-mismatch`` warning).

What changes between the versions rr supports (each cited from the RabbitMQ release notes,
measured on 3.10.8, 4.0.5 and 4.3.6):

* 3.13: dead letters carry ``x-last-death-queue/-reason/-exchange`` beside
  ``x-first-death-*``.
* 4.0: a quorum queue declared without ``x-delivery-limit`` gets a limit of 20: a message
  returned 20 times (``basic.reject``/``nack`` with requeue, a consumer or channel that went
  away, ``rr dlq inspect`` taking and giving back) is dead-lettered, or dropped when the queue
  has no dead-letter route. Transient (non-durable) non-exclusive queues are a deprecated
  feature (``transient_nonexcl_queues``), permitted by default on 4.0.5 and 4.3.6.
* 4.3: only ``basic.reject`` and a channel that closes with deliveries unacknowledged count
  toward a quorum delivery limit (``x-delivery-count``); ``basic.nack`` never does; every
  return raises ``x-acquired-count``; a dead letter carries its delivery count into the next
  queue, and a quorum target counts on from it toward its own limit. rr gives messages back
  and dead-letters them with ``basic.reject`` only (``retry/policy.py``), so its counts hold
  on every version; a consumer that nacks is never stopped by the limit.
  ``queue_master_locator`` (``x-queue-master-locator``) is denied by default, and classic
  queue version 1 is gone: rr refuses both while loading a file, on every server.
* 4.0: classic queue mirroring is gone (the deprecated feature ``classic_queue_mirroring``
  is removed): a policy with an ``ha-*`` key is refused (4.0.5 measured: "[{<<"ha-mode">>,
  <<"all">>}] are not recognised policy settings"), so the queues a 3.x ``ha-mode`` policy
  mirrors keep one copy after the upgrade. On 3.x, with the management API, rr reads the
  vhost's policies and the topology's queues (:class:`PoliciesRead`) and names each classic
  queue whose applying policy mirrors it (:func:`mirroring_findings`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from rabbitctl_retry.dlq.read_cost import effective_limit
from rabbitctl_retry.errors import escape_unprintable
from rabbitctl_retry.fields import FieldValue
from rabbitctl_retry.server import (
    DEPRECATED_FEATURES_PATH,
    NODES_PATH,
    OVERVIEW_PATH,
    QUORUM_DEFAULT_DELIVERY_LIMIT,
    TRANSIENT_QUEUES_FEATURE,
    DeprecatedFeature,
    NodeResources,
    Policy,
    QueueConsumer,
    QueueHealth,
    QueueState,
    ServerIdentity,
    ServerVersion,
)
from rabbitctl_retry.topology.consumers import CONSUMERS_PATH, checked_queues, consumer_notes
from rabbitctl_retry.topology.effective import applying
from rabbitctl_retry.topology.expand import Desired, QueueEntity
from rabbitctl_retry.topology.inequivalence import display_value
from rabbitctl_retry.topology.plan import (
    Absent,
    Differs,
    Matches,
    Observation,
    ObservationKey,
    OpKind,
    Plan,
    Refused,
    Status,
    missing_exchange_detail,
    server_delay_problem,
)
from rabbitctl_retry.topology.settings import rival_policies, shadowed


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


# --- the deprecated-features table ------------------------------------------------------------


def _not_checked_note(facts: ServerFacts) -> str:
    """How a finding assumed from the version says why it was not checked."""
    unread = facts.deprecated_features
    assert isinstance(unread, TableUnread)
    if unread.why is Unread.NOT_GIVEN:
        return "not checked: give --management-url"
    if unread.why is Unread.MISSING:
        return "not checked: the management API has no deprecated-features table"
    if unread.why is Unread.UNSTATED:
        return "not checked: the management API does not say which features are permitted"
    if unread.why is Unread.MISMATCH:
        return "not checked: the management API answers for another server"
    return "not checked: the management API did not answer (deprecated-features-not-checked)"


def _state_of(feature: DeprecatedFeature, version: ServerVersion) -> str:
    """``RabbitMQ 4.3.6 permits transient_nonexcl_queues (permitted_by_default)``."""
    verb = "permits" if feature.permitted else "denies"
    phase = f" ({feature.phase})" if feature.phase else ""
    return f"RabbitMQ {version} {verb} {feature.name}{phase}"


def deprecated_features_findings(facts: ServerFacts) -> list[Finding]:
    """The server's deprecated-features table, or why it could not be read."""
    table = facts.table
    unread = facts.deprecated_features
    if table is None:
        assert isinstance(unread, TableUnread)
        if unread.why is Unread.MISMATCH:
            return [Finding("management-api-mismatch", Level.WARNING, unread.detail)]
        return [_not_checked(unread)]
    denied = sorted(name for name, feature in table.items() if not feature.permitted)
    permitted = sorted(name for name, feature in table.items() if feature.permitted)
    if not table:
        listed = "lists no deprecated feature"
    else:
        parts = []
        if denied:
            parts.append("denies " + ", ".join(denied))
        if permitted:
            parts.append("permits " + ", ".join(permitted))
        listed = "; ".join(parts)
    findings = [
        Finding(
            "deprecated-features",
            Level.INFO,
            f"RabbitMQ {facts.version} (read from its management API) {listed}",
        )
    ]
    transient = table.get(TRANSIENT_QUEUES_FEATURE)
    if transient is not None:
        consequence = (
            "the server accepts such queues, but the feature is deprecated"
            if transient.permitted
            else "a declare of such a queue is refused"
        )
        findings.append(
            Finding(
                "transient-queues-deprecated",
                Level.INFO,
                f"transient (non-durable) non-exclusive queues: "
                f"{_state_of(transient, facts.version)}, read from its management API: "
                f"{consequence}",
            )
        )
    return findings


def names_to_compare(amqp: ServerIdentity, api: ServerIdentity) -> bool:
    """Whether both sides tell a cluster name, and they differ: then the API's nodes decide
    (:func:`identity_differences`)."""
    return (
        amqp.cluster_name is not None
        and api.cluster_name is not None
        and amqp.cluster_name != api.cluster_name
    )


def identity_differences(
    amqp: ServerIdentity, api: ServerIdentity, api_nodes: Sequence[str] = ()
) -> str | None:
    """How the server a management API answers for (its ``/api/overview``: ``api``; its
    cluster's nodes: ``api_nodes``) is not the server rr reached over AMQP (``amqp``), or
    None when it is.

    When both tell a cluster name, the names decide: the same name, or a default name of one
    of the API's nodes, is the same cluster, whatever versions its nodes run (a rolling
    upgrade mixes them). A cluster without a name set gives each node's own name with its
    host's full name as its cluster name: ``rrc1@vm`` from the node ``rrc1@localhost``,
    ``rrc2@vm`` from ``rrc2@localhost`` of the same cluster (measured on a 3.10.8 cluster;
    4.0.5 and 4.3.6 name a lone node so). Otherwise the versions must be the same. Names
    from the API are escaped and clipped."""
    if amqp.cluster_name is not None and api.cluster_name is not None:
        if not names_to_compare(amqp, api) or _default_names_of_one_cluster(
            amqp.cluster_name, api.cluster_name, api_nodes
        ):
            return None
        return (
            f"its cluster is {_shown_name(api.cluster_name)}, the AMQP server's "
            f"{_shown_name(amqp.cluster_name)}"
        )
    if api.version != amqp.version:
        return f"it runs RabbitMQ {api.version}, the AMQP server {amqp.version}"
    return None


def _default_names_of_one_cluster(amqp_name: str, api_name: str, api_nodes: Sequence[str]) -> bool:
    """Whether ``amqp_name`` is the name a node of ``api_nodes`` gives its cluster when none is
    set (its name before the ``@``, with its host's full name after it): the node's own name
    with its domain (``rabbit@mq1.corp`` for the node ``rabbit@mq1``), or, where the API
    answers with such a name too, a name on the same host for another node of the list
    (``rrc1@vm`` and ``rrc2@vm`` for ``rrc1@localhost`` and ``rrc2@localhost``)."""
    if any(amqp_name == node or amqp_name.startswith(node + ".") for node in api_nodes):
        return True
    node_id, at, host = amqp_name.partition("@")
    api_host = api_name.partition("@")[2]
    return (
        bool(at and host)
        and host == api_host
        and any(node.partition("@")[0] == node_id for node in api_nodes)
    )


def identity_mismatch(
    amqp: ServerIdentity,
    api: ServerIdentity,
    *,
    amqp_url: str,
    api_url: str,
    api_nodes: Sequence[str] = (),
) -> str | None:
    """What says that the management API at ``api_url`` does not answer for the server rr
    reached at ``amqp_url`` (:func:`identity_differences`), for ``rr doctor``, or None when
    they agree. Both URLs come censored."""
    differences = identity_differences(amqp, api, api_nodes)
    if differences is None:
        return None
    return (
        f"the management API at {api_url} does not answer for the server rr reached at "
        f"{amqp_url} ({OVERVIEW_PATH}: {differences}): rr uses none of its answers, "
        "and the findings it would have checked are assumed from the version. Give the "
        "management URL of the server --url reaches"
    )


_MAX_NAME_CHARS = 100


def _shown_name(name: str) -> str:
    """A name an API or a server gave, as a message shows it: quoted, escaped, clipped."""
    clipped = name if len(name) <= _MAX_NAME_CHARS else name[:_MAX_NAME_CHARS] + "..."
    return "'" + escape_unprintable(clipped) + "'"


def _not_checked(unread: TableUnread) -> Finding:
    what = "which deprecated features this server permits or denies"
    assumed = "findings on deprecated features are assumed from the version"
    if unread.why is Unread.NOT_GIVEN:
        return Finding(
            "deprecated-features-not-checked",
            Level.INFO,
            f"not checked: {what} (AMQP does not tell): give --management-url (or "
            f"$RR_MANAGEMENT_URL, or [broker] management_url); {assumed}",
        )
    if unread.why is Unread.MISSING:
        return Finding(
            "deprecated-features-not-checked",
            Level.INFO,
            f"not checked: {what}: its management API has no such table (GET "
            f"{DEPRECATED_FEATURES_PATH} answered 404 or 406, as RabbitMQ 3.10.8's does); "
            f"{assumed}",
        )
    if unread.why is Unread.UNSTATED:
        return Finding(
            "deprecated-features-not-checked",
            Level.INFO,
            f"not checked: {what}: its management API lists them without their state (GET "
            f"{DEPRECATED_FEATURES_PATH} gives no 'state', as RabbitMQ 4.0.5's does, whose "
            f"configuration may deny one all the same); {assumed}",
        )
    return Finding(
        "deprecated-features-not-checked",
        Level.WARNING,
        f"not checked: {what}: {unread.detail}; {assumed}",
    )


# --- the server ------------------------------------------------------------------------------

QUORUM_COUNTING_4_3 = (
    "only basic.reject (with or without requeue) and a channel that closes with deliveries "
    "unacknowledged count toward a quorum queue's x-delivery-limit (x-delivery-count); "
    "basic.nack never counts; every return raises x-acquired-count; a dead letter carries "
    "its delivery count into the next queue (a quorum target starts its count, and its "
    "delivery limit, from it). rr run never sends basic.nack: it gives messages back with "
    "basic.reject(requeue=true), and has the server dead-letter them with "
    "basic.reject(requeue=false); rr dlq and rr console hand back what they only read with "
    "basic.nack, so that a look counts nothing"
)


def server_findings(facts: ServerFacts) -> list[Finding]:
    """How this server behaves where versions differ (no topology needed)."""
    version = facts.version
    findings = [
        Finding(
            "server-version",
            Level.INFO,
            f"{facts.product} {version}",
        )
    ]
    if version.behaviour.writes_last_death_headers:
        findings.append(
            Finding(
                "last-death-headers",
                Level.INFO,
                "dead letters carry x-last-death-queue/-reason/-exchange beside x-first-death-*",
            )
        )
    if version.behaviour.default_quorum_delivery_limit is not None:
        findings.append(
            Finding(
                "quorum-default-delivery-limit",
                Level.INFO,
                f"quorum queues declared without x-delivery-limit get "
                f"{QUORUM_DEFAULT_DELIVERY_LIMIT}: a message returned that often is "
                "dead-lettered, or dropped without a dead-letter route",
            )
        )
    findings.extend(deprecated_features_findings(facts))
    if facts.table is None and version.behaviour.transient_queues_deprecated:
        findings.append(
            Finding(
                "transient-queues-deprecated",
                Level.INFO,
                "transient (non-durable) non-exclusive queues are a deprecated feature "
                "(transient_nonexcl_queues), assumed from the version "
                f"({_not_checked_note(facts)}): permitted by default on 4.0.5 and 4.3.6, "
                "refused where the operator denies it",
            )
        )
    counted = (
        QUORUM_COUNTING_4_3
        if not version.behaviour.nack_requeue_counts_delivery
        else "basic.reject and basic.nack(requeue=true) both count toward a quorum delivery "
        "limit; rr uses reject"
    )
    findings.append(Finding("quorum-return-counting", Level.INFO, counted))
    if facts.delayed_message_plugin is not None:
        findings.append(
            Finding(
                "delayed-message-plugin",
                Level.INFO,
                "the delayed-message exchange plugin is "
                + ("enabled" if facts.delayed_message_plugin else "not enabled"),
            )
        )
    return findings


# --- the topology ----------------------------------------------------------------------------


def _quorum(queue: QueueEntity) -> bool:
    return queue.arguments.get("x-queue-type") == "quorum"


def _has_dead_letter_route(queue: QueueEntity) -> bool:
    return queue.setting("x-dead-letter-exchange") is not None


def _delivery_limit(queue: QueueEntity) -> int | None:
    """A quorum queue's own ``x-delivery-limit`` (or its rr policy's ``delivery-limit``),
    when it has a whole one."""
    limit = queue.setting("x-delivery-limit")
    if isinstance(limit, bool) or not isinstance(limit, int):
        return None
    return limit


def _transient_finding(queue: QueueEntity, facts: ServerFacts) -> Finding | None:
    version = facts.version
    table = facts.table
    if table is None:
        if not version.behaviour.transient_queues_deprecated:
            return None
        return Finding(
            "transient-queue",
            Level.INFO,
            f"{queue.name!r} is transient (durable = false): a deprecated feature on "
            f"RabbitMQ {version}, refused where the operator denies it "
            f"(assumed from the version; {_not_checked_note(facts)}); make it durable",
            queue.name,
        )
    feature = table.get(TRANSIENT_QUEUES_FEATURE)
    if feature is None:  # not a deprecated feature on this server
        return None
    state = _state_of(feature, version)
    if feature.permitted:
        return Finding(
            "transient-queue",
            Level.INFO,
            f"{queue.name!r} is transient (durable = false): {state}, read from its "
            "management API: the server accepts it, but the feature is deprecated; make it "
            "durable",
            queue.name,
        )
    return Finding(
        "transient-queue-denied",
        Level.UNSAFE,
        f"{queue.name!r} is transient (durable = false): {state}, read from its management "
        "API: its declare is refused; make it durable",
        queue.name,
    )


def _counting_findings(
    queue: QueueEntity, facts: ServerFacts, retried_queues: frozenset[str]
) -> list[Finding]:
    """RabbitMQ 4.3's counting, for a quorum queue that relies on its delivery limit."""
    limit = _delivery_limit(queue)
    if limit is None or not _quorum(queue) or facts.version.behaviour.nack_requeue_counts_delivery:
        return []
    version = facts.version
    nack = (
        "a consumer that gives a message back with basic.nack(requeue=true) is never stopped "
        "by it (x-acquired-count grows, x-delivery-count does not): that message comes back "
        "forever"
    )
    if queue.name in retried_queues:
        return [
            Finding(
                "quorum-delivery-limit-counting",
                Level.INFO,
                f"{queue.name!r} relies on x-delivery-limit = {limit}: on RabbitMQ {version} "
                "it counts what rr run gives back with basic.reject and what a closing channel "
                f"returns; {nack}, so a consumer of it other than rr run must use basic.reject",
                queue.name,
            )
        ]
    return [
        Finding(
            "quorum-nack-not-counted",
            Level.WARNING,
            f"{queue.name!r} relies on x-delivery-limit = {limit} without a max_attempts of "
            f"rr's, so consumers other than rr run may read it: on RabbitMQ {version} only "
            f"basic.reject and a closing channel count toward the limit; {nack}. Its "
            "consumers must give messages back with basic.reject",
            queue.name,
        )
    ]


def _carried_count_findings(desired: Desired, facts: ServerFacts) -> Iterator[Finding]:
    """RabbitMQ 4.3: a quorum queue that a quorum queue's limit dead-letters into (by the
    default exchange) counts on from the delivery count the dead letter carries. Measured on
    4.3.6: a source limit of 2 sends it with x-delivery-count 3, and a target of limit 20
    drops it at its 18th counted return (20 - 2), not its 21st."""
    if not facts.version.behaviour.counts_travel_from_any_queue:
        return
    by_name = {queue.name: queue for queue in desired.queues}
    for source in desired.queues:
        source_limit = _delivery_limit(source)
        target = by_name.get(str(source.setting("x-dead-letter-routing-key") or ""))
        if (
            source_limit is None
            or not _quorum(source)
            or source.setting("x-dead-letter-exchange") != ""
            or target is None
            or not _quorum(target)
        ):
            continue
        target_limit = _delivery_limit(target)
        if target_limit is None:
            # the file leaves it to the server: rr declares it without a limit (-1), but one
            # declared earlier may hold the server's own
            target_limit = _held_limit(target.name, facts)
        if target_limit is None:
            continue
        returns = max(target_limit - source_limit, 1)
        then = "dead-letters" if _has_dead_letter_route(target) else "drops"
        yield Finding(
            "dead-letter-carried-count",
            Level.INFO,
            f"{target.name!r} gets {source.name!r}'s dead letters: on RabbitMQ {facts.version} "
            f"each carries its x-delivery-count (up to {source_limit + 1}, its count when "
            f"{source.name!r}'s x-delivery-limit = {source_limit} sent it) and "
            f"{target.name!r} counts on from it, so it {then} such a message at its "
            f"{_ordinal(returns)} counted return rather than its {_ordinal(target_limit + 1)}",
            target.name,
        )


def _ordinal(number: int) -> str:
    if 10 <= number % 100 <= 20:
        suffix = "th"
    else:
        suffix = {1: "st", 2: "nd", 3: "rd"}.get(number % 10, "th")
    return f"{number}{suffix}"


def _server_delay_finding(queue: QueueEntity, version: ServerVersion) -> Finding | None:
    """A queue with ``delay = "server"``: refused below RabbitMQ 4.3 (it would retry at once),
    else how its waits go (docs/runtime.md, "The quorum queue waits")."""
    if queue.setting("x-delayed-retry-type") is None:
        return None
    problem = server_delay_problem(queue, version.release)
    if problem is not None:
        return Finding("server-delay-unsupported", Level.UNSAFE, problem, queue.name)
    min_ms, max_ms = (queue.setting(f"x-delayed-retry-{end}") for end in ("min", "max"))
    return Finding(
        "server-delay",
        Level.INFO,
        f"{queue.name!r} waits on the server: a retry is a counted basic.reject, held back "
        f"min({min_ms!r} ms x x-delivery-count, {max_ms!r} ms) before it is delivered again "
        "(retry_after's delay is not used); a waiting message is not counted as ready",
        queue.name,
    )


def _held_limit(queue: str, facts: ServerFacts) -> int | None:
    """The delivery limit the server holds ``queue`` with, when its ``x-delivery-limit`` was
    read (``QueueCounts.limit_read``) and one applies; else None."""
    held = next((c for c in facts.queue_counts or () if c.name == queue), None)
    if held is None or not held.limit_read:
        return None
    return effective_limit(facts.version.release, held.limit_argument)


def _server_limit_finding(queue: QueueEntity, facts: ServerFacts) -> Finding | None:
    """A quorum queue of the file without a limit of its own that the server holds with one
    it gave it (RabbitMQ 4.x: 20, when the queue was declared without ``x-delivery-limit``,
    by an earlier rr or by hand): a message returned that often is dropped, or dead-lettered
    where the queue has a route; rr declares such a queue with ``x-delivery-limit = -1``
    now, but changes no existing one. None when the server holds it without a limit, or
    does not hold it (``rr declare`` will), or its limit was not read."""
    limit = _held_limit(queue.name, facts)
    if limit is None:
        return None
    held = next(c for c in facts.queue_counts or () if c.name == queue.name)
    if held.limit_argument is not None:
        given = f"holds x-delivery-limit = {display_value(held.limit_argument)}"
    else:
        given = (
            f"was declared without x-delivery-limit, so RabbitMQ {facts.version} gives it a "
            f"limit of {limit}"
        )
    if held.policies_read:
        given += " (with the policies that apply to it)"
    else:
        given += " (a policy that applies to it is not seen without --management-url)"
    reads = (
        "every rr dlq inspect, export or groups read of it counts one"
        if not facts.version.nack_returns_uncounted
        else "rr's reads no longer count on this server, but every return does"
    )
    fix = (
        f"Lift it with a policy: rabbitmqctl set_policy rr-no-limit "
        f"'^{re.escape(queue.name)}$' '{{\"delivery-limit\": -1}}' --apply-to queues "
        '(only the highest-priority policy applies to a queue; docs/topology.md, "Quorum '
        'queues without a limit")'
    )
    if _has_dead_letter_route(queue):
        return Finding(
            "quorum-default-limit",
            Level.WARNING,
            f"{queue.name!r} {given}: a message returned {limit} times is dead-lettered "
            f"({reads}). {fix}",
            queue.name,
        )
    return Finding(
        "quorum-default-limit-drops",
        Level.UNSAFE,
        f"{queue.name!r} {given}, and has no dead-letter route: a message returned {limit} "
        f"times is dropped ({reads}). {fix}",
        queue.name,
    )


def topology_findings(
    desired: Desired, facts: ServerFacts, retried_queues: frozenset[str] = frozenset()
) -> list[Finding]:
    """What this server does to the topology's queues where versions differ.

    ``retried_queues``: the queues the file gives a ``max_attempts`` (consumed by ``rr run``,
    which gives messages back with ``basic.reject``)."""
    version = facts.version
    findings: list[Finding] = []
    for queue in desired.queues:
        if not queue.durable:
            transient = _transient_finding(queue, facts)
            if transient is not None:
                findings.append(transient)
        if _quorum(queue) and queue.setting("x-delivery-limit") is None:
            held_limit = _server_limit_finding(queue, facts)
            if held_limit is not None:
                findings.append(held_limit)
        findings.extend(_counting_findings(queue, facts, retried_queues))
        server_delay = _server_delay_finding(queue, version)
        if server_delay is not None:
            findings.append(server_delay)
    findings.extend(_carried_count_findings(desired, facts))
    for exchange in desired.exchanges:
        if exchange.type == "x-delayed-message" and facts.delayed_message_plugin is False:
            findings.append(
                Finding(
                    "delayed-message-plugin-missing",
                    Level.UNSAFE,
                    f"{exchange.name!r} needs the delayed-message exchange plugin, which this "
                    "server does not have",
                )
            )
    return findings


# --- classic queue mirroring (RabbitMQ 3.x) ----------------------------------------------------

HA_MODE = "ha-mode"
"""The policy key that mirrors a classic queue on RabbitMQ 3.x; 4.0 refuses every ``ha-*``
key."""

_AFTER_4_0 = (
    "RabbitMQ 4.0 removed classic queue mirroring (it refuses ha-* policy keys; the "
    "deprecated feature classic_queue_mirroring is removed), so after the upgrade"
)
_MOVE = (
    'Move it to a quorum queue before the upgrade: type = "quorum" (with replicas) in the '
    "topology, then rr migrate TOPOLOGY rebuilds it with its messages (docs/topology.md, "
    '"Migrating a queue")'
)


def _mirrors(policy: Policy | None) -> bool:
    return policy is not None and HA_MODE in policy.keys


def _ha_text(policy: Policy) -> str:
    return ", ".join(
        f"{key} = {value!r}" for key, value in policy.definition if key.startswith("ha-")
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
            findings.append(
                Finding(
                    "classic-mirroring",
                    Level.WARNING,
                    f"{name!r} (a classic queue of the vhost"
                    f"{', not in the topology' if desired is not None else ''}) is mirrored by "
                    f"the policy {policy.name!r} ({_ha_text(policy)}): {_AFTER_4_0} {name!r} "
                    f"has one copy, on one node: losing that node loses its messages. {_MOVE}",
                    name,
                )
            )
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
            if _quorum(queue):
                continue
            candidates = (*read.policies, *((queue.policy,) if queue.policy else ()))
        policy = applying(candidates, queue.name, "classic", facts.version)
        if policy is not None and _mirrors(policy):
            findings.append(
                Finding(
                    "classic-mirroring",
                    Level.WARNING,
                    f"{queue.name!r} is a classic queue mirrored by the policy {policy.name!r} "
                    f"({_ha_text(policy)}): {_AFTER_4_0} {queue.name!r} has one copy, on one "
                    f"node: losing that node loses its messages. {_MOVE}",
                    queue.name,
                )
            )
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


# --- the node and the queues now ---------------------------------------------------------------

_GIVE_URL = "give --management-url (or $RR_MANAGEMENT_URL, or [broker] management_url)"


def _health_not_checked(code: str, what: str, unread: TableUnread) -> Finding:
    """A check of the management API's that was not made: info without a management URL or
    with one of another server, a warning when the API failed (as
    ``classic-mirroring-not-checked``)."""
    if unread.why is Unread.NOT_GIVEN:
        return Finding(code, Level.INFO, f"not checked: {what}: {_GIVE_URL}")
    if unread.why is Unread.MISMATCH:
        return Finding(
            code, Level.INFO, f"not checked: {what}: the management API answers for another server"
        )
    return Finding(code, Level.WARNING, f"not checked: {what}: {unread.detail}")


_UNITS = ((10**12, "TB"), (10**9, "GB"), (10**6, "MB"), (10**3, "kB"))


def shown_bytes(count_bytes: int | None) -> str:
    """``1.1 GB`` (decimal units, as RabbitMQ's own pages); ``unknown`` when not stated."""
    if count_bytes is None:
        return "unknown"
    for size, unit in _UNITS:
        if count_bytes >= size:
            return f"{count_bytes / size:.1f} {unit}"
    return f"{count_bytes} bytes"


_BLOCKED = (
    "every connection that publishes, on every node of the cluster, is blocked until it "
    "clears (consumers go on)"
)


def alarm_findings(facts: ServerFacts) -> list[Finding]:
    """Each node's resource alarms (``node-alarm``, an error: publishers are blocked while it
    lasts), each node that does not run (``node-not-running``, a warning), or why the nodes
    were not read (``alarms-not-checked``)."""
    read = facts.cluster
    if isinstance(read, TableUnread):
        what = f"the nodes' memory and disk alarms (GET {NODES_PATH})"
        return [_health_not_checked("alarms-not-checked", what, read)]
    findings = []
    for node in read.nodes:
        name = _shown_name(node.name)
        if not node.running:
            findings.append(
                Finding(
                    "node-not-running",
                    Level.WARNING,
                    f"node {name} does not run (the management API lists it as not running): "
                    "its alarms are not known, and the queues it holds are without it",
                )
            )
            continue
        if node.mem_alarm:
            findings.append(
                Finding(
                    "node-alarm",
                    Level.ERROR,
                    f"node {name} has a memory alarm: {shown_bytes(node.mem_used_bytes)} used, "
                    f"its limit {shown_bytes(node.mem_limit_bytes)}: {_BLOCKED}",
                )
            )
        if node.disk_free_alarm:
            findings.append(
                Finding(
                    "node-alarm",
                    Level.ERROR,
                    f"node {name} has a disk alarm: {shown_bytes(node.disk_free_bytes)} free, "
                    f"its limit {shown_bytes(node.disk_free_limit_bytes)}: {_BLOCKED}",
                )
            )
    return findings


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def consumer_findings(
    desired: Desired, facts: ServerFacts, dead_letter_queues: frozenset[str]
) -> list[Finding]:
    """What each queue of the topology holds and who consumes it, by what a passive declare
    said (``queue_counts``): a work queue without a consumer (``no-consumer``, a warning), a
    wait queue with one (``wait-queue-consumer``, an error: it takes copies before their
    delay), a dead-letter queue that holds messages (``dead-letter-queue-messages``, info)
    and one whose depth grows (``dead-letter-queue-growing``, a warning: its
    ``messages_details.rate`` above 0, read from the management API); a queue the server
    does not hold is ``queue-not-declared`` (info).

    ``dead_letter_queues``: the queues the file names as a ``dead_letter`` (no consumer is
    expected there); a wait queue is one of :attr:`QueueEntity.wait_of`; every other queue of
    the file is a work queue, which ``rr run`` (or another service) consumes."""
    if facts.queue_counts is None:
        return []
    counts = {count.name: count for count in facts.queue_counts}
    rates = (
        {}
        if isinstance(facts.cluster, TableUnread)
        else {queue.name: queue.messages_per_s for queue in facts.cluster.queues}
    )
    findings = []
    for queue in desired.queues:
        name = queue.name
        count = counts.get(name)
        if count is None:
            findings.append(
                Finding(
                    "queue-not-declared",
                    Level.INFO,
                    f"{name!r} is not on the server (a passive declare found no such queue): "
                    "its consumers and depth are not checked; rr declare makes it",
                    name,
                )
            )
            continue
        if queue.wait_of is not None:
            if count.consumers:
                findings.append(
                    Finding(
                        "wait-queue-consumer",
                        Level.ERROR,
                        f"{name!r} is a wait queue of {queue.wait_of!r} and has "
                        f"{_plural(count.consumers, 'consumer')}: it takes the copies waiting "
                        f"there before their delay ends, instead of their going back to "
                        f"{queue.wait_of!r} when it does (a wait queue must have none; "
                        "stop whatever consumes it)",
                        name,
                    )
                )
        elif name in dead_letter_queues:
            if count.messages:
                findings.append(
                    Finding(
                        "dead-letter-queue-messages",
                        Level.INFO,
                        f"{name!r} (a dead-letter queue) holds "
                        f"{_plural(count.messages, 'message')}: rr dlq inspect shows them",
                        name,
                    )
                )
            rate = rates.get(name)
            if rate is not None and rate > 0:
                findings.append(
                    Finding(
                        "dead-letter-queue-growing",
                        Level.WARNING,
                        f"{name!r} (a dead-letter queue) grows at {rate:g} messages/s (its "
                        "messages_details.rate, from the management API's last samples): "
                        "messages are failing now",
                        name,
                    )
                )
        elif count.consumers == 0:
            findings.append(
                Finding(
                    "no-consumer",
                    Level.WARNING,
                    f"{name!r} has no consumer: messages wait "
                    f"({_plural(count.messages, 'message')} ready)",
                    name,
                )
            )
    return findings


def quorum_member_findings(desired: Desired, facts: ServerFacts) -> list[Finding]:
    """Each quorum queue of the topology whose members online (the management API's
    ``online``) are fewer than expected: its ``replicas`` (``x-quorum-initial-group-size``),
    at most the cluster's nodes, else every node (docs/topology.md) — a warning,
    ``quorum-members-offline``; fewer than a majority of its ``members`` — an error,
    ``quorum-queue-unavailable``. Or why they were not read (``quorum-members-not-checked``,
    when the file has a quorum queue)."""
    quorum = [queue for queue in desired.queues if _quorum(queue)]
    if not quorum:
        return []
    read = facts.cluster
    if isinstance(read, TableUnread):
        what = "the quorum queues' members online (GET /api/queues/VHOST)"
        return [_health_not_checked("quorum-members-not-checked", what, read)]
    cluster_size = len(read.nodes)
    states = {queue.name: queue for queue in read.queues}
    findings = []
    for queue in quorum:
        state = states.get(queue.name)
        if state is None or state.members is None:
            continue
        members = state.members
        online = set(state.online or ())
        offline = [node for node in members if node not in online]
        replicas = queue.setting("x-quorum-initial-group-size")
        wanted = replicas if isinstance(replicas, int) and not isinstance(replicas, bool) else None
        expected = cluster_size if wanted is None else min(wanted, cluster_size)
        majority = len(members) // 2 + 1
        up = len(members) - len(offline)
        names = ", ".join(_shown_name(node) for node in offline) or "none"
        if up < majority:
            findings.append(
                Finding(
                    "quorum-queue-unavailable",
                    Level.ERROR,
                    f"{queue.name!r} has {up} of its {len(members)} members online (offline: "
                    f"{names}): fewer than a majority ({majority}), so it takes and delivers "
                    "nothing until enough of them are back",
                    queue.name,
                )
            )
        elif up < expected:
            source = (
                "every node of the cluster"
                if wanted is None
                else f"replicas = {wanted}, on a cluster of {_plural(cluster_size, 'node')}"
            )
            findings.append(
                Finding(
                    "quorum-members-offline",
                    Level.WARNING,
                    f"{queue.name!r} has {up} of the {expected} members expected online "
                    f"({source}; members: {len(members)}, offline: {names}): it works, with "
                    f"fewer copies; losing {up - majority + 1} more makes it unavailable",
                    queue.name,
                )
            )
    return findings


# --- the file against the live queues ---------------------------------------------------------


def _kind_of(op_kind: OpKind) -> str:
    return "exchange" if op_kind is OpKind.DECLARE_EXCHANGE else "queue"


def declare_findings(facts: ServerFacts) -> list[Finding]:
    """What ``rr declare`` would refuse in the file on this server now (docs/cli.md, "rr
    doctor"): each queue or exchange the server holds otherwise than the file says, in
    ``rr declare``'s words (``declare-conflict``, unsafe: every differing argument, the type,
    a missing delivery limit or dead-letter route), and each exchange the file uses that is
    neither declared in it nor on the server (``exchange-missing``, unsafe); or that the
    server holds what it holds as the file says (``declare-matches``), or why it was not
    checked (``declare-not-checked``). What only a new queue would meet (a server too old
    for ``delay = "server"``, a denied transient queue) has findings of its own."""
    check = facts.declare
    if check is None:
        return []
    if isinstance(check, TableUnread):
        return [
            Finding(
                "declare-not-checked",
                Level.WARNING,
                "not checked: whether the queues and exchanges the server holds are as the "
                f"file says (rr declare's look at each): {check.detail}",
            )
        ]
    findings = []
    for op in check.plan.operations:
        if op.op is OpKind.BIND or op.status is not Status.CONFLICT:
            continue
        observed = check.observed.get((_kind_of(op.op), op.name), Absent())
        if not isinstance(observed, Differs | Refused):
            continue
        findings.append(
            Finding(
                "declare-conflict",
                Level.UNSAFE,
                f"{_kind_of(op.op)} {op.name!r}: {op.detail}. rr declare refuses the file as "
                "it is and changes nothing, and rr run does not start",
                op.name if op.op is OpKind.DECLARE_QUEUE else None,
            )
        )
    for exchange in check.referenced_exchanges:
        observed = check.observed.get(("exchange", exchange), Absent())
        if not isinstance(observed, Matches):
            findings.append(
                Finding(
                    "exchange-missing",
                    Level.UNSAFE,
                    missing_exchange_detail(exchange, observed),
                )
            )
    held = [
        op
        for op in check.plan.operations
        if op.op is not OpKind.BIND
        and isinstance(check.observed.get((_kind_of(op.op), op.name)), Matches)
    ]
    if not findings and held:
        findings.append(
            Finding(
                "declare-matches",
                Level.INFO,
                f"the {len(held)} queues and exchanges of the file the server holds are as the "
                "file says (checked as rr declare checks them: a redeclare of each, which "
                "RabbitMQ compares argument by argument, the type included)",
            )
        )
    return findings


def default_type_findings(facts: ServerFacts) -> list[Finding]:
    """The vhost's default queue type, where the management API states it
    (``vhost-default-queue-type``, info): what a queue declared without ``x-queue-type``
    becomes there."""
    default = facts.default_queue_type
    if isinstance(default, TableUnread):
        if default.why is not Unread.FAILED:
            return []  # none without a management URL: AMQP does not tell
        return [
            Finding(
                "vhost-default-queue-type-not-checked",
                Level.WARNING,
                f"not checked: the vhost's default queue type (GET /api/vhosts/VHOST): "
                f"{default.detail}",
            )
        ]
    if default is None:
        return []
    said = (
        f"the vhost's default queue type is {default} (from the management API): a queue "
        f"declared without x-queue-type is a {default} queue there. rr declares every queue "
        "with its type"
    )
    if default != "classic":
        said += (
            "; a client that declares one of the file's classic queues without "
            "x-queue-type is refused (406 inequivalent arg 'x-queue-type'), and a queue of the "
            f"file it declared first is a {default} queue (declare-conflict)"
        )
    return [Finding("vhost-default-queue-type", Level.INFO, said)]


def foreign_consumer_findings(
    desired: Desired, facts: ServerFacts, retried_queues: frozenset[str]
) -> list[Finding]:
    """The queues whose consumers that are not rr change what the file's settings mean
    (``topology/consumers.py``), or why that was not checked
    (``foreign-consumers-not-checked``, when the file has such a queue)."""
    read = facts.consumers
    if isinstance(read, TableUnread):
        if not checked_queues(desired.queues, retried_queues):
            return []
        what = f"which consumers of the file's queues are not rr run (GET {CONSUMERS_PATH})"
        return [_health_not_checked("foreign-consumers-not-checked", what, read)]
    return [
        Finding(note.code, Level(note.level.value), note.message, note.queue)
        for note in consumer_notes(desired.queues, retried_queues, read, facts.version.release)
    ]


def examine(
    desired: Desired | None,
    facts: ServerFacts,
    retried_queues: frozenset[str] = frozenset(),
    dead_letter_queues: frozenset[str] = frozenset(),
) -> list[Finding]:
    """Every finding; ``desired`` is the topology's expansion, when one was given
    (``retried_queues``: see :func:`topology_findings`; ``dead_letter_queues``: see
    :func:`consumer_findings`)."""
    findings = server_findings(facts)
    findings.extend(default_type_findings(facts))
    findings.extend(mirroring_findings(desired, facts))
    findings.extend(alarm_findings(facts))
    if desired is not None:
        findings.extend(declare_findings(facts))
        findings.extend(topology_findings(desired, facts, retried_queues))
        findings.extend(consumer_findings(desired, facts, dead_letter_queues))
        findings.extend(foreign_consumer_findings(desired, facts, retried_queues))
        findings.extend(quorum_member_findings(desired, facts))
    return findings


def safe(findings: list[Finding]) -> bool:
    """Nothing in the topology is unsafe on this server."""
    return all(finding.level is not Level.UNSAFE for finding in findings)


def healthy(findings: list[Finding]) -> bool:
    """Nothing is wrong with the server now (no ``error`` finding)."""
    return all(finding.level is not Level.ERROR for finding in findings)
