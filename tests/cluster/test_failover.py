"""rr run on the local cluster while the node it is connected to stops (docs/reference/cli.md,
"Several hosts"): 5,000 messages with mixed outcomes (70 % ack, 20 % retry, 10 % retry_after(1 s))
on a quorum queue with three replicas; the service is given the three nodes' URLs and talks to
the first; that node's application is stopped while work is under way, and started again at
the end. Every message ends handled or dead-lettered (none lost), in the place its plan says;
handler calls beyond the plan stay within the in-flight window (the prefetch, and the delayed
copies the stopped node's quorum wait queue was moving back), and are counted.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Iterator

import pytest

from rabbitctl_retry.cli._common import amqp_connector
from rabbitctl_retry.ops.declare import declare_topology
from rabbitctl_retry.runtime.handlers import Subscriber
from rabbitctl_retry.runtime.loader import HandlerSet
from rabbitctl_retry.runtime.service import RunOptions, Service
from rabbitctl_retry.topology.load import load_text
from rabbitctl_retry.transport.base import Connection
from rabbitctl_retry.transport.failover import connect_any
from tests.cluster.conftest import LocalCluster
from tests.cluster.queues import take_into
from tests.ledger import (
    Ledger,
    duplicate_window,
    message_ids,
    mixed_outcome,
    publish_ids,
    wait_until,
)

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(420)]

COUNT = 5000
MAX_ATTEMPTS = 3

TOPOLOGY = """
[queues."{prefix}.payouts"]
type = "quorum"
max_attempts = 3
dead_letter = "{prefix}.payouts.dead"
delay = "dlx-ttl"
replicas = 3

[queues."{prefix}.payouts.dead"]
type = "quorum"
replicas = 3
"""


@pytest.fixture
def prefix(cluster: LocalCluster) -> Iterator[str]:
    with cluster.own_queues("rr-failover", "payouts", "payouts.retry", "payouts.dead") as name:
        yield name


def leader_of(cluster: LocalCluster, queue: str) -> str:
    listed = cluster.ctl(2, "list_queues", "name", "leader", "--formatter", "json")
    return next(str(row["leader"]) for row in json.loads(listed) if row["name"] == queue)


@pytest.mark.parametrize("stopped", ["connected node", "queue leader"])
async def test_rr_run_moves_to_another_node_and_loses_nothing(
    cluster: LocalCluster, prefix: str, stopped: str
) -> None:
    """``connected node``: node 1, which rr talks to (and which leads the queue rr declared
    through it). ``queue leader``: the queue is declared through node 3 first, so node 3 leads
    it while rr talks to node 1; node 3 is stopped."""
    queue = f"{prefix}.payouts"
    topology = load_text(TOPOLOGY.format(prefix=prefix))
    if stopped == "queue leader":
        await declare_topology(topology, [cluster.url(3)], dry_run=False, connector=amqp_connector)
        node = cluster.nodes.index(leader_of(cluster, queue)) + 1
        assert node != 1, "the queue must be led by a node rr does not talk to"
    else:
        node = 1
    ledger = Ledger(outcome_of=mixed_outcome, max_attempts=MAX_ATTEMPTS)
    ids = message_ids(prefix, COUNT)

    async def via_node_2() -> Connection:
        return await amqp_connector(cluster.url(2))

    async def any_node() -> Connection:
        return await connect_any(amqp_connector, cluster.urls)

    service = Service(
        HandlerSet(module="failover", subscribers=(Subscriber(queue, ledger.handler(), "f:h"),)),
        topology=topology,
        connect=any_node,
        options=RunOptions(),
    )
    dead: Counter[str] = Counter()
    async with service.running():
        await publish_ids(via_node_2, queue, ids)

        async def some_done() -> bool:
            return sum(ledger.calls.values()) >= COUNT // 4

        await wait_until(some_done, "a quarter of the work", timeout_s=120)
        await asyncio.to_thread(cluster.stop_app, node)

        async def all_ended() -> bool:
            await take_into(dead, via_node_2, f"{queue}.dead")
            return ledger.settled(ids, dead) == COUNT

        await wait_until(all_ended, f"all {COUNT} messages to end", timeout_s=240, poll_s=0.5)
        await asyncio.sleep(1.0)  # anything still moving would show now
    await take_into(dead, via_node_2, f"{queue}.dead")

    verdict = ledger.verdict(ids, dead)
    assert verdict.lost == [], verdict.summary()
    if stopped == "connected node":
        assert service.connections >= 2  # it reconnected, to node 2 or 3
    # Redeliveries of what was in flight when the node stopped: at most the prefetch window;
    # and the stopped node led the quorum wait queue, whose dead-letter worker moves again the
    # delayed copies it had not settled (docs/reference/runtime.md, "Under faults"): seen on a
    # loaded machine, 95 ids of the window and 11 copies moved twice.
    window = duplicate_window(interruptions=1, broker_stops=1)
    assert len(verdict.extra_calls) <= window, verdict.summary()
    assert verdict.duplicates <= window, verdict.summary()
    # RabbitMQ 3.x counts a delivery the lost connection cut (in flight, never handled) in the
    # quorum queue's x-delivery-count (docs/reference/runtime.md, "Under faults"). A message ends
    # somewhere else than planned only when the failover changed the attempt numbers its
    # handler saw (the plan is a function of the attempt): a cut delivery counted (a gap:
    # 1, 2, 4), or a lost settlement delivered again (a repeat, or past max_attempts) — or,
    # the last attempt's ack lost with the node, not delivered again at all: the server counts
    # the return, which spends the delivery limit, and dead-letters it (acked and dead, the
    # attempts unchanged) — or a cut delivery counted as the last one: dead-lettered before
    # its handler saw max_attempts (1, 2, then dead).
    for message_id in verdict.wrong_place:
        seen = ledger.attempts[message_id]
        perturbed = seen != list(range(1, len(seen) + 1)) or len(seen) > MAX_ATTEMPTS
        last_ack_lost = len(seen) == MAX_ATTEMPTS and message_id in verdict.acked_and_dead
        last_cut = len(seen) < MAX_ATTEMPTS and dead[message_id] > 0
        assert perturbed or last_ack_lost or last_cut, (message_id, seen)
    assert len(verdict.wrong_place) <= window, verdict.summary()
    print(f"failover ({stopped}): {verdict.summary()}; connections {service.connections}")
