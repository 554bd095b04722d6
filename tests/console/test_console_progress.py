"""A run's progress counts the copies the broker confirmed, not the letters read
(docs/reference/console.md, "What each page does"): the engine's ``confirmed`` hook
(ops/transfer.py) is told once per letter done with, and the run's page counts those up to its
plan's number, on RabbitMQ and on the emulator."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from functools import partial
from pathlib import Path

from rabbitctl_retry.console.reads import transfer
from rabbitctl_retry.console.security import csrf_of
from rabbitctl_retry.dlq.origin import WaitQueues
from rabbitctl_retry.dlq.replay import ReplayPlan, choose
from rabbitctl_retry.dlq.report import TransferKind
from rabbitctl_retry.ops.dlq import NO_PROGRESS
from rabbitctl_retry.ops.transfer import TransferOptions, new_run_id
from tests.backends import Backend
from tests.console.conftest import console_on
from tests.console.test_console_http import group_rows, post, session, text_of
from tests.dlq.support import TOPOLOGY, H, declare, publish_all, synthesized
from tests.observe import peek as read_all


async def test_the_hook_counts_each_copy_confirmed(backend: Backend) -> None:
    await declare(backend, "dead")
    await declare(backend, "refunds")
    now = datetime.now(UTC)
    await publish_all(backend, "dead", [synthesized("rr", 2 * n, now) for n in range(6)])
    told: list[int] = []
    plan = ReplayPlan(
        source="dead", run_id=new_run_id(), retry_header=H, wait_queues=WaitQueues.of(TOPOLOGY)
    )
    options = TransferOptions(confirmed=told.append)
    report = await transfer(
        backend.connect, "dead", partial(choose, plan), TransferKind.REPLAY, options, NO_PROGRESS
    )
    assert report.sent == 6
    assert told == [1] * 6
    assert len(await read_all(backend, "refunds")) == 6


async def test_the_run_page_counts_copies_confirmed(backend: Backend, tmp_path: Path) -> None:
    await declare(backend, "dead")
    await declare(backend, "refunds")
    now = datetime.now(UTC)
    await publish_all(backend, "dead", [synthesized("rr", 2 * n, now) for n in range(8)])
    async with console_on(backend, tmp_path) as console, session(console) as client:
        _, page = await text_of(client, f"{console.base}/queues/dead/groups")
        ((group, _),) = group_rows(page).items()
        base = f"{console.base}/queues/dead/groups/{group}"
        form = {"csrf": csrf_of(console.token), "action": "retry", "rate": "20"}
        _, plan, _ = await post(client, f"{base}/plan", form)
        assert 'name="expect" value="8"' in plan
        _, _, job_url = await post(client, f"{base}/run", {**form, "expect": "8"})
        seen: list[tuple[int, int]] = []
        for _ in range(4000):
            _, job = await text_of(client, job_url)
            found = re.search(r'data-confirmed="(\d+)">[\d,]+ of ([\d,]+) copies confirmed', job)
            assert found is not None, job
            read = re.search(r"\(([\d,]+) of [\d,]+ letters? read\)", job)
            assert read is not None
            seen.append((int(found[1]), int(read[1])))
            assert found[2] == "8"
            if 'data-state="running"' not in job:
                break
        assert 'data-state="done"' in job
        assert seen[-1][0] == 8
        assert all(confirmed <= read for confirmed, read in seen)  # never ahead of the reads
        assert [c for c, _ in seen] == sorted(c for c, _ in seen)
    assert len(await read_all(backend, "refunds")) == 8
