"""--where id= and text= (#47, docs/reference/dlq.md "--where"), on RabbitMQ and on the emulator: rr
dlq inspect shows, replay and move copy, purge removes exactly the letters with that message id or
that word in their error, headers or body's first KiB; the broker holds the others in order."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from rabbitctl_retry.fields import FieldValue
from rabbitctl_retry.transport.base import Properties
from tests.backends import Backend
from tests.dlq.support import declare, json_of, publish_all, rr, synthesized
from tests.observe import peek as read_all

NOW = datetime.now(UTC).replace(microsecond=0)


def letters() -> list[tuple[bytes, Properties]]:
    """12 dead letters of refunds/orders (rr's own copies): 0, 4, 8 failed with a timeout
    (their error type), 1 and 5 say "Gateway Timeout" in their body, 2 in a header beyond
    the error, 3 only beyond its body's first KiB, 11 has no message id."""
    made: list[tuple[bytes, Properties]] = []
    for number in range(12):
        body, properties = synthesized("rr", number, NOW)
        headers: dict[str, FieldValue] = dict(properties.headers or {})
        message_id: str | None = properties.message_id
        if number % 4 == 0:
            headers["rr-error-type"] = "TimeoutError"
        elif number in (1, 5):
            body = b'{"upstream": "502 Gateway TIMEOUT"}'
        elif number == 2:
            headers["x-last-reply"] = b"read timeout after 30s"
        elif number == 3:
            body = b"x" * 1024 + b"timeout"
        if number == 11:
            message_id = None
        made.append((body, Properties(message_id=message_id, headers=headers)))
    return made


TIMEOUTS = {0, 1, 2, 4, 5, 8}


async def published(backend: Backend, queue: str = "dead") -> list[str | None]:
    await declare(backend, queue, "refunds", "orders")
    made = letters()
    await publish_all(backend, queue, made)
    return [properties.message_id for _, properties in made]


async def ids_in(backend: Backend, queue: str) -> list[str | None]:
    return [d.properties.message_id for d in await read_all(backend, queue)]


async def test_inspect_finds_by_text_and_by_id(backend: Backend) -> None:
    ids = await published(backend)

    found = await rr(backend, "dlq", "inspect", "dead", "--where", "text=timeout", "-o", "json")
    assert found.exit_code == 0, found.output
    assert [m["message_id"] for m in json_of(found)["messages"]] == [
        ids[n] for n in sorted(TIMEOUTS)
    ]
    both = await rr(
        backend,
        "dlq",
        "inspect",
        "dead",
        "--where",
        "text=TIMEOUT",
        "--where",
        f"id!={ids[0]}",
        "-o",
        "json",
    )
    assert [m["message_id"] for m in json_of(both)["messages"]] == [
        ids[n] for n in sorted(TIMEOUTS - {0})
    ]
    one = await rr(backend, "dlq", "inspect", "dead", "--where", f"id={ids[7]}", "-o", "json")
    assert [m["message_id"] for m in json_of(one)["messages"]] == [ids[7]]
    assert await ids_in(backend, "dead") == ids  # inspect takes nothing


async def test_replay_by_text_copies_only_the_letters_that_say_it(backend: Backend) -> None:
    ids = await published(backend)

    result = await rr(
        backend, "dlq", "replay", "dead", "--where", "text=timeout", "--yes", "-o", "json"
    )

    assert result.exit_code == 0, result.output
    replayed = [r["message_id"] for r in json_of(result)["results"] if r["outcome"] == "replayed"]
    assert replayed == [ids[n] for n in sorted(TIMEOUTS)]
    # synthesized("rr", n): even numbers failed in refunds, odd ones in orders
    assert await ids_in(backend, "refunds") == [ids[n] for n in (0, 2, 4, 8)]
    assert await ids_in(backend, "orders") == [ids[n] for n in (1, 5)]
    assert await ids_in(backend, "dead") == [m for n, m in enumerate(ids) if n not in TIMEOUTS]


async def test_replay_and_purge_by_id(backend: Backend) -> None:
    ids = await published(backend)

    replayed = await rr(
        backend, "dlq", "replay", "dead", "--where", f"id={ids[6]}", "--yes", "-o", "json"
    )
    assert replayed.exit_code == 0, replayed.output
    assert await ids_in(backend, "refunds") == [ids[6]]

    purged = await rr(
        backend, "dlq", "purge", "dead", "--where", f"id={ids[9]}", "--yes", "-o", "json"
    )
    assert purged.exit_code == 0, purged.output
    assert json_of(purged)["purged"] == 1
    assert await ids_in(backend, "dead") == [m for n, m in enumerate(ids) if n not in (6, 9)]

    # the letter without a message id never equals one: id!= keeps it among the matches
    others = await rr(
        backend, "dlq", "purge", "dead", "--where", "text!=timeout", "--yes", "-o", "json"
    )
    assert others.exit_code == 0, others.output
    assert await ids_in(backend, "dead") == [ids[n] for n in sorted(TIMEOUTS)]


async def test_move_by_text_and_bad_words_are_usage_errors(backend: Backend) -> None:
    ids = await published(backend)
    await declare(backend, "parked")

    moved = await rr(
        backend,
        "dlq",
        "move",
        "dead",
        "--to",
        "parked",
        "--where",
        "text=gateway",
        "--yes",
        "-o",
        "json",
    )
    assert moved.exit_code == 0, moved.output
    assert await ids_in(backend, "parked") == [ids[1], ids[5]]

    for where, said in (
        ("text=", "give a word to search for"),
        ("text=" + "w" * 257, "at most 256"),
        ("text<x", "only age compares"),
        ("id=", "give a message id"),
    ):
        bad = await rr(backend, "dlq", "replay", "dead", "--where", where, "--yes")
        assert bad.exit_code == 2, (where, bad.output)
        assert said in bad.stderr
    assert len(await ids_in(backend, "dead")) == 10


async def test_export_writes_only_the_letters_that_say_it(backend: Backend, tmp_path: Path) -> None:
    ids = await published(backend)
    file = tmp_path / "timeouts.jsonl"

    exported = await rr(backend, "dlq", "export", "dead", str(file), "--where", "text=timeout")

    assert exported.exit_code == 0, exported.output
    records = [json.loads(line) for line in file.read_text(encoding="utf-8").splitlines()]
    assert [record["properties"].get("message_id") for record in records] == [
        ids[n] for n in sorted(TIMEOUTS)
    ]
    assert await ids_in(backend, "dead") == ids  # the queue keeps them all
