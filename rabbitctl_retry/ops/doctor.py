"""``rr doctor``: what rr reads of a server for the pure ``doctor/`` to judge — its version
and identity from the AMQP handshake, whether it can declare an ``x-delayed-message``
exchange (the probe of ``ops/probe.py``), and its deprecated-features table from the
management API, once that API shows it answers for the same server (docs/reference/cli.md,
"rr doctor"); on RabbitMQ 3.x also the vhost's policies and the state of the topology's
queues, for classic queue mirroring; with a topology, each of its queues' depth and consumers
by a passive declare (AMQP: no management API needed) and a quorum queue's
``x-delivery-limit`` where the file leaves it to the server (a re-declare probe), and from
the API the nodes' resource alarms, a quorum queue's members online and the rate a queue's
depth changes at. An API that cannot be read is a finding, never an error."""

from __future__ import annotations

import dataclasses

from rabbitctl_retry.doctor import (
    ClusterRead,
    DeclareCheck,
    PoliciesRead,
    QueueCounts,
    ServerFacts,
    TableUnread,
    Unread,
    identity_mismatch,
    names_to_compare,
)
from rabbitctl_retry.errors import TransportError, censor_urls, escape_unprintable
from rabbitctl_retry.ops.connected import connected
from rabbitctl_retry.ops.declare import observe_and_plan
from rabbitctl_retry.ops.probe import Connect, exchange_type, queue_arguments, queue_info
from rabbitctl_retry.server import (
    DeprecatedFeature,
    Policy,
    QueueConsumer,
    ServerIdentity,
    ServerVersion,
    Unstated,
)
from rabbitctl_retry.topology.effective import resolve
from rabbitctl_retry.topology.expand import Desired, QueueEntity, expand
from rabbitctl_retry.topology.model import Topology
from rabbitctl_retry.topology.plan import Absent
from rabbitctl_retry.transport.base import Connection, identity_of
from rabbitctl_retry.transport.management import ManagementApi, ManagementConnector, vhost_of

DELAYED_EXCHANGE_TYPE = "x-delayed-message"


async def server_facts(
    connect: Connect,
    desired: Desired | None,
    management: ManagementConnector,
    management_url: str | None,
    topology: Topology | None = None,
) -> ServerFacts:
    """What ``doctor/`` examines: the server ``connect`` reaches, whether it has the
    delayed-message plugin (probed only when ``desired`` has such an exchange) and, with a
    ``management_url``, what its management API says; with ``topology`` (``desired`` its
    expansion), what ``rr declare`` would make of it now (:func:`_declare_check`)."""
    async with connected(connect) as connection:
        identity, reached = identity_of(connection), connection.url
        facts = ServerFacts(
            version=connection.server_version,
            url=reached,
            cluster_name=identity.cluster_name,
            queue_counts=None if desired is None else await _queue_counts(connection, desired),
        )
    delayed = [x for x in desired.exchanges if x.type == DELAYED_EXCHANGE_TYPE] if desired else []
    if delayed:
        plugin = isinstance(await exchange_type(delayed[0], connect), Absent)
        facts = dataclasses.replace(facts, delayed_message_plugin=plugin)
    api: ManagementApi | None = None
    if management_url is not None:
        api = management(management_url, vhost=vhost_of(reached))
        unusable = await _identity_problem(api, identity, reached)
        if unusable is None:
            facts = await _with_api(facts, api, desired)
        else:  # an API that failed, or answers for another server
            facts = _api_unread(facts, unusable)
            api = None
    if topology is not None:
        facts = dataclasses.replace(facts, declare=await _declare_check(connect, topology, api))
    return facts


