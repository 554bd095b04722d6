"""``rr status``: each queue's depth, consumers, type and whether it is what the topology file
says, from passive declares and the declare probes of ``ops/probe.py`` (the file expanded for
the server reached, each probe judged as ``rr declare`` judges it: ``topology/plan.py``);
with a management API, also its unacked messages, its consumers' prefetch and its publish
and deliver rates, and the vhost's default queue type. Nothing is changed and no message is
read (docs/reference/cli.md, "rr status")."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial

from rabbitctl_retry.errors import ResourceLocked
from rabbitctl_retry.ops.connected import connected
from rabbitctl_retry.ops.live import LiveQueue, live_settings
from rabbitctl_retry.ops.probe import Connect, compare_queue, queue_info, queue_kind
from rabbitctl_retry.server import QueueActivity, QueueConsumer, ServerVersion
from rabbitctl_retry.topology.expand import Desired, QueueEntity, expand
from rabbitctl_retry.topology.model import Topology
from rabbitctl_retry.topology.plan import (
    Differs,
    Refused,
    broker_queue_type,
    describe_differences,
    keeps_server_limit,
)
from rabbitctl_retry.transport.base import Connection
from rabbitctl_retry.transport.management import ManagementConnector


@dataclass(frozen=True, slots=True)
class QueueStatus:
    entity: QueueEntity
    listed: bool
    """The queue comes from the topology file (so its arguments are compared)."""
    messages: int | None
    """Ready messages (None: the queue does not exist)."""
    consumers: int | None
    drift: str | None = None
    """How it differs from the file (None: it matches, or it is not in a file)."""
    live: LiveQueue | None = None
    """Its settings as the management API states them, with their effective values (None:
    no management URL was given; docs/how-to/migrate-to-quorum.md, "Changing a topology")."""
    kind: str | None = None
    """Its type on the broker (``classic``, ``quorum``, ``stream``), from the management API,
    else from the re-declare probes: a queue of the file's (``topology/plan.py``
    ``broker_queue_type``), a queue only named's (``ops/probe.py`` ``queue_kind``); None when
    not known, or the queue does not exist."""
    activity: QueueActivity | None = None
    """Its traffic as the management API states it (None: no management URL was given, or
    the API does not list the queue)."""
    locked: bool = False
    """It exists, exclusive to another connection: the broker refuses every look at it
    over AMQP (405), so its depth and consumers are not known, nor, for a queue of the file,
    whether it matches."""

    @property
    def present(self) -> bool:
        return self.messages is not None or self.locked

    @property
    def ok(self) -> bool:
        return self.present and self.drift is None and not (self.locked and self.listed)


async def queue_statuses(
    connection: Connection,
    queues: Sequence[QueueEntity],
    *,
    listed: bool,
    activities: Mapping[str, QueueActivity] | None = None,
) -> list[QueueStatus]:
    """The status of each of ``queues``, in order. ``listed``: they come from a topology file
    and their arguments are compared with it. ``activities``: what the management API states
    of each queue (by name; None: no API), whose type is believed; a queue only named that
    the API does not state is probed for its type."""
    statuses: list[QueueStatus] = []
    for entity in queues:
        activity = None if activities is None else activities.get(entity.name)
        kind = activity.kind if activity is not None else None
        try:
            info = await queue_info(connection, entity.name)
        except ResourceLocked:
            statuses.append(
                QueueStatus(entity, listed, None, None, kind=kind, activity=activity, locked=True)
            )
            continue
        if info is None:
            statuses.append(QueueStatus(entity, listed, None, None))
            continue
        drift = None
        if listed:
            # judged as rr declare judges it: a quorum queue kept with the server's limit is
            # no difference (topology/plan.py, keeps_server_limit)
            _, observed, _ = keeps_server_limit(entity, await compare_queue(connection, entity))
            if isinstance(observed, Differs):
                drift = describe_differences(observed)
            elif isinstance(observed, Refused):
                drift = observed.reason
            kind = kind or broker_queue_type(entity, observed)
        elif kind is None:
            kind = await queue_kind(connection, entity.name)
        statuses.append(
            QueueStatus(
                entity,
                listed,
                info.message_count,
                info.consumer_count,
                drift,
                kind=kind,
                activity=activity,
            )
        )
    return statuses


ReadLive = Callable[[Desired], Awaitable[tuple[LiveQueue, ...]]]
"""``ops/live.py`` ``live_settings`` with its management API bound."""

ReadActivity = Callable[[], Awaitable[tuple[QueueActivity, ...]]]
"""The management API's ``queue_activity``: every queue of the vhost with its traffic."""


