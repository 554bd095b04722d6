"""The console's record (docs/reference/console.md, "The record"): one stderr line and one audit-log
JSON line per action, with its report and every letter's id; the runs page; a run stopped with the
console reports how far it went; a letter retried and dead-lettered again is marked. Checked
on the broker by message id, on RabbitMQ and on the emulator."""

from __future__ import annotations

import asyncio
import dataclasses
import io
import json
from pathlib import Path

from rabbitctl_retry.console.audit import AuditLog
from rabbitctl_retry.console.security import csrf_of
from tests.backends import Backend
from tests.console.conftest import console_on
from tests.console.test_console_http import (
    PER_KIND,
    VALUE_ERROR,
    group_rows,
    post,
    session,
    text_of,
    wait_done,
)
from tests.dlq.support import H, declare, run_to_dead
from tests.observe import peek as read_all


def audit_lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


async def fail_all_back(backend: Backend, queue: str, dead: str) -> list[str]:
    """Every message in ``queue`` fails again: rr run would dead-letter it to ``dead`` with its
    headers, ``rr-replayed-count`` included. Their ids."""
    connection = await backend.connect()
    ids: list[str] = []
    try:
        channel = await connection.channel(confirms=True)
        while (delivery := await channel.get(queue)) is not None:
            headers = {**(delivery.properties.headers or {}), "rr-origin-queue": queue, H: "3"}
            properties = dataclasses.replace(delivery.properties, headers=headers)
            await channel.publish(delivery.body, routing_key=dead, properties=properties)
            await channel.ack(delivery.delivery_tag)
            ids.append(delivery.properties.message_id or "")
    finally:
        await connection.close()
    return ids


async def test_every_action_is_recorded_and_listed(backend: Backend, tmp_path: Path) -> None:
    made = await run_to_dead(backend, PER_KIND)
    await declare(backend, "parked")
    odd = sorted(m for n, m in enumerate(made.refunds) if n % 2)
    stderr = io.StringIO()
    log = tmp_path / "audit.jsonl"
    audit = AuditLog("alice", stderr, log)
    csrf = {"csrf": ""}
    async with console_on(backend, tmp_path, audit=audit) as console, session(console) as client:
        csrf["csrf"] = csrf_of(console.token)
        status, runs = await text_of(client, f"{console.base}/jobs")
        assert status == 200
        assert "Nothing was retried, moved, discarded or edited yet." in runs
        _, page = await text_of(client, f"{console.base}/queues/dead/groups")
        rows = group_rows(page)
        retried = next(g for g, (kind, _) in rows.items() if kind == VALUE_ERROR)
        moved = next(g for g, (kind, _) in rows.items() if kind == "(delivery_limit)")
        for group, form in ((retried, {"action": "retry"}), (moved, {"action": "move"})):
            form = {**form, "to": "parked"} if form["action"] == "move" else form
            _, _, job_url = await post(
                client, f"{console.base}/queues/dead/groups/{group}/run", {**form, **csrf}
            )
            await wait_done(client, job_url)
        _, runs = await text_of(client, f"{console.base}/jobs")
        assert runs.count("<tr data-run=") == 2
        assert runs.index(f"Move group {moved}") < runs.index(f"Retry group {retried}")
        assert runs.count('data-state="done"') == 2
    audit.close()
    retry, move = audit_lines(log)
    assert (retry["who"], retry["action"], retry["queue"], retry["letters"], retry["to"]) == (
        "alice",
        "retry",
        "dead",
        f"group {retried}",
        None,
    )
    assert retry["outcome"] == "done"
    report = retry["report"]
    assert isinstance(report, dict)
    assert report["replayed"] == len(odd)
    sent = [r for r in report["results"] if r["outcome"] == "replayed"]
    assert sorted(r["message_id"] for r in sent) == odd
    assert {r["to"] for r in sent} == {"refunds"}
    assert (move["action"], move["to"], move["outcome"]) == ("move", "parked", "done")
    assert isinstance(move["report"], dict)
    moved_ids = [r["message_id"] for r in move["report"]["results"] if r["outcome"] == "moved"]
    assert sorted(moved_ids) == sorted(made.payouts)
    said = stderr.getvalue().splitlines()
    assert said[0].startswith(f"rr console: alice: retry group {retried} of dead: replayed ")
    assert said[1].startswith(f"rr console: alice: move group {moved} of dead to parked: moved ")
    assert len(said) == 2
    # the broker agrees, by id
    refunds = sorted(d.properties.message_id or "" for d in await read_all(backend, "refunds"))
    assert refunds == odd
    parked = sorted(d.properties.message_id or "" for d in await read_all(backend, "parked"))
    assert parked == sorted(made.payouts)


