"""Time and memory of `rr dlq inspect --summary` over a big dead-letter queue, against a raw
aiormq `basic.get` loop reading the same queue, in the same run.

    python benchmarks/inspect_summary.py [--messages 100000] [--rounds 3] [--url URL]

The queue: one classic durable queue preloaded (untimed) with realistic dead letters (the
200-byte persistent JSON bodies with a message id, the retry header and an `x-death` entry of
benchmarks/dlq.py). Every case reads every message and takes none (the queue holds the same
messages afterwards; checked after each case):

* rr summary          what `rr dlq inspect QUEUE --summary` runs (no CLI start-up, no
                      rendering): `scan_messages` (basic.consume, never acked, channel closed at
                      the end), each delivery turned into a Letter (origin, reason, retry count,
                      dead-letter time) and counted into a Summary
* aiormq get loop     raw aiormq: basic.get until get-empty, never acked, then the channel is
                      closed (what a script that "peeks" a queue does); nothing decoded

Timed: from the first basic.consume / basic.get to the channel closed. Each round runs both, in
a fixed order; the table shows each case's median and the median of the per-round ratios
(rr's time ÷ the get loop's: below 1 is faster). Then memory: the peak Python allocation
(tracemalloc) of the rr summary over a tenth of the queue and over all of it, in untimed runs:
flat means the summary keeps no message.

Needs a RabbitMQ (default amqp://guest:guest@127.0.0.1:5672/); it creates and deletes its own
queue. Speed is measured here, never asserted in the test suite.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
import tracemalloc
import uuid
from datetime import UTC, datetime
from pathlib import Path

import aiormq
from pamqp import commands as spec

sys.path.insert(0, str(Path(__file__).resolve().parent))

from dlq import delete, depth, preload  # benchmarks/dlq.py: the same dead letters

from rabbitctl_retry.cli.dlq.inspect import InspectReading
from rabbitctl_retry.dlq.origin import WaitQueues
from rabbitctl_retry.dlq.summary import Summary
from rabbitctl_retry.ops import dlq
from rabbitctl_retry.retry.headers import DEFAULT_RETRY_HEADER
from rabbitctl_retry.transport import amqp


async def rr_summary(url: str, queue: str, limit: int | None = None) -> tuple[float, Summary]:
    reading = InspectReading(
        retry_header=DEFAULT_RETRY_HEADER, wait_queues=WaitQueues(), now=datetime.now(UTC)
    )
    summary = Summary(now=reading.now)
    connection = await amqp.connect(url)
    try:
        started = time.perf_counter()
        await dlq.scan_messages(connection, queue, reading.taker(summary.add), limit=limit)
        return time.perf_counter() - started, summary
    finally:
        await connection.close()


async def aiormq_get_loop(url: str, queue: str) -> tuple[float, int]:
    connection = await aiormq.connect(url)
    try:
        channel = await connection.channel()
        read = 0
        started = time.perf_counter()
        while True:
            message = await channel.basic_get(queue)
            if not isinstance(message.delivery, spec.Basic.GetOk):
                break
            read += 1
        await channel.close()
        return time.perf_counter() - started, read
    finally:
        await connection.close()


async def peak_bytes(url: str, queue: str, limit: int) -> int:
    tracemalloc.start()
    try:
        _, summary = await rr_summary(url, queue, limit)
        assert summary.count == limit, summary.count
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


async def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--url", default="amqp://guest:guest@127.0.0.1:5672/")
    args = parser.parse_args()
    count = args.messages
    queue = f"rr-bench-inspect-{uuid.uuid4().hex[:8]}"
    await preload(args.url, queue, f"{queue}.origin", count)
    try:
        rr_times, get_times = [], []
        for _ in range(args.rounds):
            seconds, summary = await rr_summary(args.url, queue)
            assert summary.count == count, summary.count
            assert summary.origins == {f"{queue}.origin": count}, summary.origins
            rr_times.append(seconds)
            assert await depth(args.url, queue) == count
            seconds, read = await aiormq_get_loop(args.url, queue)
            assert read == count, read
            get_times.append(seconds)
            assert await depth(args.url, queue) == count
        tenth = await peak_bytes(args.url, queue, max(1, count // 10))
        whole = await peak_bytes(args.url, queue, count)
    finally:
        await delete(args.url, queue, f"{queue}.origin")
    ratios = [rr / get for rr, get in zip(rr_times, get_times, strict=True)]
    print(
        f"{count:,} dead letters, {args.rounds} rounds, classic durable queue, persistent "
        "200-byte bodies with x-death; nothing taken"
    )
    print(f"{'case':18} {'seconds (median)':>17} {'msg/s':>10}  per round")
    for name, times in (("rr summary", rr_times), ("aiormq get loop", get_times)):
        median = statistics.median(times)
        each = " ".join(f"{seconds:.2f}" for seconds in times)
        print(f"{name:18} {median:17.2f} {count / median:10,.0f}  {each}")
    each = " ".join(f"{ratio:.2f}" for ratio in ratios)
    print(f"rr summary time / get loop time: {statistics.median(ratios):.2f} median  ({each})")
    print(
        f"peak traced memory of the summary: {tenth / 1e6:.1f} MB over {max(1, count // 10):,}, "
        f"{whole / 1e6:.1f} MB over {count:,}"
    )


if __name__ == "__main__":
    asyncio.run(main())
