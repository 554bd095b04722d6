"""``rr run`` under faults while its handler publishes outputs (docs/reference/runtime.md,
"Publishing"), every output counted by id.

The handler of ``work`` publishes two outputs per call, one to the queue ``out.q`` and one
through the exchange ``out.x`` (bound to ``out.x.q``), and answers
:func:`tests.ledger.mixed_outcome` (ack, retry or retry_after by id and attempt), appending
each call to a file. While a stream of messages is handled (1,000, then 200 more whenever
the handler comes within 200 of the stream) the test forces rr's connection closed (the
broker's ``close_connection``, or the proxy's cut), kills ``rr run`` (SIGKILL) or
stops it (SIGTERM); a process that is gone is replaced by a new ``rr run``, which finishes the
work; then every id is counted (:mod:`tests.faults.output_ledger`): an acked message has each
output, an output exists only for a message whose handler acked, a duplicated output only for
a message acked again, and at most the in-flight window of those; a graceful stop duplicates
nothing.
"""

from __future__ import annotations

import asyncio
import re
import signal
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.faults import process
from tests.faults.conftest import FaultVhost
from tests.faults.harness import (
    PREFETCH,
    REPORT,
    TOPOLOGY,
    Collector,
    FaultResult,
    direct,
)
from tests.faults.node import PrivateNode
from tests.faults.output_ledger import OutputCount, ack_calls_of, count_outputs
from tests.faults.process import RrRun, calls_of, handled, ledger_of, stop, until
from tests.faults.proxy import FaultProxy
from tests.ledger import Ledger, mixed_outcome, publish_ids, take_ids

pytestmark = [pytest.mark.faults, pytest.mark.timeout(420)]

FIRST = 1000
"""Messages published before rr starts handling."""
STREAM_BATCH = 200
IN_FLIGHT = re.compile(
    r"connection lost; deliveries in flight return to their queues .*in_flight=(\d+)"
)
OUTPUT_QUEUES = ("out.q", "out.x.q")
"""Where output number 0 and number 1 of each message go."""

HANDLERS = """
import asyncio, os
from rabbitctl_retry import Message, Outputs, subscriber
from tests.ledger import mixed_outcome

CALLS = os.environ["RR_FAULT_CALLS"]
SLEEP_S = float(os.environ["RR_FAULT_SLEEP_S"])

@subscriber("work")
async def handle(msg: Message, out: Outputs):
    outcome = mixed_outcome(msg.message_id, msg.attempt)
    out.publish(msg.body, to="out.q")
    out.publish(msg.body, exchange="out.x", routing_key="out")
    with open(CALLS, "a") as calls:
        calls.write(f"{msg.message_id} {msg.attempt} {type(outcome).__name__}\\n")
    await asyncio.sleep(SLEEP_S)
    return outcome
"""


@dataclass(frozen=True, slots=True)
class Scene:
    """What a fault acts on."""

    node: PrivateNode
    proxy: FaultProxy
    run: RrRun
    given_back: list[int] = field(default_factory=list)
    """What the broker counted unacknowledged on rr's channels when the fault hit (each
    fault that takes rr's connection adds one: :func:`held_by_rr`)."""


Fault = Callable[[Scene], Awaitable[bool]]
"""Injects the fault; returns whether the ``rr run`` process still runs."""


async def held_by_rr(scene: Scene) -> None:
    """Freeze the proxy (rr's frames, acks included, stop reaching the broker), then record
    what the broker counts unacknowledged on rr's channels once that count stops moving: the
    deliveries the fault about to hit gives back. rr's own count (``in_flight=N``) misses
    the acks it had written that the broker never read, and a RabbitMQ 3.10 quorum queue
    hands out more than the prefetch; this count holds both. The caller thaws the proxy."""
    await asyncio.to_thread(scene.proxy.freeze)
    ports = set(await asyncio.to_thread(scene.proxy.upstream_ports))
    previous = -1
    while True:
        rows = await asyncio.to_thread(
            scene.node.list_channels, ("name", "messages_unacknowledged")
        )
        held = sum(int(row["messages_unacknowledged"]) for row in rows if client_port(row) in ports)
        if held == previous:
            scene.given_back.append(held)
            return
        previous = held


