"""``delay = "server"`` (RabbitMQ 4.3's delayed retries of a quorum queue) across a crash of
the broker: messages waiting out their delay in the queue survive a SIGKILL of the node and
a restart, and come back counted; with ``rr run`` through it, every id counted
(docs/explanation/attempts.md, "The quorum queue waits: `delay = "server"`"). On the suite's private
4.3 node only: older servers have no delayed retries."""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict

import pytest

from rabbitctl_retry import Message, Outcome
from rabbitctl_retry.retry.outcome import AnyOutcome
from tests.faults.conftest import FaultVhost
from tests.faults.harness import assert_no_loss, direct, run_with_fault, serving
from tests.faults.node import PrivateNode
from tests.ledger import message_ids, mixed_outcome, publish_ids, wait_until

pytestmark = [
    pytest.mark.faults,
    pytest.mark.timeout(300),
    pytest.mark.parametrize("any_fault_node", ["4.3"], indirect=True),
]

WAITING_TOPOLOGY = """
[queues.work]
type = "quorum"
max_attempts = 3
dead_letter = "work.dead"
delay = "server"
delay_min = "{delay_min}"
"""


FRESH_QUEUE_SETTLE_S = 5.0
"""How long a new quorum queue is left before the node is killed: a queue declared and used
in the seconds before a SIGKILL may come back empty, delayed retries or not (measured on
4.3.6, as on 3.10.8: docs/reference/topology.md, "What survives a broker restart")."""


async def ready(vhost: FaultVhost, queue: str) -> int:
    """Ready messages in ``queue``, on a connection of its own."""
    connection = await direct(vhost.url)()
    try:
        channel = await connection.channel()
        return (await channel.queue_declare(queue, passive=True)).message_count
    finally:
        await connection.close()


async def test_messages_waiting_in_the_queue_survive_a_crash_of_the_broker(
    any_fault_node: PrivateNode, any_fault_vhost: FaultVhost
) -> None:
    """50 ids, each retried once by rr and then waiting 40 s in ``work`` (not ready, held by
    nobody) when the node is SIGKILLed; after the restart every id is delivered again exactly
    once, at attempt 2, with x-delivery-count 1, and acked: none lost, none twice."""
    ids = message_ids("waiting", 50)
    calls: dict[str, list[tuple[int, int | None]]] = defaultdict(list)

    async def retry_once(msg: Message) -> AnyOutcome:
        calls[msg.message_id or ""].append((msg.attempt, msg.delivery_count))
        return Outcome.retry() if msg.attempt == 1 else Outcome.ack()

    # 40 s: longer than a restart of the node takes on a busy machine (over 15 s once in CI)
    topology = WAITING_TOPOLOGY.format(delay_min="40s")
    async with serving(any_fault_vhost.proxy_url, topology, retry_once) as service:
        await asyncio.sleep(FRESH_QUEUE_SETTLE_S)
        await publish_ids(direct(any_fault_vhost.url), "work", ids)

        async def all_waiting() -> bool:
            first_calls = sum(1 for seen in calls.values() if seen)
            return (
                first_calls == len(ids)
                and service.in_flight == 0
                and await ready(any_fault_vhost, "work") == 0
            )

        await wait_until(all_waiting, "every id rejected once and waiting", timeout_s=60)
        waiting_since = time.monotonic()
        await asyncio.to_thread(any_fault_node.kill)
        await asyncio.to_thread(any_fault_node.restart)
        restarted_after_s = time.monotonic() - waiting_since
        assert restarted_after_s < 40, "the restart took longer than the wait: nothing shown"

        async def all_again() -> bool:
            return all(len(calls[message_id]) == 2 for message_id in ids)

        await wait_until(all_again, "every id delivered again", timeout_s=120)
        await asyncio.sleep(1.0)  # a duplicate would show now
    assert sorted(calls) == ids
    assert all(calls[message_id] == [(1, None), (2, 1)] for message_id in ids), calls
    assert await ready(any_fault_vhost, "work") == 0
    assert await ready(any_fault_vhost, "work.dead") == 0


async def test_rr_run_through_a_crash_of_the_broker_loses_nothing(
    any_fault_node: PrivateNode, any_fault_vhost: FaultVhost
) -> None:
    """2,000 ids, mixed outcomes (70 % ack, 20 % retry, 10 % retry_after: both wait in the
    queue, 1 s x the count), the node SIGKILLed and restarted mid-run: every id ends where
    its outcomes say (acked, or work.dead after its third attempt), none lost."""

    async def fault(service: object, ledger: object) -> float:
        await asyncio.to_thread(any_fault_node.kill)
        await asyncio.sleep(2)
        await asyncio.to_thread(any_fault_node.restart)
        return asyncio.get_running_loop().time()

    result = await run_with_fault(
        any_fault_vhost,
        fault_name="SIGKILL + restart, delay = server",
        fault=fault,  # type: ignore[arg-type]
        queue_type="quorum",
        topology_text=WAITING_TOPOLOGY.format(delay_min="1s"),
        outcome_of=mixed_outcome,
        settle_s=FRESH_QUEUE_SETTLE_S,
        timeout_s=150,
    )
    assert_no_loss(result, interruptions=1, crashes=1)
