"""The shell of ``rr declare``: observe the broker, plan, and apply only a clean plan.

Observation never changes the broker: every queue and exchange is looked up and compared by
the probes of ``ops/probe.py`` (a passive declare, then re-declares with the desired
arguments on throwaway channels until the broker names no more differences; an exchange type
that needs a plugin is tried on a throwaway connection).

Applying happens only when no operation conflicts, so a bad file or a drifted broker never
leaves a half-provisioned topology; applying is idempotent, so an interrupted apply can be
rerun.

Given the management API's URL, the cluster's nodes and each queue's members come from it
(through the management port, ``transport/management.py``): AMQP cannot tell either; so
does, for a file with transient queues, whether the server denies them (its
deprecated-features table, docs/how-to/run-on-a-cluster.md).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from functools import partial
from typing import assert_never

from rabbitctl_retry.doctor import identity_differences, names_to_compare
from rabbitctl_retry.errors import ConfigError, TransportError
from rabbitctl_retry.ops.connected import connected
from rabbitctl_retry.ops.probe import (
    Connect,
    compare_exchange,
    compare_queue,
    exchange_exists,
    exchange_type,
    queue_exists,
)
from rabbitctl_retry.server import OVERVIEW_PATH, DeprecatedFeature, Policy, Unstated
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
from rabbitctl_retry.transport.base import (
    Channel,
    Connection,
    Connector,
    identity_of,
)
from rabbitctl_retry.transport.failover import connect_any
from rabbitctl_retry.transport.management import ManagementApi, ManagementConnector, vhost_of
from rabbitctl_retry.urls import parse_management_url


async def provision(
    connection: Connection,
    desired: Desired,
    *,
    dry_run: bool,
    connect: Connect,
    cluster_nodes: Sequence[str] | None = None,
    deprecated_features: Mapping[str, bool] | None = None,
    api: ManagementApi | None = None,
    policies: Sequence[Policy] | None = None,
) -> Plan:
    """Observe, plan, and (unless ``dry_run`` or a conflict) apply; return the final plan.

    Args:
        connection: the connection to observe and apply on.
        desired: the expanded topology.
        dry_run: plan only.
        connect: opens a throwaway connection for exchange-type probes.
        cluster_nodes: the cluster's nodes, when known (``replicas`` is checked against them).
        deprecated_features: the server's deprecated-features table (name -> permitted), when
            known: a transient queue is a conflict only where it denies them.
        api: the management API, which puts rr's policies (``settings = "policy"``).
        policies: the vhost's policies as ``api`` listed them, when read.
    """
    _, result = await observe_and_plan(
        connection,
        desired,
        connect=connect,
        cluster_nodes=cluster_nodes,
        deprecated_features=deprecated_features,
        policies=policies,
    )
    if dry_run or not result.can_apply:
        return result
    await apply(connection, result, api=api)
    return result.applied()


OBSERVERS = 8
"""Connections that look entities up at once when there are many: a file of 30,000 queues is
observed in a fraction of the 30,000 round trips one after the other. (Each look-up runs on
a channel of its own, and a connection opens them one at a time: aiormq reuses a channel
number the broker has not finished closing when several open at once.)"""
LOOKS_PER_OBSERVER = 200
"""Below this many look-ups per extra connection, the given connection does them alone."""


Look = Callable[[Connection], Awaitable[Observation]]


async def observe_and_plan(
    connection: Connection,
    desired: Desired,
    *,
    connect: Connect,
    cluster_nodes: Sequence[str] | None = None,
    deprecated_features: Mapping[str, bool] | None = None,
    policies: Sequence[Policy] | None = None,
) -> tuple[dict[ObservationKey, Observation], Plan]:
    """What the broker holds of ``desired`` (:func:`observe`), and the plan of ``desired``
    against it for the server of ``connection`` (``topology/plan.py`` ``plan``, the other
    arguments its own): ``rr declare``'s, ``rr doctor``'s, ``rr migrate``'s and ``rr run``'s
    look at a file."""
    observed = await observe(connection, desired, connect=connect)
    result = plan(
        desired,
        observed,
        server_version=connection.server_version.release,
        cluster_nodes=cluster_nodes,
        deprecated_features=deprecated_features,
        policies=policies,
    )
    return observed, result


async def observe(
    connection: Connection, desired: Desired, *, connect: Connect
) -> dict[ObservationKey, Observation]:
    """What the broker holds for every queue and exchange of ``desired``; with many, on up to
    :data:`OBSERVERS` connections at once (``connect`` opens the extra ones)."""
    looks: list[tuple[ObservationKey, Look]] = [
        (("exchange", name), partial(_exchange_exists, name=name))
        for name in desired.referenced_exchanges
    ]
    looks += [
        (x.key, partial(_observe_exchange, exchange=x, connect=connect)) for x in desired.exchanges
    ]
    looks += [(q.key, partial(_observe_queue, queue=q)) for q in desired.queues]
    extra = min(OBSERVERS - 1, len(looks) // LOOKS_PER_OBSERVER)
    observed: dict[ObservationKey, Observation] = {}
    pending = iter(looks)

    async def work(on: Connection) -> None:
        for key, look in pending:  # one shared iterator: each look-up is taken once
            observed[key] = await look(on)

    async def work_on_own_connection() -> None:
        own = await connect()
        try:
            await work(own)
        finally:
            await own.close()

    workers = [asyncio.ensure_future(work(connection))]
    workers += [asyncio.ensure_future(work_on_own_connection()) for _ in range(extra)]
    try:
        await asyncio.gather(*workers)
    finally:
        for worker in workers:
            worker.cancel()
        await asyncio.gather(*workers, return_exceptions=True)
    return {key: observed[key] for key, _ in looks}


async def _exchange_exists(connection: Connection, *, name: str) -> Observation:
    return await exchange_exists(connection, name)


async def _observe_queue(connection: Connection, *, queue: QueueEntity) -> Observation:
    presence = await queue_exists(connection, queue.name)
    if not isinstance(presence, Matches):
        return presence
    return await compare_queue(connection, queue)


async def _observe_exchange(
    connection: Connection, *, exchange: ExchangeEntity, connect: Connect
) -> Observation:
    presence = await exchange_exists(connection, exchange.name)
    if isinstance(presence, Absent) and exchange.type not in BUILTIN_EXCHANGE_TYPES:
        return await exchange_type(exchange, connect)
    if not isinstance(presence, Matches):
        return presence
    return await compare_exchange(connection, exchange)


@dataclass(frozen=True, slots=True)
class PolicyStep:
    """Put rr's policy ``policy`` (new or changed), or delete the one named ``name``."""

    name: str
    policy: Policy | None