def client_port(channel: dict[str, object]) -> int | None:
    """The client's port in a channel's name (``127.0.0.1:PORT -> 127.0.0.1:5672 (1)``)."""
    port = str(channel["name"]).split(" -> ")[0].rpartition(":")[2]
    return int(port) if port.isdigit() else None


async def no_fault(scene: Scene) -> bool:
    return True


async def forced_close(scene: Scene) -> bool:
    """The broker closes rr's connection (``rabbitmqctl close_connection``: CONNECTION_FORCED),
    and only that one (the test's stream goes on); rr reconnects."""
    ports = await asyncio.to_thread(scene.proxy.upstream_ports)
    await held_by_rr(scene)
    closed = await asyncio.to_thread(
        scene.node.close_connections_from, ports, "fault suite: forced close"
    )
    await asyncio.to_thread(scene.proxy.thaw)
    assert closed >= 1, ports
    await until(lambda: "connection lost" in scene.run.output(), "rr's 'connection lost' line")
    return True


async def proxy_cut(scene: Scene) -> bool:
    """rr's TCP connection is reset under it; rr reconnects."""
    await held_by_rr(scene)
    assert await asyncio.to_thread(scene.proxy.cut) >= 1
    await asyncio.to_thread(scene.proxy.thaw)
    await until(lambda: "connection lost" in scene.run.output(), "rr's 'connection lost' line")
    return True


async def sigkill(scene: Scene) -> bool:
    await held_by_rr(scene)
    scene.run.process.kill()
    await asyncio.to_thread(scene.run.process.wait, 30)
    await asyncio.to_thread(scene.proxy.thaw)
    return False


async def sigterm(scene: Scene) -> bool:
    code, _, output = await stop(scene.run, signal.SIGTERM)
    assert code == 0, output
    return False


FAULTS: dict[str, tuple[Fault, int]] = {
    "no fault": (no_fault, 0),
    "forced close": (forced_close, 1),
    "proxy cut": (proxy_cut, 1),
    "SIGKILL of rr run": (sigkill, 1),
    "SIGTERM of rr run": (sigterm, 1),
}
"""name -> (the fault, the interruptions it makes)."""


def rr_run(tmp_path: Path, url: str, queue_type: str) -> AbstractContextManager[RrRun]:
    return process.rr_run(
        tmp_path,
        url,
        topology=TOPOLOGY.format(type=queue_type, delay="dlx-ttl"),
        handlers=HANDLERS,
        env={"RR_FAULT_SLEEP_S": "0.02"},
        args=["--shutdown-timeout", "30"],
    )


class Stream:
    """New messages for ``work`` (each id published once and confirmed) while the run goes
    on: a batch whenever rr's handler came within a batch of the last, until stopped, so the
    fault hits while handlers publish, however long the fault takes to inject."""

    def __init__(self, url: str, prefix: str, calls: Path) -> None:
        self.url = url
        self.prefix = prefix
        self.calls = calls
        self.ids: list[str] = []
        self.stopped = asyncio.Event()

    async def run(self) -> None:
        while not self.stopped.is_set():
            await self.publish(STREAM_BATCH)
            await until(
                lambda: (
                    self.stopped.is_set() or handled(self.calls) + STREAM_BATCH >= len(self.ids)
                ),
                "the handler to come within a batch of the stream",
                timeout_s=120,
            )

    async def publish(self, count: int) -> None:
        first = len(self.ids)
        batch = [f"{self.prefix}-{number:06d}" for number in range(first, first + count)]
        await publish_ids(direct(self.url), "work", batch)
        self.ids += batch


