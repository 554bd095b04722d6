"""The shell of ``rr declare``: observe the broker, plan, and apply only a clean plan.

Observation never changes the broker: a queue or exchange is looked up with a passive
declare, and one that exists is re-declared with the desired arguments on a throwaway
channel. RabbitMQ answers an equivalent re-declare with declare-ok (a no-op) and an
inequivalent one with PRECONDITION_FAILED, which closes only that channel. Each refusal names
one argument, so the desired declaration takes the broker's value for it and is re-declared
again, until every difference is known. An exchange type that needs a plugin is tried on a
separate, throwaway connection, since RabbitMQ closes the whole connection (503) for an
unknown type; the probe exchange is auto-delete and deleted at once.

Applying happens only when no operation conflicts, so a bad file or a drifted broker never
leaves a half-provisioned topology; applying is idempotent, so an interrupted apply can be
rerun.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import assert_never

from rabbitctl_retry.errors import NotFound, PreconditionFailed, ResourceLocked, TransportError
from rabbitctl_retry.topology.expand import (
    BindingEntity,
    Desired,
    ExchangeEntity,
    QueueEntity,
    expand,
)
from rabbitctl_retry.topology.inequivalence import (
    Declaration,
    adopt_current,
    desired_display,
    parse_inequivalence,
)
from rabbitctl_retry.topology.model import BUILTIN_EXCHANGE_TYPES, Topology
from rabbitctl_retry.topology.plan import (
    Absent,
    Difference,
    Differs,
    Matches,
    Observation,
    ObservationKey,
    Plan,
    Refused,
    Status,
    plan,
)
from rabbitctl_retry.transport.base import Channel, Connection, Connector

Connect = Callable[[], Awaitable[Connection]]

_MAX_DIFFERENCES = 32


async def provision(
    connection: Connection, desired: Desired, *, dry_run: bool, connect: Connect
) -> Plan:
    """Observe, plan, and (unless ``dry_run`` or a conflict) apply; return the final plan.

    Args:
        connection: the connection to observe and apply on.
        desired: the expanded topology.
        dry_run: plan only.
        connect: opens a throwaway connection for exchange-type probes.
    """
    observed = await observe(connection, desired, connect=connect)
    result = plan(desired, observed, server_major=connection.server_version.major)
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
        observed[("exchange", name)] = await _exists(connection, "exchange", name)
    for exchange in desired.exchanges:
        observed[exchange.key] = await _observe_exchange(connection, exchange, connect)
    for queue in desired.queues:
        observed[queue.key] = await _observe_queue(connection, queue)
    return observed


async def _exists(connection: Connection, kind: str, name: str) -> Observation:
    channel = await connection.channel()
    try:
        if kind == "queue":
            await channel.queue_declare(name, passive=True)
        else:
            await channel.exchange_declare(name, passive=True)
    except NotFound:
        return Absent()
    except ResourceLocked as error:
        return Refused(f"locked: {error}")
    finally:
        await channel.close()
    return Matches()


async def _observe_queue(connection: Connection, queue: QueueEntity) -> Observation:
    presence = await _exists(connection, "queue", queue.name)
    if not isinstance(presence, Matches):
        return presence
    declaration = Declaration(durable=queue.durable, arguments=dict(queue.arguments))

    async def redeclare(channel: Channel, current: Declaration) -> None:
        await channel.queue_declare(
            queue.name, durable=current.durable, arguments=current.arguments
        )

    return await _compare(connection, declaration, redeclare)


async def _observe_exchange(
    connection: Connection, exchange: ExchangeEntity, connect: Connect
) -> Observation:
    presence = await _exists(connection, "exchange", exchange.name)
    if isinstance(presence, Absent) and exchange.type not in BUILTIN_EXCHANGE_TYPES:
        return await _probe_exchange_type(exchange, connect)
    if not isinstance(presence, Matches):
        return presence
    declaration = Declaration(
        durable=exchange.durable,
        arguments=dict(exchange.arguments),
        exchange_type=exchange.type,
    )

    async def redeclare(channel: Channel, current: Declaration) -> None:
        await channel.exchange_declare(
            exchange.name,
            type=current.exchange_type or exchange.type,
            durable=current.durable,
            auto_delete=current.auto_delete,
            internal=current.internal,
            arguments=current.arguments,
        )

    return await _compare(connection, declaration, redeclare)


async def _compare(
    connection: Connection,
    declaration: Declaration,
    redeclare: Callable[[Channel, Declaration], Awaitable[None]],
) -> Observation:
    """Re-declare until the broker accepts, collecting each difference it names."""
    desired = declaration
    differences: list[Difference] = []
    for _ in range(_MAX_DIFFERENCES):
        channel = await connection.channel()
        try:
            await redeclare(channel, declaration)
        except PreconditionFailed as error:
            found = parse_inequivalence(str(error))
            adopted = adopt_current(declaration, found) if found is not None else None
            if found is None or adopted is None or found.key in {d.key for d in differences}:
                return Differs(tuple(differences), detail=str(error))
            differences.append(
                Difference(
                    key=found.key,
                    desired=desired_display(desired, found.key),
                    current=found.current.display(),
                )
            )
            declaration = adopted
            continue
        finally:
            await channel.close()
        break
    if differences:
        return Differs(tuple(differences))
    return Matches()


async def _probe_exchange_type(exchange: ExchangeEntity, connect: Connect) -> Observation:
    """Absent, if the broker knows the type; Refused otherwise (e.g. no delayed-message plugin)."""
    probe = f"rr.probe.{uuid.uuid4().hex}"
    connection = await connect()
    try:
        channel = await connection.channel()
        await channel.exchange_declare(
            probe,
            type=exchange.type,
            durable=False,
            auto_delete=True,
            arguments=exchange.arguments,
        )
        await channel.exchange_delete(probe)
        await channel.close()
    except TransportError as error:
        return Refused(
            f"the broker cannot declare an exchange of type {exchange.type!r} "
            f"(is its plugin enabled?): {error}"
        )
    finally:
        await connection.close()
    return Absent()


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
    topology: Topology, url: str, *, dry_run: bool, connector: Connector
) -> Plan:
    """``rr declare``: connect to ``url``, provision ``topology``, close."""

    async def connect() -> Connection:
        return await connector(url)

    connection = await connect()
    try:
        return await provision(connection, expand(topology), dry_run=dry_run, connect=connect)
    finally:
        await connection.close()
