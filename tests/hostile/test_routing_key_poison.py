"""A message whose routing key is not UTF-8 (a field of ``basic.deliver`` and
``basic.get-ok``, not a property), on RabbitMQ and the emulator.

RabbitMQ takes such a routing key from any client (through a fanout exchange it reaches a
queue). rr used to drop the whole connection on it: ``rr run`` reconnected forever and
handled the message ahead of it again and again, and every ``rr dlq`` command but ``purge``
exited 69. Now it is an undecodable message (docs/reference/runtime.md, "Malformed messages";
docs/reference/dlq.md, "Undecodable dead letters"): ``rr run`` sets it aside byte for byte and goes
on,
``inspect``/``export`` read past it and say so, ``replay`` fails it alone, ``replay
--undecodable`` and ``move`` move it byte for byte.

On RabbitMQ the message is published with a raw client (``tests/hostile/raw_amqp.py``: pamqp
cannot write such a routing key); the emulator, whose port carries text, is given what rr's
codec makes of it (``properties.undecodable``, ``properties.raw`` and the routing key as
shown), so the shells' treatment is checked on both.
"""

from __future__ import annotations

import json
import logging
import struct
from collections import Counter
from pathlib import Path

import pytest

from rabbitctl_retry import Outcome
from rabbitctl_retry.ops.declare import provision
from rabbitctl_retry.topology.expand import expand
from rabbitctl_retry.topology.load import load_text
from rabbitctl_retry.transport.base import Properties
from tests.backends import Backend, RabbitBackend, publish, running_work
from tests.dlq.support import declare, json_of, publish_all, rr
from tests.hostile.raw_amqp import RawPublish, get_raw, send_raw
from tests.hostile.test_run_poison import CLASSIC, QUORUM, recording, wait_for
from tests.observe import depth, peek

NOT_UTF8 = b"\xff\xfe\x1b[31m"
SHOWN = "\\xff\\xfe\x1b[31m"
"""What rr reads for :data:`NOT_UTF8`: the bytes that are not UTF-8 written ``\\xff``; the ESC
stays a character, which every output escapes (docs/reference/cli.md, "Output")."""


def _short(text: str) -> bytes:
    return bytes([len(text.encode())]) + text.encode()


def raw_properties(message_id: str) -> bytes:
    """``message_id``, persistent, and a header ``n = 1`` written as a 64-bit integer (``l``):
    the AMQP client would write 1 as one byte, so only a copy made byte for byte keeps ``l``."""
    table = _short("n") + b"l" + struct.pack(">q", 1)
    flags = 0x2000 | 0x1000 | 0x0080  # headers, delivery_mode, message_id
    return (
        struct.pack(">H", flags)
        + struct.pack(">I", len(table))
        + table
        + b"\x02"
        + (_short(message_id))
    )


async def publish_poison(backend: Backend, queue: str, message_id: str, body: bytes) -> bytes:
    """Publish to ``queue``, through a fanout exchange bound to it, a message whose routing
    key is :data:`NOT_UTF8`; its raw properties."""
    exchange = f"fan.{queue}"
    channel = await backend.channel()
    await channel.exchange_declare(exchange, type="fanout")
    await channel.queue_bind(queue, exchange)
    raw = raw_properties(message_id)
    if isinstance(backend, RabbitBackend):
        await send_raw(backend.url, [RawPublish(exchange.encode(), NOT_UTF8, body, raw)])
    else:
        shown = Properties(
            message_id=message_id,
            delivery_mode=2,
            headers={"n": 1},
            undecodable=("routing_key",),
            raw=raw,
        )
        await channel.publish(body, exchange=exchange, routing_key=SHOWN, properties=shown)
    return raw


async def assert_moved_byte_for_byte(backend: Backend, queue: str, raw: bytes) -> None:
    """The head of ``queue`` carries ``raw`` as its properties (RabbitMQ: read raw, taken)."""
    if isinstance(backend, RabbitBackend):
        got = await get_raw(backend.url, queue)
        assert got is not None
        assert got.properties == raw
    else:
        (moved, *_) = await peek(backend, queue)
        assert moved.properties.raw == raw


# ------------------------------------------------------------------------------- rr run


@pytest.mark.parametrize("topology", [CLASSIC, QUORUM], ids=["classic", "quorum"])
async def test_rr_run_sets_it_aside_and_acks_the_message_ahead_of_it_once(
    backend: Backend, caplog: pytest.LogCaptureFixture, topology: str
) -> None:
    caplog.set_level(logging.INFO, logger="rr")
    connection = await backend.connect()
    try:
        await provision(
            connection, expand(load_text(topology)), dry_run=False, connect=backend.connect
        )
    finally:
        await connection.close()
    await publish(backend, "work", b"fine", Properties(message_id="good"))
    raw = await publish_poison(backend, "work", "poison", b"raw body")
    seen: list[str] = []
    async with running_work(backend, topology, recording(seen, Outcome.ack())) as service:
        dead = await wait_for(backend, "work.dead", 1)
        await backend.until(lambda: seen == ["good"], "the good message handled")
        await backend.until(
            lambda: service.stats.undecodable_deliveries == 1, "the poison message set aside"
        )
        assert await depth(backend, "work") == 0
        assert service.stats.connections == 1
    assert seen == ["good"]  # handled once: its ack was not lost with the connection
    assert [(d.body, d.properties.message_id) for d in dead] == [(b"raw body", "poison")]
    assert (dead[0].properties.headers or {})["n"] == 1
    if topology == CLASSIC:  # rr moved it: the properties are the very bytes received
        await assert_moved_byte_for_byte(backend, "work.dead", raw)
    errors = [r for r in caplog.records if r.name == "rr.runtime" and r.levelno >= logging.ERROR]
    assert [r.getMessage() for r in errors] == [
        "message properties cannot be decoded; it is dead-lettered"
    ]
    assert errors[0].rr["undecodable"] == ["routing_key"]  # type: ignore[attr-defined]


