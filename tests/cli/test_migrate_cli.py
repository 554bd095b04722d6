"""``rr migrate`` against the emulator (docs/how-to/migrate-to-quorum.md, "Migrating a queue"): a
classic queue with delay tiers becomes a quorum queue with every message kept — those in the queue,
those waiting in its wait queues (they wait again, then land in the rebuilt queue) and those
published through its exchange binding during the run —; a run stopped at any step is finished
by the same command; consumers stop it unless --force; a dry run changes nothing. Without a
management URL every run needs --force (publishing by name cannot be checked): the tests
about something else pass it."""

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
from rabbitctl_retry.fields import FieldValue
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
    result = invoke(emulator, tmp_path, AFTER, "migrate", "--dry-run", "--force", "-o", "json")
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
    result = invoke(emulator, tmp_path, AFTER, "migrate", "--dry-run", "--force")
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
    result = invoke(emulator, tmp_path, AFTER, "migrate", "--yes", "--force", "-o", "json")
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
    assert again.exit_code == 0, again.output  # nothing starts: no --force needed
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
    first = invoke(emulator, tmp_path, AFTER, "migrate", "--yes", "--force")
    assert first.exit_code == 70, first.output  # the unexpected: an internal error's exit
    assert f"Stopped: {stop_at.value}" in first.output
    monkeypatch.setattr(migrate_shell._Run, "_begin", real)
    second = invoke(emulator, tmp_path, AFTER, "migrate", "--yes", "--force", "-o", "json")
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


def test_forced_it_goes_ahead(tmp_path: Path) -> None:
    emulator = Emulator()
    prepare(emulator, tmp_path)
    forced = invoke(
        emulator, tmp_path, AFTER, "migrate", "--yes", "--force", "--management-url", MANAGEMENT
    )
    assert forced.exit_code == 0, forced.output
    assert "not checked" not in forced.output


def test_without_the_api_it_refuses_unless_forced_and_warns_before_the_first_step(
    tmp_path: Path,
) -> None:
    """Publishing by name cannot be checked without the management API (docs/reference/topology.md,
    "Migrating a queue"): the run refuses before anything changes; forced, it says so before
    the first step, not after the last."""
    emulator = Emulator()
    ready, _waiting = prepare(emulator, tmp_path)
    refused = invoke(emulator, tmp_path, AFTER, "migrate", "--yes")
    assert refused.exit_code == 1, refused.output
    said = " ".join(refused.stderr.split())
    assert "rr: error: rr migrate: publishing by name (the default exchange, routing key = " in said
    assert "cannot be checked without the management API" in said
    assert "nothing was changed" in said
    assert "rr: migrate jobs:" not in refused.stderr  # no step began
    assert not emulator.has_queue("jobs.rr-migrating")
    assert emulator.queue("jobs").kind == "classic"  # not migrated
    assert ids_in(emulator, "jobs") == ready

    forced = invoke(emulator, tmp_path, AFTER, "migrate", "--yes", "--force")
    assert forced.exit_code == 0, forced.output
    lines = forced.stderr.splitlines()
    warning = next(i for i, line in enumerate(lines) if "was not checked" in line)
    first_step = lines.index("rr: migrate jobs: hold")
    assert lines[warning].startswith("rr: warning: publishing by name")
    assert warning < first_step
    assert sum("was not checked" in line for line in lines) == 1


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
    result = invoke(emulator, tmp_path, AFTER, "migrate", "--yes", "--force", "-o", "json")
    assert expired == ["jobs.retry.10s"]
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["conflicts_left"] == []
    # the 10 s tier's copies came through jobs: they are ready now; the 1 m tier's wait again
    assert sorted(ids_in(emulator, "jobs")) == sorted(ready + waiting[:20])
    assert sorted(ids_in(emulator, "jobs.retry.1m")) == sorted(waiting[20:])
    assert ids_in(emulator, "jobs.retry.10s") == []
    assert not [q for q in emulator.queue_names() if q.endswith(".rr-migrating")]


# --- what the rebuilt queue can hold (docs/how-to/migrate-to-quorum.md, "Migrating a queue")
# -----------------


