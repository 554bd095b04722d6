"""Publish + deliver + ack throughput of the emulator, beside raw aiormq on the real broker.

    python benchmarks/emulator.py [--messages 50000] [--prefetch 500] [--rounds 3] [--url URL]

One shape, run on all three: publish N persistent 200-byte messages to a classic queue
(pipelined, no confirms), consume them with the given prefetch and ack each one. Timed from
the first publish to the last ack. The emulator runs through the transport port, as rr's own
code does, with TestBroker's defaults (events recorded, the default server version); the
references are raw aiormq and the ceiling (raw pamqp frames over a socket, benchmarks/wire.py)
against the RabbitMQ at --url (skipped if none answers). Each round runs every case, the order
rotated by one each round; the table shows medians and the median per-round ratios.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import time
import uuid
from collections.abc import AsyncIterator

import aiormq
import wire
from pamqp import commands as spec

from rabbitctl_retry.testing import TestBroker
from rabbitctl_retry.transport.base import Delivery, Properties

BODY = b"x" * 200


async def emulator_case(count: int, prefetch: int) -> float:
    emulator = TestBroker().emulator
    connection = emulator.connect()
    channel = await connection.channel()
    await channel.queue_declare("bench", durable=True)
    await channel.qos(prefetch)
    done = asyncio.Event()
    acked = 0

    async def on_message(delivery: Delivery) -> None:
        nonlocal acked
        await channel.ack(delivery.delivery_tag)
        acked += 1
        if acked == count:
            done.set()

    properties = Properties(delivery_mode=2)
    started = time.perf_counter()
    await channel.consume("bench", on_message)
    publisher = await connection.channel()
    for _ in range(count):
        await publisher.publish(BODY, routing_key="bench", properties=properties)
    await done.wait()
    elapsed = time.perf_counter() - started
    await connection.close()
    return count / elapsed


@contextlib.asynccontextmanager
async def fresh_queue(url: str) -> AsyncIterator[tuple[aiormq.abc.AbstractChannel, str] | None]:
    """A new durable queue on the broker at ``url`` and a channel (None: no broker answers);
    the queue is deleted afterwards."""
    try:
        connection = await aiormq.connect(url)
    except Exception:
        yield None
        return
    queue = f"rr-bench-{uuid.uuid4().hex[:8]}"
    try:
        channel = await connection.channel()
        await channel.queue_declare(queue, durable=True)
        yield channel, queue
        await (await connection.channel()).queue_delete(queue)
    finally:
        await connection.close()


async def aiormq_case(url: str, count: int, prefetch: int) -> float | None:
    async with fresh_queue(url) as fresh:
        if fresh is None:
            return None
        channel, queue = fresh
        await channel.basic_qos(prefetch_count=prefetch)
        done = asyncio.Event()
        acked = 0

        async def on_message(message: aiormq.abc.DeliveredMessage) -> None:
            nonlocal acked
            await channel.basic_ack(message.delivery_tag)
            acked += 1
            if acked == count:
                done.set()

        properties = spec.Basic.Properties(delivery_mode=2)
        publisher = await channel.connection.channel()
        started = time.perf_counter()
        await channel.basic_consume(queue, on_message)
        for start in range(0, count, 1000):
            await asyncio.gather(
                *(
                    publisher.basic_publish(BODY, routing_key=queue, properties=properties)
                    for _ in range(min(1000, count - start))
                )
            )
        await done.wait()
        elapsed = time.perf_counter() - started
        await channel.close()
        return count / elapsed


async def ceiling_case(url: str, count: int, prefetch: int) -> float | None:
    async with fresh_queue(url) as fresh:
        if fresh is None:
            return None
        return await asyncio.to_thread(wire.publish_consume_and_ack, url, fresh[1], count, prefetch)


EMULATOR = "emulator (transport port)"
AIORMQ = "raw aiormq on RabbitMQ"
CEILING = "ceiling (pamqp, socket) on RabbitMQ"


def median_ratio(rounds: list[dict[str, float | None]], name: str, reference: str) -> str:
    ratios = [r[name] / r[reference] for r in rounds if r[name] and r[reference]]  # type: ignore[operator]
    return f"{statistics.median(ratios):9.2f}" if ratios else f"{'-':>9}"


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=50_000)
    parser.add_argument("--prefetch", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--url", default="amqp://guest:guest@127.0.0.1:5672/")
    args = parser.parse_args()
    count, prefetch = args.messages, args.prefetch
    cases = {
        EMULATOR: lambda: emulator_case(count, prefetch),
        AIORMQ: lambda: aiormq_case(args.url, count, prefetch),
        CEILING: lambda: ceiling_case(args.url, count, prefetch),
    }
    rounds: list[dict[str, float | None]] = []
    for number in range(args.rounds):
        names = list(cases)
        names = names[number % len(names) :] + names[: number % len(names)]
        rates = {name: await cases[name]() for name in names}
        print("  round " + ", ".join(f"{n} {r or 0:,.0f}" for n, r in rates.items()), flush=True)
        rounds.append(rates)
    print(f"{count} messages, prefetch {prefetch}, {args.rounds} rounds: publish + deliver + ack")
    print(f"{'case':36} {'msg/s (median)':>15} {'x aiormq':>9} {'x ceiling':>9}")
    for name in cases:
        rates = [r[name] for r in rounds if r[name]]
        if not rates:
            print(f"{name:36} {'no broker':>15}")
            continue
        print(
            f"{name:36} {statistics.median(rates):15,.0f} "  # type: ignore[type-var]
            f"{median_ratio(rounds, name, AIORMQ)} {median_ratio(rounds, name, CEILING)}"
        )


if __name__ == "__main__":
    asyncio.run(main())
