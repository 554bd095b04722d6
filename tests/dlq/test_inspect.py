"""rr dlq inspect, on RabbitMQ and on the emulator: it lists every dead letter with what rr
reads from it, and the queue keeps the same messages in the same order."""

from __future__ import annotations

import base64
import json
from datetime import datetime
from pathlib import Path

from rabbitctl_retry.transport.base import Properties
from tests.backends import Backend
from tests.dlq.support import (
    TOPOLOGY_TEXT,
    H,
    declare,
    interactive,
    json_of,
    publish_all,
    rr,
    run_to_dead,
)
from tests.observe import depth
from tests.observe import peek as read_all
from tests.shared_node import BROKERS


async def test_300_dead_letters_from_rr_and_the_server_in_order(
    backend: Backend, tmp_path: Path
) -> None:
    made = await run_to_dead(backend, per_kind=100)
    before = [d.properties.message_id for d in await read_all(backend, "dead")]
    assert len(before) == 300
    topology = tmp_path / "topology.toml"
    topology.write_text(TOPOLOGY_TEXT, encoding="utf-8")

    result = await rr(backend, "dlq", "inspect", "dead", "--topology", str(topology), "-o", "json")

    assert result.exit_code == 0, result.output
    document = json_of(result)
    assert document["queue"] == "dead"
    assert document["count"] == 300
    assert document["in_queue"] == 300
    messages = document["messages"]
    assert [m["position"] for m in messages] == list(range(1, 301))
    assert [m["message_id"] for m in messages] == before
    by_id = {m["message_id"]: m for m in messages}
    for message_id in made.refunds:
        letter = by_id[message_id]
        number = int(message_id.split("-")[1])
        assert letter["retry_count"] == 3  # rr wrote max_attempts into the copy
        assert letter["origin_queue"] == "refunds"
        assert letter["reason"] == "max_attempts"
        failed_at = datetime.fromisoformat(letter["failed_at"])
        assert failed_at == datetime.fromisoformat(letter["headers"]["rr-failed-at"])
        assert letter["deaths"] == []  # rr's copy carries no x-death
        assert letter["headers"]["rr-origin-queue"] == "refunds"
        if number % 2:
            assert letter["headers"]["rr-error-type"] == "ValueError"
            assert letter["headers"]["rr-error-message"] == f"card {number} declined"
        else:
            assert "rr-error-type" not in letter["headers"]
    for message_id in made.payouts:
        letter = by_id[message_id]
        assert letter["retry_count"] is None
        assert letter["origin_queue"] == "payouts"
        assert letter["reason"] == "delivery_limit"
        [entry] = letter["deaths"]
        assert (entry["queue"], entry["reason"], entry["count"]) == ("payouts", "delivery_limit", 1)
        assert entry["routing_keys"] == ["payouts"]
        assert datetime.fromisoformat(entry["time"]).tzinfo is not None
    for message_id in made.waited:
        letter = by_id[message_id]
        assert letter["retry_count"] == 1  # the one delayed copy
        assert letter["origin_queue"] == "payouts"  # not payouts.retry, x-first-death-queue
        assert letter["reason"] == "rejected"
        assert letter["headers"]["x-first-death-queue"] == "payouts.retry"
        assert [(d["queue"], d["reason"]) for d in letter["deaths"]] == [
            ("payouts", "rejected"),
            ("payouts.retry", "expired"),
        ]
    for letter in messages:
        assert letter["body_encoding"] == "utf-8"
        assert json.loads(letter["body"])["kind"] in ("refund", "payout", "waited")
        assert letter["body_size"] == len(letter["body"].encode())

    after = [d.properties.message_id for d in await read_all(backend, "dead")]
    assert after == before


async def test_the_table_shows_origin_timeline_errors_and_a_grouped_summary(
    backend: Backend,
) -> None:
    await run_to_dead(backend, per_kind=4)
    result = await rr(backend, "dlq", "inspect", "dead")
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "origin: refunds" in out
    assert "reason: max_attempts" in out
    assert "rr-error-type: ValueError" in out
    assert "payouts  delivery_limit  x1" in out
    assert "payouts.retry  expired  x1" in out
    assert '"kind": "refund"' in out  # pretty JSON
    summary = out.strip().splitlines()[-1]
    assert summary.startswith("12 dead letters shown of 12 in 'dead': ")
    assert "refunds/max_attempts 4" in summary
    assert "payouts/delivery_limit 4" in summary
    assert "payouts/rejected 4" in summary
    assert await depth(backend, "dead") == 12