def with_arguments(arguments: str) -> str:
    """BEFORE with ``arguments`` for jobs: a migration (RabbitMQ changes no x- argument)."""
    return BEFORE.replace("max_attempts = 5", f"max_attempts = 5\narguments = {{ {arguments} }}")


def declare_with(emulator: Emulator, tmp_path: Path, bodies: list[str]) -> None:
    """The old topology, ``bodies`` in jobs (each its own id), the publish rate quiet again."""
    result = invoke(emulator, tmp_path, BEFORE, "declare")
    assert result.exit_code == 0, result.output
    asyncio.run(publish(emulator, bodies, routing_key="jobs"))
    asyncio.run(emulator.advance(5))  # the default exchange's rate back to 0


def unchanged(emulator: Emulator, ids: list[str]) -> None:
    """Nothing was changed: jobs as it was, with every id, and no holding queue."""
    assert ids_in(emulator, "jobs") == ids
    assert emulator.queue("jobs").arguments.get("x-max-length") is None
    assert not [q for q in emulator.queue_names() if q.endswith(".rr-migrating")]


def test_the_issue_s_x_max_length_10_on_a_queue_of_50_is_refused_before_any_step(
    tmp_path: Path,
) -> None:
    emulator = Emulator()
    ids = [f"m{n}" for n in range(50)]
    declare_with(emulator, tmp_path, ids)
    limited = with_arguments('"x-max-length" = 10')
    for extra in (("--force",), ("--force", "--dry-run"), ("--management-url", MANAGEMENT)):
        result = invoke(emulator, tmp_path, limited, "migrate", "--yes", *extra)
        assert result.exit_code == 1, (extra, result.output)
        said = " ".join(result.stderr.split())
        assert (
            "rr: error: rr migrate: jobs would hold at most 10 messages (x-max-length = 10), "
            "and the rebuild puts 50 back into it (jobs 50); nothing was changed"
        ) in said, said
        assert "rr: migrate jobs:" not in result.stderr
        unchanged(emulator, ids)


def test_the_wait_queues_count_with_the_queue(tmp_path: Path) -> None:
    emulator = Emulator()
    ready, _waiting = prepare(emulator, tmp_path)  # 300 ready, 20 waiting in each tier
    result = invoke(
        emulator, tmp_path, with_arguments('"x-max-length" = 330'), "migrate", "--yes", "--force"
    )
    assert result.exit_code == 1, result.output
    assert "the rebuild puts 340 back into it (jobs 300, jobs.retry.10s 20, jobs.retry.1m 20)" in (
        " ".join(result.stderr.split())
    )
    assert ids_in(emulator, "jobs") == ready


def test_a_limit_that_drops_is_refused_even_with_room(tmp_path: Path) -> None:
    emulator = Emulator()
    ids = [f"m{n}" for n in range(50)]
    declare_with(emulator, tmp_path, ids)
    result = invoke(
        emulator, tmp_path, with_arguments('"x-max-length" = 1000'), "migrate", "--yes", "--force"
    )
    assert result.exit_code == 1, result.output
    said = " ".join(result.stderr.split())
    assert "the rebuilt jobs has x-max-length = 1000 with x-overflow = drop-head" in said
    assert 'give it x-overflow = "reject-publish" in the file' in said
    unchanged(emulator, ids)
    # with reject-publish and room, the same rebuild runs and keeps every message
    room = with_arguments('"x-max-length" = 1000, "x-overflow" = "reject-publish"')
    done = invoke(emulator, tmp_path, room, "migrate", "--yes", "--force")
    assert done.exit_code == 0, done.output
    assert ids_in(emulator, "jobs") == ids
    assert emulator.queue("jobs").arguments["x-max-length"] == 1000


