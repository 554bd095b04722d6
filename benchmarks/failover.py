"""`rr run` through a node failure on the local three-node cluster, measured in one run.

    scripts/cluster.sh up
    python benchmarks/failover.py [--messages 20000] [--stop connected|leader] [--prefetch 100]

The `payouts` shape of docs/how-to/run-on-a-cluster.md: a quorum queue with `replicas = 3`,
`max_attempts` 3 and a quorum dead-letter queue, persistent messages each with its own message_id,
preloaded untimed through node 2. `rr run` (the runtime, in this process) is given the three nodes'
URLs and talks to node 1; a no-op handler acks every message. A third of the way through, the
application of a node is stopped (`--stop connected`: node 1, the one rr talks to and which
leads the queue; `--stop leader`: the queue is declared through node 3, which then leads it
while rr talks to node 1, and node 3 is stopped). The script prints:

* rate before   messages handled per second from the first delivery to the stop
* failover      the longest pause in handling after the stop (seconds between two messages
                handled, or from the stop to the first): the time rr took to reach a surviving
                node (`connected`) or the queue took to elect a new leader (`leader`)
* new connection  (`connected`) seconds from the stop command to the first message handled on
                rr's new connection; until the node closes the old one, rr goes on handling
                what it already holds, so this is longer than the pause
* rate after    messages per second from the end of that pause to the last message
* duplicates    handler calls beyond one per message (redeliveries of what was in flight)

Reference, in the same run and on the same cluster (all three nodes up): raw aiormq consuming
an identical quorum queue through node 2 with the same prefetch and one basic.ack per message.
Both rates are printed as ratios against it. The stopped node is started again at the end and
every queue the script made is deleted. Exit 1 if a message was lost (a message_id never
handled) or the run timed out. Speed is measured here, never asserted in the test suite.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import logging
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path

import aiormq
from pamqp.commands import Basic

from rabbitctl_retry import Message, Outcome
from rabbitctl_retry.cli._common import amqp_connector
from rabbitctl_retry.ops.declare import declare_topology
from rabbitctl_retry.retry.outcome import AnyOutcome
from rabbitctl_retry.runtime.handlers import Subscriber
from rabbitctl_retry.runtime.loader import HandlerSet
from rabbitctl_retry.runtime.service import RunOptions, Service
from rabbitctl_retry.topology.load import load_text
from rabbitctl_retry.transport.base import Connection
from rabbitctl_retry.transport.failover import connect_any

ROOT = Path(__file__).resolve().parent.parent
CLUSTER = ROOT / "scripts" / "cluster.sh"
URLS = [f"amqp://guest:guest@127.0.0.1:{5680 + n}/" for n in (1, 2, 3)]
BODY = json.dumps({"amount": 1250, "currency": "EUR", "note": "x" * 160}).encode()

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


def cluster(*args: str) -> str:
    done = subprocess.run(
        [str(CLUSTER), *args], capture_output=True, text=True, timeout=300, check=True
    )
    return done.stdout


def ctl(node: int, *args: str) -> str:
    done = subprocess.run(
        ["rabbitmqctl", "-q", "-n", f"rrc{node}@localhost", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return done.stdout


def leader_node(queue: str) -> int:
    rows = json.loads(ctl(2, "list_queues", "name", "leader", "--formatter", "json"))
    leader = next(str(row["leader"]) for row in rows if row["name"] == queue)
    return int(leader.removeprefix("rrc").split("@")[0])


async def preload(url: str, queue: str, ids: list[str]) -> None:
    connection = await aiormq.connect(url)
    channel = await connection.channel()
    await channel.confirm_delivery()
    for start in range(0, len(ids), 1000):
        await asyncio.gather(
            *(
                channel.basic_publish(
                    BODY,
                    routing_key=queue,
                    properties=Basic.Properties(delivery_mode=2, message_id=message_id),
                )
                for message_id in ids[start : start + 1000]
            )
        )
    await connection.close()


async def aiormq_reference(url: str, prefix: str, count: int, prefetch: int) -> float:
    """Messages per second of raw aiormq, one basic.ack per message, on a quorum queue with
    three replicas (declared and deleted here)."""
    queue = f"{prefix}.reference"
    connection = await aiormq.connect(url)
    channel = await connection.channel()
    await channel.queue_declare(
        queue,
        durable=True,
        arguments={"x-queue-type": "quorum", "x-quorum-initial-group-size": 3},
    )
    await preload(url, queue, [f"r{number}" for number in range(count)])
    await channel.basic_qos(prefetch_count=prefetch)
    done = asyncio.Event()
    seen = 0

    async def on_message(message: aiormq.abc.DeliveredMessage) -> None:
        nonlocal seen
        assert message.delivery_tag is not None
        await channel.basic_ack(message.delivery_tag)
        seen += 1
        if seen == count:
            done.set()

    started = time.perf_counter()
    await channel.basic_consume(queue, on_message)
    await done.wait()
    await channel.basic_qos(prefetch_count=prefetch)  # a round trip after the last ack
    elapsed_s = time.perf_counter() - started
    await channel.queue_delete(queue)
    await connection.close()
    return count / elapsed_s


class Timeline:
    """When each message was handled, and on which of rr's connections."""

    def __init__(self, service_of: list[Service]) -> None:
        self._service_of = service_of
        self.calls: Counter[str] = Counter()
        self.handled: list[tuple[float, int, str]] = []

    async def handle(self, msg: Message) -> AnyOutcome:
        message_id = msg.message_id or ""
        self.calls[message_id] += 1
        self.handled.append((time.perf_counter(), self._service_of[0].connections, message_id))
        return Outcome.ack()


