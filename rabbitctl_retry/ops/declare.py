"""The shell of ``rr declare``: observe the broker, plan, and apply only a clean plan.

Observation never changes the broker: every queue and exchange is looked up and compared by
the probes of ``ops/probe.py`` (a passive declare, then re-declares with the desired
arguments on throwaway channels until the broker names no more differences; an exchange type
that needs a plugin is tried on a throwaway connection).

Applying happens only when no operation conflicts, so a bad file or a drifted broker never
leaves a half-provisioned topology; applying is idempotent, so an interrupted apply can be
rerun.

Given the management API's URL, the cluster's nodes and each queue's members come from it
(``transport/management.py``): AMQP cannot tell either.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import assert_never

from rabbitctl_retry.ops.probe import (
    Connect,
    compare_exchange,
    compare_queue,
    exchange_exists,
    exchange_type,
    queue_exists,
)
from rabbitctl_retry.topology.expand import (
    BindingEntity,
    Desired,
    ExchangeEntity,
    QueueEntity,
    expand,
)
from rabbitctl_retry.topology.model import BUILTIN_EXCHANGE_TYPES, Topology
from rabbitctl_retry.topology.plan import (
    Absent,
    Matches,
    Observation,
    ObservationKey,
    Plan,
    Status,
    plan,
)
from rabbitctl_retry.transport.base import Connection, Connector
from rabbitctl_retry.transport.failover import connect_any
from rabbitctl_retry.transport.management import ManagementApi, vhost_of


async def provision(
    connection: Connection,
    desired: Desired,
    *,
    dry_run: bool,
    connect: Connect,
    cluster_nodes: Sequence[str] | None = None,
) -> Plan:
    """Observe, plan, and (unless ``dry_run`` or a conflict) apply; return the final plan.

    Args:
        connection: the connection to observe and apply on.
        desired: the expanded topology.
        dry_run: plan only.
        connect: opens a throwaway connection for exchange-type probes.
        cluster_nodes: the cluster's nodes, when known (``replicas`` is checked against them).
    """
    observed = await observe(connection, desired, connect=connect)
    result = plan(
        desired,
        observed,
        server_major=connection.server_version.major,
        cluster_nodes=cluster_nodes,
    )
    if dry_run or not result.can_apply:
        return result
    await apply(connection, result)
    return result.applied()


async def observe(
    connection: Connection, desired: Desired, *, connect: Connect
) -> dict[ObservationKey, Observation]:
    """What the broker holds for every queue and exchange of ``desired``."""
    observed: dict[ObservationKey, Observation] = {}
    for name in desired.referenced_exchanges:
        observed[("exchange", name)] = await exchange_exists(connection, name)
    for exchange in desired.exchanges:
        observed[exchange.key] = await _observe_exchange(connection, exchange, connect)
    for queue in desired.queues:
        observed[queue.key] = await _observe_queue(connection, queue)
    return observed


async def _observe_queue(connection: Connection, queue: QueueEntity) -> Observation:
    presence = await queue_exists(connection, queue.name)
    if not isinstance(presence, Matches):
        return presence
    return await compare_queue(connection, queue)


async def _observe_exchange(
    connection: Connection, exchange: ExchangeEntity, connect: Connect
) -> Observation:
    presence = await exchange_exists(connection, exchange.name)
    if isinstance(presence, Absent) and exchange.type not in BUILTIN_EXCHANGE_TYPES:
        return await exchange_type(exchange, connect)
    if not isinstance(presence, Matches):
        return presence
    return await compare_exchange(connection, exchange)


async def apply(connection: Connection, result: Plan) -> None:
    """Declare every planned or unchanged entity of a conflict-free plan, in order."""
    if not result.can_apply:
        raise ValueError("a plan with conflicts is never applied")
    channel = await connection.channel()
    try:
        for operation in result.operations:
            if operation.status is Status.CONFLICT:
                continue
            entity = operation.entity
            match entity:
                case ExchangeEntity():
                    await channel.exchange_declare(
                        entity.name,
                        type=entity.type,
                        durable=entity.durable,
                        arguments=entity.arguments,
                    )
                case QueueEntity():
                    await channel.queue_declare(
                        entity.name, durable=entity.durable, arguments=entity.arguments
                    )
                case BindingEntity():
                    await channel.queue_bind(
                        entity.queue, entity.exchange, entity.routing_key, entity.arguments
                    )
                case _:
                    assert_never(entity)
    finally:
        await channel.close()


async def declare_topology(
    topology: Topology,
    urls: Sequence[str],
    *,
    dry_run: bool,
    connector: Connector,
    management_url: str | None = None,
) -> Plan:
    """``rr declare``: connect to the first of ``urls`` that answers, provision ``topology``,
    close.

    With ``management_url`` (docs/cluster.md, "Replicas"), the cluster's nodes are read first
    (a ``replicas`` the cluster cannot meet is a conflict: nothing is changed), and after an
    apply the plan says where each queue lives.
    """

    async def connect() -> Connection:
        return await connect_any(connector, urls)

    connection = await connect()
    try:
        api = (
            ManagementApi(management_url, vhost=vhost_of(connection.url))
            if management_url is not None
            else None
        )
        nodes = await api.nodes() if api is not None else None
        desired = expand(topology)
        result = await provision(
            connection, desired, dry_run=dry_run, connect=connect, cluster_nodes=nodes
        )
    finally:
        await connection.close()
    if api is None or dry_run or result.conflicts:
        return result
    placements = {}
    for queue in desired.queues:
        placement = await api.placement(queue.name)
        if placement is not None:
            placements[queue.name] = placement
    return result.placed(placements)
