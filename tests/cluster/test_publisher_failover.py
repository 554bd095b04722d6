"""``rr.Publisher`` on the local cluster while the node it is connected to stops
(docs/reference/publishing.md, "Reconnecting"): every message whose publish returned is in the
quorum queue (three replicas) afterwards; one whose confirm the stop cut may be there twice (at
least once), never missing."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Iterator

import pytest

import rabbitctl_retry as rr
from rabbitctl_retry.cli._common import amqp_connector
from rabbitctl_retry.ops.declare import declare_topology
from rabbitctl_retry.topology.load import load_text
from rabbitctl_retry.transport.base import Connection
from tests.cluster.conftest import LocalCluster
from tests.cluster.queues import take_into
from tests.ledger import wait_until

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(420)]

COUNT = 400
TOPOLOGY = """
[queues."{prefix}.orders"]
type = "quorum"
replicas = 3
"""


@pytest.fixture
def prefix(cluster: LocalCluster) -> Iterator[str]:
    with cluster.own_queues("rr-publisher", "orders") as name:
        yield name


async def test_publisher_moves_to_another_node_and_loses_nothing(
    cluster: LocalCluster, prefix: str
) -> None:
    queue = f"{prefix}.orders"
    topology = load_text(TOPOLOGY.format(prefix=prefix))
    await declare_topology(topology, [cluster.url(2)], dry_run=False, connector=amqp_connector)
    returned: list[str] = []
    async with rr.Publisher(*cluster.urls, reconnect_for_s=120) as pub:

        async def publish(number: int) -> None:
            returned.append(await pub.publish({"n": number}, to=queue, message_id=f"m-{number}"))

        for number in range(COUNT):
            await publish(number)
        # node 1, which the publisher talks to, stops while it publishes; then COUNT more
        stopping = asyncio.ensure_future(asyncio.to_thread(cluster.stop_app, 1))
        during = COUNT
        while not stopping.done():
            await publish(during)
            during += 1
        await stopping
        for number in range(during, during + COUNT):
            await publish(number)
        reconnects = pub.reconnects

    async def via_node_2() -> Connection:
        return await amqp_connector(cluster.url(2))

    found: Counter[str] = Counter()

    async def all_there() -> bool:
        await take_into(found, via_node_2, queue)
        return set(returned) <= set(found)

    await wait_until(all_there, "every message in the queue", timeout_s=120, poll_s=0.5)
    assert len(returned) == len(set(returned)) >= 2 * COUNT
    assert sorted(found) == sorted(returned)  # nothing lost, nothing foreign
    assert reconnects >= 1  # it lost node 1 and went on through another
