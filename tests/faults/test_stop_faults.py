"""``rr run`` with ``delay = "memory"`` stops with thousands of delayed copies in its memory:
none may be lost (docs/explanation/guarantees.md, "What is guaranteed").

Each test runs an ``rr run`` process on the private node of each server (3.10 and 4.0), with
3,000 messages on a classic and 3,000 on a quorum queue whose handler answers
``retry_after`` at attempt 1 and ack after, and stops it with SIGTERM while the 6,000 copies
wait in rr: on a healthy broker, during a memory alarm, with the broker stopped, and while
copies fall due. Then it counts every id: a copy in its queue (with the retry header of
attempt 1), a copy in a file the stop saved (``rr-pending-*.jsonl``), or a handler call at
attempt 2. Lost: an id none of these has. Duplicated: an id more than one has.

Each of the first three lost messages before rr kept its copies (5,988 of 6,000 with the
broker stopped; 635 at the default timeout and 4,532 with ``--shutdown-timeout 5`` during an
alarm); the fourth published 1,083 copies twice.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from rabbitctl_retry.dlq.jsonl import parse_record
from rabbitctl_retry.runtime.delays import PUBLISH_WINDOW
from tests.faults.conftest import FaultVhost
from tests.faults.harness import REPORT, Collector, FaultResult, direct
from tests.faults.node import PrivateNode
from tests.faults.process import REPO, RrRun, attempts_seen, rr_run, stop, until
from tests.ledger import Verdict, message_ids, publish_ids

pytestmark = [pytest.mark.faults, pytest.mark.timeout(420)]

QUEUES = ("jobs", "jobs.q")
PER_QUEUE = 3000
H = "x-ruststream-retry-count"

TOPOLOGY = """
[queues.jobs]
max_attempts = 3
dead_letter = "jobs.dead"
delay = "memory"

[queues."jobs.q"]
type = "quorum"
max_attempts = 3
dead_letter = "jobs.q.dead"
delay = "memory"
"""

HANDLERS = """
import os
from rabbitctl_retry import Message, Outcome, subscriber

CALLS = os.environ["RR_FAULT_CALLS"]
DELAY_S = float(os.environ["RR_FAULT_DELAY_S"])
SPREAD_S = float(os.environ["RR_FAULT_SPREAD_S"])


def outcome(msg: Message) -> Outcome:
    if msg.attempt == 1:  # the copy waits in rr: DELAY_S, plus up to SPREAD_S by id
        number = int((msg.message_id or "0").rsplit("-", 1)[-1])
        return Outcome.retry_after(DELAY_S + SPREAD_S * (number % 100) / 100)
    return Outcome.ack()


def handle(msg: Message) -> Outcome:
    result = outcome(msg)
    with open(CALLS, "a") as calls:
        calls.write(f"{msg.message_id} {msg.attempt} {type(result).__name__}\\n")
    return result


@subscriber("jobs")
async def jobs(msg: Message) -> Outcome:
    return handle(msg)


@subscriber("jobs.q")
async def jobs_q(msg: Message) -> Outcome:
    return handle(msg)
