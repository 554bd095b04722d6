"""Publish + deliver + ack throughput of the emulator, beside raw aiormq on the real broker.

    python benchmarks/emulator.py [--messages 50000] [--prefetch 500] [--rounds 3] [--url URL]

One shape, run on both: publish N persistent 200-byte messages to a classic queue (pipelined,
no confirms), consume them with the given prefetch and ack each one. Timed from the first
publish to the last ack. The emulator runs through the transport port, as rr's own code does;
the reference is raw aiormq against the RabbitMQ at --url (skipped if none answers). Each
round runs both cases; the table shows medians and the median per-round ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
import uuid

import aiormq
from pamqp import commands as spec

from rabbitctl_retry.emulator import Emulator
from rabbitctl_retry.transport.base import Delivery, Properties

BODY = b"x" * 200


async def emulator_case(count: int, prefetch: int) -> float:
    emulator = Emulator(record_events=False)
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


async def aiormq_case(url: str, count: int, prefetch: int) -> float | None:
    try:
        connection = await aiormq.connect(url)
    except Exception:
        return None
    queue = f"rr-bench-{uuid.uuid4().hex[:8]}"
    channel = await connection.channel()
    await channel.queue_declare(queue, durable=True)
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
    publisher = await connection.channel()
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
    await publisher.queue_delete(queue)
    await connection.close()
    return count / elapsed


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=50_000)
    parser.add_argument("--prefetch", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--url", default="amqp://guest:guest@127.0.0.1:5672/")
    args = parser.parse_args()
    emulated: list[float] = []
    raw: list[float | None] = []
    for _ in range(args.rounds):
        emulated.append(await emulator_case(args.messages, args.prefetch))
        raw.append(await aiormq_case(args.url, args.messages, args.prefetch))
    print(
        f"{args.messages} messages, prefetch {args.prefetch}, {args.rounds} rounds: "
        "publish + deliver + ack"
    )
    print(f"{'case':34} {'msg/s (median)':>15} {'x aiormq':>9}")
    ratios = [e / r for e, r in zip(emulated, raw, strict=True) if r]
    ratio = f"{statistics.median(ratios):9.2f}" if ratios else f"{'-':>9}"
    print(f"{'emulator (transport port)':34} {statistics.median(emulated):15,.0f} {ratio}")
    rates = [r for r in raw if r]
    if rates:
        print(f"{'raw aiormq on RabbitMQ':34} {statistics.median(rates):15,.0f} {1.0:9.2f}")
    else:
        print(f"{'raw aiormq on RabbitMQ':34} {'no broker':>15}")


if __name__ == "__main__":
    asyncio.run(main())