async def declare_outputs(url: str, queue_type: str) -> None:
    """The queues the outputs go to (of the source's type), and the exchange of output 1."""
    connection = await direct(url)()
    try:
        channel = await connection.channel()
        for queue in OUTPUT_QUEUES:
            await channel.queue_declare(queue, arguments={"x-queue-type": queue_type})
        await channel.exchange_declare("out.x", type="direct")
        await channel.queue_bind("out.x.q", "out.x", "out")
    finally:
        await connection.close()


async def every_message_ended(
    calls: Path, ids: list[str], collector: Collector, node: PrivateNode, vhost: str
) -> Ledger:
    """Until every id reached an end (a handler acked it, or it is dead) and the source
    queues hold nothing, unacked deliveries included; the ledger then."""
    deadline = time.monotonic() + 240
    while True:
        await collector.collect()
        ledger = ledger_of(calls, mixed_outcome)
        if (
            ledger.settled(ids, collector.dead) == len(ids)
            and await collector.queued("work", "work.retry") == 0
        ):
            queues = await asyncio.to_thread(node.queues, vhost)
            if sum(queues.get(q, (0, 0))[0] for q in ("work", "work.retry")) == 0:
                return ledger
        settled = ledger.settled(ids, collector.dead)
        assert time.monotonic() < deadline, f"only {settled} of {len(ids)} ids ended"
        await asyncio.sleep(0.5)


async def finish(scene: Scene, ids: list[str], collector: Collector, vhost: str) -> None:
    """Let ``scene.run`` end the work, then stop it gracefully (exit 0)."""
    calls = scene.run.log.parent / "calls.txt"
    await every_message_ended(calls, ids, collector, scene.node, vhost)
    code, _, output = await stop(scene.run)
    assert code == 0, output


async def run_with_outputs(
    vhost: FaultVhost,
    node: PrivateNode,
    proxy: FaultProxy,
    tmp_path: Path,
    *,
    queue_type: str,
    fault: Fault,
) -> tuple[list[str], Counter[str], Counter[str], list[Counter[str]], list[int]]:
    """One run under ``fault``: (ids, dead ids, ids still queued, ids in each output queue,
    the deliveries the broker held for rr at each interruption)."""
    calls = tmp_path / "calls.txt"
    stream = Stream(vhost.url, f"outputs-{queue_type}", calls)
    collector = Collector(vhost.url)
    await declare_outputs(vhost.url, queue_type)
    with rr_run(tmp_path, vhost.proxy_url, queue_type) as first:
        await until(lambda: "consuming" in first.output(), "rr run to consume")
        await stream.publish(FIRST)
        streaming = asyncio.create_task(stream.run())
        await until(lambda: handled(calls) >= 300, "300 handler calls")
        scene = Scene(node, proxy, first)
        try:
            still_running = await fault(scene)
        finally:
            stream.stopped.set()
            await streaming
        ids = stream.ids
        if still_running:
            await finish(scene, ids, collector, vhost.name)
    if not still_running:  # a new rr run finishes the work
        with rr_run(tmp_path, vhost.proxy_url, queue_type) as second:
            await finish(Scene(node, proxy, second), ids, collector, vhost.name)
    await collector.collect()
    connect = direct(vhost.url)
    queued = await take_ids(connect, "work") + await take_ids(connect, "work.retry")
    outputs = [await take_ids(connect, queue) for queue in OUTPUT_QUEUES]
    return ids, collector.dead, queued, outputs, scene.given_back


