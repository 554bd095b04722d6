"""What a publisher by name learns when its queue is deleted and declared again under it: the
measurement behind docs/how-to/migrate-to-quorum.md, "Migrating a queue" (messages published by
name).

    python benchmarks/publish_by_name.py [--url amqp://guest:guest@127.0.0.1:5672/]
                                         [--rate 50] [--cycles 100] [--queue-type classic]
                                         [--seed 40]

A publisher sends ``id-N`` to the default exchange with routing key = the queue, each
``mandatory``, persistent, on a confirm channel, at ``--rate`` messages a second (each publish
its own task: a slow confirm does not slow the rate). Meanwhile, ``--cycles`` times, what
``rr migrate`` does to the queue between its drain and its declare: take every message out
(``basic.get``, acked; each id counted as found), delete the queue only when empty as rr
does (a classic queue with ``if-empty``; a quorum queue, whose delete takes no such flag, after
a passive declare says 0 messages), taken out again while it is not, declare it again at once,
then wait until the publisher confirmed one more message and a random part of the interval
between two publishes (so that the deletes fall anywhere between two publishes, not in step
with them). At the end every message left is taken out too.

Each id ends in one of these:

* confirmed and found: kept;
* returned (``basic.return`` before the confirm): published while the queue did not exist;
  a publisher that does not publish ``mandatory`` never hears of these, and they are gone;
* nacked: the broker refused it;
* not confirmed: the broker closed the publisher's connection first (RabbitMQ 3.10.8 does, with
  ``INTERNAL_ERROR``, when a quorum queue a message was routed to is deleted); the publisher
  knows, and opens a new one;
* confirmed, not returned, never found: **lost without a word** — it was routed to the queue
  being deleted (the broker confirms a message whose queue is deleted after routing).

Every name starts with a fresh prefix (``rr-measure-byname-XXXXXXXX.``) in the URL's vhost;
the queue is deleted at the end. Needs a RabbitMQ: the local servers are 3.10.8 (5672), 4.0.5
(5674) and 4.3.6 (5675). About ``--cycles`` / 10 seconds at the default rate.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import uuid
from collections import Counter
from dataclasses import dataclass, field

from rabbitctl_retry.errors import PreconditionFailed, PublishFailed
from rabbitctl_retry.transport.base import Channel, Properties
from rabbitctl_retry.transport.clients import connect


@dataclass
class Ledger:
    """What became of each id the publisher sent."""

    sent: int = 0
    ends: dict[str, str] = field(default_factory=dict)
    """id -> ``confirmed``, ``returned``, ``nacked`` or ``error: ...``."""
    found: Counter[str] = field(default_factory=Counter)
    reconnects: int = 0
    """Times the broker closed the publisher's connection."""

    def confirmed(self) -> int:
        return sum(1 for end in self.ends.values() if end == "confirmed")


async def _publish_one(channel: Channel, queue: str, message_id: str, ledger: Ledger) -> None:
    try:
        await channel.publish(
            message_id.encode(),
            routing_key=queue,
            properties=Properties(message_id=message_id, delivery_mode=2),
            mandatory=True,
        )
        ledger.ends[message_id] = "confirmed"
    except PublishFailed as error:
        ledger.ends[message_id] = "returned" if "returned" in str(error) else "nacked"
    except Exception as error:  # measured, not hidden
        ledger.ends[message_id] = f"error: {error}"


async def publisher(url: str, queue: str, rate: float, ledger: Ledger, stop: asyncio.Event) -> None:
    """Publishes at ``rate``; a connection the broker closes is opened again (its unconfirmed
    publishes end in an error: the publisher knows they were not confirmed)."""
    tasks: list[asyncio.Task[None]] = []
    connection = await connect(url, client_name="rr-measure-publisher")
    try:
        channel = await connection.channel(confirms=True)
        while not stop.is_set():
            if connection.is_closed:
                ledger.reconnects += 1
                connection = await connect(url, client_name="rr-measure-publisher")
                channel = await connection.channel(confirms=True)
            message_id = f"id-{ledger.sent}"
            ledger.sent += 1
            tasks.append(asyncio.ensure_future(_publish_one(channel, queue, message_id, ledger)))
            await asyncio.sleep(1 / rate)
        await asyncio.gather(*tasks)
    finally:
        await connection.close()


