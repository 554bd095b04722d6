"""A group run of the console while its pages are viewed (docs/reference/console.md, "While a run
moves a queue's letters"): a message page of the queue says its letters are being moved
(409), never 404 for a letter that is there, and the views do not cut the run short: it moves
exactly what its plan said, every message id once. On RabbitMQ (a fresh vhost of each
server) and on the emulator."""

from __future__ import annotations

import asyncio
import dataclasses
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import pytest

from rabbitctl_retry.console.security import csrf_of
from tests.backends import Backend, EmulatorBackend
from tests.console.conftest import console_on
from tests.console.test_console_http import group_rows, post, session, text_of
from tests.dlq.support import declare, publish_all, synthesized
from tests.observe import peek as read_all

LETTERS = 1000
RATE_PER_S = "250"
NOW = datetime.now(UTC).replace(microsecond=0)


async def _letters(backend: Backend) -> list[str]:
    """``dead`` holding :data:`LETTERS` of rr's dead letters of one cause, from refunds."""
    await declare(backend, "dead", "refunds")
    letters = []
    for n in range(LETTERS):
        body, properties = synthesized("rr", 2 * n, NOW)
        headers = {**(properties.headers or {}), "rr-error-message": "card declined"}
        letters.append((body, dataclasses.replace(properties, headers=headers)))
    await publish_all(backend, "dead", letters)
    return [str(properties.message_id) for _, properties in letters]


async def test_views_during_a_run_say_being_moved_and_the_run_moves_every_letter(
    backend: Backend, tmp_path: Path
) -> None:
    if isinstance(backend, EmulatorBackend):
        pytest.skip("the emulator's run has no time of its own to view pages in")
    ids = await _letters(backend)
    async with console_on(backend, tmp_path) as console, session(console) as client:
        status, page = await text_of(client, f"{console.base}/queues/dead/groups")
        assert status == 200, page
        (group, (_, count)) = max(group_rows(page).items(), key=lambda row: row[1][1])
        assert count == LETTERS
        csrf = {"csrf": csrf_of(console.token)}
        run = f"{console.base}/queues/dead/groups/{group}"
        _, plan, _ = await post(client, f"{run}/plan", {"action": "retry", **csrf})
        assert f"{LETTERS:,} of {LETTERS:,} dead letters" in plan
        status, job_page, job_url = await post(
            client, f"{run}/run", {"action": "retry", "rate": RATE_PER_S, **csrf}
        )
        assert status == 200, job_page
        seen: Counter[int] = Counter()
        for n in range(10_000):
            letter = ids[(n * 37) % LETTERS]
            status, view = await text_of(client, f"{console.base}/queues/dead/messages/{letter}")
            seen[status] += 1
            _, job_page = await text_of(client, job_url)
            running = 'data-state="running"' in job_page
            # not there: only once the run moved it (it ended meanwhile)
            assert status in (200, 409) or (status == 404 and not running), view
            if status == 409:
                assert "being moved" in view
            if not running:
                break
            await asyncio.sleep(0.02)  # a person's pace: a view now and then
        assert seen[409] >= 1, seen  # views happened while the run went on
        assert 'data-state="done"' in job_page, job_page
        assert f"replayed {LETTERS:,}" in job_page or f"{LETTERS:,} replayed" in job_page, job_page
    copies = Counter(d.properties.message_id for d in await read_all(backend, "refunds"))
    assert copies == Counter(ids)  # every id once
    assert await read_all(backend, "dead") == []