@pytest.mark.parametrize(("limit_bytes", "refused"), [(149, True), (150, False)])
def test_a_bytes_limit_is_weighed_by_the_management_api(
    tmp_path: Path, limit_bytes: int, refused: bool
) -> None:
    emulator = Emulator()
    ids = [f"m{n:02}" for n in range(50)]  # 3 bytes each: 150
    declare_with(emulator, tmp_path, ids)
    file = with_arguments(f'"x-max-length-bytes" = {limit_bytes}, "x-overflow" = "reject-publish"')
    # without the API the bytes are not known: refused, whatever the limit
    blind = invoke(emulator, tmp_path, file, "migrate", "--yes", "--force")
    assert blind.exit_code == 1, blind.output
    assert "cannot be weighed without the management API" in " ".join(blind.stderr.split())
    unchanged(emulator, ids)
    weighed = invoke(emulator, tmp_path, file, "migrate", "--yes", "--management-url", MANAGEMENT)
    if refused:
        assert weighed.exit_code == 1, weighed.output
        assert (
            f"jobs would hold at most {limit_bytes} bytes (x-max-length-bytes = {limit_bytes}), "
            "and the rebuild puts 50 messages of 150 bytes back into it (jobs 50)"
        ) in " ".join(weighed.stderr.split())
        unchanged(emulator, ids)
    else:
        assert weighed.exit_code == 0, weighed.output
        assert ids_in(emulator, "jobs") == ids


def publish_before_the_declare(
    emulator: Emulator, monkeypatch: pytest.MonkeyPatch, ids: list[str]
) -> None:
    """Publish ``ids`` through the exchange binding as the run reaches ``declare`` (the binding
    is the holding queue's then): new messages during the run, which the plan did not count."""
    real = migrate_shell._Run.after

    async def after(self: Any) -> None:
        await publish(emulator, ids, exchange="events", routing_key="job")
        await real(self)

    monkeypatch.setattr(migrate_shell._Run, "after", after)


