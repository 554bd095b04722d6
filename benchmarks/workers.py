"""Throughput of `rr run --workers N` (N = 1, 2, 4, ...) against one raw aiormq process.

    python benchmarks/workers.py [--messages 100000] [--workers 1,2,4] [--prefetch 500]
                                 [--rounds 3] [--url URL]

Each case drains a preloaded (untimed) classic durable queue of persistent 200-byte messages:

* rr run --workers N   the command, as users start it: a no-op async handler (acks), the
                       supervisor and its N worker processes, each with its own connection;
                       timed from the command's start (start-up counted) until it exited
                       after its stop: SIGTERM once the queue has no ready message (a passive
                       declare every 50 ms), and its graceful stop acks what it holds
* aiormq batched       one raw aiormq process, basic.ack(multiple=true) every 100 messages
                       (and what is left on SIGTERM, then it closes), timed the same way
* ceiling              raw pamqp frames over a blocking socket (benchmarks/wire.py), in this
                       process (no start-up): consume, basic.ack(multiple=true) every 100;
                       what one Python process can reach at best here

The rate counts the messages acked: what a case left unacked is back in the queue afterwards,
counted and shown. Each round runs every case once, the order rotated by one each round; the
table shows the median rate and the median per-round ratios to the aiormq process and to the
ceiling. Past the point where one more worker adds nothing, the broker (its queue process, on
the same 2 cores) is the limit, not rr: the "x half as many" column says how much each N
added over N/2. Needs a RabbitMQ (default amqp://guest:guest@127.0.0.1:5672/); it creates and
deletes its own queues.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
import uuid
from pathlib import Path

import aiormq
import wire
from pamqp import commands as spec

BODY = b'{"id": 1, "note": "' + b"x" * 180 + b'"}'

HANDLER = """
from rabbitctl_retry import Message, subscriber


@subscriber({queue!r})
async def handle(message: Message) -> None:
    return None
"""

AIORMQ_CONSUMER = """
import asyncio, signal, sys
import aiormq


async def main(url: str, queue: str, prefetch: int) -> None:
    connection = await aiormq.connect(url)
    channel = await connection.channel()
    await channel.basic_qos(prefetch_count=prefetch)
    unacked = last_tag = 0
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)

    async def on_message(message: aiormq.abc.DeliveredMessage) -> None:
        nonlocal unacked, last_tag
        unacked += 1
        last_tag = message.delivery_tag
        if unacked >= 100:
            unacked = 0
            await channel.basic_ack(message.delivery_tag, multiple=True)

    consume = await channel.basic_consume(queue, on_message)
    await stop.wait()
    await channel.basic_cancel(consume.consumer_tag)
    if unacked:
        await channel.basic_ack(last_tag, multiple=True)
    await connection.close()


asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
"""


async def preload(url: str, queue: str, count: int) -> None:
    connection = await aiormq.connect(url)
    channel = await connection.channel()
    await channel.queue_declare(queue, durable=True)
    properties = spec.Basic.Properties(delivery_mode=2, content_type="application/json")
    for start in range(0, count, 1000):
        await asyncio.gather(
            *(
                channel.basic_publish(BODY, routing_key=queue, properties=properties)
                for _ in range(min(1000, count - start))
            )
        )
    while (await channel.queue_declare(queue, passive=True)).message_count < count:
        await asyncio.sleep(0.05)
    await connection.close()


async def no_ready_message(url: str, queue: str, process: subprocess.Popen[bytes]) -> None:
    """Return once ``queue`` has no ready message (a passive declare's count; what the
    consumers hold unacked is not in it)."""
    connection = await aiormq.connect(url)
    channel = await connection.channel()
    while (await channel.queue_declare(queue, passive=True)).message_count:
        if process.poll() is not None:
            raise RuntimeError(f"the consumer exited with {process.returncode}")
        await asyncio.sleep(0.05)
    await connection.close()


async def left_behind(url: str, queue: str) -> int:
    """The queue's messages once its consumers are gone (what they never acked is back)."""
    connection = await aiormq.connect(url)
    channel = await connection.channel()
    count = (await channel.queue_declare(queue, passive=True)).message_count or 0
    await channel.queue_delete(queue)
    await connection.close()
    return count