async def test_a_retried_letter_that_comes_back_is_marked(backend: Backend, tmp_path: Path) -> None:
    made = await run_to_dead(backend, PER_KIND)
    odd = sorted(m for n, m in enumerate(made.refunds) if n % 2)
    async with console_on(backend, tmp_path) as console, session(console) as client:
        csrf = {"csrf": csrf_of(console.token)}
        _, page = await text_of(client, f"{console.base}/queues/dead/groups")
        retried = next(g for g, (kind, _) in group_rows(page).items() if kind == VALUE_ERROR)
        _, _, job_url = await post(
            client, f"{console.base}/queues/dead/groups/{retried}/run", {"action": "retry", **csrf}
        )
        await wait_done(client, job_url)
        assert sorted(await fail_all_back(backend, "refunds", "dead")) == odd
        _, shown = await text_of(client, f"{console.base}/queues/dead/messages/{odd[0]}")
        assert 'class="came-back" data-replayed="1"' in shown
        assert "retried 1 time before, last at " in shown
        never = made.payouts[0]  # dead-lettered once, never retried
        _, shown = await text_of(client, f"{console.base}/queues/dead/messages/{never}")
        assert "came-back" not in shown


async def test_a_run_stopped_with_the_console_records_how_far_it_went(
    backend: Backend, tmp_path: Path
) -> None:
    made = await run_to_dead(backend, PER_KIND)
    before = sorted(d.properties.message_id or "" for d in await read_all(backend, "dead"))
    stderr = io.StringIO()
    log = tmp_path / "audit.jsonl"
    audit = AuditLog("console", stderr, log)
    async with console_on(backend, tmp_path, audit=audit) as console, session(console) as client:
        csrf = {"csrf": csrf_of(console.token)}
        _, page = await text_of(client, f"{console.base}/queues/dead/groups")
        group = next(g for g, (kind, _) in group_rows(page).items() if kind == "(rejected)")
        # one letter a second: the console stops after the first copy is confirmed
        _, _, job_url = await post(
            client,
            f"{console.base}/queues/dead/groups/{group}/run",
            {"action": "move", "to": "refunds", "rate": "1", **csrf},
        )
        for _ in range(2000):
            if await read_all(backend, "refunds"):  # a copy arrived: stop the console now
                break
            await asyncio.sleep(0.05)
        else:
            raise AssertionError("the run never moved a letter")
        _, running = await text_of(client, job_url)
        assert 'data-state="running"' in running
    audit.close()
    (record,) = audit_lines(log)
    assert record["outcome"] == "stopped"
    report = record["report"]
    assert isinstance(report, dict)
    sent = sorted(r["message_id"] for r in report["results"] if r["outcome"] == "moved")
    assert 1 <= len(sent) < PER_KIND, report
    assert "(stopped with the console)" in stderr.getvalue()
    # nothing lost, nothing doubled: each id is in dead or in refunds, once
    dead = [d.properties.message_id or "" for d in await read_all(backend, "dead")]
    refunds = [d.properties.message_id or "" for d in await read_all(backend, "refunds")]
    assert sorted(refunds) == sent
    assert sorted(dead + refunds) == before
    assert made.total == len(before)