@pytest.mark.parametrize("fault_name", list(FAULTS))
@pytest.mark.parametrize("queue_type", ["classic", "quorum"])
async def test_outputs_under_a_fault(
    any_fault_node: PrivateNode,
    any_fault_vhost: FaultVhost,
    any_proxy: FaultProxy,
    tmp_path: Path,
    queue_type: str,
    fault_name: str,
) -> None:
    fault, interruptions = FAULTS[fault_name]
    ids, dead, queued, outputs, given_back = await run_with_outputs(
        any_fault_vhost, any_fault_node, any_proxy, tmp_path, queue_type=queue_type, fault=fault
    )
    calls = calls_of(tmp_path / "calls.txt")
    count = count_outputs(
        ids, ack_calls=ack_calls_of(calls), dead=dead, queued=queued, per_queue=outputs
    )
    ledger = ledger_of(tmp_path / "calls.txt", mixed_outcome)
    result = OutputFaultResult(
        fault=f"outputs: {fault_name} ({any_fault_node.server})",
        queue_type=queue_type,
        messages=len(ids),
        verdict=ledger.verdict(ids, dead, queued),
        recovery_s=None,
        connections=0,
        consumer_restarts=0,
        count=count,
        output_failures=output_failures(tmp_path),
    )
    REPORT.append(result)
    print(f"\n{result.row()}\n{count.summary()}")
    extra = {i: ledger.attempts[i] for i in result.duplicated_ids}
    print(f"attempts of the ids with duplicated work: {dict(list(extra.items())[:20])}")
    window = max(in_flight_window(tmp_path), *given_back, 0) * interruptions
    print(f"window {window}: rr said {in_flight_window(tmp_path)}, the broker held {given_back}")
    assert result.verdict.lost == [], result.verdict.summary()
    assert len(result.duplicated_ids) <= window, result.verdict.summary()
    assert_outputs_within_window(count, window=window)
    if fault is sigterm or fault is no_fault:
        # a graceful stop settles every call it began: nothing is handled twice at one
        # attempt (a quorum queue counts a delivery returned unhandled as an attempt, so a
        # message may start at attempt 2: its work differs from the plan, none repeats)
        assert (count.duplicated, count.acked_again, count.dead_with_outputs) == ([], [], [])
        assert repeated_attempts(ledger) == {}, result.verdict.summary()
        assert result.output_failures == 0


def output_failures(tmp_path: Path) -> int:
    """How many times the ``rr run`` processes of a test said an acked delivery's output was
    not confirmed (docs/reference/runtime.md, "Publishing")."""
    said = "an output of an acked delivery was not confirmed"
    return sum(log.read_text(errors="replace").count(said) for log in tmp_path.glob("rr-*.log"))


def repeated_attempts(ledger: Ledger) -> dict[str, list[int]]:
    """The ids whose handler ran more than once at one attempt, with their attempts."""
    return {i: seen for i, seen in ledger.attempts.items() if len(seen) != len(set(seen))}


@dataclass
class OutputFaultResult(FaultResult):
    """A fault run whose handler published outputs: its row adds their count."""

    count: OutputCount | None = None
    output_failures: int = 0
    """Acked deliveries whose outputs were not all confirmed (rr's warning line)."""

    def row(self) -> str:
        count = self.count
        if count is None:  # pragma: no cover - always given
            return super().row()
        return (
            f"{super().row()}  outputs {count.outputs}, duplicated {len(count.duplicated)}, "
            f"acked again {len(count.acked_again)}, dead with outputs "
            f"{len(count.dead_with_outputs)}, not confirmed {self.output_failures}"
        )


def in_flight_window(tmp_path: Path) -> int:
    """The deliveries in flight when the fault hit as rr counts them: the prefetch, or more if
    rr said it had more when its connection was lost (``in_flight=N``: a RabbitMQ 3.10 quorum
    queue was seen to hand out 116 unsettled deliveries to a consumer of prefetch 100). The
    broker's own count (:func:`held_by_rr`) also holds the acks rr wrote that it never read."""
    said = [
        int(found)
        for log in tmp_path.glob("rr-*.log")
        for found in IN_FLIGHT.findall(log.read_text(errors="replace"))
    ]
    return max([PREFETCH, *said])


def assert_outputs_within_window(count: OutputCount, *, window: int) -> None:
    """docs/reference/runtime.md, "Publishing": no acked message without its outputs, no output
    without an ack, a duplicate only for a message acked again, at most ``window`` of those (the
    deliveries in flight when the fault hit)."""
    assert count.missing == [], count.summary()
    assert count.without_ack == [], count.summary()
    assert count.strangers == 0, count.summary()
    assert count.unexplained_duplicates() == [], count.summary()
    assert len(count.disturbed) <= window, count.summary()