CEILING = 0
"""The ``workers`` of the ceiling case."""


async def one_case(args: argparse.Namespace, folder: Path, workers: int | None) -> float:
    """Drain one preloaded queue with ``rr run --workers N`` (None: the aiormq process;
    :data:`CEILING`: the pamqp loop in this process)."""
    queue = f"rr-bench-workers-{uuid.uuid4().hex[:8]}"
    await preload(args.url, queue, args.messages)
    if workers == CEILING:
        result = await asyncio.to_thread(
            wire.consume_and_ack, args.url, queue, args.messages, args.prefetch, 100
        )
        assert result.ids.total() == args.messages, result.ids.total()
        await left_behind(args.url, queue)
        return result.rate
    if workers is None:
        script = folder / "aiormq_consumer.py"
        script.write_text(AIORMQ_CONSUMER)
        command = [sys.executable, str(script), args.url, queue, str(args.prefetch)]
    else:
        handler = folder / f"handler_{queue.replace('-', '_')}.py"
        handler.write_text(textwrap.dedent(HANDLER.format(queue=queue)))
        topology = folder / f"{queue}.toml"
        topology.write_text(f'[queues."{queue}"]\n')
        command = [sys.executable, "-m", "rabbitctl_retry", "run", str(handler)]
        command += ["--topology", str(topology), "--url", args.url, "--workers", str(workers)]
        command += ["--prefetch", str(args.prefetch), "--log-level", "error"]
    started = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        await no_ready_message(args.url, queue, process)
        process.send_signal(signal.SIGTERM)
        code = await asyncio.to_thread(process.wait, 120)
        elapsed = time.perf_counter() - started
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    left = await left_behind(args.url, queue)
    if code != 0 or left:
        print(f"  {name(workers)}: exit {code}, {left} message(s) left unacked", flush=True)
    return (args.messages - left) / elapsed


def name(workers: int | None) -> str:
    if workers == CEILING:
        return "ceiling (pamqp, socket)"
    return "aiormq batched, 1 process" if workers is None else f"rr run --workers {workers}"


async def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--workers", default="1,2,4")
    parser.add_argument("--prefetch", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--url", default="amqp://guest:guest@127.0.0.1:5672/")
    args = parser.parse_args()
    counts: list[int | None] = [None, *(int(n) for n in args.workers.split(",")), CEILING]
    rounds: list[dict[str, float]] = []
    with tempfile.TemporaryDirectory(prefix="rr-bench-workers-") as folder:
        for number in range(args.rounds):
            order = counts[number % len(counts) :] + counts[: number % len(counts)]
            rates = {name(n): await one_case(args, Path(folder), n) for n in order}
            print(
                f"  round {number + 1}: " + ", ".join(f"{k} {v:,.0f}" for k, v in rates.items()),
                flush=True,
            )
            rounds.append(rates)
    print(
        f"{args.messages:,} messages, prefetch {args.prefetch}, {args.rounds} rounds, "
        f"{os.cpu_count()} cores; start-up counted"
    )
    reference = name(None)
    ceiling = name(CEILING)
    print(
        f"{'case':28} {'msg/s (median)':>15} {'x aiormq':>9} {'x ceiling':>10} "
        f"{'x half as many':>15}  per round"
    )
    for n in counts:
        each = [r[name(n)] for r in rounds]
        versus = statistics.median(r[name(n)] / r[reference] for r in rounds)
        to_ceiling = statistics.median(r[name(n)] / r[ceiling] for r in rounds)
        half = ""
        if n is not None and n > 1 and n // 2 in counts:
            half = f"{statistics.median(r[name(n)] / r[name(n // 2)] for r in rounds):15.2f}"
        listed = " ".join(f"{rate:,.0f}" for rate in each)
        print(
            f"{name(n):28} {statistics.median(each):15,.0f} {versus:9.2f} {to_ceiling:10.2f} "
            f"{half:>15}  {listed}"
        )


if __name__ == "__main__":
    asyncio.run(main())
