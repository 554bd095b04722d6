"""rr dlq inspect on big queues, on RabbitMQ and on the emulator: ``--summary`` counts the whole
queue, ``--format lines`` and ``--output jsonl`` print one message per line as it is read, and
none of them keeps the messages it read (docs/reference/dlq.md, "Big queues")."""

from __future__ import annotations

import gc
import json
import re
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from rabbitctl_retry.cli.dlq import inspect as dlq_inspect
from rabbitctl_retry.cli.dlq.inspect import InspectFormat, InspectOutput, InspectReading, Kept
from rabbitctl_retry.dlq.letter import Letter
from rabbitctl_retry.dlq.origin import WaitQueues
from rabbitctl_retry.dlq.summary import Summary
from rabbitctl_retry.ops import dlq as shell
from rabbitctl_retry.retry.headers import utc_stamp
from rabbitctl_retry.transport.base import Delivery, Properties
from tests.backends import Backend
from tests.dlq.support import (
    H,
    declare,
    json_of,
    publish_all,
    rr,
    synthesized,
)
from tests.observe import depth
from tests.observe import peek as read_all

COUNT = 1_200
"""More than inspect's default --limit (1,000): --summary must read past it."""

KINDS = ("rr", "server", "waited")


async def fill(backend: Backend, now: datetime, count: int = COUNT) -> list[str]:
    """``count`` dead letters in ``dead``, kinds in turn (rr's copies, server dead letters,
    letters that once waited); the n-th was dead-lettered ``n % 90`` minutes before ``now``."""
    await declare(backend, "dead")
    messages = [synthesized(KINDS[n % 3], n, now) for n in range(count)]
    await publish_all(backend, "dead", messages)
    return [str(properties.message_id) for _, properties in messages]


def expected_counts(count: int) -> dict[str, Counter[Any]]:
    """What the summary must say of :func:`fill`'s letters, worked out from how they were made."""
    origins: Counter[Any] = Counter()
    reasons: Counter[Any] = Counter()
    retries: Counter[Any] = Counter()
    ages: Counter[Any] = Counter()
    for n in range(count):
        kind = KINDS[n % 3]
        origins[
            {"rr": ("refunds", "orders"), "server": ("payouts", "invoices")}.get(
                kind, ("payouts", "payouts")
            )[n % 2]
        ] += 1
        reasons[{"rr": "max_attempts", "server": "delivery_limit", "waited": "rejected"}[kind]] += 1
        retries[{"rr": 3, "server": None, "waited": 2}[kind]] += 1
        minutes = n % 90
        ages["< 1 min" if minutes == 0 else "< 1 h" if minutes < 60 else "< 1 day"] += 1
    return {"origins": origins, "reasons": reasons, "retries": retries, "ages": ages}


