"""``rr dlq replay`` on the local cluster while the node it talks to stops
(docs/how-to/run-on-a-cluster.md): 20,000 dead letters in a quorum dead-letter queue with three
replicas go back to their quorum queue; node 1, which the replay talks to and which leads both
queues, stops a quarter of the way through. The run ends interrupted, reporting what may now be in
two places; reruns through the surviving nodes (right away, while the queues elect new leaders)
finish the job. Nothing is lost, the dead-letter queue ends empty, and the copies found twice are at
most what the first run reported as possible duplicates.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from rabbitctl_retry.cli._common import amqp_connector
from rabbitctl_retry.dlq.replay import ReplayPlan
from rabbitctl_retry.dlq.report import TransferReport
from rabbitctl_retry.errors import TransportError
from rabbitctl_retry.ops.declare import declare_topology
from rabbitctl_retry.ops.dlq import REPLAY_WINDOW
from rabbitctl_retry.ops.transfer import new_run_id, replay_queue
from rabbitctl_retry.topology.load import load_text
from rabbitctl_retry.transport.base import Channel, Connection, Delivery, Properties
from rabbitctl_retry.transport.failover import connect_any
from tests.cluster.conftest import LocalCluster
from tests.dlq.support import death

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(600)]

COUNT = 20_000
STOP_AT = COUNT // 4

TOPOLOGY = """
[queues."{prefix}.payouts"]
type = "quorum"
max_attempts = 3
dead_letter = "{prefix}.payouts.dead"
replicas = 3

