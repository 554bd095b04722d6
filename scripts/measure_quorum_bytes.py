#!/usr/bin/env python3
"""Measure what a RabbitMQ quorum queue counts toward ``x-max-length-bytes`` (issue #49).

For each case, the smallest ``x-max-length-bytes`` of a ``drop-head`` quorum queue that keeps
the case's message (binary search; a queue declared afresh for each try, its drops
dead-lettered to a sink so that a drop is seen, not waited for), printed beside what
``rabbitctl_retry.releases``'s row of that server predicts.

    python scripts/measure_quorum_bytes.py                       # 4.3.6 on 127.0.0.1:5675
    python scripts/measure_quorum_bytes.py amqp://guest:guest@127.0.0.1:5674/ 4.0.5
    python scripts/measure_quorum_bytes.py amqp://guest:guest@127.0.0.1:5675/ 4.3.6 aiormq
    python scripts/measure_quorum_bytes.py amqp://guest:guest@127.0.0.1:5675/ 4.3.6 "" \
        http://guest:guest@127.0.0.1:15675/

With a management URL (fourth) it measures instead what the management API states as the
queue's ``message_bytes`` once the case's messages are in it (no limit searched: one run a
case, read when two statistics samples in a row state the same).

Cases: published by rr's client with each property (a client's ``x-death`` header, a
``BCC`` header the server takes out), and by aiormq; into a classic queue; dead-lettered
into the queue from a classic and a quorum queue (expired, rejected); given back by a
closing channel and by ``basic.reject`` with requeue (then a second message published
behind it decides: the smallest limit keeping both). docs/reference/testing.md, "What the
emulator models", holds the results.
"""

from __future__ import annotations

import asyncio
import base64
import json
import sys
import urllib.request
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import replace
from datetime import UTC, datetime
from urllib.parse import quote, urlsplit

from rabbitctl_retry.emulator.message_size import property_bytes
from rabbitctl_retry.fields import FieldValue
from rabbitctl_retry.releases import release_of
from rabbitctl_retry.server import ServerVersion
from rabbitctl_retry.transport import native
from rabbitctl_retry.transport.base import TRANSIENT, Channel, Connection, Delivery, Properties

URL = "amqp://guest:guest@127.0.0.1:5675/"
BODY = b"m1"
HIGH = 400
"""The largest limit a search tries."""

Setup = Callable[[Connection, Channel, str, str], Awaitable[bool]]
"""Puts a case's message(s) into the queue named third (its sink fourth, where the queue's
drops go); returns whether the queue kept them all."""


def publishing(properties: Properties | None, body: bytes = BODY) -> Setup:
    async def setup(conn: Connection, ch: Channel, queue: str, sink: str) -> bool:
        await ch.publish(body, routing_key=queue, properties=properties)
        return (await _settled(ch, (queue, sink), 1))[queue] == 1

    return setup


async def _settled(ch: Channel, names: tuple[str, ...], total: int) -> dict[str, int]:
    """The counts of ``names`` once they hold ``total`` messages together."""
    for _ in range(400):
        counts = {n: (await ch.queue_declare(n, passive=True)).message_count for n in names}
        if sum(counts.values()) == total:
            return counts
        await asyncio.sleep(0.01)
    raise RuntimeError(f"never settled: {counts}")


def with_bcc() -> Setup:
    """Published with a ``BCC`` header naming the queue itself (routed there once; the
    server takes the header out and writes the properties again)."""

    async def setup(conn: Connection, ch: Channel, queue: str, sink: str) -> bool:
        props = Properties(headers={"BCC": [queue]})
        await ch.publish(BODY, routing_key=queue, properties=props)
        return (await _settled(ch, (queue, sink), 1))[queue] == 1

    return setup


def by_aiormq(url: str, message_id: str | None) -> Setup:
    """Published by aiormq (pamqp's encoder) on a connection of its own."""

    async def setup(conn: Connection, ch: Channel, queue: str, sink: str) -> bool:
        import aiormq
        from pamqp.commands import Basic

        other = await aiormq.connect(url)
        try:
            aio = await other.channel()
            props = Basic.Properties(message_id=message_id)
            await aio.basic_publish(BODY, routing_key=queue, properties=props)
        finally:
            await other.close()
        return (await _settled(ch, (queue, sink), 1))[queue] == 1

    return setup


