"""Throughput of `rr dlq replay` and `rr dlq move` against raw aiormq moves, and the time of
`rr dlq inspect`.

    python benchmarks/dlq.py [--messages 20000] [--prefetch 500] [--rounds 3]
                             [--inspect 10000] [--url URL]

Every message is a realistic dead letter: a 200-byte persistent JSON body, a message id, the
retry header, and an `x-death` entry naming its origin queue. Cases, each moving every message
of a preloaded (untimed) classic durable queue to another queue:

* rr replay           the `rr dlq replay` engine (`ops/transfer.py`, no CLI): origin from
                      `x-death`, new headers, mandatory copies on a confirm channel, many in
                      flight, each dead letter acked after its own confirm (acks coalesced)
* rr move             `rr dlq move SOURCE --to TARGET` on the same engine: every header kept
* rr dlq replay (CLI) the command itself, `rr dlq replay SOURCE --yes -o tsv` in a process of
                      its own, timed from its start (Python, imports, connecting: start-up
                      counted) to its exit; its peak RSS (the process's ru_maxrss) is shown
                      apart
* ... (native)        the same three on rr's own AMQP client (``RR_AMQP_CLIENT=native``,
                      ``transport/native.py``) instead of the aiormq adapter
* aiormq pipelined    raw aiormq: consume with the same prefetch, publish the message as it
                      is (mandatory) on a confirm channel, await the confirm, ack; every
                      delivery's callback runs at once, so publishes are pipelined. aiormq's
                      defaults (``wait=True``: each publish and ack also waits for the socket
                      to drain; rr's adapter skips that wait on confirm channels, where the
                      confirm makes it redundant)
* aiormq get loop     raw aiormq, one message at a time: basic.get, publish, await the
                      confirm, ack (what a naive replay script does)
* ceiling             raw pamqp frames over a blocking socket (benchmarks/wire.py): the
                      pipelined move's frames, acks coalesced over the confirmed prefix
                      (multiple=true every 100), every read's answers in one send

Timed: from the first basic.consume / basic.get to the moment every dead letter is acked and
the broker has processed the acks (a round trip on the consuming channel). Each round runs
every case once, the order rotated by one each round; the table shows the median rate and the
median of the per-round ratios. Then `inspect`: reading N messages without taking them
(`scan_messages`, what `rr dlq inspect` does under its rendering, on the default client),
timed the same way, median of the rounds.

Needs a RabbitMQ (default amqp://guest:guest@127.0.0.1:5672/); it creates and deletes its own
queues. Speed is measured here, never asserted in the test suite.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

import aiormq
import wire
from pamqp import commands as spec

from rabbitctl_retry.dlq.move import MovePlan
from rabbitctl_retry.dlq.replay import ReplayPlan
from rabbitctl_retry.ops import dlq
from rabbitctl_retry.ops import transfer as replay
from rabbitctl_retry.transport import amqp, clients, native
from rabbitctl_retry.transport.base import Connection

BODY = json.dumps({"id": 1, "card": "4111111111111111", "note": "x" * 150}).encode()[:200]


def properties(origin: str, number: int) -> spec.Basic.Properties:
    return spec.Basic.Properties(
        delivery_mode=2,
        content_type="application/json",
        message_id=f"m-{number}",
        headers={
            "x-ruststream-retry-count": "4",
            "x-death": [
                {
                    "count": 1,
                    "exchange": "",
                    "queue": origin,
                    "reason": "rejected",
                    "routing-keys": [origin],
                    "time": datetime.now(UTC).replace(microsecond=0),
                }
            ],
            "x-first-death-exchange": "",
            "x-first-death-queue": origin,
            "x-first-death-reason": "rejected",
        },
    )


async def preload(url: str, queue: str, origin: str, count: int) -> None:
    connection = await aiormq.connect(url)
    channel = await connection.channel()
    for name in (queue, origin):
        await channel.queue_declare(name, durable=True)
    for start in range(0, count, 1000):
        await asyncio.gather(
            *(
                channel.basic_publish(BODY, routing_key=queue, properties=properties(origin, i))
                for i in range(start, min(start + 1000, count))
            )
        )
    while (await channel.queue_declare(queue, passive=True)).message_count < count:
        await asyncio.sleep(0.05)
    await connection.close()


async def delete(url: str, *queues: str) -> None:
    connection = await aiormq.connect(url)
    channel = await connection.channel()
    for queue in queues:
        await channel.queue_delete(queue)
    await connection.close()


async def depth(url: str, queue: str) -> int:
    connection = await aiormq.connect(url)
    channel = await connection.channel()
    count = (await channel.queue_declare(queue, passive=True)).message_count or 0
    await connection.close()
    return count


# ---------------------------------------------------------------- cases


Case = Callable[[str, str, str, int, int], Awaitable[float]]
Connect = Callable[[str], Awaitable[Connection]]


async def aiormq_connect(url: str) -> Connection:
    return await amqp.connect(url)


async def native_connect(url: str) -> Connection:
    return await native.connect(url)


def rr_engine(connect: Connect, *, move: bool) -> Case:
    """The transfer engine's replay (or, with ``move``, its move) on ``connect``'s client."""

    async def case(url: str, source: str, target: str, count: int, prefetch: int) -> float:
        connection = await connect(url)
        options = replay.TransferOptions(window=prefetch)
        started = time.perf_counter()
        if move:
            plan = MovePlan(source=source, to=target)
            report = await replay.move_queue(connection, plan, options)
        else:
            run = ReplayPlan(source=source, run_id=uuid.uuid4().hex)
            report = await replay.replay_queue(connection, run, options)
        elapsed = time.perf_counter() - started
        await connection.close()
        assert report.sent == count, (report.sent, report.failed, report.stopped)
        return count / elapsed

    return case


async def aiormq_pipelined(url: str, source: str, target: str, count: int, prefetch: int) -> float:
    connection = await aiormq.connect(url)
    consume = await connection.channel()
    confirm = await connection.channel(publisher_confirms=True)
    await consume.basic_qos(prefetch_count=prefetch)
    done = asyncio.Event()
    moved = 0

    async def on_message(message: aiormq.abc.DeliveredMessage) -> None:
        nonlocal moved
        await confirm.basic_publish(
            message.body,
            routing_key=target,
            properties=message.header.properties,
            mandatory=True,
        )
        await consume.basic_ack(message.delivery_tag)
        moved += 1
        if moved == count:
            done.set()

    started = time.perf_counter()
    await consume.basic_consume(source, on_message)
    await done.wait()
    await consume.basic_qos(prefetch_count=prefetch)  # a round trip: every ack was processed
    elapsed = time.perf_counter() - started
    await connection.close()
    return count / elapsed


async def aiormq_get_loop(url: str, source: str, target: str, count: int, prefetch: int) -> float:
    connection = await aiormq.connect(url)
    channel = await connection.channel()
    confirm = await connection.channel(publisher_confirms=True)
    moved = 0
    started = time.perf_counter()
    while True:
        message = await channel.basic_get(source)
        if not isinstance(message.delivery, spec.Basic.GetOk):
            break
        await confirm.basic_publish(
            message.body, routing_key=target, properties=message.header.properties, mandatory=True
        )
        await channel.basic_ack(message.delivery_tag)
        moved += 1
    await channel.basic_qos(prefetch_count=1)
    elapsed = time.perf_counter() - started
    await connection.close()
    assert moved == count, moved
    return count / elapsed


async def ceiling(url: str, source: str, target: str, count: int, prefetch: int) -> float:
    result = await asyncio.to_thread(
        wire.consume_copy_and_ack, url, source, target, count, prefetch, 100
    )
    assert result.ids.total() == count == len(result.ids), result.ids.most_common(3)
    return result.rate


PEAK_RSS_KIB: dict[str, list[int]] = {}
"""The peak RSS of each `rr dlq replay` process run, in KiB, by client."""


def _replay_process(url: str, source: str, client: str) -> tuple[float, int, int]:
    """Run `rr dlq replay SOURCE` on ``client``; (seconds, exit status, peak RSS in KiB)."""
    command = [sys.executable, "-m", "rabbitctl_retry", "dlq", "replay", source, "--yes"]
    command += ["--url", url, "--output", "tsv"]
    environ = {**os.environ, clients.ENV: client}
    started = time.perf_counter()
    process = subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=environ
    )
    _, status, usage = os.wait4(process.pid, 0)
    elapsed = time.perf_counter() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    return elapsed, process.returncode, usage.ru_maxrss


def rr_replay_command(client: str) -> Case:
    async def case(url: str, source: str, target: str, count: int, prefetch: int) -> float:
        elapsed, code, peak_kib = await asyncio.to_thread(_replay_process, url, source, client)
        assert code == 0, f"rr dlq replay exited with {code}"
        PEAK_RSS_KIB.setdefault(client, []).append(peak_kib)
        return count / elapsed

    return case


CEILING = "ceiling (pamqp, socket)"
PIPELINED = "aiormq pipelined move"
GET_LOOP = "aiormq get/publish/ack loop"
CASES: dict[str, Case] = {
    "rr replay": rr_engine(aiormq_connect, move=False),
    "rr move": rr_engine(aiormq_connect, move=True),
    "rr dlq replay (CLI)": rr_replay_command("aiormq"),
    "rr replay (native)": rr_engine(native_connect, move=False),
    "rr move (native)": rr_engine(native_connect, move=True),
    "rr dlq replay (CLI, native)": rr_replay_command("native"),
    PIPELINED: aiormq_pipelined,
    GET_LOOP: aiormq_get_loop,
    CEILING: ceiling,
}


async def inspect_seconds(url: str, count: int) -> float:
    source = f"rr-bench-dlq-{uuid.uuid4().hex[:8]}"
    await preload(url, source, f"{source}.origin", count)
    try:
        connection = await clients.connect(url)
        started = time.perf_counter()
        scan = await dlq.scan_messages(connection, source, lambda delivery: True)
        elapsed = time.perf_counter() - started
        await connection.close()
        assert scan.read == count
        assert await depth(url, source) == count  # nothing taken
        return elapsed
    finally:
        await delete(url, source, f"{source}.origin")


async def one_round(url: str, count: int, prefetch: int, index: int) -> dict[str, float]:
    rates: dict[str, float] = {}
    names = list(CASES)
    shift = index % len(names)
    for name in names[shift:] + names[:shift]:
        case = CASES[name]
        source = f"rr-bench-dlq-{uuid.uuid4().hex[:8]}"
        target = f"{source}.origin"
        await preload(url, source, target, count)
        try:
            rates[name] = await case(url, source, target, count, prefetch)
            assert await depth(url, target) == count
            assert await depth(url, source) == 0
        finally:
            await delete(url, source, target)
    return rates


async def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--prefetch", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--inspect", type=int, default=10_000)
    parser.add_argument("--url", default="amqp://guest:guest@127.0.0.1:5672/")
    args = parser.parse_args()
    rounds = []
    inspects = []
    for index in range(args.rounds):
        rounds.append(await one_round(args.url, args.messages, args.prefetch, index))
        inspects.append(await inspect_seconds(args.url, args.inspect))
    print(
        f"{args.messages} dead letters, prefetch {args.prefetch}, {args.rounds} rounds, "
        "classic durable queues, persistent 200-byte bodies with x-death"
    )
    print(
        f"{'case':30} {'msg/s (median)':>15} {'x pipelined':>12} {'x get loop':>11} "
        f"{'x ceiling':>10}  per round"
    )
    for name in CASES:
        rates = [r[name] for r in rounds]
        pipelined = statistics.median(r[name] / r[PIPELINED] for r in rounds)
        get_loop = statistics.median(r[name] / r[GET_LOOP] for r in rounds)
        versus_ceiling = statistics.median(r[name] / r[CEILING] for r in rounds)
        each = " ".join(f"{rate:,.0f}" for rate in rates)
        print(
            f"{name:30} {statistics.median(rates):15,.0f} {pipelined:12.2f} {get_loop:11.2f} "
            f"{versus_ceiling:10.2f}  {each}"
        )
    for client, peaks in PEAK_RSS_KIB.items():
        print(
            f"rr dlq replay (CLI, {client}) peak RSS: "
            + ", ".join(f"{kib / 1024:.0f} MiB" for kib in peaks)
            + f" ({args.messages:,} dead letters each run)"
        )
    each = " ".join(f"{seconds:.2f}" for seconds in inspects)
    print(
        f"inspect {args.inspect:,} messages (read, nothing taken): "
        f"{statistics.median(inspects):.2f} s median  ({each})"
    )


if __name__ == "__main__":
    asyncio.run(main())
