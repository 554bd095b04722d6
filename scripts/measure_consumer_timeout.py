#!/usr/bin/env python3
"""Measure what a RabbitMQ server does with a delivery held past its queue's consumer timeout.

For one server (its AMQP URL, its release and how to run its ``rabbitmqctl``), in a vhost of
the script's own (made, then deleted; the node's own settings are only read), each case on
a classic and a quorum queue, all at once:

* ``consume``: one channel (prefetch 10) with consumer A on ``TIMED`` (the queue's timeout
  ``TIMEOUT_MS``) holding a1, then a2 handed to it a second later, and consumer B on
  ``UNTIMED`` (no timeout of its own: the node's ``consumer_timeout``) holding b1;
* ``get``: a ``basic.get`` (no_ack=false) of g1 from a timed queue, held;
* ``limit`` (quorum): a timed queue with ``x-delivery-limit = 0`` dead-lettering to a sink.

The queue's timeout is the argument ``x-consumer-timeout``, except where the server refuses
it (RabbitMQ 4.3's classic queues): a ``consumer-timeout`` policy there. Each case prints,
with seconds since its first delivery: what the client saw (``basic.cancel`` and its
consumer, the channel's close and its reply text, or nothing within ``WAIT_S``), then what
each queue holds (bodies, redelivered flags, ``x-delivery-count`` / ``x-acquired-count``)
and what is dead-lettered, and whether the other consumer still holds its delivery.

    python scripts/measure_consumer_timeout.py 4.3.6     # or 3.10.8, 4.0.5
    python scripts/measure_consumer_timeout.py 4.3.6 --wait 30

docs/measurements.md, "Consumer timeouts", holds the results.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shlex
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from urllib.parse import quote

from rabbitctl_retry.fields import FieldValue
from rabbitctl_retry.transport import native
from rabbitctl_retry.transport.base import Channel, Connection, Delivery

TIMEOUT_MS = 2000
WAIT_S = 75.0
"""How long a case waits for the server to act: past one tick of a channel's consumer-timeout
check (once a minute on 3.10 and 4.0)."""

SERVERS: dict[str, tuple[str, str]] = {
    "3.10.8": ("amqp://guest:guest@127.0.0.1:5672/", "rabbitmqctl -n rabbit@localhost"),
    "4.0.5": (
        "amqp://guest:guest@127.0.0.1:5674/",
        "scripts/rabbitmq4.sh ctl-raw -n rabbit4@localhost",
    ),
    "4.3.6": (
        "amqp://guest:guest@127.0.0.1:5675/",
        "scripts/rabbitmq43.sh ctl-raw -n rabbit43@localhost",
    ),
}


@dataclass
class Seen:
    """What one case's client saw, with seconds since ``start``."""

    start: float = field(default_factory=time.monotonic)
    lines: list[str] = field(default_factory=list)
    event: asyncio.Event = field(default_factory=asyncio.Event)

    def note(self, text: str) -> None:
        self.lines.append(f"  {time.monotonic() - self.start:6.1f} s  {text}")


def shown(delivery: Delivery) -> str:
    headers = delivery.properties.headers or {}
    counts = {k: v for k, v in headers.items() if k in ("x-delivery-count", "x-acquired-count")}
    deaths = headers.get("x-death")
    reason = deaths[0].get("reason") if isinstance(deaths, list) and deaths else None  # type: ignore[union-attr]
    return f"{delivery.body.decode()} redelivered={delivery.redelivered} {counts or ''}" + (
        f" x-death reason={reason}" if reason else ""
    )