def dead_lettered(kind: str, how: str, properties: Properties | None) -> Setup:
    """The message dead-lettered into the queue from a ``kind`` queue (``expired``: its
    expiration 1 ms; ``rejected``: taken by basic.get and rejected)."""

    async def setup(conn: Connection, ch: Channel, queue: str, sink: str) -> bool:
        source = f"{queue}-src"
        args: dict[str, FieldValue] = {"x-queue-type": kind, "x-dead-letter-exchange": ""}
        args["x-dead-letter-routing-key"] = queue
        await ch.queue_declare(source, arguments=args)
        props = properties or Properties()
        if how == "expired":
            props = replace(props, expiration="1")
        await ch.publish(BODY, routing_key=source, properties=props)
        if how == "rejected":
            got = await _get(ch, source)
            await ch.reject(got.delivery_tag, requeue=False)
        kept = (await _settled(ch, (queue, sink), 1))[queue] == 1
        await ch.queue_delete(source)
        return kept

    return setup


def given_back(how: str, properties: Properties | None, second: Properties | None) -> Setup:
    """The message taken by a consumer and given back (``close``: its channel closes;
    ``reject``: basic.reject with requeue), then a second message published behind it."""

    async def setup(conn: Connection, ch: Channel, queue: str, sink: str) -> bool:
        await ch.publish(BODY, routing_key=queue, properties=properties)
        if (await _settled(ch, (queue, sink), 1))[queue] == 0:
            return False
        other = await conn.channel()
        got = await _get(other, queue)
        if how == "close":
            await other.close()
        else:
            await other.reject(got.delivery_tag, requeue=True)
            await other.close()
        await _settled(ch, (queue, sink), 1)
        await ch.publish(b"m2", routing_key=queue, properties=second)
        return (await _settled(ch, (queue, sink), 2))[queue] == 2

    return setup


async def _get(ch: Channel, queue: str) -> Delivery:
    for _ in range(400):
        got = await ch.get(queue)
        if got is not None:
            return got
        await asyncio.sleep(0.01)
    raise RuntimeError(f"nothing to get from {queue}")


@asynccontextmanager
async def limited_queue(
    url: str, kind: str, limit: int
) -> AsyncIterator[tuple[Connection, Channel, str, str]]:
    """A fresh ``kind`` queue of ``x-max-length-bytes = limit`` dead-lettering what it drops to
    a sink of its own: the connection, a confirm channel, the queue and the sink; both
    deleted after."""
    conn = await native.connect(url)
    try:
        ch = await conn.channel(confirms=True)
        queue = f"rr-measure-{uuid.uuid4().hex[:10]}"
        sink = f"{queue}-sink"
        await ch.queue_declare(sink, arguments={"x-queue-type": "classic"})
        args: dict[str, FieldValue] = {
            "x-queue-type": kind,
            "x-max-length-bytes": limit,
            "x-dead-letter-exchange": "",
            "x-dead-letter-routing-key": sink,
        }
        await ch.queue_declare(queue, arguments=args)
        try:
            yield conn, ch, queue, sink
        finally:
            await ch.queue_delete(queue)
            await ch.queue_delete(sink)
    finally:
        await conn.close()


async def keeps(url: str, limit: int, setup: Setup, kind: str) -> bool:
    async with limited_queue(url, kind, limit) as (conn, ch, queue, sink):
        return await setup(conn, ch, queue, sink)


SAMPLE_S = 6.0
"""Longer than the management API's statistics interval (5 s)."""


async def stated(url: str, management_url: str, setup: Setup, kind: str, count: int) -> int | None:
    """The ``message_bytes`` the management API states of a ``kind`` queue once ``setup`` put
    its ``count`` messages in it (a limit no case reaches; None: the queue did not keep them),
    read when two statistics samples in a row state the same (a sample may be half
    updated)."""
    async with limited_queue(url, kind, HIGH) as (conn, ch, queue, sink):
        if not await setup(conn, ch, queue, sink):
            return None
        seen: list[object] = []
        for _ in range(10):
            await asyncio.sleep(SAMPLE_S)
            row = await asyncio.to_thread(_queue_row, management_url, queue)
            if row.get("messages") == count and row.get("message_bytes") is not None:
                if seen[-1:] == [row["message_bytes"]]:
                    return int(str(row["message_bytes"]))
                seen.append(row["message_bytes"])
        raise RuntimeError(f"the management API never stated {count} message(s): {row}")


def _queue_row(management_url: str, queue: str) -> dict[str, object]:
    """``GET /api/queues/%2F/QUEUE`` with the URL's user and password."""
    parts = urlsplit(management_url)
    base = f"{parts.scheme}://{parts.hostname}:{parts.port}"
    request = urllib.request.Request(f"{base}/api/queues/%2F/{quote(queue, safe='')}")
    login = f"{parts.username or 'guest'}:{parts.password or 'guest'}".encode()
    request.add_header("Authorization", "Basic " + base64.b64encode(login).decode())
    with urllib.request.urlopen(request, timeout=10) as answer:
        row: dict[str, object] = json.load(answer)
    return row


