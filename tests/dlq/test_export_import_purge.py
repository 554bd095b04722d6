"""rr dlq export / import / purge, on RabbitMQ and on the emulator."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from rabbitctl_retry.retry.properties import PROPERTY_NAMES
from rabbitctl_retry.transport.base import Delivery, Properties
from tests.backends import Backend
from tests.dlq.support import (
    declare,
    interactive,
    json_of,
    publish_all,
    rr,
    run_to_dead,
    shown_broker,
)
from tests.observe import depth
from tests.observe import peek as read_all
from tests.target_line import after_target

T0 = datetime(2024, 5, 1, 10, 0, tzinfo=UTC)


def stored(delivery: Delivery) -> tuple[bytes, dict[str, object], dict[str, object]]:
    """Body, every property, and the headers (without a quorum queue's delivery annotations)."""
    properties = {name: getattr(delivery.properties, name) for name in PROPERTY_NAMES}
    headers = dict(delivery.properties.headers or {})
    headers.pop("x-delivery-count", None)
    return delivery.body, properties, headers


async def test_export_then_import_restores_every_byte_property_and_header(
    backend: Backend, tmp_path: Path
) -> None:
    made = await run_to_dead(backend, per_kind=5)  # real x-death tables with timestamps
    rich_properties = Properties(
        content_type="application/octet-stream",
        content_encoding="identity",
        delivery_mode=2,
        priority=7,
        correlation_id="c-1",
        reply_to="replies",
        expiration="3600000",
        message_id="typed",
        timestamp=T0,
        type="refund",
        user_id="guest",
        app_id="shop",
        headers={
            "bytes": b"\x00\xff\x10",
            "when": T0,
            "float": 1.5,
            "int": -70000,
            "big": 2**40,
            "bool": False,
            "none": None,
            "list": [1, "two", b"\x03", [T0]],
            "table": {"$bytes": "not a tag", "nested": {"deep": b"\x01"}},
            "x-death": [
                {
                    "count": 3,
                    "exchange": "",
                    "queue": "payouts",
                    "reason": "delivery_limit",
                    "routing-keys": ["payouts"],
                    "time": T0,
                }
            ],
        },
    )
    extra = [(bytes(range(256)) * 4, rich_properties), (b"", Properties(message_id="empty"))]
    extra += [(b"\xff%d" % n, Properties(message_id=f"bin-{n}")) for n in range(1000)]
    await publish_all(backend, "dead", extra)
    total = made.total + len(extra)
    original = [stored(d) for d in await read_all(backend, "dead")]
    assert len(original) == total
    file = tmp_path / "dead.jsonl"

    exported = await rr(backend, "dlq", "export", "dead", str(file))

    assert exported.exit_code == 0, exported.output
    assert f"exported {total:,} message(s) of {total:,} from 'dead'" in exported.stdout
    assert "the queue still holds them" in exported.stdout
    assert [stored(d) for d in await read_all(backend, "dead")] == original  # untouched
    lines = file.read_text(encoding="utf-8").splitlines()
    assert len(lines) == total
    assert all(
        set(json.loads(line)) >= {"body", "body_size", "properties", "headers"} for line in lines
    )

    await declare(backend, "restored")
    imported = await rr(backend, "dlq", "import", str(file), "--to", "restored")

    assert imported.exit_code == 0, imported.output
    assert f"imported {total:,} of {total:,} message(s) into 'restored'" in imported.stdout
    assert [stored(d) for d in await read_all(backend, "restored")] == original

    again = await rr(backend, "dlq", "export", "dead", str(file))
    assert again.exit_code == 2
    assert "does not overwrite" in again.stderr


async def test_export_limit_and_a_message_without_id(backend: Backend, tmp_path: Path) -> None:
    await declare(backend, "dead", "restored")
    await publish_all(backend, "dead", [(b"no id %d" % n, Properties()) for n in range(5)])
    file = tmp_path / "head.jsonl"
    result = await rr(backend, "dlq", "export", "dead", str(file), "--limit", "2")
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in file.read_text(encoding="utf-8").splitlines()]
    assert len(records) == 2
    assert all("message_id" not in record["properties"] for record in records)
    assert await depth(backend, "dead") == 5


async def test_export_to_stdout_writes_the_same_lines_and_keeps_stdout_clean(
    backend: Backend, tmp_path: Path
) -> None:
    await declare(backend, "dead")
    await publish_all(
        backend, "dead", [(b"body %d" % n, Properties(message_id=f"m{n}")) for n in range(4)]
    )
    file = tmp_path / "dead.jsonl"
    to_file = await rr(backend, "dlq", "export", "dead", str(file))
    to_stdout = await rr(backend, "dlq", "export", "dead", "-")
    assert to_stdout.exit_code == 0, to_stdout.output
    lines = to_stdout.stdout.splitlines()  # stdout holds the lines and nothing else

    def records(texts: list[str]) -> list[dict[str, object]]:
        # the second read sees them redelivered (the first one put them back)
        return [{k: v for k, v in json.loads(t).items() if k != "redelivered"} for t in texts]

    assert records(lines) == records(file.read_text(encoding="utf-8").splitlines())
    assert [json.loads(line)["properties"]["message_id"] for line in lines] == [
        "m0",
        "m1",
        "m2",
        "m3",
    ]
    assert "exported 4 message(s) of 4 from 'dead' to stdout" in to_stdout.stderr
    assert to_file.exit_code == 0
    assert await depth(backend, "dead") == 4