[queues."{prefix}.payouts.dead"]
type = "quorum"
replicas = 3
"""


@pytest.fixture
def prefix(cluster: LocalCluster) -> Iterator[str]:
    with cluster.own_queues("rr-replay-failover", "payouts", "payouts.dead") as name:
        yield name


async def publish_dead_letters(connection: Connection, queue: str, origin: str) -> None:
    """COUNT dead letters of ``origin`` (as the server writes them: one x-death entry)."""
    channel = await connection.channel(confirms=True)
    died = datetime(2026, 12, 1, 3, 0, tzinfo=UTC)
    batch = 500
    for start in range(0, COUNT, batch):
        await asyncio.gather(
            *(
                channel.publish(
                    f"payout {number}".encode(),
                    routing_key=queue,
                    properties=Properties(
                        message_id=f"m{number:05d}",
                        delivery_mode=2,
                        headers={"x-death": [death(origin, "rejected", died)]},
                    ),
                    mandatory=True,
                )
                for number in range(start, min(start + batch, COUNT))
            )
        )
    await channel.close()


async def take_all(cluster: LocalCluster, queue: str, *, timeout_s: float = 180.0) -> Counter[str]:
    """Every message of ``queue`` by id, taken through whichever node answers: a consumer
    without acks takes what the queue held when it started (thousands of basic.get round
    trips to a three-replica queue took a minute), then basic.get until get-empty. A
    connection the cluster closes mid-way (541 while the queue elects a leader) is retried,
    and what was taken before it is kept."""
    found: Counter[str] = Counter()
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while True:
        try:
            connection = await connect_any(amqp_connector, cluster.urls)
            try:
                channel = await connection.channel()
                await _consume_what_is_there(channel, queue, found, deadline)
                while (delivery := await channel.get(queue, no_ack=True)) is not None:
                    found[delivery.properties.message_id or ""] += 1
                return found
            finally:
                await connection.close()
        except TransportError:
            if loop.time() > deadline:
                raise
            await asyncio.sleep(1.0)


async def _consume_what_is_there(
    channel: Channel, queue: str, found: Counter[str], deadline: float
) -> None:
    there = (await channel.queue_declare(queue, passive=True)).message_count
    taken = 0
    done = asyncio.Event()

    async def take(delivery: Delivery) -> None:
        nonlocal taken
        found[delivery.properties.message_id or ""] += 1
        taken += 1
        if taken >= there:
            done.set()

    if there == 0:
        return
    await channel.qos(1000)
    tag = await channel.consume(queue, take, no_ack=True)
    loop = asyncio.get_running_loop()
    while not done.is_set() and loop.time() < deadline and not channel.is_closed:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(done.wait(), timeout=1.0)
    if not channel.is_closed:
        await channel.cancel(tag)


class StopNodeAt:
    """A progress sink that stops node 1 (in a thread) once ``at`` messages were replayed."""

    def __init__(self, cluster: LocalCluster, at: int) -> None:
        self._cluster = cluster
        self._at = at
        self._done = 0
        self.stopping: asyncio.Future[None] | None = None

    def begin(self, total: int, description: str) -> None:
        pass

    def advance(self, count: int = 1) -> None:
        self._done += count
        if self._done >= self._at and self.stopping is None:
            loop = asyncio.get_running_loop()
            self.stopping = loop.run_in_executor(None, self._cluster.stop_app, 1)


async def test_replay_reruns_after_a_node_stops_and_loses_nothing(
    cluster: LocalCluster, prefix: str
) -> None:
    origin, dead = f"{prefix}.payouts", f"{prefix}.payouts.dead"
    topology = load_text(TOPOLOGY.format(prefix=prefix))
    await declare_topology(topology, [cluster.url(1)], dry_run=False, connector=amqp_connector)
    connection = await amqp_connector(cluster.url(1))
    await publish_dead_letters(connection, dead, origin)

    stopper = StopNodeAt(cluster, STOP_AT)
    first = await replay_queue(
        connection, ReplayPlan(source=dead, run_id=new_run_id()), progress=stopper
    )
    assert stopper.stopping is not None
    await stopper.stopping
    await connection.close()
    assert first.interrupted is not None, "node 1 stopped: the first run must end interrupted"
    # The stop begins once STOP_AT dead letters were read; what was sent by then may lag the
    # reading by the in-flight window (the replay's prefetch), if the node goes quickly.
    assert STOP_AT - REPLAY_WINDOW <= first.sent < COUNT, first.sent

    # Reruns, right away and through any node, until one ends neither interrupted nor refused,
    # nor stopped: a rerun that hears nothing for a while (a queue electing its leader on a
    # busy machine) stops with the dead letters it has not read still there (docs/reference/dlq.md).
    reruns: list[TransferReport] = []
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 240
    while True:
        assert loop.time() < deadline, [(r.interrupted, r.stopped) for r in reruns]
        try:
            again = await connect_any(amqp_connector, cluster.urls)
        except TransportError:
            await asyncio.sleep(1.0)
            continue
        try:
            report = await replay_queue(again, ReplayPlan(source=dead, run_id=new_run_id()))
        except TransportError:
            await asyncio.sleep(1.0)
            continue
        finally:
            await again.close()
        reruns.append(report)
        if report.interrupted is None and report.stopped is None:
            break
        await asyncio.sleep(1.0)

    landed = await take_all(cluster, origin)
    left = await take_all(cluster, dead)
    expected = {f"m{number:05d}" for number in range(COUNT)}
    assert sum(left.values()) == 0, f"{sum(left.values())} dead letters left after the reruns"
    assert set(landed) == expected, f"lost: {len(expected - set(landed))}"
    duplicates = sum(landed.values()) - COUNT
    assert duplicates <= first.possible_duplicates, (duplicates, first.possible_duplicates)
    replayed = first.sent + sum(report.sent for report in reruns)
    # Each message was sent (copy confirmed) at least once; a second confirmed copy is a
    # duplicate, and so is a copy that landed unconfirmed when the connection dropped.
    assert COUNT <= replayed <= COUNT + duplicates, (first.sent, [r.sent for r in reruns])
    print(
        f"replay failover: first run {first.sent:,} sent, {first.possible_duplicates} possible "
        f"duplicates; {len(reruns)} rerun(s) {[r.sent for r in reruns]}; {duplicates} duplicates"
    )