def test_the_refill_does_not_move_into_a_queue_that_drops(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The plan saw an empty queue, so a drop-head limit was no problem; 12 messages come
    through the exchange during the run, into the holding queue: the refill stops before it
    moves one, they stay there, and a file with reject-publish finishes the job."""
    emulator = Emulator()
    declare_with(emulator, tmp_path, [])
    late = [f"late{n}" for n in range(12)]
    publish_before_the_declare(emulator, monkeypatch, late)
    dropping = with_arguments('"x-max-length" = 10')
    stopped = invoke(emulator, tmp_path, dropping, "migrate", "--yes", "--force")
    assert stopped.exit_code == 1, stopped.output
    said = " ".join(stopped.stderr.split())
    assert (
        "rr: error: rr migrate: the refill jobs.rr-migrating -> jobs stopped before it moved a "
        "message: the rebuilt jobs has x-max-length = 10 with x-overflow = drop-head"
    ) in said, said
    assert "its 12 messages stay in jobs.rr-migrating, none dropped" in said
    assert ids_in(emulator, "jobs.rr-migrating") == late
    assert ids_in(emulator, "jobs") == []
    monkeypatch.undo()
    keeping = with_arguments('"x-max-length" = 20, "x-overflow" = "reject-publish"')
    finished = invoke(emulator, tmp_path, keeping, "migrate", "--yes", "--force")
    assert finished.exit_code == 0, finished.output
    assert ids_in(emulator, "jobs") == late
    assert not emulator.has_queue("jobs.rr-migrating")


def test_the_refill_does_not_move_more_than_the_queue_holds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    emulator = Emulator()
    ready = [f"m{n}" for n in range(5)]
    declare_with(emulator, tmp_path, ready)
    late = [f"late{n}" for n in range(10)]
    publish_before_the_declare(emulator, monkeypatch, late)
    limited = with_arguments('"x-max-length" = 10, "x-overflow" = "reject-publish"')
    stopped = invoke(emulator, tmp_path, limited, "migrate", "--yes", "--force")
    assert stopped.exit_code == 1, stopped.output
    assert (
        "jobs holds 0 of at most 10 messages (x-max-length), and 15 are to come back: run rr "
        "migrate again once it has room; its 15 messages stay in jobs.rr-migrating"
    ) in " ".join(stopped.stderr.split())
    assert sorted(ids_in(emulator, "jobs.rr-migrating")) == sorted(ready + late)
    assert ids_in(emulator, "jobs") == []


# --- holding queues: rr's by its marks, never by their name --------------------------------


def test_another_application_s_holding_named_queue_is_a_conflict(tmp_path: Path) -> None:
    """The issue's case: another application's jobs.rr-migrating holding 5, and a file that
    needs no change: nothing moved, nothing deleted, with or without the management API."""
    emulator = Emulator()
    ids = [f"m{n}" for n in range(7)]
    declare_with(emulator, tmp_path, ids)
    theirs = [f"theirs{n}" for n in range(5)]

    async def their_queue() -> None:
        channel = await emulator.connect().channel()
        await channel.queue_declare("jobs.rr-migrating", durable=True)

    asyncio.run(their_queue())
    asyncio.run(publish(emulator, theirs, routing_key="jobs.rr-migrating"))
    asyncio.run(emulator.advance(5))
    for extra in ((), ("--force",), ("--management-url", MANAGEMENT)):
        for file in (BEFORE, AFTER):
            result = invoke(emulator, tmp_path, file, "migrate", "--yes", *extra)
            assert result.exit_code == 1, (extra, result.output)
            said = " ".join(result.stderr.split())
            assert (
                "rr: error: rr migrate: 'jobs.rr-migrating': named as rr names its holding "
                "queues, but not declared by rr"
            ) in said, said
            assert "nothing was changed" in said
            assert ids_in(emulator, "jobs.rr-migrating") == theirs
            assert ids_in(emulator, "jobs") == ids
            assert emulator.queue("jobs").kind == "classic"  # not migrated


def test_a_holding_named_wait_queue_of_another_is_a_conflict_too(tmp_path: Path) -> None:
    emulator = Emulator()
    declare_with(emulator, tmp_path, ["m0"])

    async def their_queue() -> None:
        channel = await emulator.connect().channel()
        await channel.queue_declare("jobs.retry.10s.rr-migrating", durable=True)

    asyncio.run(their_queue())
    result = invoke(emulator, tmp_path, AFTER, "migrate", "--yes", "--force")
    assert result.exit_code == 1, result.output
    assert "'jobs.retry.10s.rr-migrating': named as rr names" in " ".join(result.stderr.split())
    assert emulator.has_queue("jobs.retry.10s.rr-migrating")


def test_the_api_reads_the_marker_that_amqp_cannot(tmp_path: Path) -> None:
    """A queue with rr's compared marks but not its marker: the management API shows it is
    not rr's (AMQP alone cannot tell: docs/how-to/migrate-to-quorum.md, "Holding queues")."""
    emulator = Emulator()
    declare_with(emulator, tmp_path, ["m0"])
    marks: dict[str, FieldValue] = {
        "x-max-length": 32_213_686_696_242_276,
        "x-overflow": "reject-publish",
    }

    async def look_alike() -> None:
        channel = await emulator.connect().channel()
        await channel.queue_declare("jobs.rr-migrating", durable=True, arguments=marks)

    asyncio.run(look_alike())
    result = invoke(emulator, tmp_path, AFTER, "migrate", "--yes", "--management-url", MANAGEMENT)
    assert result.exit_code == 1, result.output
    assert "'jobs.rr-migrating': named as rr names" in " ".join(result.stderr.split())


def test_rr_declares_its_holding_queues_with_its_marks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    emulator = Emulator()
    prepare(emulator, tmp_path)

    class Stopped(Exception):
        pass

    def stop(self: Any) -> Any:
        raise Stopped

    monkeypatch.setattr(migrate_shell._Run, "after", stop)
    assert invoke(emulator, tmp_path, AFTER, "migrate", "--yes", "--force").exit_code == 70
    for queue in ("jobs", "jobs.retry.10s", "jobs.retry.1m"):
        arguments = emulator.queue(f"{queue}.rr-migrating").arguments
        assert arguments["x-rr-holding-for"] == queue
        assert arguments["x-max-length"] == 32_213_686_696_242_276
        assert arguments["x-overflow"] == "reject-publish"
