"""How closely RabbitMQ 4.3 keeps `delay = "server"`'s schedule under `rr run`.

    python benchmarks/server_delay.py [--url URL] [--messages 200] [--min 500ms] [--max 2s]
                                      [--attempts 5]

One quorum queue with `delay = "server"` (`delay_min`, `delay_max`, `max_attempts`), a fresh
vhost-less queue name per run, `--messages` persistent messages published at once, and
`rr run`'s service with a handler that always retries: each message is delivered
`--attempts` times, waiting `min(delay_min x n, delay_max)` before its (n+1)-th delivery, and
then dead-lettered by the server's limit.

Prints, per wait (1st, 2nd, ...), the configured wait and the measured gaps between one
delivery and the next of the same message (the handler's clock: the time the server held the
message plus the round trips of the reject and the delivery), as minimum, median, 99th
percentile and maximum, each also as a ratio to the configured wait; and checks that every
message was delivered exactly `--attempts` times and is in the dead-letter queue once (exit 1
otherwise). Needs RabbitMQ 4.3 or later (default `amqp://guest:guest@127.0.0.1:5675/`, the
suite's 4.3 server: docs/reference/testing.md).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import statistics
import sys
import time
import uuid
from collections import defaultdict

from rabbitctl_retry import Message, Outcome
from rabbitctl_retry.retry.outcome import AnyOutcome
from rabbitctl_retry.runtime.handlers import Subscriber
from rabbitctl_retry.runtime.loader import HandlerSet
from rabbitctl_retry.runtime.service import RunOptions, Service
from rabbitctl_retry.topology.load import load_text
from rabbitctl_retry.topology.naming import format_duration_ms, parse_duration_ms
from rabbitctl_retry.transport import amqp
from rabbitctl_retry.transport.base import Connection, Properties

TOPOLOGY = """
[queues."{queue}"]
type = "quorum"
max_attempts = {attempts}
dead_letter = "{queue}.dead"
delay = "server"
delay_min = "{delay_min}"
delay_max = "{delay_max}"
"""


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


async def measure(args: argparse.Namespace) -> int:
    delay_min_ms = parse_duration_ms(args.min)
    delay_max_ms = parse_duration_ms(args.max)
    queue = f"rr-bench-delay-{uuid.uuid4().hex[:8]}"
    times: dict[str, list[float]] = defaultdict(list)

    async def failing(msg: Message) -> AnyOutcome:
        times[msg.message_id or ""].append(time.monotonic())
        return Outcome.retry()

    async def connect() -> Connection:
        return await amqp.connect(args.url)

    text = TOPOLOGY.format(
        queue=queue,
        attempts=args.attempts,
        delay_min=format_duration_ms(delay_min_ms),
        delay_max=format_duration_ms(delay_max_ms),
    )
    service = Service(
        HandlerSet(module="bench", subscribers=(Subscriber(queue, failing, "bench:failing"),)),
        topology=load_text(text),
        connect=connect,
        options=RunOptions(prefetch=args.messages),
    )
    ids = [f"m{n}" for n in range(args.messages)]
    connection = await connect()
    try:
        async with service.running():
            channel = await connection.channel(confirms=True)
            await asyncio.gather(
                *(
                    channel.publish(
                        message_id.encode(),
                        routing_key=queue,
                        properties=Properties(message_id=message_id, delivery_mode=2),
                    )
                    for message_id in ids
                )
            )
            deadline = time.monotonic() + 60 + args.attempts * delay_max_ms / 1000 * 2
            while True:
                dead = (await channel.queue_declare(f"{queue}.dead", passive=True)).message_count
                if dead == len(ids) or time.monotonic() > deadline:
                    break
                await asyncio.sleep(0.2)
        counts_ok = all(len(times[message_id]) == args.attempts for message_id in ids)
        print(
            f"RabbitMQ {connection.server_version}, {len(ids)} messages, max_attempts "
            f"{args.attempts}, delay_min {format_duration_ms(delay_min_ms)}, delay_max "
            f"{format_duration_ms(delay_max_ms)}: {dead} dead-lettered, every message delivered "
            f"{args.attempts} times: {'yes' if counts_ok else 'NO'}"
        )
        print(f"{'wait':>4} {'configured':>10} {'min':>14} {'median':>14} {'p99':>14} {'max':>14}")
        for wait in range(1, args.attempts):
            configured_ms = min(delay_min_ms * wait, delay_max_ms)
            gaps_ms = [
                (times[m][wait] - times[m][wait - 1]) * 1000 for m in ids if len(times[m]) > wait
            ]
            cells = [
                f"{value:7.0f} ({value / configured_ms:.3f})"
                for value in (
                    min(gaps_ms),
                    statistics.median(gaps_ms),
                    percentile(gaps_ms, 0.99),
                    max(gaps_ms),
                )
            ]
            print(f"{wait:>4} {configured_ms:>8}ms " + " ".join(cells))
        await (await connection.channel()).queue_delete(queue)
        await (await connection.channel()).queue_delete(f"{queue}.dead")
        return 0 if counts_ok and dead == len(ids) else 1
    finally:
        await connection.close()


def main() -> None:
    logging.getLogger("rr").setLevel(logging.ERROR)  # no line per dead-lettered message
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="amqp://guest:guest@127.0.0.1:5675/")
    parser.add_argument("--messages", type=int, default=200)
    parser.add_argument("--min", default="500ms")
    parser.add_argument("--max", default="2s")
    parser.add_argument("--attempts", type=int, default=5)
    sys.exit(asyncio.run(measure(parser.parse_args())))


if __name__ == "__main__":
    main()