Step = PolicyStep | ExchangeEntity | QueueEntity | BindingEntity


async def apply(connection: Connection, result: Plan, *, api: ManagementApi | None = None) -> None:
    """Carry out a conflict-free plan: first rr's policies (put, or deleted) through ``api``,
    so that no queue exists without its settings, then every planned or unchanged entity in
    order (docs/reference/topology.md, "How `rr declare` decides").

    A step the broker refuses ends the apply with the broker's error, its text saying which
    step failed, what was done before it and what was not (every step is idempotent:
    ``rr declare`` again goes on from there); a refused policy stops before any queue is
    declared."""
    if not result.can_apply:
        raise ValueError("a plan with conflicts is never applied")
    steps: list[Step] = [
        PolicyStep(op.drop_policy or (op.put_policy.name if op.put_policy else ""), op.put_policy)
        for op in result.operations
        if op.put_policy is not None or op.drop_policy is not None
    ]
    if steps and api is None:
        raise ValueError("rr's policies are put through a management API")
    steps += [op.entity for op in result.operations if op.status is not Status.CONFLICT]
    channel = await connection.channel()
    try:
        for done, step in enumerate(steps):
            try:
                if isinstance(step, PolicyStep):
                    assert api is not None
                    await _policy(api, step)
                else:
                    await declare_entity(channel, step)
            except TransportError as error:
                raise type(error)(_stopped_at(steps, done, error)) from error
    finally:
        await channel.close()