async def test_export_import_and_purge_speak_json(backend: Backend, tmp_path: Path) -> None:
    await declare(backend, "dead", "restored")
    await publish_all(
        backend, "dead", [(b"body %d" % n, Properties(message_id=f"m{n}")) for n in range(4)]
    )
    file = tmp_path / "dead.jsonl"

    exported = await rr(backend, "dlq", "export", "dead", str(file), "-o", "json")
    imported = await rr(backend, "dlq", "import", str(file), "--to", "restored", "-o", "json")
    purged = await rr(backend, "dlq", "purge", "restored", "--yes", "-o", "json")
    both = await rr(backend, "dlq", "export", "dead", "-", "-o", "json")

    assert json_of(exported) == {"queue": "dead", "file": str(file), "exported": 4, "in_queue": 4}
    assert json_of(imported) == {
        "file": str(file),
        "to": "restored",
        "messages": 4,
        "from_line": 1,
        "to_publish": 4,
        "imported": 4,
        "first_not_imported": None,
        "reason": None,
        "unconfirmed": [],
        "user_ids_dropped": 0,
        "broker": shown_broker(backend),
    }
    assert json_of(purged) == {"queue": "restored", "purged": 4, "broker": shown_broker(backend)}
    assert both.exit_code == 2
    assert "-o json needs a file" in both.stderr
    assert await depth(backend, "dead") == 4


async def test_import_keeps_file_order_with_repeated_message_ids(
    backend: Backend, tmp_path: Path
) -> None:
    """A message id that comes again waits for the confirm of its first copy (docs/reference/dlq.md,
    "Import"); the messages behind it wait too, so the queue holds them in file order."""
    await declare(backend, "dead", "restored")
    ids = ["a", "a", "b", "a", "c", "b", "b", "d"]
    await publish_all(
        backend,
        "dead",
        [(f"{n}:{i}".encode(), Properties(message_id=i)) for n, i in enumerate(ids)],
        window=1,  # one by one: the file must hold them in this order
    )
    file = tmp_path / "dead.jsonl"
    assert (await rr(backend, "dlq", "export", "dead", str(file))).exit_code == 0

    imported = await rr(backend, "dlq", "import", str(file), "--to", "restored")

    assert imported.exit_code == 0, imported.output
    lines = file.read_text().splitlines()
    assert [json.loads(line)["properties"]["message_id"] for line in lines] == ids
    bodies = [d.body for d in await read_all(backend, "restored")]
    assert bodies == [f"{n}:{i}".encode() for n, i in enumerate(ids)]


async def test_a_damaged_file_publishes_nothing(backend: Backend, tmp_path: Path) -> None:
    await declare(backend, "restored")
    file = tmp_path / "bad.jsonl"
    good = json.dumps({"body": "YQ==", "body_size": 1, "properties": {}, "headers": {}})
    file.write_text(f"{good}\n{good}\n{{broken\n", encoding="utf-8")
    result = await rr(backend, "dlq", "import", str(file), "--to", "restored")
    assert result.exit_code == 65
    assert f"{file}:3: not JSON" in result.stderr
    assert await depth(backend, "restored") == 0
    missing = await rr(backend, "dlq", "import", str(tmp_path / "nope.jsonl"), "--to", "restored")
    assert missing.exit_code == 65
    assert "nope.jsonl: no such file" in missing.stderr
    file.write_text(f"{good}\n", encoding="utf-8")
    no_queue = await rr(backend, "dlq", "import", str(file), "--to", "nope")
    assert no_queue.exit_code == 1
    assert "no queue 'nope' in vhost" in no_queue.stderr


async def test_purge_asks_and_says_how_many_went(backend: Backend) -> None:
    await declare(backend, "dead")
    await publish_all(backend, "dead", [(b"%d" % n, Properties()) for n in range(7)])
    with interactive(False):
        refused = await rr(backend, "dlq", "purge", "dead")
    assert refused.exit_code == 2
    assert "pass --yes" in refused.stderr
    with interactive(True):
        declined = await rr(backend, "dlq", "purge", "dead", input="n\n")
    assert declined.exit_code == 1
    assert "Purge 7 message(s) from 'dead'? They cannot be recovered" in declined.stderr
    assert await depth(backend, "dead") == 7
    purged = await rr(backend, "dlq", "purge", "dead", "--yes")
    assert purged.exit_code == 0, purged.output
    assert "purged 7 message(s) from 'dead'" in purged.stdout
    assert await depth(backend, "dead") == 0
    missing = await rr(backend, "dlq", "purge", "nope", "--yes")
    assert missing.exit_code == 1
    assert after_target(missing.stderr).startswith("rr: error: no queue 'nope' in vhost")
    export_missing = await rr(backend, "dlq", "export", "nope", "/tmp/never.jsonl")
    assert export_missing.exit_code == 1
    assert "no queue 'nope' in vhost" in export_missing.stderr