async def test_summary_counts_the_whole_queue_and_takes_nothing(backend: Backend) -> None:
    now = datetime.now(UTC)
    ids = await fill(backend, now)

    result = await rr(backend, "dlq", "inspect", "dead", "--summary", "-o", "json")

    assert result.exit_code == 0, result.output
    document = json_of(result)
    want = expected_counts(COUNT)
    assert document["queue"] == "dead"
    assert (document["in_queue"], document["read"], document["complete"]) == (COUNT, COUNT, True)
    assert {o["queue"]: o["count"] for o in document["origins"]} == want["origins"]
    assert {r["reason"]: r["count"] for r in document["reasons"]} == want["reasons"]
    assert [(r["retry_count"], r["count"]) for r in document["retry_counts"]] == [
        (2, want["retries"][2]),
        (3, want["retries"][3]),
        (None, want["retries"][None]),
    ]
    assert [(a["age"], a["count"]) for a in document["ages"]] == [
        ("< 1 min", want["ages"]["< 1 min"]),
        ("< 1 h", want["ages"]["< 1 h"]),
        ("< 1 day", want["ages"]["< 1 day"]),
    ]
    counts = [o["count"] for o in document["origins"]]
    assert counts == sorted(counts, reverse=True)
    # the oldest: n = 89 (89 minutes; every n % 90 == 89 is a "waited" letter, the first wins);
    # the newest: rr's copies dead-lettered at ``now`` (n % 270 == 0, whose rr-failed-at keeps
    # the milliseconds): the last of them in the queue, n = 1170
    assert document["oldest"]["message_id"] == "s-waited-89"
    assert document["oldest"]["position"] == 90
    oldest = datetime.fromisoformat(document["oldest"]["failed_at"])
    assert oldest == (now - timedelta(minutes=89)).replace(microsecond=0)
    assert document["newest"]["message_id"] == "s-rr-1170"
    assert document["newest"]["position"] == 1171
    assert document["undecodable"] == 0
    assert document["body_bytes"] == sum(
        len(synthesized(KINDS[n % 3], n, now)[0]) for n in range(COUNT)
    )
    assert [d.properties.message_id for d in await read_all(backend, "dead")] == ids

    table = await rr(backend, "dlq", "inspect", "dead", "--summary", "--limit", "30")
    assert table.exit_code == 0, table.output
    lines = table.stdout.splitlines()
    assert lines[0] == f"30 dead letters read of {COUNT:,} in 'dead'"
    rows = [re.split(r"\s*[│┃]\s*", line.strip()) for line in lines]
    assert ["origin queue", "count", "share"] in rows
    assert ["payouts", "15", "50.0%"] in rows
    assert ["refunds", "5", "16.7%"] in rows
    assert ["max_attempts", "10", "33.3%"] in rows
    assert ["(no header)", "10", "33.3%"] in rows
    assert ["< 1 min", "1", "3.3%"] in rows
    assert ["< 1 h", "29", "96.7%"] in rows
    oldest_stamp = utc_stamp((now - timedelta(minutes=29)).replace(microsecond=0))
    assert f"oldest: {oldest_stamp} (#30, s-waited-29)" in lines
    assert f"newest: {utc_stamp(now)} (#1, s-rr-0)" in lines
    assert await depth(backend, "dead") == COUNT


async def test_jsonl_is_the_json_messages_one_per_line(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    # --output json keeps 7 documents in memory: the other 33 go through the temporary file
    monkeypatch.setattr(dlq_inspect, "DOCUMENTS_IN_MEMORY", 7)
    now = datetime.now(UTC)
    ids = await fill(backend, now, count=40)

    whole = json_of(await rr(backend, "dlq", "inspect", "dead", "-o", "json"))
    streamed = await rr(backend, "dlq", "inspect", "dead", "-o", "jsonl", "--limit", "25")

    assert streamed.exit_code == 0, streamed.output
    lines = streamed.stdout.splitlines()
    assert len(lines) == 25
    # the same documents; only "redelivered" differs (the second read sees returned messages)
    assert [json.loads(line) | {"redelivered": None} for line in lines] == [
        message | {"redelivered": None} for message in whole["messages"][:25]
    ]
    assert (whole["in_queue"], whole["count"], len(whole["messages"])) == (40, 40, 40)
    assert [m["position"] for m in whole["messages"]] == list(range(1, 41))
    assert [m["message_id"] for m in whole["messages"]] == ids
    assert [m["reason"] for m in whole["messages"][:3]] == [
        "max_attempts",
        "delivery_limit",
        "rejected",
    ]
    assert [d.properties.message_id for d in await read_all(backend, "dead")] == ids


async def test_lines_show_one_dead_letter_per_line(backend: Backend) -> None:
    now = datetime.now(UTC)
    await fill(backend, now, count=40)
    await declare(backend, "odd.dead")
    await publish_all(
        backend,
        "odd.dead",
        [
            (bytes(range(200)), synthesized("server", 61, now)[1]),
            (b"a\n  b\tc " * 20, Properties()),
        ],
    )

    result = await rr(backend, "dlq", "inspect", "dead", "--format", "lines", "--limit", "3")

    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert len(lines) == 3
    assert re.fullmatch(
        r'1  s-rr-0  refunds  max_attempts  retries=3  age=\d+s  \{"kind": "rr", "n": 0, '
        r'"origin": "refunds"\}',
        lines[0],
    ), lines[0]
    assert lines[1].startswith("2  s-server-1  invoices  delivery_limit  retries=-  age=1m  {")
    assert lines[2].startswith("3  s-waited-2  payouts  rejected  retries=2  age=2m  {")
    assert "3 dead letter(s) shown of 40 in 'dead'" in result.stderr

    odd = await rr(backend, "dlq", "inspect", "odd.dead", "--format", "lines")
    assert odd.exit_code == 0, odd.output
    binary, text = odd.stdout.splitlines()
    assert binary.startswith("1  s-server-61  invoices  delivery_limit  retries=-  age=1h  base64:")
    assert binary.endswith("…")
    assert len(binary.split("base64:")[1]) == 80 + 1
    assert (
        text == "2  (no id)  (unknown)  (unknown)  retries=-  age=-  " + ("a b c " * 14)[:80] + "…"
    )
    bare = await rr(backend, "dlq", "inspect", "odd.dead", "--format", "lines", "--no-body")
    assert bare.stdout.splitlines()[1] == "2  (no id)  (unknown)  (unknown)  retries=-  age=-"


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--summary", "--format", "lines"], "two different views"),
        (["--summary", "-o", "jsonl"], "use --output json"),
        (["--format", "lines", "-o", "json"], "drop it with --output json"),
        (["--format", "lines", "-o", "jsonl"], "drop it with --output jsonl"),
    ],
)
async def test_views_that_do_not_go_together_are_usage_errors(
    backend: Backend, flags: list[str], message: str
) -> None:
    await fill(backend, datetime.now(UTC), count=2)
    result = await rr(backend, "dlq", "inspect", "dead", *flags)
    assert result.exit_code == 2, result.output
    assert message in result.stderr
    assert result.stderr.startswith("rr: error: ")
    assert await depth(backend, "dead") == 2


