"""What ``rr run`` makes sure of on each connection before it consumes: the topology declared
(or, with declaring off, checked), or without a topology the handlers' queues there; and what
a consumer re-declares (or checks) before it consumes again (docs/reference/runtime.md, "Running
it").
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Collection

from rabbitctl_retry.errors import ConfigError, ConflictError, NotFound
from rabbitctl_retry.ops.declare import observe_and_plan, provision
from rabbitctl_retry.runtime.consumer import Recover
from rabbitctl_retry.topology.expand import Desired, expand
from rabbitctl_retry.topology.model import QueueType, Topology
from rabbitctl_retry.topology.plan import OpKind, Plan, Status
from rabbitctl_retry.transport.base import Connection

log = logging.getLogger("rr.runtime")

Connect = Callable[[], Awaitable[Connection]]


def missing_for_handlers(result: Plan, topology: Topology, queues: Collection[str]) -> list[str]:
    """What the broker lacks of ``topology`` for the handlers of ``queues`` (``result``: the
    plan of the file against the broker), one phrase each; a quorum queue consumed without
    the topology's delivery limit in force is named as such (its retry policy cannot be
    applied)."""
    limited = {
        queue.name
        for queue in topology.queues
        if queue.name in queues
        and queue.type is QueueType.QUORUM
        and queue.server_delivery_limit is not None
    }
    problems = []
    for operation in result.operations:
        if operation.op is OpKind.BIND or operation.status is Status.UNCHANGED:
            continue
        reason = operation.detail or "does not exist"
        if operation.name in limited:
            problems.append(
                f"quorum queue {operation.name!r} does not carry the topology's delivery "
                f"limit and dead-letter route ({reason}), so its retry policy cannot be "
                "applied; run rr declare, or drop max_attempts/dead_letter from the file"
            )
        else:
            kind = operation.op.value.removeprefix("declare_")
            problems.append(f"{kind} {operation.name!r}: {reason}")
    return problems


NO_TOPOLOGY_HINT = (
    "rr run was given no --topology, so it declares nothing and only checks that the queues "
    "are there: give --topology TOPOLOGY.toml (it declares them, on its [broker] url unless "
    "--url or $RR_URL says otherwise), or run rr declare first (rr docs runtime)"
)


async def check_queue_exists(connection: Connection, *queues: str) -> None:
    """A passive declare of each of ``queues`` on a channel of its own."""
    channel = await connection.channel()
    try:
        for queue in queues:
            await channel.queue_declare(queue, passive=True)
    finally:
        await channel.close()


class Preparation:
    """Declares (or checks) what the handlers of ``queues`` need, on each connection."""

    def __init__(self, queues: Collection[str], *, declare: bool, connect: Connect) -> None:
        self._queues = queues
        self._declare = declare
        self._connect = connect
        self._warned = False
        """Whether the declare's warnings (docs/reference/topology.md) were logged: once a run."""

    async def prepare(self, connection: Connection, topology: Topology | None) -> None:
        """Declare ``topology``, or check that what the handlers need is there."""
        if topology is None:
            try:
                await check_queue_exists(connection, *self._queues)
            except NotFound as missing:
                # without a topology rr run declares nothing: say so, and where it looked
                raise NotFound(f"{missing}; {NO_TOPOLOGY_HINT}") from None
            return
        desired = expand(topology, connection.server_version.release)
        if self._declare:
            result = await provision(connection, desired, dry_run=False, connect=self._connect)
            if result.conflicts:
                details = "; ".join(f"{op.name}: {op.detail}" for op in result.conflicts)
                raise ConflictError(f"the broker conflicts with the topology: {details}")
            if not self._warned:
                self._warned = True
                for warning in result.warnings:
                    log.warning(warning)
            return
        await self._check_declared(connection, topology, desired)

    async def _check_declared(
        self, connection: Connection, topology: Topology, desired: Desired
    ) -> None:
        """With declaring off: every queue and exchange exists as the file says, and quorum
        delivery limits are in force (otherwise the retry policy could not be applied)."""
        _, result = await observe_and_plan(connection, desired, connect=self._connect)
        problems = missing_for_handlers(result, topology, self._queues)
        if problems:
            raise ConfigError(
                "--no-declare: the broker lacks what the handlers need: " + "; ".join(problems)
            )

    def recover_for(
        self, connection: Connection, queue: str, topology: Callable[[], Topology | None]
    ) -> Recover:
        """What a consumer of ``queue`` re-declares (or checks) before consuming again (the
        topology of that moment: ``topology()``)."""

        async def recover() -> None:
            current = topology()
            if current is not None and self._declare:
                await self.prepare(connection, current)
                return
            await check_queue_exists(connection, queue)

        return recover
