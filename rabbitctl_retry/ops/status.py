"""``rr status``: each queue's depth, consumers and whether it is what the topology file says,
from passive declares and the declare probes of ``ops/probe.py``; nothing is changed and no
message is read (docs/cli.md, "rr status")."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace

from rabbitctl_retry.ops.live import LiveQueue
from rabbitctl_retry.ops.probe import Connect, compare_queue, queue_info
from rabbitctl_retry.topology.expand import Desired, QueueEntity
from rabbitctl_retry.topology.plan import Differs, Refused, describe_differences
from rabbitctl_retry.transport.base import Connection


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
    no management URL was given; docs/topology.md, "Changing a topology")."""

    @property
    def present(self) -> bool:
        return self.messages is not None

    @property
    def ok(self) -> bool:
        return self.present and self.drift is None


async def queue_statuses(
    connection: Connection, queues: Sequence[QueueEntity], *, listed: bool
) -> list[QueueStatus]:
    """The status of each of ``queues``, in order. ``listed``: they come from a topology file
    and their arguments are compared with it."""
    statuses: list[QueueStatus] = []
    for entity in queues:
        info = await queue_info(connection, entity.name)
        if info is None:
            statuses.append(QueueStatus(entity, listed, None, None))
            continue
        drift = None
        if listed:
            observed = await compare_queue(connection, entity)
            if isinstance(observed, Differs):
                drift = describe_differences(observed)
            elif isinstance(observed, Refused):
                drift = observed.reason
        statuses.append(QueueStatus(entity, listed, info.message_count, info.consumer_count, drift))
    return statuses


ReadLive = Callable[[Desired], Awaitable[tuple[LiveQueue, ...]]]
"""``ops/live.py`` ``live_settings`` with its management API bound."""


async def read_statuses(
    connect: Connect,
    listed: Sequence[QueueEntity],
    named: Sequence[QueueEntity],
    *,
    read_live: ReadLive | None = None,
) -> list[QueueStatus]:
    """One reading of ``rr status``: the queues of the topology file (``listed``, compared
    with it), then the ones only named, on one connection from ``connect``; with
    ``read_live``, each one's settings as the management API states them."""
    connection = await connect()
    try:
        statuses = [
            *await queue_statuses(connection, listed, listed=True),
            *await queue_statuses(connection, named, listed=False),
        ]
    finally:
        await connection.close()
    if read_live is None:
        return statuses
    found = await read_live(Desired(queues=tuple(status.entity for status in statuses)))
    return [replace(status, live=live) for status, live in zip(statuses, found, strict=True)]


__all__ = ["QueueStatus", "queue_statuses", "read_statuses"]