async def test_binary_bodies_no_message_id_and_hostile_text(backend: Backend) -> None:
    await declare(backend, "raw.dead")
    binary = bytes(range(256))
    hostile = "\x1b[31mred[/] [bold]x[/bold]\x07"
    await publish_all(
        backend,
        "raw.dead",
        [
            (binary, Properties(headers={"rr-origin-queue": "raw"})),
            (
                hostile.encode(),
                Properties(
                    headers={"rr-origin-queue": hostile, "rr-error-message": hostile},
                ),
            ),
            (b"x" * 5000, Properties(headers={H: "2", "blob": b"\x00\x01"})),
        ],
    )
    document = json_of(await rr(backend, "dlq", "inspect", "raw.dead", "-o", "json"))
    first, second, third = document["messages"]
    assert first["message_id"] is None
    assert first["body_encoding"] == "base64"
    assert base64.b64decode(first["body"]) == binary
    assert first["body_size"] == 256
    assert second["body_encoding"] == "base64"  # control characters: not shown as text
    assert second["origin_queue"] == hostile
    assert third["body"] == "x" * 5000  # JSON is never cut
    assert (
        third["headers"]["blob"] == "AAE="
    )  # bytes as base64 (docs/reference/dlq.md, "JSON output")
    assert third["retry_count"] == 2

    table = await rr(backend, "dlq", "inspect", "raw.dead")
    assert table.exit_code == 0, table.output
    out = table.stdout
    assert "\x1b" not in out
    assert "\x07" not in out
    assert "\\x1b[31mred[/] [bold]x[/bold]\\x07" in out  # shown literally, escaped
    assert "id: (none)" in out
    assert "base64:" in out
    assert "AAECAwQF" in out
    assert "… (3,000 more bytes)" in out
    no_body = await rr(backend, "dlq", "inspect", "raw.dead", "--no-body", "-n", "1")
    assert "base64" not in no_body.stdout
    assert "1 dead letter shown of 3" in no_body.stdout
    assert await depth(backend, "raw.dead") == 3


async def test_limit_reads_only_the_head(backend: Backend) -> None:
    await declare(backend, "few.dead")
    await publish_all(
        backend,
        "few.dead",
        [
            (b"%d" % n, Properties(message_id=f"m{n}", headers={"rr-origin-queue": "few"}))
            for n in range(10)
        ],
    )
    document = json_of(await rr(backend, "dlq", "inspect", "few.dead", "-n", "3", "-o", "json"))
    assert [m["message_id"] for m in document["messages"]] == ["m0", "m1", "m2"]
    assert [d.properties.message_id for d in await read_all(backend, "few.dead")] == [
        f"m{n}" for n in range(10)
    ]


async def test_a_quorum_queue_is_named_and_asked_about_first(backend: Backend) -> None:
    await declare(backend, "q.dead", arguments={"x-queue-type": "quorum", "x-delivery-limit": 50})
    await publish_all(
        backend,
        "q.dead",
        [
            (b"%d" % n, Properties(message_id=f"m{n}", headers={"rr-origin-queue": "q"}))
            for n in range(3)
        ],
    )
    if BROKERS[backend.version].server_version.nack_returns_uncounted:
        # RabbitMQ 4.3: handed back with basic.nack, which is not counted: nothing to ask
        with interactive(False):
            free = await rr(backend, "dlq", "inspect", "q.dead", "-o", "json")
        assert free.exit_code == 0, free.output
        assert free.stderr == ""
        assert [m["delivery_count"] for m in json_of(free)["messages"]] == [None] * 3
        return
    # no terminal, no --yes: refused before anything is read
    with interactive(False):
        refused = await rr(backend, "dlq", "inspect", "q.dead")
    assert refused.exit_code == 2, refused.output
    assert "'q.dead' is a quorum queue" in refused.stderr
    assert "x-delivery-count + 1" in refused.stderr
    assert "it has x-delivery-limit = 50" in refused.stderr
    assert "pass --yes" in refused.stderr
    # a terminal, answered no: nothing read
    with interactive(True):
        declined = await rr(backend, "dlq", "inspect", "q.dead", input="n\n")
    assert declined.exit_code == 1, declined.output
    assert "not confirmed" in declined.stderr
    untouched = await read_all(backend, "q.dead")
    # read_all's own gets count once: every message was delivered exactly once so far
    assert [(d.properties.headers or {}).get("x-delivery-count") for d in untouched] in (
        [0, 0, 0],  # RabbitMQ 3.x: a first basic.get shows 0
        [None, None, None],
    )
    # answered yes: read, in order, and each look counted
    with interactive(True):
        agreed = await rr(backend, "dlq", "inspect", "q.dead", "-o", "json", input="y\n")
    assert agreed.exit_code == 0, agreed.output
    assert "Read them anyway?" in agreed.stderr
    # (the test runner echoes the typed answer on stdout, as a terminal would show it)
    document = json.loads(agreed.stdout[agreed.stdout.index("{") :])
    assert [m["message_id"] for m in document["messages"]] == ["m0", "m1", "m2"]
    yes = json_of(await rr(backend, "dlq", "inspect", "q.dead", "--yes", "-o", "json"))
    assert [m["delivery_count"] for m in yes["messages"]] == [2, 2, 2]
    assert [d.properties.message_id for d in await read_all(backend, "q.dead")] == [
        "m0",
        "m1",
        "m2",
    ]


async def test_a_missing_queue_is_a_clear_error(backend: Backend) -> None:
    result = await rr(backend, "dlq", "inspect", "nope.dead")
    assert result.exit_code == 1
    assert result.stderr.startswith("rr: error: no queue 'nope.dead' in vhost ")
    assert "Traceback" not in result.output
    empty = await rr(backend, "dlq", "inspect", "refunds", "-o", "json")
    assert empty.exit_code == 1  # refunds does not exist in this vhost either


async def test_an_empty_queue(backend: Backend) -> None:
    await declare(backend, "empty.dead")
    document = json_of(await rr(backend, "dlq", "inspect", "empty.dead", "-o", "json"))
    assert document == {"queue": "empty.dead", "in_queue": 0, "count": 0, "messages": []}
    table = await rr(backend, "dlq", "inspect", "empty.dead")
    assert "0 dead letters shown of 0 in 'empty.dead'" in table.stdout