# ------------------------------------------------------------------------------- rr dlq

GOOD = [
    (b"good", Properties(message_id=f"good-{number}", headers={"rr-origin-queue": "orders"}))
    for number in range(3)
]


async def dead_with_poison(backend: Backend) -> bytes:
    """``dead``: good-0, the poison message, good-1, good-2; ``orders`` empty."""
    await declare(backend, "dead", "orders")
    await publish_all(backend, "dead", [GOOD[0]])
    raw = await publish_poison(backend, "dead", "bad", b"raw body")
    await publish_all(backend, "dead", GOOD[1:])
    return raw


async def ids_in(backend: Backend, queue: str) -> list[str | None]:
    return [d.properties.message_id for d in await peek(backend, queue)]


async def test_inspect_and_export_read_past_it_and_show_it_escaped(
    backend: Backend, tmp_path: Path
) -> None:
    await dead_with_poison(backend)

    inspected = await rr(backend, "dlq", "inspect", "dead", "-o", "json")
    document = json_of(inspected)
    assert inspected.exit_code == 0, inspected.output
    assert [m["undecodable"] for m in document["messages"]] == [[], ["routing_key"], [], []]
    poison = document["messages"][1]
    assert (poison["message_id"], poison["routing_key"]) == ("bad", SHOWN)
    assert poison["exchange"] == "fan.dead"
    assert "\x1b" not in inspected.stdout  # written \u001b: nothing a terminal acts on

    table = await rr(backend, "dlq", "inspect", "dead")
    assert table.exit_code == 0, table.output
    assert "undecodable: routing_key (replay --undecodable moves it aside)" in table.stdout
    assert "\x1b" not in table.stdout

    summary = await rr(backend, "dlq", "inspect", "dead", "--summary", "-o", "json")
    assert summary.exit_code == 0, summary.output
    assert (json_of(summary)["read"], json_of(summary)["undecodable"]) == (4, 1)

    lines = await rr(backend, "dlq", "inspect", "dead", "--format", "lines")
    assert lines.exit_code == 0, lines.output
    assert len(lines.stdout.splitlines()) == 4

    exported = tmp_path / "dead.jsonl"
    export = await rr(backend, "dlq", "export", "dead", str(exported), "--yes")
    assert export.exit_code == 0, export.output
    text = exported.read_text(encoding="utf-8")
    assert "\x1b" not in text
    records = [json.loads(line) for line in text.splitlines()]
    assert [r["routing_key"] for r in records][1] == SHOWN
    assert [r["properties"].get("message_id") for r in records] == [
        "good-0",
        "bad",
        "good-1",
        "good-2",
    ]
    assert await depth(backend, "dead") == 4  # inspect and export take nothing


async def test_replay_fails_it_alone_and_replay_undecodable_moves_it_byte_for_byte(
    backend: Backend,
) -> None:
    raw = await dead_with_poison(backend)

    replayed = await rr(backend, "dlq", "replay", "dead", "--yes", "-o", "json")
    report = json_of(replayed)
    assert replayed.exit_code == 3, replayed.output
    assert (report["replayed"], report["skipped"], report["failed"]) == (3, 0, 1)
    failure = next(r for r in report["results"] if r["outcome"] == "failed")
    assert failure["message_id"] == "bad"
    assert "cannot be decoded (routing_key)" in failure["reason"]
    assert await ids_in(backend, "dead") == ["bad"]
    assert Counter(await ids_in(backend, "orders")) == Counter(["good-0", "good-1", "good-2"])

    aside = await rr(backend, "dlq", "replay", "dead", "--undecodable", "--yes", "-o", "json")
    report = json_of(aside)
    assert aside.exit_code == 0, aside.output
    assert (report["replayed"], report["skipped"], report["failed"]) == (1, 0, 0)
    assert await depth(backend, "dead") == 0
    assert await ids_in(backend, "dead.undecodable") == ["bad"]
    await assert_moved_byte_for_byte(backend, "dead.undecodable", raw)


async def test_move_moves_it_byte_for_byte_and_where_fails_it_alone(backend: Backend) -> None:
    raw = await dead_with_poison(backend)
    await declare(backend, "parked")

    move = ("dlq", "move", "dead", "--to", "parked", "--yes", "-o", "json")
    where = await rr(backend, *move, "--where", "origin=orders")
    report = json_of(where)
    assert where.exit_code == 3, where.output
    assert (report["moved"], report["failed"]) == (3, 1)
    assert await ids_in(backend, "dead") == ["bad"]

    moved = await rr(backend, *move)
    report = json_of(moved)
    assert moved.exit_code == 0, moved.output
    assert (report["moved"], report["failed"]) == (1, 0)
    assert await depth(backend, "dead") == 0
    assert Counter(await ids_in(backend, "parked")) == Counter(
        ["good-0", "good-1", "good-2", "bad"]
    )
    for _ in range(3):  # the good ones, moved first
        if isinstance(backend, RabbitBackend):
            assert await get_raw(backend.url, "parked") is not None
        else:
            channel = await backend.channel()
            assert await channel.get("parked", no_ack=True) is not None
    await assert_moved_byte_for_byte(backend, "parked", raw)
