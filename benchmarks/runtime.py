"""Throughput of `rr run` against raw aiormq (and FastStream), measured in the same run.

    python benchmarks/runtime.py [--messages 20000] [--prefetch 500] [--rounds 3] [--url URL]

Shapes (one classic durable queue, persistent 200-byte JSON bodies, preloaded untimed):

* no-op        consume and ack every message
    - aiormq     raw aiormq, one basic.ack per message (the reference)
    - rr         `rr run` runtime, no-op async handler (acks coalesced where safe)
    - faststream a FastStream subscriber doing the same (if `faststream[rabbit]` is installed)
* retry path   consume, publish a copy with a publisher confirm, then ack the original
    - aiormq     raw aiormq: publish the copy on a confirm channel, await it, ack
    - rr         `rr run` with max_attempts = 1 and a dead-letter queue, handler returns
                 retry(): every message becomes one confirmed copy, then the ack

Timed: from basic.consume to the moment the queue and the unacked count are empty (all acks
reached the broker). Each round runs every case once, in a fixed order; the table shows the
median rate and the median of the per-round ratios against the aiormq case of the same shape.
Needs a RabbitMQ (default amqp://guest:guest@127.0.0.1:5672/); it creates and deletes its own
queues. Speed is measured here, never asserted in the test suite.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import statistics
import time
import uuid
from collections.abc import Awaitable, Callable

import aiormq
from pamqp import commands as spec

from rabbitctl_retry import Message, Outcome
from rabbitctl_retry.runtime.handlers import Subscriber
from rabbitctl_retry.runtime.loader import HandlerSet
from rabbitctl_retry.runtime.service import RunOptions, Service
from rabbitctl_retry.topology.load import load_text
from rabbitctl_retry.transport import amqp

# Each message gets its own message_id, as from a real producer (rr publishes the copies of
# messages that share one id one at a time: see runtime/message_ids.py).
BODY = json.dumps({"id": 1, "card": "4111111111111111", "note": "x" * 150}).encode()[:200]


async def preload(url: str, queue: str, count: int) -> None:
    connection = await aiormq.connect(url)
    channel = await connection.channel()
    await channel.queue_declare(queue, durable=True)
    for start in range(0, count, 1000):
        await asyncio.gather(
            *(
                channel.basic_publish(
                    BODY,
                    routing_key=queue,
                    properties=spec.Basic.Properties(
                        delivery_mode=2, content_type="application/json", message_id=f"m-{n}"
                    ),
                )
                for n in range(start, min(start + 1000, count))
            )
        )
    while (await channel.queue_declare(queue, passive=True)).message_count < count:
        await asyncio.sleep(0.05)
    await connection.close()


async def drained(url: str, queue: str) -> None:
    """Wait until ``queue`` holds nothing, ready or unacked (passive declare counts ready only,
    so also wait for the consumer side to have acked: checked by the caller's counter)."""
    connection = await aiormq.connect(url)
    channel = await connection.channel()
    while (await channel.queue_declare(queue, passive=True)).message_count:
        await asyncio.sleep(0.01)
    await connection.close()


async def delete(url: str, *queues: str) -> None:
    connection = await aiormq.connect(url)
    channel = await connection.channel()
    for queue in queues:
        await channel.queue_delete(queue)
    await connection.close()


# ---------------------------------------------------------------- no-op shape


async def aiormq_noop(url: str, queue: str, count: int, prefetch: int) -> float:
    connection = await aiormq.connect(url)
    channel = await connection.channel()
    await channel.basic_qos(prefetch_count=prefetch)
    done = asyncio.Event()
    seen = 0

    async def on_message(message: aiormq.abc.DeliveredMessage) -> None:
        nonlocal seen
        await channel.basic_ack(message.delivery_tag)
        seen += 1
        if seen == count:
            done.set()

    started = time.perf_counter()
    await channel.basic_consume(queue, on_message)
    await done.wait()
    await channel.basic_qos(prefetch_count=prefetch)  # a round trip: every ack was written
    elapsed = time.perf_counter() - started
    await connection.close()
    return count / elapsed


async def rr_run(
    url: str, queue: str, count: int, prefetch: int, topology: str, outcome: Callable[[], object]
) -> float:
    done = asyncio.Event()
    seen = 0

    async def handler(msg: Message) -> object:
        nonlocal seen
        seen += 1
        if seen == count:
            done.set()
        return outcome()

    async def connect() -> amqp.AmqpConnection:
        return await amqp.connect(url)

    service = Service(
        HandlerSet(module="bench", subscribers=(Subscriber(queue, handler, "bench"),)),
        topology=load_text(topology),
        connect=connect,
        options=RunOptions(prefetch=prefetch, shutdown_timeout_s=30),
    )
    task = asyncio.ensure_future(service.run())
    await service.wait_ready()
    started = time.perf_counter()
    await done.wait()
    service.stop()  # graceful: the last acks are flushed before the connection closes
    await task
    return count / (time.perf_counter() - started)


async def faststream_noop(url: str, queue: str, count: int, prefetch: int) -> float | None:
    try:
        from faststream.rabbit import Channel, RabbitBroker, RabbitQueue
    except ImportError:
        return None
    import logging

    broker = RabbitBroker(
        url,
        logger=None,
        log_level=logging.CRITICAL,
        default_channel=Channel(prefetch_count=prefetch),
    )
    done = asyncio.Event()
    seen = 0

    @broker.subscriber(RabbitQueue(queue, durable=True))
    async def handle(body: dict[str, object]) -> None:
        nonlocal seen
        seen += 1
        if seen == count:
            done.set()

    await broker.connect()
    started = time.perf_counter()
    await broker.start()
    await done.wait()
    await broker.stop()
    return count / (time.perf_counter() - started)


# ---------------------------------------------------------------- retry shape


async def aiormq_retry(url: str, queue: str, count: int, prefetch: int) -> float:
    connection = await aiormq.connect(url)
    consume = await connection.channel()
    confirm = await connection.channel(publisher_confirms=True)
    await consume.basic_qos(prefetch_count=prefetch)
    done = asyncio.Event()
    seen = 0

    async def on_message(message: aiormq.abc.DeliveredMessage) -> None:
        nonlocal seen
        await confirm.basic_publish(
            message.body,
            routing_key=f"{queue}.dead",
            properties=spec.Basic.Properties(
                delivery_mode=2,
                content_type=message.header.properties.content_type,
                headers={"x-ruststream-retry-count": "1"},
            ),
            mandatory=True,
        )
        await consume.basic_ack(message.delivery_tag)
        seen += 1
        if seen == count:
            done.set()

    started = time.perf_counter()
    await consume.basic_consume(queue, on_message)
    await done.wait()
    await consume.basic_qos(prefetch_count=prefetch)
    elapsed = time.perf_counter() - started
    await connection.close()
    return count / elapsed


# ---------------------------------------------------------------- runner

Case = Callable[[str, str, int, int], Awaitable[float | None]]


def cases() -> dict[str, tuple[str, Case]]:
    noop_topology = "[queues.{q}]\n"
    retry_topology = '[queues.{q}]\nmax_attempts = 1\ndead_letter = "{q}.dead"\n'

    def rr(topology: str, outcome: Callable[[], object]) -> Case:
        async def run(url: str, queue: str, count: int, prefetch: int) -> float:
            return await rr_run(url, queue, count, prefetch, topology.format(q=queue), outcome)

        return run

    return {
        "no-op aiormq (1 ack/msg)": ("noop", aiormq_noop),
        "no-op rr run": ("noop", rr(noop_topology, lambda: None)),
        "no-op faststream": ("noop", faststream_noop),
        "retry aiormq (confirm+ack)": ("retry", aiormq_retry),
        "retry rr run (copy+ack)": ("retry", rr(retry_topology, Outcome.retry)),
    }


async def one_round(url: str, count: int, prefetch: int) -> dict[str, float | None]:
    rates: dict[str, float | None] = {}
    for name, (_, case) in cases().items():
        queue = f"rr-bench-{uuid.uuid4().hex[:8]}"
        await preload(url, queue, count)
        connection = await aiormq.connect(url)
        channel = await connection.channel()
        await channel.queue_declare(f"{queue}.dead", durable=True)
        await connection.close()
        try:
            rates[name] = await case(url, queue, count, prefetch)
        finally:
            await delete(url, queue, f"{queue}.dead")
    return rates


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--prefetch", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--url", default="amqp://guest:guest@127.0.0.1:5672/")
    args = parser.parse_args()
    logging.getLogger("rr").setLevel(logging.ERROR)  # no line per dead-lettered message
    rounds = [await one_round(args.url, args.messages, args.prefetch) for _ in range(args.rounds)]
    references = {"noop": "no-op aiormq (1 ack/msg)", "retry": "retry aiormq (confirm+ack)"}
    print(
        f"{args.messages} messages, prefetch {args.prefetch}, {args.rounds} rounds, "
        "classic durable queue, persistent 200-byte bodies"
    )
    print(f"{'case':30} {'msg/s (median)':>15} {'x aiormq':>9} {'x faststream':>13}")
    for name, (shape, _) in cases().items():
        rates = [r[name] for r in rounds if r[name] is not None]
        if not rates:
            print(f"{name:30} {'not installed':>15}")
            continue
        ratio = statistics.median(
            r[name] / r[references[shape]]  # type: ignore[operator]
            for r in rounds
            if r[name] is not None
        )
        versus_fs = ""
        if shape == "noop" and all(r["no-op faststream"] for r in rounds):
            fs_ratio = statistics.median(
                r[name] / r["no-op faststream"]  # type: ignore[operator]
                for r in rounds
            )
            versus_fs = f"{fs_ratio:13.2f}"
        print(f"{name:30} {statistics.median(rates):15,.0f} {ratio:9.2f} {versus_fs:>13}")


if __name__ == "__main__":
    asyncio.run(main())