class Case:
    def __init__(self, ctl: list[str], vhost: str, url: str, version: str, kind: str) -> None:
        self.ctl = ctl
        self.vhost = vhost
        self.url = url
        self.version = version
        self.kind = kind
        self.by_policy = kind == "classic" and version.startswith("4.3")

    def arguments(self, timed: bool, **more: FieldValue) -> dict[str, FieldValue]:
        args: dict[str, FieldValue] = {"x-queue-type": self.kind, **more}
        if timed and not self.by_policy:
            args["x-consumer-timeout"] = TIMEOUT_MS
        return args

    def policy(self, name: str) -> None:
        if self.by_policy:
            definition = json.dumps({"consumer-timeout": TIMEOUT_MS})
            pattern = f"^{name}$"
            run([*self.ctl, "set_policy", "-p", self.vhost, f"ct-{name}", pattern, definition])

    async def wait(self, seen: Seen, wait_s: float) -> None:
        try:
            await asyncio.wait_for(seen.event.wait(), wait_s)
        except TimeoutError:
            seen.note(f"nothing within {wait_s:g} s")

    async def contents(self, conn: Connection, seen: Seen, *queues: str) -> None:
        ch = await conn.channel()
        for name in queues:
            info = await ch.queue_declare(name, passive=True)
            found = []
            while (d := await ch.get(name, no_ack=True)) is not None:
                found.append(shown(d))
            seen.note(f"{name}: {info.message_count} ready, consumers {info.consumer_count}")
            for line in found:
                seen.note(f"    {line}")
        await ch.close()

    async def follow(self, ch: Channel, name: str, seen: Seen, seconds: float) -> None:
        """Note each change of ``name``'s ready and consumer counts for ``seconds``."""
        last = None
        end = time.monotonic() + seconds
        while time.monotonic() < end and not ch.is_closed:
            info = await ch.queue_declare(name, passive=True)
            now = (info.message_count, info.consumer_count)
            if now != last:
                seen.note(f"{name}: {now[0]} ready, consumers {now[1]}")
                last = now
            await asyncio.sleep(0.1)

    def watch(self, ch: Channel, seen: Seen) -> None:
        async def closed() -> None:
            await ch.wait_closed()
            seen.note(f"channel closed: {ch.close_reason}")
            seen.event.set()

        asyncio.get_running_loop().create_task(closed())

    async def consume(self, wait_s: float) -> Seen:
        seen = Seen()
        conn = await native.connect(self.url)
        admin = await conn.channel()
        timed, untimed = f"timed-{self.kind}", f"untimed-{self.kind}"
        await admin.queue_declare(timed, durable=True, arguments=self.arguments(True))
        await admin.queue_declare(untimed, durable=True, arguments=self.arguments(False))
        self.policy(timed)
        ch = await conn.channel()
        await ch.qos(10)
        self.watch(ch, seen)

        def recorder(name: str) -> object:
            async def got(d: Delivery) -> None:
                seen.note(f"{name} got {shown(d)}")

            return got

        def cancelled(tag: str) -> None:
            seen.note(f"basic.cancel {tag}")
            seen.event.set()

        await ch.consume(timed, recorder("A"), consumer_tag="A", on_cancel=cancelled)  # type: ignore[arg-type]
        await ch.consume(untimed, recorder("B"), consumer_tag="B", on_cancel=cancelled)  # type: ignore[arg-type]
        seen.start = time.monotonic()
        await admin.publish(b"a1", routing_key=timed)
        await admin.publish(b"b1", routing_key=untimed)
        await asyncio.sleep(1.0)
        await admin.publish(b"a2", routing_key=timed)
        await self.wait(seen, wait_s)
        await self.follow(admin, timed, seen, 4.0)  # a2's own timeout, a second after a1's
        seen.note(f"channel open: {not ch.is_closed}")
        await self.contents(conn, seen, timed, untimed)
        if not ch.is_closed:
            await ch.close()
        await conn.close()
        return seen

    async def get(self, wait_s: float) -> Seen:
        seen = Seen()
        conn = await native.connect(self.url)
        admin = await conn.channel()
        name = f"get-{self.kind}"
        await admin.queue_declare(name, durable=True, arguments=self.arguments(True))
        self.policy(name)
        await admin.publish(b"g1", routing_key=name)
        await asyncio.sleep(0.2)
        ch = await conn.channel()
        self.watch(ch, seen)
        seen.start = time.monotonic()
        got = await ch.get(name, no_ack=False)
        seen.note(f"get {shown(got) if got else None}")
        await self.wait(seen, wait_s)
        seen.note(f"channel open: {not ch.is_closed}")
        await self.contents(conn, seen, name)
        await conn.close()
        return seen

    async def limit(self, wait_s: float) -> Seen:
        seen = Seen()
        conn = await native.connect(self.url)
        admin = await conn.channel()
        name, sink = "limit-quorum", "limit-sink"
        await admin.queue_declare(sink, durable=True)
        args = self.arguments(
            True,
            **{
                "x-delivery-limit": 0,
                "x-dead-letter-exchange": "",
                "x-dead-letter-routing-key": sink,
            },
        )
        await admin.queue_declare(name, durable=True, arguments=args)
        ch = await conn.channel()
        self.watch(ch, seen)

        async def got(d: Delivery) -> None:
            seen.note(f"C got {shown(d)}")

        def cancelled(tag: str) -> None:
            seen.note(f"basic.cancel {tag}")
            seen.event.set()

        await ch.consume(name, got, consumer_tag="C", on_cancel=cancelled)
        seen.start = time.monotonic()
        await admin.publish(b"l1", routing_key=name)
        await self.wait(seen, wait_s)
        await asyncio.sleep(1.0)
        await self.contents(conn, seen, name, sink)
        await conn.close()
        return seen

    async def both(self, wait_s: float, argument_ms: int, policy_ms: int) -> Seen:
        """A quorum queue with ``x-consumer-timeout = argument_ms`` under a
        ``consumer-timeout`` policy of ``policy_ms``: which one the server applies."""
        seen = Seen()
        conn = await native.connect(self.url)
        admin = await conn.channel()
        name = f"both-{argument_ms}-{policy_ms}"
        definition = json.dumps({"consumer-timeout": policy_ms})
        run([*self.ctl, "set_policy", "-p", self.vhost, f"ct-{name}", f"^{name}$", definition])
        args: dict[str, FieldValue] = {"x-queue-type": "quorum", "x-consumer-timeout": argument_ms}
        await admin.queue_declare(name, durable=True, arguments=args)
        ch = await conn.channel()
        self.watch(ch, seen)

        async def got(d: Delivery) -> None:
            seen.note(f"D got {shown(d)}")

        def cancelled(tag: str) -> None:
            seen.note(f"basic.cancel {tag}")
            seen.event.set()

        await ch.consume(name, got, consumer_tag="D", on_cancel=cancelled)
        seen.start = time.monotonic()
        await admin.publish(b"p1", routing_key=name)
        await self.wait(seen, wait_s)
        await conn.close()
        return seen

    async def order(self, wait_s: float) -> Seen:
        """A quorum consumer with prefetch 1 holds o1, o2 waits behind it: where o1 comes
        back; then the consumer acks o1 (timed out), and o3 is published: who gets it."""
        seen = Seen()
        conn = await native.connect(self.url)
        admin = await conn.channel()
        name = "order-quorum"
        await admin.queue_declare(name, durable=True, arguments=self.arguments(True))
        ch = await conn.channel()
        await ch.qos(1)
        self.watch(ch, seen)
        tags: list[int] = []

        async def got(d: Delivery) -> None:
            tags.append(d.delivery_tag)
            seen.note(f"E got {shown(d)} tag {d.delivery_tag}")

        def cancelled(tag: str) -> None:
            seen.note(f"basic.cancel {tag}")
            seen.event.set()

        await ch.consume(name, got, consumer_tag="E", on_cancel=cancelled)
        seen.start = time.monotonic()
        await admin.publish(b"o1", routing_key=name)
        await admin.publish(b"o2", routing_key=name)
        await self.wait(seen, wait_s)
        await asyncio.sleep(0.5)
        info = await admin.queue_declare(name, passive=True)
        seen.note(f"{name}: {info.message_count} ready, consumers {info.consumer_count}")
        if not ch.is_closed:
            await ch.ack(tags[0])
            seen.note(f"acked tag {tags[0]} (timed out)")
            await asyncio.sleep(1.0)
            await admin.publish(b"o3", routing_key=name)
            await asyncio.sleep(1.0)
        seen.note(f"channel open: {not ch.is_closed}")
        await self.contents(conn, seen, name)
        await conn.close()
        return seen