"""


@dataclass
class Copies:
    """Where every id's copy ended, and the rr run that held them."""

    run: RrRun
    tmp_path: Path
    vhost: FaultVhost
    ids: dict[str, list[str]]
    """Queue -> its message ids."""
    queued: Counter[str] = field(default_factory=Counter)
    """Copies in their queue (retry header 1), by id."""
    saved: Counter[str] = field(default_factory=Counter)
    """Copies in the files the stop saved, by id."""
    wrong: list[str] = field(default_factory=list)
    """Messages found with another retry header, or in the other queue."""

    @property
    def calls(self) -> Path:
        return self.tmp_path / "calls.txt"

    def all_ids(self) -> list[str]:
        return [i for queue in QUEUES for i in self.ids[queue]]

    def handled_again(self) -> Counter[str]:
        return attempts_seen(self.calls, 2)

    async def take_queued(self) -> None:
        """Empty both queues into :attr:`queued` (copies of attempt 1 only)."""
        connection = await direct(self.vhost.url)()
        try:
            channel = await connection.channel()
            for queue in QUEUES:
                while (delivery := await channel.get(queue, no_ack=True)) is not None:
                    message_id = delivery.properties.message_id or ""
                    header = (delivery.properties.headers or {}).get(H)
                    if header != "1" or message_id not in self.ids[queue]:
                        self.wrong.append(f"{queue}: {message_id} {H}={header!r}")
                    self.queued[message_id] += 1
        finally:
            await connection.close()

    def read_saved(self) -> list[Path]:
        """The files the stop saved; count their copies into :attr:`saved`."""
        files = sorted(self.tmp_path.glob("rr-pending-*.jsonl"))
        for path in files:
            for number, line in enumerate(path.read_text().splitlines(), 1):
                record = parse_record(line, f"{path.name}:{number}")
                message_id = str(record.properties.get("message_id"))
                if (record.headers or {}).get(H) != "1":
                    self.wrong.append(f"{path.name}: {message_id}")
                self.saved[message_id] += 1
        return files

    def verdict(self) -> Verdict:
        """Lost: an id with no copy anywhere and no second handler call; duplicated: more
        than one of those."""
        again = self.handled_again()
        lost, twice = [], []
        for message_id in self.all_ids():
            ends = self.queued[message_id] + self.saved[message_id] + again[message_id]
            if ends == 0:
                lost.append(message_id)
            elif ends > 1:
                twice.append(message_id)
        return Verdict(lost, {}, twice, [], self.wrong)

    def report(self, fault: str, server: str) -> Verdict:
        verdict = self.verdict()
        result = FaultResult(
            fault=f"{fault} [{server}]",
            queue_type="both",
            messages=len(self.all_ids()),
            verdict=verdict,
            recovery_s=None,
            connections=0,
            consumer_restarts=0,
        )
        REPORT.append(result)
        print(
            f"\n{result.row()}  (in queues {sum(self.queued.values())}, saved "
            f"{sum(self.saved.values())}, handled again {sum(self.handled_again().values())})"
        )
        return verdict


@asynccontextmanager
async def copies_pending(
    vhost: FaultVhost,
    tmp_path: Path,
    *,
    shutdown_timeout_s: float | None = None,
    delay_s: float = 600.0,
    spread_s: float = 0.0,
) -> AsyncIterator[Copies]:
    """An ``rr run`` holding a copy of each of 6,000 messages (or, with a short ``delay_s``,
    having published some already): the block stops it."""
    ids = {queue: message_ids(f"stop-{queue}", PER_QUEUE) for queue in QUEUES}
    args = [] if shutdown_timeout_s is None else ["--shutdown-timeout", str(shutdown_timeout_s)]
    env = {"RR_FAULT_DELAY_S": str(delay_s), "RR_FAULT_SPREAD_S": str(spread_s)}
    with rr_run(
        tmp_path, vhost.url, topology=TOPOLOGY, handlers=HANDLERS, env=env, args=args
    ) as run:
        collector = Collector(vhost.url)
        await until_async(lambda: collector.exists("jobs.q"), "rr run to declare its queues", run)
        for queue in QUEUES:
            await publish_ids(direct(vhost.url), queue, ids[queue])
        copies = Copies(run, tmp_path, vhost, ids)
        await until(
            lambda: len(attempts_seen(copies.calls, 1)) == 2 * PER_QUEUE,
            "every message handled once",
            timeout_s=180,
        )
        yield copies


async def until_async(check: object, what: str, run: RrRun, timeout_s: float = 60) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not await check():  # type: ignore[operator]
        assert run.process.poll() is None, run.output()
        assert loop.time() < deadline, f"timed out waiting for {what}: {run.output()[-3000:]}"
        await asyncio.sleep(0.1)


def log_events(output: str) -> list[str]:
    """The messages of rr's log lines (``--log-format text``: after the level and logger)."""
    events = []
    for line in output.splitlines():
        parts = line.split(" ", 3)
        if len(parts) == 4 and parts[2] == "rr.runtime":
            events.append(parts[3])
    return events


def said(output: str, text: str) -> list[str]:
    return [event for event in log_events(output) if event.startswith(text)]