async def _policy(api: ManagementApi, step: PolicyStep) -> None:
    if step.policy is not None:
        await api.put_policy(step.policy)
    else:
        await api.delete_policy(step.name)


async def declare_entity(
    channel: Channel, entity: ExchangeEntity | QueueEntity | BindingEntity
) -> None:
    """Declare (or bind) ``entity`` as the file says; idempotent."""
    match entity:
        case ExchangeEntity():
            await channel.exchange_declare(
                entity.name, type=entity.type, durable=entity.durable, arguments=entity.arguments
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


async def unbind_entity(channel: Channel, binding: BindingEntity) -> None:
    """Remove ``binding``: what :func:`declare_entity` binds."""
    await channel.queue_unbind(
        binding.queue, binding.exchange, binding.routing_key, binding.arguments
    )


def _stopped_at(steps: Sequence[Step], failed: int, error: Exception) -> str:
    """What an apply that failed at step ``failed`` did and did not do. Pure."""
    before = ", ".join(_step(entity) for entity in steps[:failed]) or "nothing"
    after = ", ".join(_step(entity) for entity in steps[failed + 1 :]) or "nothing"
    return (
        f"the declare stopped at {_step(steps[failed])}: {error}; declared before it: "
        f"{before}; not declared: {after} (rr declare again goes on from there)"
    )


def _step(entity: Step) -> str:
    match entity:
        case PolicyStep():
            verb = "put" if entity.policy is not None else "deletion"
            return f"policy {entity.name!r} ({verb})"
        case ExchangeEntity():
            return f"exchange {entity.name!r}"
        case QueueEntity():
            return f"queue {entity.name!r}"
        case BindingEntity():
            return f"binding of {entity.queue!r} to {entity.exchange!r} ({entity.routing_key!r})"
        case _:
            assert_never(entity)


def permitted_features(
    table: tuple[DeprecatedFeature, ...] | Unstated | None,
) -> dict[str, bool] | None:
    """A deprecated-features table as the plan takes it (name -> permitted); None when the
    API has none (404/406: RabbitMQ 3.10.8) or gives no states (RabbitMQ 4.0.5)."""
    if table is None or isinstance(table, Unstated):
        return None
    return {feature.name: feature.permitted for feature in table}


async def _check_same_server(api: ManagementApi, connection: Connection) -> None:
    """Refuse, before anything changes, a management API that does not answer for the server
    ``connection`` reached: its nodes and its deprecated-features table would decide the plan
    (docs/how-to/run-on-a-cluster.md, "Replicas")."""
    amqp, told = identity_of(connection), await api.overview()
    nodes = await api.nodes() if names_to_compare(amqp, told) else ()
    differences = identity_differences(amqp, told, nodes)
    if differences is not None:
        raise ConfigError(
            f"the management API at {api.shown} does not answer for the server rr reached at "
            f"{connection.url} ({OVERVIEW_PATH}: {differences}); nothing was changed. Give the "
            "management URL of the server --url reaches"
        )


POLICY_NEEDS_MANAGEMENT = (
    'settings = "policy" puts queue settings in policies, which only the management HTTP API '
    "sets (AMQP cannot): give --management-url, $RR_MANAGEMENT_URL or [broker] "
    'management_url; nothing was changed (rr docs migrate-to-quorum "Changing a topology")'
)


@dataclass(frozen=True, slots=True)
class Declared:
    """What ``rr declare`` did (docs/how-to/run-on-a-cluster.md, "Replicas")."""

    plan: Plan
    """The final plan; with the placements when the management API told them."""
    placement_problem: TransportError | None = None
    """Why the management API could not tell where the queues live after the apply (the
    apply itself is done): a refused login, an error answer, an answer of the wrong shape.
    None when it told, or was not asked."""
    default_queue_type: str | None = None
    """The vhost's default queue type as the management API states it (None: no management
    URL, or the API states none): what a queue declared without ``x-queue-type`` would be;
    rr declares every queue with its type (docs/reference/topology.md, "The queue's type")."""
    default_type_problem: TransportError | None = None
    """Why the management API could not tell the vhost's default queue type (it decides
    nothing: rr declares every queue with its type); None when it told, or was not asked."""


def need_management_for_policies(topology: Topology, management_url: str | None) -> None:
    """A file with policies needs the management API (rr declare, rr migrate)."""
    if topology.uses_policies and management_url is None:
        raise ConfigError(POLICY_NEEDS_MANAGEMENT)


@asynccontextmanager
async def opened(
    urls: Sequence[str],
    connector: Connector,
    management_url: str | None,
    management: ManagementConnector | None,
) -> AsyncIterator[tuple[Connection, ManagementApi | None, Callable[[], Awaitable[Connection]]]]:
    """The connection of ``rr declare`` and ``rr migrate`` (the first of ``urls`` that
    answers), the management API of its vhost when ``management_url`` is given, and how to
    open another connection like it; the connection is closed on the way out."""

    async def connect() -> Connection:
        return await connect_any(connector, urls)

    async with connected(connect) as connection:
        api = (
            management(management_url, vhost=vhost_of(connection.url))
            if management_url is not None and management is not None
            else None
        )
        yield connection, api, connect


async def declare_topology(
    topology: Topology,
    urls: Sequence[str],
    *,
    dry_run: bool,
    connector: Connector,
    management_url: str | None = None,
    management: ManagementConnector | None = None,
) -> Declared:
    """``rr declare``: connect to the first of ``urls`` that answers, provision ``topology``,
    close.

    With ``management_url`` (docs/how-to/run-on-a-cluster.md, "Replicas"), the cluster's nodes are
    read first (a ``replicas`` the cluster cannot meet is a conflict, and an API that does not
    answer ends the command: nothing is changed), and, when the file has transient queues, the
    server's deprecated-features table (one that denies them makes them conflicts); after an
    apply the plan says where each queue lives. ``management`` reaches the API (the
    management port's adapter, as ``connector`` is the AMQP one's); it must be given with
    ``management_url``. When the API fails only then, the apply
    stands: the plan comes back without placements, with the reason in
    ``placement_problem``.
    """
    if management_url is not None:
        parse_management_url(management_url)  # refused before anything connects
        if management is None:
            raise ValueError("a management URL needs a management connector")
    need_management_for_policies(topology, management_url)
    async with opened(urls, connector, management_url, management) as (connection, api, connect):
        if api is not None:
            await _check_same_server(api, connection)
        nodes = await api.nodes() if api is not None else None
        default_type, default_problem = await _default_type(api)
        desired = expand(topology, connection.server_version.release)
        features = None
        if api is not None and any(not queue.durable for queue in desired.queues):
            features = permitted_features(await api.deprecated_features())
        policies = await api.policies() if api is not None and topology.uses_policies else None
        result = await provision(
            connection,
            desired,
            dry_run=dry_run,
            connect=connect,
            cluster_nodes=nodes,
            deprecated_features=features,
            api=api,
            policies=policies,
        )
    told = Declared(
        plan=result, default_queue_type=default_type, default_type_problem=default_problem
    )
    if api is None or dry_run or result.conflicts:
        return told
    placements = {}
    try:
        for queue in desired.queues:
            placement = await api.placement(queue.name)
            if placement is not None:
                placements[queue.name] = placement
    except TransportError as error:
        return dataclasses.replace(told, placement_problem=error)
    return dataclasses.replace(told, plan=result.placed(placements))


async def _default_type(api: ManagementApi | None) -> tuple[str | None, TransportError | None]:
    """The vhost's default queue type the management API states, or why it could not: only
    said, it decides nothing (rr declares every queue with its type), so an API that fails
    here does not stop the declare."""
    if api is None:
        return None, None
    try:
        return await api.vhost_default_queue_type(), None
    except TransportError as error:
        return None, error
