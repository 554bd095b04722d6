"""A queue.declare-ok that says 0 while the queue holds messages: what RabbitMQ 3.10 answers
for a quorum queue whose leader it cannot reach at that instant (a cluster node just stopped;
docs/how-to/run-on-a-cluster.md). rr confirms a 0 with one basic.get before it believes it, so a
replay run right after a failover replays every message instead of "0 of 0", and inspect shows them.

The emulator stands in for the server here, with its passive declares made to answer 0 as
3.10 does during an election; ``tests/cluster/test_replay_failover.py`` runs the real thing.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from rabbitctl_retry.dlq.replay import ReplayPlan
from rabbitctl_retry.ops import dlq as reading
from rabbitctl_retry.ops import transfer as shell
from rabbitctl_retry.transport.base import Channel, Connection, QueueInfo
from tests.backends import EmulatorBackend
from tests.dlq.support import declare, publish_all
from tests.dlq.test_interrupted import census, letters
from tests.observe import depth

COUNT = 120


class ElectingQuorumQueue:
    """A connection whose passive declares report no messages and no consumers."""

    def __init__(self, connection: Connection) -> None:
        self._connection = connection
        self.zeros = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._connection, name)

    async def channel(self, *, confirms: bool = False) -> Channel:
        channel = await self._connection.channel(confirms=confirms)
        declare = channel.queue_declare

        async def electing(queue: str, **kwargs: Any) -> QueueInfo:
            info = await declare(queue, **kwargs)
            if not kwargs.get("passive"):
                return info
            self.zeros += 1
            return dataclasses.replace(info, message_count=0, consumer_count=0)

        channel.queue_declare = electing  # type: ignore[method-assign]
        return channel


async def test_a_replay_does_not_believe_a_zero_count() -> None:
    backend = EmulatorBackend()
    try:
        await declare(backend, "dead", "refunds")
        await publish_all(backend, "dead", letters(COUNT))
        connection = ElectingQuorumQueue(await backend.connect())
        report = await shell.replay_queue(connection, ReplayPlan(source="dead", run_id="r"))
        assert connection.zeros >= 1
        assert report.interrupted is None
        assert (report.in_queue, report.sent) == (COUNT, COUNT)
        assert await depth(backend, "dead") == 0
        landed = await census(backend, "refunds")
        assert landed == {f"m{n}": 1 for n in range(COUNT)}
    finally:
        await backend.close()


async def test_inspect_does_not_believe_a_zero_count() -> None:
    backend = EmulatorBackend()
    try:
        await declare(backend, "dead")
        await publish_all(backend, "dead", letters(COUNT))
        connection = ElectingQuorumQueue(await backend.connect())
        read = await reading.read_messages(connection, "dead")
        assert read.in_queue == COUNT
        # in order: the confirming get put m0 back in its place
        assert [d.properties.message_id for d in read.deliveries] == [f"m{n}" for n in range(COUNT)]
        assert await depth(backend, "dead") == COUNT
    finally:
        await backend.close()


async def test_an_empty_queue_is_still_empty() -> None:
    backend = EmulatorBackend()
    try:
        await declare(backend, "dead", "refunds")
        connection = ElectingQuorumQueue(await backend.connect())
        report = await shell.replay_queue(connection, ReplayPlan(source="dead", run_id="r"))
        assert (report.in_queue, report.sent) == (0, 0)
        assert await depth(backend, "dead") == 0
    finally:
        await backend.close()