async def take_all(channel: Channel, queue: str, ledger: Ledger) -> None:
    while (delivery := await channel.get(queue)) is not None:
        ledger.found[delivery.body.decode()] += 1
        await channel.ack(delivery.delivery_tag)


async def delete_when_empty(channel: Channel, queue: str, queue_type: str) -> bool:
    """Delete ``queue`` as rr migrate does (docs/how-to/migrate-to-quorum.md, "Migrating a queue");
    False when it was not empty (the channel is closed then)."""
    if queue_type == "quorum":
        if (await channel.queue_declare(queue, passive=True)).message_count:
            await channel.close()
            return False
        await channel.queue_delete(queue)
        return True
    try:
        await channel.queue_delete(queue, if_empty=True)
    except PreconditionFailed:
        return False
    return True


async def measure(args: argparse.Namespace) -> int:
    queue = f"rr-measure-byname-{uuid.uuid4().hex[:8]}.jobs"
    declare_arguments = {"x-queue-type": args.queue_type}
    connection = await connect(args.url, client_name="rr-measure-deleter")
    ledger = Ledger()
    stop = asyncio.Event()
    refused_deletes = 0
    phase = random.Random(args.seed)
    try:
        channel = await connection.channel()
        await channel.queue_declare(queue, durable=True, arguments=declare_arguments)
        publishing = asyncio.ensure_future(publisher(args.url, queue, args.rate, ledger, stop))
        for _ in range(args.cycles):
            while True:
                await take_all(channel, queue, ledger)
                if await delete_when_empty(channel, queue, args.queue_type):
                    break
                refused_deletes += 1
                channel = await connection.channel()
            await channel.queue_declare(queue, durable=True, arguments=declare_arguments)
            wanted = ledger.confirmed() + 1
            while ledger.confirmed() < wanted and not publishing.done():
                await asyncio.sleep(0.005)
            await asyncio.sleep(phase.uniform(0, 1 / args.rate))
        stop.set()
        await publishing
        await take_all(channel, queue, ledger)
    finally:
        cleaning = await connection.channel()
        await cleaning.queue_delete(queue)
        await connection.close()
    ends = Counter(
        "lost" if end == "confirmed" and not ledger.found[mid] else end.split(":")[0]
        for mid, end in ledger.ends.items()
    )
    reasons = sorted({end for end in ledger.ends.values() if end.startswith("error")})
    duplicated = sum(n - 1 for n in ledger.found.values() if n > 1)
    print(
        f"{args.url.rsplit('@', 1)[-1]} {args.queue_type} rate {args.rate:g}/s, "
        f"{args.cycles} delete+declare cycles ({refused_deletes} deletes refused: not empty): "
        f"published {ledger.sent}, confirmed and kept {ends['confirmed']}, "
        f"returned {ends['returned']}, nacked {ends['nacked']}, "
        f"confirmed but lost {ends['lost']}, duplicated {duplicated}, "
        f"not confirmed (connection closed) {ends['error']} in {ledger.reconnects} reconnects"
    )
    for reason in reasons:
        print(f"  {reason}")
    return 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="amqp://guest:guest@127.0.0.1:5672/")
    parser.add_argument("--rate", type=float, default=50.0)
    parser.add_argument("--cycles", type=int, default=100)
    parser.add_argument("--queue-type", choices=("classic", "quorum"), default="classic")
    parser.add_argument("--seed", type=int, default=40, help="of the random waits")
    raise SystemExit(asyncio.run(measure(parser.parse_args())))


if __name__ == "__main__":
    main()