async def _with_api(facts: ServerFacts, api: ManagementApi, desired: Desired | None) -> ServerFacts:
    """``facts`` with what the management API (which answers for the same server) says."""
    features = await _deprecated_features(api)
    policies: PoliciesRead | TableUnread = facts.policies
    if isinstance(features, TableUnread) and features.why is Unread.FAILED:
        policies = features
    elif facts.version.behaviour.mirrors_classic_queues:
        policies = await _policies_read(api, desired)
    # the nodes and the queues whatever became of the table (paths of their own)
    cluster = await _cluster_read(api, desired)
    counts = facts.queue_counts
    if counts is not None:
        counts = await _with_policies(api, counts, facts.version)
    default_type, consumers = await _vhost_read(api, desired is not None)
    return dataclasses.replace(
        facts,
        deprecated_features=features,
        policies=policies,
        cluster=cluster,
        queue_counts=counts,
        default_queue_type=default_type,
        consumers=consumers,
    )


def _api_unread(facts: ServerFacts, why: TableUnread) -> ServerFacts:
    """``facts`` with every part the management API would have said unread, for ``why``."""
    return dataclasses.replace(
        facts,
        deprecated_features=why,
        policies=why,
        cluster=why,
        default_queue_type=why,
        consumers=why,
    )


async def _declare_check(
    connect: Connect, topology: Topology, api: ManagementApi | None
) -> DeclareCheck | TableUnread:
    """What ``rr declare`` would make of ``topology`` now: the file expanded for the server
    reached, observed and planned by ``rr declare``'s own code (``ops/declare.py``
    ``observe``, ``topology/plan.py`` ``plan``; nothing is changed: an equivalent redeclare
    is a no-op), with the vhost's policies when the management API reads them and the file
    keeps settings in a policy. A refusal of a look (a user without the configure
    permission) is why it was not checked."""
    connection = await connect()
    try:
        desired = expand(topology, connection.server_version.release)
        policies: tuple[Policy, ...] | None = None
        if api is not None and topology.uses_policies:
            policies = await api.policies()
        observed, planned = await observe_and_plan(
            connection, desired, connect=connect, policies=policies
        )
    except TransportError as error:
        return TableUnread(Unread.FAILED, escape_unprintable(censor_urls(str(error))))
    finally:
        await connection.close()
    return DeclareCheck(planned, observed, desired.referenced_exchanges)


async def _vhost_read(
    api: ManagementApi, with_consumers: bool
) -> tuple[str | TableUnread | None, tuple[QueueConsumer, ...] | TableUnread]:
    """The vhost's default queue type and (``with_consumers``: a topology was given) every
    consumer of it with its client, each or why it could not be read (one censored, escaped
    line)."""
    default: str | TableUnread | None
    consumers: tuple[QueueConsumer, ...] | TableUnread = TableUnread(Unread.NOT_GIVEN)
    try:
        default = await api.vhost_default_queue_type()
    except TransportError as error:
        default = TableUnread(Unread.FAILED, escape_unprintable(censor_urls(str(error))))
    if with_consumers:
        try:
            consumers = await api.consumers()
        except TransportError as error:
            consumers = TableUnread(Unread.FAILED, escape_unprintable(censor_urls(str(error))))
    return default, consumers


async def _queue_counts(connection: Connection, desired: Desired) -> tuple[QueueCounts, ...]:
    """Each queue of the topology the server holds, with its ready messages and consumers (a
    passive declare each, on a channel of its own: ``ops/probe.py``); one it does not hold is
    left out."""
    found = []
    for queue in desired.queues:
        info = await queue_info(connection, queue.name)
        if info is None:
            continue
        counts = QueueCounts(queue.name, info.message_count, info.consumer_count)
        if _limit_by_server(queue):
            arguments = await queue_arguments(connection, queue.name)
            if arguments is not None:
                counts = dataclasses.replace(
                    counts, limit_read=True, limit_argument=arguments.get("x-delivery-limit")
                )
        found.append(counts)
    return tuple(found)