async def rr_through_failover(
    prefix: str, count: int, prefetch: int, stop: str, timeout_s: float
) -> dict[str, float]:
    """rr's part; the failover is the longest pause in handling after the stop."""
    queue = f"{prefix}.payouts"
    topology = load_text(TOPOLOGY.format(prefix=prefix))
    declare_via = URLS[2] if stop == "leader" else URLS[0]
    await declare_topology(topology, [declare_via], dry_run=False, connector=amqp_connector)
    node = leader_node(queue) if stop == "leader" else 1
    if stop == "leader" and node == 1:
        raise SystemExit("the queue must not be led by node 1 for --stop leader; run it again")
    ids = [f"{prefix}-{number:06d}" for number in range(count)]
    await preload(URLS[1], queue, ids)

    async def any_node() -> Connection:
        return await connect_any(amqp_connector, URLS)

    holder: list[Service] = []
    timeline = Timeline(holder)
    service = Service(
        HandlerSet(module="bench", subscribers=(Subscriber(queue, timeline.handle, "b:h"),)),
        topology=topology,
        connect=any_node,
        options=RunOptions(prefetch=prefetch),
    )
    holder.append(service)
    stopped_at = 0.0
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    try:
        async with service.running():
            while len(timeline.calls) < count // 3:
                await asyncio.sleep(0.01)
            stopped_at = time.perf_counter()
            await asyncio.to_thread(cluster, "stop-node", str(node))
            while len(timeline.calls) < count and loop.time() < deadline:
                await asyncio.sleep(0.05)
    finally:
        await asyncio.to_thread(cluster, "start-node", str(node))
    lost = count - len(timeline.calls)
    if lost:
        print(f"FAILED: {lost} of {count} messages never handled", file=sys.stderr)
    first_s = timeline.handled[0][0]
    before = [entry for entry in timeline.handled if entry[0] < stopped_at]
    times = [stopped_at] + [entry[0] for entry in timeline.handled if entry[0] >= stopped_at]
    if len(times) < 2:
        raise SystemExit(
            f"every message was handled before node {node} stopped: run it with more --messages"
        )
    gaps = [later - earlier for earlier, later in itertools.pairwise(times)]
    longest = max(range(len(gaps)), key=gaps.__getitem__)
    resumed_s, last_s = times[longest + 1], times[-1]
    handled_after = len(times) - 1 - longest
    moved = [entry[0] for entry in timeline.handled if entry[1] >= 2]
    return {
        "reconnected_s": moved[0] - stopped_at if moved else float("nan"),
        "before": len(before) / (stopped_at - first_s),
        "failover_s": gaps[longest],
        "after": handled_after / max(last_s - resumed_s, 1e-9),
        "duplicates": sum(timeline.calls.values()) - len(timeline.calls),
        "connections": service.connections,
        "lost": lost,
    }


async def delete_queues(prefix: str) -> None:
    connection = await aiormq.connect(URLS[1])
    channel = await connection.channel()
    for suffix in ("payouts", "payouts.dead", "reference"):
        await channel.queue_delete(f"{prefix}.{suffix}")
    await connection.close()


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--prefetch", type=int, default=100)
    parser.add_argument("--stop", choices=["connected", "leader"], default="connected")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds for rr's part")
    arguments = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    cluster("up")
    prefix = f"bench-failover-{uuid.uuid4().hex[:8]}"
    try:
        reference = await aiormq_reference(URLS[1], prefix, arguments.messages, arguments.prefetch)
        measured = await rr_through_failover(
            prefix, arguments.messages, arguments.prefetch, arguments.stop, arguments.timeout
        )
    finally:
        await delete_queues(prefix)
    print(
        f"rr run through a failover ({arguments.stop} node stopped), {arguments.messages:,} "
        f"messages, prefetch {arguments.prefetch}, quorum queue with 3 replicas"
    )
    print(f"  aiormq 1-ack reference      {reference:10,.0f} msg/s")
    print(
        f"  rr before the stop         {measured['before']:10,.0f} msg/s  "
        f"({measured['before'] / reference:.2f}x aiormq)"
    )
    pause_s = measured["failover_s"]
    print(f"  failover                   {pause_s:10.2f} s without a message handled")
    if measured["connections"] >= 2:
        print(
            f"  on a new connection        {measured['reconnected_s']:10.2f} s after the stop "
            "command (the old one handled what it held until the node closed it)"
        )
    print(
        f"  rr after the failover      {measured['after']:10,.0f} msg/s  "
        f"({measured['after'] / reference:.2f}x aiormq)"
    )
    print(
        f"  duplicates                 {measured['duplicates']:10,.0f}  "
        f"(connections {measured['connections']:.0f}, lost {measured['lost']:.0f})"
    )
    return 1 if measured["lost"] else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
