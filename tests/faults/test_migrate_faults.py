"""``rr migrate`` killed at every step, on each server (docs/how-to/migrate-to-quorum.md, "Migrating
a queue").

A classic queue holding 10,000 messages, with 1,000 more waiting in its two delay tiers and a
publisher sending through its exchange binding at a steady rate, becomes a quorum queue. The
command is started again and again: the first run is killed (SIGKILL) as it begins the first
step, the next as it begins the second step, and so on (the moves in the middle of their
work), one run loses its connection in the middle of a move (the fault proxy cuts it), and a
last run finishes. Then every id is counted in the rebuilt queue, once the waiting copies
waited again: none lost; duplicates only where the documented windows allow (the copies in
flight of a killed move, one prefetch window each; messages published while a binding moved).
Every run passes ``--force``: no management URL is given, and nothing publishes by name.
"""

from __future__ import annotations

import asyncio
import json
import re
import signal
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from rabbitctl_retry.ops.dlq import REPLAY_WINDOW
from rabbitctl_retry.topology.migration import Step, holding_name
from rabbitctl_retry.transport.base import Properties
from tests.faults.conftest import FaultVhost
from tests.faults.harness import Collector, direct
from tests.faults.process import rr_process
from tests.faults.proxy import FaultProxy
from tests.ledger import message_ids, publish_ids, take_ids

pytestmark = [pytest.mark.faults, pytest.mark.timeout(900)]


BEFORE = """
[exchanges.events]
type = "direct"

[queues.jobs]
max_attempts = 5
dead_letter = "jobs.dead"
delay_tiers = ["3s", "6s"]
bindings = [{ exchange = "events", routing_key = "job" }]
"""

AFTER = BEFORE.replace("max_attempts = 5", 'max_attempts = 5\ntype = "quorum"')

READY = 10_000
WAITING = 1_000
RATE_PER_S = 50
WAITS = ("jobs.retry.3s", "jobs.retry.6s")


@dataclass
class Publisher:
    """Publishes ``steady-N`` through the exchange at a steady rate, with confirms; keeps the
    confirmed ids and when each was confirmed."""

    url: str
    confirmed: list[tuple[str, float]] = field(default_factory=list)
    stop: asyncio.Event = field(default_factory=asyncio.Event)

    async def run(self) -> None:
        connection = await direct(self.url)()
        try:
            channel = await connection.channel(confirms=True)
            number = 0
            while not self.stop.is_set():
                message_id = f"steady-{number}"
                number += 1
                await channel.publish(
                    message_id.encode(),
                    exchange="events",
                    routing_key="job",
                    properties=Properties(message_id=message_id, delivery_mode=2),
                    mandatory=True,
                )
                self.confirmed.append((message_id, time.monotonic()))
                await asyncio.sleep(1 / RATE_PER_S)
        finally:
            await connection.close()


async def depth(collector: Collector, queue: str) -> int:
    return await collector.queued(queue) or 0