@dataclass(frozen=True, slots=True)
class Management:
    """What ``rr status`` reads of a management API."""

    activity: ReadActivity
    live: ReadLive
    default_queue_type: Callable[[], Awaitable[str | None]]
    """The vhost's default queue type (``vhost_default_queue_type``)."""
    consumers: Callable[[], Awaitable[tuple[QueueConsumer, ...]]]
    """Every consumer of the vhost with its client (``consumers``)."""


def management_reads(
    management_url: str, *, vhost: str, management: ManagementConnector
) -> Management:
    """What ``rr status`` reads of the management API at ``management_url`` for ``vhost``,
    through ``management``'s adapter."""

    async def activity() -> tuple[QueueActivity, ...]:
        return await management(management_url, vhost=vhost).queue_activity()

    async def default_queue_type() -> str | None:
        return await management(management_url, vhost=vhost).vhost_default_queue_type()

    async def consumers() -> tuple[QueueConsumer, ...]:
        return await management(management_url, vhost=vhost).consumers()

    return Management(
        activity=activity,
        live=partial(
            live_settings, management_url=management_url, vhost=vhost, management=management
        ),
        default_queue_type=default_queue_type,
        consumers=consumers,
    )


@dataclass(frozen=True, slots=True)
class Statuses:
    """One reading of ``rr status``."""

    queues: list[QueueStatus]
    server: ServerVersion
    """The release of the server read."""
    default_queue_type: str | None = None
    """The vhost's default queue type, as the management API states it (None: no API, or it
    states none)."""
    consumers: tuple[QueueConsumer, ...] | None = None
    """Every consumer of the vhost with its client, from the management API (None: no
    API)."""


async def read_statuses(
    connect: Connect,
    topology: Topology | None,
    named: Sequence[QueueEntity] | None,
    *,
    management: Management | None = None,
) -> Statuses:
    """One reading of ``rr status``: the queues of the topology file (``topology``, expanded
    for the server reached and compared with it), then the ones only named (``named``; None:
    every queue of the vhost, as the management API lists them, sorted by name), on one
    connection from ``connect``; with ``management``, each one's traffic and its settings as
    the management API states them, the vhost's default queue type and its consumers."""
    activities = None
    if management is not None:
        activities = {found.name: found for found in await management.activity()}
    async with connected(connect) as connection:
        server = connection.server_version
        listed = expand(topology, server.release).queues if topology is not None else ()
        if named is None:
            in_file = {queue.name for queue in listed}
            named = [
                QueueEntity(name=name) for name in sorted(activities or {}) if name not in in_file
            ]
        statuses = [
            *await queue_statuses(connection, listed, listed=True, activities=activities),
            *await queue_statuses(connection, named, listed=False, activities=activities),
        ]
    if management is None:
        return Statuses(statuses, server)
    found = await management.live(Desired(queues=tuple(status.entity for status in statuses)))
    return Statuses(
        [replace(status, live=live) for status, live in zip(statuses, found, strict=True)],
        server,
        default_queue_type=await management.default_queue_type(),
        consumers=await management.consumers(),
    )


__all__ = [
    "Management",
    "QueueStatus",
    "Statuses",
    "management_reads",
    "queue_statuses",
    "read_statuses",
]
