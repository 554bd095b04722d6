"""The ``cluster`` fixture works: three running members of one cluster, quorum queues
replicated on all three, messages routed between nodes, a node's application stopped and
started again.

Every test names its queues ``rr-cluster-test-<random>`` and deletes them.
"""

from __future__ import annotations

import asyncio
import json
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress

import pytest

from rabbitctl_retry.fields import FieldValue
from rabbitctl_retry.transport.amqp import AmqpChannel, connect
from rabbitctl_retry.transport.base import Properties
from tests.cluster.conftest import LocalCluster

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(300)]

ALL_NODES = ["rrc1@localhost", "rrc2@localhost", "rrc3@localhost"]
QUORUM_OF_THREE: dict[str, FieldValue] = {
    "x-queue-type": "quorum",
    "x-quorum-initial-group-size": 3,
}


def _queue_name() -> str:
    return f"rr-cluster-test-{secrets.token_hex(6)}"


@asynccontextmanager
async def _channel(url: str) -> AsyncIterator[AmqpChannel]:
    connection = await connect(url, timeout_s=10.0)
    try:
        yield await connection.channel(confirms=True)
    finally:
        await connection.close()


@asynccontextmanager
async def _quorum_queue(cluster: LocalCluster) -> AsyncIterator[str]:
    """A quorum queue on all three nodes, declared through node 1; deleted afterwards."""
    name = _queue_name()
    async with _channel(cluster.url(1)) as channel:
        await channel.queue_declare(name, arguments=QUORUM_OF_THREE)
    try:
        yield name
    finally:
        async with _channel(cluster.url(1)) as channel:
            await channel.queue_delete(name)


def _members(cluster: LocalCluster, queue: str) -> list[str]:
    rows = json.loads(cluster.ctl(1, "list_queues", "name", "members", "--formatter", "json"))
    found = [row for row in rows if row["name"] == queue]
    assert len(found) == 1, rows
    return sorted(found[0]["members"])


def test_three_running_members_of_one_cluster(cluster: LocalCluster) -> None:
    assert cluster.nodes == tuple(ALL_NODES)
    for n in (1, 2, 3):
        status = cluster.cluster_status(n)
        assert sorted(status["disk_nodes"]) == ALL_NODES, status  # type: ignore[call-overload]
        assert cluster.running_nodes(n) == ALL_NODES, status


async def test_quorum_queue_has_three_members(cluster: LocalCluster) -> None:
    async with _quorum_queue(cluster) as queue:
        assert await asyncio.to_thread(_members, cluster, queue) == ALL_NODES
        raft = await asyncio.to_thread(
            cluster.queues_ctl, 1, "quorum_status", queue, "--formatter", "json"
        )
        assert sorted(row["Node Name"] for row in json.loads(raft)) == ALL_NODES, raft


async def test_published_through_node_1_consumed_through_node_3(cluster: LocalCluster) -> None:
    body = secrets.token_bytes(16)
    async with _quorum_queue(cluster) as queue:
        async with _channel(cluster.url(1)) as channel:
            await channel.publish(body, routing_key=queue, properties=Properties(message_id="one"))
        async with _channel(cluster.url(3)) as channel:
            delivery = await channel.get(queue)
            assert delivery is not None
            await channel.ack(delivery.delivery_tag)
            assert await channel.get(queue) is None
    assert delivery.body == body
    assert delivery.properties.message_id == "one"


async def test_node_2_stopped_and_started_again(cluster: LocalCluster) -> None:
    """With node 2's application stopped the other two carry on (a quorum queue takes
    messages); started again, node 2 is a running member and serves the queue."""
    body = secrets.token_bytes(16)
    async with _quorum_queue(cluster) as queue:
        await asyncio.to_thread(cluster.stop_app, 2)
        try:
            assert await asyncio.to_thread(cluster.running_nodes, 1) == [
                "rrc1@localhost",
                "rrc3@localhost",
            ]
            async with _channel(cluster.url(1)) as channel:
                await channel.publish(body, routing_key=queue)
        finally:
            with suppress(Exception):
                await asyncio.to_thread(cluster.start_app, 2)
        for n in (1, 2, 3):
            assert await asyncio.to_thread(cluster.running_nodes, n) == ALL_NODES
        async with _channel(cluster.url(2)) as channel:
            delivery = await channel.get(queue, no_ack=True)
        assert delivery is not None
        assert delivery.body == body