def run(command: list[str]) -> str:
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{shlex.join(command)}: {done.stderr}")
    return done.stdout


async def main(version: str, wait_s: float) -> None:
    base_url, ctl_line = SERVERS[version]
    ctl = shlex.split(ctl_line)
    node_timeout = run([*ctl, "eval", "application:get_env(rabbit, consumer_timeout)."])
    print(f"RabbitMQ {version}: the node's consumer_timeout: {node_timeout.strip()}")
    vhost = f"measure-timeout-{uuid.uuid4().hex[:8]}"
    run([*ctl, "add_vhost", vhost])
    run([*ctl, "set_permissions", "-p", vhost, "guest", ".*", ".*", ".*"])
    url = base_url + quote(vhost, safe="")
    try:
        runs = []
        for kind in ("classic", "quorum"):
            case = Case(ctl, vhost, url, version, kind)
            runs.append((f"{kind} consume", case.consume(wait_s)))
            runs.append((f"{kind} get", case.get(wait_s)))
            if kind == "quorum":
                runs.append(("quorum limit 0", case.limit(wait_s)))
                runs.append(("quorum argument 10000, policy 2000", case.both(wait_s, 10000, 2000)))
                runs.append(("quorum argument 2000, policy 10000", case.both(wait_s, 2000, 10000)))
                runs.append(("quorum order", case.order(wait_s)))
        results = await asyncio.gather(*(job for _, job in runs))
        for (title, _), seen in zip(runs, results, strict=True):
            via = "policy" if "classic" in title and version.startswith("4.3") else "argument"
            print(f"{title} (timeout {TIMEOUT_MS} ms by {via}):")
            print("\n".join(seen.lines))
    finally:
        run([*ctl, "delete_vhost", vhost])


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("version", choices=sorted(SERVERS))
    parser.add_argument("--wait", type=float, default=WAIT_S, help="seconds to wait for the server")
    options = parser.parse_args()
    asyncio.run(main(options.version, options.wait))