def live_deliveries() -> int:
    gc.collect()
    return sum(1 for thing in gc.get_objects() if type(thing) is Delivery)


async def test_the_summary_keeps_no_message_it_read(backend: Backend) -> None:
    """Constant memory: when the last of 3,000 dead letters is counted, the earlier ones are
    gone from this process; the same read keeping its deliveries (what the table does) holds
    every one, which is what this test would see if the summary kept a list."""
    count = 3_000
    await fill(backend, datetime.now(UTC), count=count)
    reading = InspectReading(retry_header=H, wait_queues=WaitQueues(), now=datetime.now(UTC))
    tally = Summary(now=reading.now)
    alive_at_end: list[int] = []

    def take(letter: Letter) -> None:
        tally.add(letter)
        if letter.position == count:
            alive_at_end.append(live_deliveries())

    kept: list[Letter] = []

    def keep(letter: Letter) -> None:
        kept.append(letter)
        if letter.position == count:
            alive_at_end.append(live_deliveries())

    connection = await backend.connect()
    try:
        scan = await shell.scan_messages(connection, "dead", reading.taker(take))
        assert (scan.in_queue, scan.read, scan.complete) == (count, count, True)
        assert tally.count == count
        await shell.scan_messages(connection, "dead", reading.taker(keep))
    finally:
        await connection.close()
    summary_alive, kept_alive = alive_at_end
    assert kept_alive >= count
    assert summary_alive < 100, summary_alive
    assert await depth(backend, "dead") == count


async def test_the_json_output_keeps_documents_not_deliveries(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--output json`` keeps each letter's document (in bounded memory: dlq/spill.py), not the
    letter: when the last of 3,000 is read, the earlier deliveries are gone; every document
    comes back, in order."""
    monkeypatch.setattr(dlq_inspect, "DOCUMENTS_IN_MEMORY", 100)
    count = 3_000
    ids = await fill(backend, datetime.now(UTC), count=count)
    reading = InspectReading(retry_header=H, wait_queues=WaitQueues(), now=datetime.now(UTC))
    kept = Kept()
    keep = kept.taker(
        output=InspectOutput.JSON,
        view=InspectFormat.TABLE,
        with_body=True,
        now=reading.now,
    )
    alive_at_end: list[int] = []

    def take(letter: Letter) -> None:
        keep(letter)
        if letter.position == count:
            alive_at_end.append(live_deliveries())

    connection = await backend.connect()
    try:
        scan = await shell.scan_messages(connection, "dead", reading.taker(take))
    finally:
        await connection.close()
    assert (scan.read, scan.complete) == (count, True)
    assert alive_at_end[0] < 100, alive_at_end
    assert kept.letters == []
    assert [d["message_id"] for d in kept.documents] == ids
    assert [d["position"] for d in kept.documents] == list(range(1, count + 1))
    assert await depth(backend, "dead") == count