async def import_saved(vhost: FaultVhost, files: list[Path]) -> None:
    """``rr dlq import FILE --to QUEUE`` for each saved file, as the log line tells."""
    for path in files:
        queue = "jobs.q" if path.name.startswith("rr-pending-jobs.q-") else "jobs"
        done = await asyncio.to_thread(
            subprocess.run,
            [
                sys.executable,
                "-m",
                "rabbitctl_retry",
                "dlq",
                "import",
                str(path),
                "--to",
                queue,
                "--url",
                vhost.url,
                "--output",
                "json",
            ],
            capture_output=True,
            text=True,
            cwd=REPO,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["imported"] == len(path.read_text().splitlines())


@pytest.mark.parametrize(
    "shutdown_timeout_s", [None, 5.0, 0.5], ids=["default timeout", "5 s", "0.5 s"]
)
async def test_sigterm_publishes_every_pending_copy(
    any_fault_node: PrivateNode,
    any_fault_vhost: FaultVhost,
    tmp_path: Path,
    shutdown_timeout_s: float | None,
) -> None:
    """A healthy broker: the stop publishes the 6,000 copies pipelined, each once. What a
    timeout cuts off (half a second may not be enough) is saved, not lost: every copy ends in
    its queue or in a file (one published as the timeout cut it may be in both, counted)."""
    async with copies_pending(
        any_fault_vhost, tmp_path, shutdown_timeout_s=shutdown_timeout_s
    ) as copies:
        code, took_s, output = await stop(copies.run)
    assert code == 0, output
    await copies.take_queued()
    files = copies.read_saved()
    timeout = "30 (default)" if shutdown_timeout_s is None else f"{shutdown_timeout_s:g}"
    verdict = copies.report(f"SIGTERM, 6,000 pending, timeout {timeout}", any_fault_node.server)
    assert verdict.lost == [], verdict.summary()
    assert len(verdict.dead_twice) <= PUBLISH_WINDOW, verdict.summary()
    assert copies.wrong == []
    assert not said(output, "delayed copy lost"), output[-3000:]
    published = said(output, "published pending delayed copies")
    assert len(published) == 1, output[-3000:]
    # in the queue: the copies the broker confirmed, and those it took as the timeout cut
    # their publish (saved too: the duplicates)
    in_both = len(set(copies.queued) & set(copies.saved))
    assert sum(copies.queued.values()) == int(published[0].split("count=")[-1]) + in_both
    if shutdown_timeout_s is None:  # 30 s: time enough on any machine
        assert files == []
        assert copies.queued == Counter(dict.fromkeys(copies.all_ids(), 1))
    if files:
        await import_saved(any_fault_vhost, files)
    print(f"SIGTERM with 6,000 copies pending: exited in {took_s:.1f} s, {len(files)} files")


async def test_sigterm_during_a_memory_alarm_saves_what_the_broker_did_not_take(
    any_fault_node: PrivateNode, any_fault_vhost: FaultVhost, tmp_path: Path
) -> None:
    """The broker blocks publishers: no copy can be confirmed before ``--shutdown-timeout 5``
    ends. rr exits within the timeout and the bounded close (5 s), the copies saved to a
    file per queue; once the alarm is over, ``rr dlq import`` puts them back. A copy whose
    publish was under way when the broker stopped reading (at most the publish window) may
    arrive too: a duplicate, counted."""
    timeout_s = 5.0
    try:
        async with copies_pending(
            any_fault_vhost, tmp_path, shutdown_timeout_s=timeout_s
        ) as copies:
            await asyncio.to_thread(any_fault_node.set_memory_alarm, True)
            code, took_s, output = await stop(copies.run)
    finally:
        await asyncio.to_thread(any_fault_node.set_memory_alarm, False)
    assert code == 0, output
    # the timeout, the bounded close (5 s), and room for a busy machine: this catches a stop
    # that waits for the broker without bound, not a slow one
    assert took_s < timeout_s + 5 + 15, output[-3000:]
    assert said(output, "the broker blocked the connection"), output[-3000:]
    files = copies.read_saved()
    assert len(files) == 2, output[-3000:]
    saved_lines = said(output, "delayed copies not published before the stop; saved to a file")
    assert len(saved_lines) == 2, output[-3000:]
    assert not said(output, "delayed copy lost"), output[-3000:]
    await copies.take_queued()  # what reached the broker anyway
    verdict = copies.report("SIGTERM in a memory alarm, timeout 5 s", any_fault_node.server)
    assert verdict.lost == [], verdict.summary()
    assert len(verdict.dead_twice) <= PUBLISH_WINDOW, verdict.summary()
    await import_saved(any_fault_vhost, files)
    imported = Copies(copies.run, tmp_path, any_fault_vhost, copies.ids)
    await imported.take_queued()
    assert imported.wrong == []
    assert imported.queued == copies.saved
    print(f"SIGTERM in a memory alarm: exited in {took_s:.1f} s")


async def wait_said(run: RrRun, text: str, timeout_s: float = 60) -> None:
    await until(lambda: said(run.output(), text), f"rr run to log {text!r}", timeout_s)


async def test_sigterm_while_the_broker_is_stopped_publishes_once_it_is_back(
    any_fault_node: PrivateNode, any_fault_vhost: FaultVhost, tmp_path: Path
) -> None:
    """rr waits to reconnect when SIGTERM comes: it connects again only to publish its copies
    (before, it exited at once and 5,988 of 6,000 were gone). The shutdown timeout is long:
    this is about waiting for the broker, and a node on a busy machine may take longer than
    the default 30 s to start (then the copies go to a file, which another test covers)."""
    try:
        async with copies_pending(any_fault_vhost, tmp_path, shutdown_timeout_s=600) as copies:
            await asyncio.to_thread(any_fault_node.stop_app)
            await wait_said(copies.run, "reconnect failed")
            copies.run.process.send_signal(signal.SIGTERM)
            await wait_said(copies.run, "cannot publish the delayed copies yet")
            await asyncio.to_thread(any_fault_node.start_app)
            code, _, output = await stop(copies.run)  # a second SIGTERM changes nothing
    finally:
        await asyncio.to_thread(any_fault_node.heal)
    assert code == 0, output
    assert said(output, "stopping"), output[-3000:]
    assert said(output, "stopped"), output[-3000:]
    assert said(output, "connected to publish the delayed copies"), output[-3000:]
    await copies.take_queued()
    assert copies.read_saved() == []
    verdict = copies.report("SIGTERM, broker stopped, then back", any_fault_node.server)
    assert verdict.lost == [], verdict.summary()
    assert copies.queued == Counter(dict.fromkeys(copies.all_ids(), 1))


async def test_sigterm_while_the_broker_stays_away_saves_every_copy(
    any_fault_node: PrivateNode, any_fault_vhost: FaultVhost, tmp_path: Path
) -> None:
    try:
        async with copies_pending(any_fault_vhost, tmp_path, shutdown_timeout_s=3) as copies:
            await asyncio.to_thread(any_fault_node.stop_app)
            await wait_said(copies.run, "reconnect failed")
            code, _, output = await stop(copies.run)
    finally:
        await asyncio.to_thread(any_fault_node.heal)
    assert code == 0, output
    files = copies.read_saved()
    assert sorted(f.name.rsplit("-", 2)[0] for f in files) == [
        "rr-pending-jobs",
        "rr-pending-jobs.q",
    ]
    await copies.take_queued()
    verdict = copies.report("SIGTERM, broker stays stopped", any_fault_node.server)
    assert verdict.lost == [], verdict.summary()
    assert copies.saved == Counter(dict.fromkeys(copies.all_ids(), 1))
    assert sum(copies.queued.values()) == 0
    await import_saved(any_fault_vhost, files)
    imported = Copies(copies.run, tmp_path, any_fault_vhost, copies.ids)
    await imported.take_queued()
    assert imported.queued == Counter(dict.fromkeys(copies.all_ids(), 1))
    assert imported.wrong == []


async def test_a_stop_while_copies_fall_due_publishes_none_twice(
    any_fault_node: PrivateNode, any_fault_vhost: FaultVhost, tmp_path: Path
) -> None:
    """The copies fall due over 4 s, and rr consumes those published; the stop comes in the
    middle: every copy ends exactly once (in its queue, or handled at attempt 2)."""
    async with copies_pending(any_fault_vhost, tmp_path, delay_s=3.0, spread_s=6.0) as copies:
        await until(lambda: len(copies.handled_again()) >= 300, "copies falling due", 60)
        code, _, output = await stop(copies.run)
    assert code == 0, output
    await copies.take_queued()
    assert copies.read_saved() == []
    assert sum(copies.queued.values()) > 0  # the stop came before every copy fell due
    verdict = copies.report("SIGTERM while copies fall due", any_fault_node.server)
    assert verdict.lost == [], verdict.summary()
    assert verdict.dead_twice == [], verdict.summary()
    assert copies.wrong == []