async def _with_policies(
    api: ManagementApi, counts: tuple[QueueCounts, ...], version: ServerVersion
) -> tuple[QueueCounts, ...]:
    """``counts`` with each read ``x-delivery-limit`` resolved with the policy and the
    operator policy that apply to the queue (``topology/effective.py``), as the management
    API names them; unchanged where the API cannot be read."""
    if not any(count.limit_read for count in counts):
        return counts
    try:
        policies = {p.name: p for p in await api.policies()}
        operator = {p.name: p for p in await api.policies(operator=True)}
        resolved = []
        for count in counts:
            state = await api.queue_state(count.name) if count.limit_read else None
            if state is not None:
                acting = resolve(
                    {"x-delivery-limit": count.limit_argument}
                    if count.limit_argument is not None
                    else {},
                    "quorum",
                    policies.get(state.policy or ""),
                    operator.get(state.operator_policy or ""),
                    version,
                )
                count = dataclasses.replace(
                    count, limit_argument=acting.get("x-delivery-limit"), policies_read=True
                )
            resolved.append(count)
    except TransportError:
        return counts
    return tuple(resolved)


def _limit_by_server(queue: QueueEntity) -> bool:
    """A quorum queue of the file without a limit of its own: the server's own limit, if it
    gave it one, is read (a re-declare probe: ``ops/probe.py``)."""
    return queue.setting("x-queue-type") == "quorum" and queue.setting("x-delivery-limit") is None


async def _cluster_read(api: ManagementApi, desired: Desired | None) -> ClusterRead | TableUnread:
    """The nodes' alarms and, with a topology, the vhost's queues' members and depth rates
    (docs/reference/cli.md, "rr doctor"), or why they could not be read (one censored, escaped
    line)."""
    try:
        nodes = await api.node_resources()
        queues = await api.queue_health() if desired is not None else ()
    except TransportError as error:
        return TableUnread(Unread.FAILED, escape_unprintable(censor_urls(str(error))))
    return ClusterRead(nodes, queues)


async def _policies_read(api: ManagementApi, desired: Desired | None) -> PoliciesRead | TableUnread:
    """RabbitMQ 3.x: the vhost's policies, the state of each of the topology's queues and
    the vhost's queues (classic queue mirroring, docs/reference/cli.md), or why they could not be
    read (one censored, escaped line)."""
    try:
        policies = await api.policies()
        queues = []
        for queue in desired.queues if desired is not None else ():
            queues.append((queue.name, await api.queue_state(queue.name)))
        listed = await api.queues()
    except TransportError as error:
        return TableUnread(Unread.FAILED, escape_unprintable(censor_urls(str(error))))
    return PoliciesRead(policies, tuple(queues), listed)


async def _identity_problem(
    api: ManagementApi, identity: ServerIdentity, reached: str
) -> TableUnread | None:
    """None once the management API's ``/api/overview`` shows it answers for the server AMQP
    reached (the same cluster name, when both tell one, and the same version): else why none
    of its answers is used."""
    try:
        overview = await api.overview()
    except TransportError as error:
        return TableUnread(Unread.FAILED, escape_unprintable(censor_urls(str(error))))
    try:
        nodes = await api.nodes() if names_to_compare(identity, overview) else ()
    except TransportError as error:
        return TableUnread(Unread.FAILED, escape_unprintable(censor_urls(str(error))))
    mismatch = identity_mismatch(
        identity, overview, amqp_url=reached, api_url=api.shown, api_nodes=nodes
    )
    if mismatch is not None:
        return TableUnread(Unread.MISMATCH, censor_urls(mismatch))
    return None


async def _deprecated_features(api: ManagementApi) -> tuple[DeprecatedFeature, ...] | TableUnread:
    """The server's deprecated-features table, or why it could not be read: an API without
    it (404 or 406), one that lists no states (RabbitMQ 4.0.5's), or one that failed
    (unreachable, a refused login, an answer of the wrong shape), said in one censored,
    escaped line."""
    try:
        features = await api.deprecated_features()
    except TransportError as error:
        return TableUnread(Unread.FAILED, escape_unprintable(censor_urls(str(error))))
    if features is None:
        return TableUnread(Unread.MISSING)
    if isinstance(features, Unstated):
        return TableUnread(Unread.UNSTATED)
    return features


__all__ = ["DELAYED_EXCHANGE_TYPE", "server_facts"]