async def smallest(url: str, setup: Setup, kind: str) -> int | None:
    low, high = 0, HIGH
    if not await keeps(url, high, setup, kind):
        return None
    while low < high:
        mid = (low + high) // 2
        if await keeps(url, mid, setup, kind):
            high = mid
        else:
            low = mid + 1
    return low


TS = datetime(2026, 1, 1, tzinfo=UTC)
PUBLISHED: dict[str, Properties | None] = {
    "no properties (flags 0)": Properties(),
    "rr's default (delivery mode 1)": None,
    "message_id m1": Properties(message_id="m1"),
    "delivery mode 2, message_id m1": Properties(delivery_mode=2, message_id="m1"),
    "priority 5": Properties(priority=5),
    "expiration 100000": Properties(expiration="100000"),
    "timestamp": Properties(timestamp=TS),
    "headers {h: v}": Properties(headers={"h": "v"}),
    "headers {h: v, hh: vvvv}": Properties(headers={"h": "v", "hh": "vvvv"}),
    "content_type text/plain, message_id a": Properties(content_type="text/plain", message_id="a"),
    "headers {x-death: [a dead letter's]} (republished)": Properties(
        headers={
            "x-death": [
                {
                    "count": 1,
                    "reason": "rejected",
                    "queue": "q",
                    "time": TS,
                    "exchange": "",
                    "routing-keys": ["q"],
                }
            ],
            "x-first-death-reason": "rejected",
        }
    ),
}


Case = tuple[Setup, tuple[Properties, ...], str]
"""A case: its setup, the properties of each message the queue must keep as they reach the
server, and the type of the limited queue."""

ANY_QUEUE = ("no properties (flags 0)", "message_id m1", "headers {h: v}")
"""The properties the cases beyond a plain publish try."""
AIORMQ_ID = Properties(message_id="0" * 32)
"""What aiormq sends for a message without a message id: a uuid4's 32 hex digits."""


def cases(url: str) -> dict[str, Case]:
    """Every case, by name."""
    out: dict[str, Case] = {}
    for message_id in (None, "m1"):
        sent = AIORMQ_ID if message_id is None else Properties(message_id=message_id)
        out[f"aiormq, message_id {message_id}"] = (by_aiormq(url, message_id), (sent,), "quorum")
    for name, props in PUBLISHED.items():
        sent = props or TRANSIENT
        out[f"published, {name}"] = (publishing(props), (sent,), "quorum")
    out["published, headers {BCC: [the queue]}"] = (with_bcc(), (Properties(headers={}),), "quorum")
    for name in ANY_QUEUE:
        props = PUBLISHED[name] or TRANSIENT
        out[f"classic, published, {name}"] = (publishing(props), (props,), "classic")
    for kind in ("classic", "quorum"):
        for how in ("expired", "rejected"):
            for name in ANY_QUEUE:
                props = PUBLISHED[name] or TRANSIENT
                sent = replace(props, expiration="1") if how == "expired" else props
                setup = dead_lettered(kind, how, props)
                out[f"dead-lettered from {kind} ({how}), {name}"] = (setup, (sent,), "quorum")
    for how in ("close", "reject"):
        for name in ANY_QUEUE:
            props = PUBLISHED[name] or TRANSIENT
            setup = given_back(how, props, Properties())
            out[f"given back ({how}), then m2, {name}"] = (setup, (props, Properties()), "quorum")
    return out


def predicted(version: str, sent: tuple[Properties, ...], kind: str) -> int:
    """The smallest limit keeping ``sent`` (each with the body ``m1`` or ``m2``) by the row
    of ``version`` (releases.py)."""
    row = release_of(ServerVersion.parse(version).release)
    if kind == "classic":
        return len(BODY) * len(sent)
    return sum(row.quorum_message_bytes(len(BODY), property_bytes(p)) for p in sent)


async def main(url: str, version: str, only: str = "", management_url: str = "") -> None:
    """Measure every case whose name holds ``only`` (with ``management_url``: what the API
    states); print it with the prediction."""
    misses = 0
    for name, (setup, sent, kind) in cases(url).items():
        if only not in name:
            continue
        if management_url:
            found = await stated(url, management_url, setup, kind, len(sent))
        else:
            found = await smallest(url, setup, kind)
        expected = predicted(version, sent, kind)
        misses += found != expected
        mark = "" if found == expected else "   <-- differs"
        print(f"{found!s:>5}  predicted {expected:>5}  {name}{mark}", flush=True)
    print(f"{misses} case(s) differ from releases.py's row of {version}")


if __name__ == "__main__":
    arguments = sys.argv[1:] or [URL, "4.3.6"]
    asyncio.run(main(*arguments))
