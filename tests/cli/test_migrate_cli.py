"""``rr migrate`` against the emulator (docs/topology.md, "Migrating a queue"): a classic queue
with delay tiers becomes a quorum queue with every message kept — those in the queue, those
waiting in its wait queues (they wait again, then land in the rebuilt queue) and those
published through its exchange binding during the run —; a run stopped at any step is finished
by the same command; consumers stop it unless --force; a dry run changes nothing."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from rabbitctl_retry.cli import app
from rabbitctl_retry.cli._common import CliSettings
from rabbitctl_retry.emulator import Emulator
from rabbitctl_retry.ops import migrate as migrate_shell
from rabbitctl_retry.ops import transfer as transfer_shell
from rabbitctl_retry.ops.transfer import TransferOptions
from rabbitctl_retry.topology.migration import Step
from rabbitctl_retry.transport.base import Connection, Properties

runner = CliRunner()

BEFORE = """
[exchanges.events]
type = "direct"

[queues.jobs]
max_attempts = 5
dead_letter = "jobs.dead"
delay_tiers = ["10s", "1m"]
bindings = [{ exchange = "events", routing_key = "job" }]
"""

AFTER = BEFORE.replace("max_attempts = 5", 'max_attempts = 5\ntype = "quorum"')


def settings(emulator: Emulator) -> CliSettings:
    async def connect(url: str) -> Connection:
        return emulator.connect()

    return CliSettings(connector=connect, management=emulator.management)


def invoke(emulator: Emulator, tmp_path: Path, text: str, *args: str) -> Result:
    topology = tmp_path / "topology.toml"
    topology.write_text(text, encoding="utf-8")
    command = args[0]
    return runner.invoke(app, [command, str(topology), *args[1:]], obj=settings(emulator))


async def publish(emulator: Emulator, ids: list[str], **where: Any) -> None:
    connection = emulator.connect()
    channel = await connection.channel(confirms=True)
    for message_id in ids:
        await channel.publish(
            message_id.encode(),
            properties=Properties(message_id=message_id, delivery_mode=2),
            **where,
        )
    await connection.close()


def ids_in(emulator: Emulator, queue: str) -> list[str]:
    return [m.body.decode() for m in emulator.messages(queue)]


def prepare(emulator: Emulator, tmp_path: Path) -> tuple[list[str], list[str]]:
    """The old topology, 300 messages in the queue and 20 waiting in each tier."""
    result = invoke(emulator, tmp_path, BEFORE, "declare")
    assert result.exit_code == 0, result.output
    ready = [f"r{n}" for n in range(300)]
    waiting = [f"w{n}" for n in range(40)]
    asyncio.run(publish(emulator, ready, routing_key="jobs"))
    asyncio.run(publish(emulator, waiting[:20], routing_key="jobs.retry.10s"))
    asyncio.run(publish(emulator, waiting[20:], routing_key="jobs.retry.1m"))
    return ready, waiting


def test_dry_run_shows_the_steps_and_changes_nothing(tmp_path: Path) -> None:
    emulator = Emulator()
    ready, _waiting = prepare(emulator, tmp_path)
    result = invoke(emulator, tmp_path, AFTER, "migrate", "--dry-run", "-o", "json")
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    (rebuild,) = document["rebuilds"]
    assert rebuild["queue"] == "jobs"
    # a quorum queue's wait queues are quorum queues too
    assert rebuild["rebuilt"] == ["jobs", "jobs.retry.10s", "jobs.retry.1m"]
    assert all("x-queue-type" in keys for keys in rebuild["reasons"].values())
    assert rebuild["phase"] == "before"
    assert rebuild["messages"] == {"jobs": 300, "jobs.retry.10s": 20, "jobs.retry.1m": 20}
    assert rebuild["steps"] == [step.value for step in Step]
    assert rebuild["holding_queues"] == [
        "jobs.rr-migrating",
        "jobs.retry.10s.rr-migrating",
        "jobs.retry.1m.rr-migrating",
    ]
    assert document["steps"] == []
    assert ids_in(emulator, "jobs") == ready
    assert not emulator.has_queue("jobs.rr-migrating")
    assert emulator.queue("jobs").kind == "classic"  # as it was


def test_the_table_shows_messages_bindings_and_steps(tmp_path: Path) -> None:
    emulator = Emulator()
    prepare(emulator, tmp_path)
    result = invoke(emulator, tmp_path, AFTER, "migrate", "--dry-run")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        "jobs: to rebuild (jobs: x-dead-letter-exchange, x-dead-letter-routing-key, x-overflow, "
        "x-queue-type; jobs.retry.10s: x-overflow, x-queue-type; jobs.retry.1m: x-overflow, "
        "x-queue-type)",
        "  messages: jobs 300, jobs.retry.10s 20, jobs.retry.1m 20",
        "  bindings moved to jobs.rr-migrating and back: events ('job')",
        "  steps: hold -> redirect -> drain -> delete -> declare -> restore -> refill -> clean",
    ]


def test_rr_declare_names_rr_migrate(tmp_path: Path) -> None:
    emulator = Emulator()
    prepare(emulator, tmp_path)
    result = invoke(emulator, tmp_path, AFTER, "declare", "-o", "json")
    assert result.exit_code == 1
    details = {op["name"]: op["detail"] for op in json.loads(result.stdout)["operations"]}
    assert "rr migrate TOPOLOGY rebuilds it with its messages" in details["jobs"]
    said = " ".join(result.stderr.split())  # the error line may be folded
    assert "nothing was changed; rr migrate " in said
    assert "topology.toml rebuilds them with their messages" in said


def test_migration_keeps_every_message(tmp_path: Path) -> None:
    emulator = Emulator()
    ready, waiting = prepare(emulator, tmp_path)
    result = invoke(emulator, tmp_path, AFTER, "migrate", "--yes", "-o", "json")
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert [s["step"] for s in document["steps"]] == [step.value for step in Step]
    assert document["conflicts_left"] == []
    assert document["possible_duplicates"] == 0
    for queue in ("jobs", "jobs.retry.10s", "jobs.retry.1m"):
        assert emulator.queue(queue).arguments["x-queue-type"] == "quorum"
    assert sorted(ids_in(emulator, "jobs")) == sorted(ready)
    assert sorted(ids_in(emulator, "jobs.retry.10s") + ids_in(emulator, "jobs.retry.1m")) == sorted(
        waiting
    )
    assert not [q for q in emulator.queue_names() if q.endswith(".rr-migrating")]
    assert emulator.bindings("events") == [("jobs", "job", {})]
    # the waiting copies wait again, then land in the rebuilt queue
    asyncio.run(emulator.advance(61))
    assert sorted(ids_in(emulator, "jobs")) == sorted(ready + waiting)
    again = invoke(emulator, tmp_path, AFTER, "migrate", "--yes")
    assert again.exit_code == 0, again.output
    assert "nothing to rebuild" in again.stdout


@pytest.mark.parametrize("stop_at", list(Step))
def test_a_run_stopped_at_any_step_is_finished_by_the_same_command(
    tmp_path: Path, stop_at: Step, monkeypatch: pytest.MonkeyPatch
) -> None:
    emulator = Emulator()
    ready, waiting = prepare(emulator, tmp_path)

    class Stopped(Exception):
        pass

    real = migrate_shell._Run._begin

    def begin(self: Any, step: Step) -> Any:
        report = real(self, step)
        if step is stop_at:
            raise Stopped(step)
        return report

    monkeypatch.setattr(migrate_shell._Run, "_begin", begin)
    first = invoke(emulator, tmp_path, AFTER, "migrate", "--yes")
    assert first.exit_code == 70, first.output  # the unexpected: an internal error's exit
    assert f"Stopped: {stop_at.value}" in first.output
    monkeypatch.setattr(migrate_shell._Run, "_begin", real)
    second = invoke(emulator, tmp_path, AFTER, "migrate", "--yes", "-o", "json")
    assert second.exit_code == 0, second.output
    assert json.loads(second.stdout)["conflicts_left"] == []
    asyncio.run(emulator.advance(61))
    assert sorted(ids_in(emulator, "jobs")) == sorted(ready + waiting)
    assert not [q for q in emulator.queue_names() if q.endswith(".rr-migrating")]


def test_consumers_stop_it_unless_forced(tmp_path: Path) -> None:
    emulator = Emulator()
    prepare(emulator, tmp_path)

    async def consume_and_migrate() -> Result:
        connection = emulator.connect()
        channel = await connection.channel()
        await channel.qos(1)

        async def hold(delivery: Any) -> None:
            return None

        await channel.consume("jobs", hold)
        return await asyncio.to_thread(invoke, emulator, tmp_path, AFTER, "migrate", "--yes")

    result = asyncio.run(consume_and_migrate())
    assert result.exit_code == 1
    assert "consumers are attached to jobs (1 consumer)" in result.output
    assert "--force" in result.output
    assert not emulator.has_queue("jobs.rr-migrating")


MANAGEMENT = "http://guest:guest@rr-no-such-host.invalid:15672/"


def test_publishing_by_name_stops_it_unless_forced(tmp_path: Path) -> None:
    emulator = Emulator()
    prepare(emulator, tmp_path)  # published by name just now
    refused = invoke(emulator, tmp_path, AFTER, "migrate", "--yes", "--management-url", MANAGEMENT)
    assert refused.exit_code == 1
    assert "published by name (the default exchange, 68/s by the management API)" in (
        refused.output
    )
    assert not emulator.has_queue("jobs.rr-migrating")
    # five quiet seconds later the rate is 0 again
    asyncio.run(emulator.advance(5))
    asyncio.run(publish(emulator, ["late"], exchange="events", routing_key="job"))
    quiet = invoke(emulator, tmp_path, AFTER, "migrate", "--yes", "--management-url", MANAGEMENT)
    assert quiet.exit_code == 0, quiet.output
    assert "not checked" not in quiet.output


def test_forced_it_goes_ahead_and_without_the_api_says_what_it_did_not_check(
    tmp_path: Path,
) -> None:
    emulator = Emulator()
    prepare(emulator, tmp_path)
    forced = invoke(
        emulator, tmp_path, AFTER, "migrate", "--yes", "--force", "--management-url", MANAGEMENT
    )
    assert forced.exit_code == 0, forced.output
    emulator = Emulator()
    prepare(emulator, tmp_path)
    unchecked = invoke(emulator, tmp_path, AFTER, "migrate", "--yes")
    assert unchecked.exit_code == 0, unchecked.output
    assert "rr: warning: publishing by name was not checked" in unchecked.output


def test_copies_that_expire_while_their_wait_queue_is_drained_are_not_a_stop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The move counts a wait queue's copies, then they expire before they are read (a busy
    machine, a short tier): the move hears nothing more, the wait queue is empty, and the
    copies are in the queue, drained after it. Seen on 3.10.8 under load in the fault suite."""
    emulator = Emulator()
    ready, waiting = prepare(emulator, tmp_path)
    real_depth = transfer_shell.depth_on
    expired: list[str] = []

    async def depth_then_expire(connection: Connection, channel: Any, queue: str) -> Any:
        info = await real_depth(connection, channel, queue)
        if queue == "jobs.retry.10s" and not expired:
            expired.append(queue)
            await emulator.advance(11)  # every copy of the 10 s tier expires to jobs
        return info

    monkeypatch.setattr(transfer_shell, "depth_on", depth_then_expire)
    monkeypatch.setattr(migrate_shell, "TransferOptions", lambda: TransferOptions(idle_s=0.2))
    result = invoke(emulator, tmp_path, AFTER, "migrate", "--yes", "-o", "json")
    assert expired == ["jobs.retry.10s"]
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["conflicts_left"] == []
    # the 10 s tier's copies came through jobs: they are ready now; the 1 m tier's wait again
    assert sorted(ids_in(emulator, "jobs")) == sorted(ready + waiting[:20])
    assert sorted(ids_in(emulator, "jobs.retry.1m")) == sorted(waiting[20:])
    assert ids_in(emulator, "jobs.retry.10s") == []
    assert not [q for q in emulator.queue_names() if q.endswith(".rr-migrating")]