async def test_migration_killed_at_every_step_loses_nothing(
    any_fault_vhost: FaultVhost, any_proxy: FaultProxy, tmp_path: Path
) -> None:
    url = any_fault_vhost.url
    (tmp_path / "before.toml").write_text(BEFORE)
    (tmp_path / "after.toml").write_text(AFTER)
    declared = rr_process(
        tmp_path, "declare", "before.toml", "--url", url, log=tmp_path / "declare.log"
    )
    assert await asyncio.to_thread(declared.wait, 120) == 0, (tmp_path / "declare.log").read_text()
    ready, waiting = message_ids("ready", READY), message_ids("waiting", WAITING)
    connect = direct(url)
    await publish_ids(connect, "jobs", ready)
    await publish_ids(connect, WAITS[0], waiting[: WAITING // 2])
    await publish_ids(connect, WAITS[1], waiting[WAITING // 2 :])
    publisher = Publisher(url)
    publishing = asyncio.ensure_future(publisher.run())
    collector = Collector(url)
    moving_windows: list[tuple[float, float]] = []
    """When a run was between the start of redirect/restore and the next step (seen here)."""
    interrupted = 0
    runs = 0

    async def a_run(*, stop_at: Step | None, cut: bool = False) -> tuple[int, str]:
        """One run of the command, stopped as it begins ``stop_at`` (a move: in the middle
        of its work) if it gets there; each step line is timed as it appears."""
        nonlocal interrupted, runs
        runs += 1
        log = tmp_path / f"migrate-{runs}.log"
        target = any_fault_vhost.proxy_url if cut else url
        process = rr_process(
            tmp_path,
            "migrate",
            "after.toml",
            "--yes",
            "--force",
            "-o",
            "json",
            "--url",
            target,
            log=log,
        )
        try:
            began: dict[Step, float] = {}
            while process.poll() is None and stop_at not in began:
                text = log.read_text(errors="replace")
                for step in Step:
                    if step not in began and f"rr: migrate jobs: {step.value}\n" in text:
                        began[step] = time.monotonic()
                await asyncio.sleep(0.01)
            if stop_at in began and process.poll() is None:
                if stop_at is Step.DRAIN:
                    while await depth(collector, holding_name("jobs")) < READY // 3:
                        await asyncio.sleep(0.02)
                if stop_at is Step.REFILL:
                    while await depth(collector, "jobs") < READY // 3:
                        await asyncio.sleep(0.02)
                if cut:
                    any_proxy.cut()
                else:
                    process.send_signal(signal.SIGKILL)
                interrupted += 1
            code = await asyncio.to_thread(process.wait, 300)
            text = log.read_text(errors="replace")
            for step in Step:
                if step not in began and f"rr: migrate jobs: {step.value}\n" in text:
                    began[step] = time.monotonic()
            for moving in (Step.REDIRECT, Step.RESTORE):
                if moving in began:
                    later = [at for step, at in began.items() if at > began[moving]]
                    moving_windows.append((began[moving], min(later, default=time.monotonic())))
        finally:
            if process.poll() is None:
                process.kill()
                process.wait(10)
        return code, text

    try:
        for stop_at in Step:
            if stop_at is Step.DRAIN:  # once the connection is cut in the middle of a move
                code, output = await a_run(stop_at=stop_at, cut=True)
                assert code == 1, output
                # which of the two words it uses depends on whether the engine's read or its
                # publish saw the cut first ("failed" / "closed during the move")
                assert re.search(r"the connection to the broker (failed|closed during)", output), (
                    output[-3000:]
                )
            code, output = await a_run(stop_at=stop_at)
            assert code == -signal.SIGKILL, output
        code, output = await a_run(stop_at=None)
        assert code == 0, output
        report = json.loads(output[output.index("{") : output.rindex("}") + 1])
        assert report["conflicts_left"] == []
    finally:
        publisher.stop.set()
        await publishing
    # the last run planned the whole file again: every queue as the file says (a quorum
    # queue), and the holding queues are gone
    for queue in ("jobs", *WAITS):
        assert not await collector.exists(holding_name(queue))
    # the copies that were waiting wait again, then land in the queue
    deadline = time.monotonic() + 120
    while await collector.queued(*WAITS):
        assert time.monotonic() < deadline, "the wait queues never emptied"
        await asyncio.sleep(0.2)
    found = await take_ids(connect, "jobs")
    assert await collector.queued("jobs.dead") == 0
    steady = [message_id for message_id, _ in publisher.confirmed]
    expected = set(ready) | set(waiting) | set(steady)
    lost = expected - set(found)
    assert not lost, f"{len(lost)} lost, e.g. {sorted(lost)[:5]}"
    assert set(found) <= expected
    duplicated = Counter({m: n - 1 for m, n in found.items() if n > 1})
    in_windows = {
        message_id
        for message_id, at in publisher.confirmed
        if any(start - 1 <= at <= end + 1 for start, end in moving_windows)
    }
    from_moves = sum(n for m, n in duplicated.items() if m not in in_windows)
    assert from_moves <= interrupted * REPLAY_WINDOW, (interrupted, duplicated.most_common(5))
    print(
        f"migrate under kills: {len(expected):,} ids, {interrupted} interrupted runs, "
        f"{sum(duplicated.values())} duplicates ({from_moves} from killed moves), "
        f"{len(steady)} published during the runs"
    )
