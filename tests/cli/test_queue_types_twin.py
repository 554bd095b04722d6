"""A vhost whose default queue type is quorum, queues declared first by other clients, and
consumers that are not rr, on the emulator and its management twin (docs/reference/cli.md: "rr
declare", "rr status", "rr topology show --live", "rr doctor"). The same on the real
servers: tests/broker/test_default_queue_type.py, tests/broker/test_doctor_live_queues.py."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner, Result

from rabbitctl_retry.cli import app
from rabbitctl_retry.emulator import Emulator
from tests.cli.test_management_twin import UNREACHABLE, settings

runner = CliRunner()

CLASSIC = """
[queues.work]
max_attempts = 3
dead_letter = "work.dead"
delay = "dlx-ttl"
"""

PIKA = {"product": "Pika Python Client Library", "version": "1.4.4", "connection_name": "svc-a"}


def rr(emulator: Emulator, *args: str) -> Result:
    return runner.invoke(app, list(args), obj=settings(emulator), env={"COLUMNS": "400"})


def document(result: Result) -> dict[str, Any]:
    assert result.exit_code in (0, 1), result.output
    parsed: dict[str, Any] = json.loads(result.stdout)
    return parsed


def written(tmp_path: Path, text: str) -> str:
    path = tmp_path / "topology.toml"
    path.write_text(text, encoding="utf-8")
    return str(path)


async def declared_by_another_client(emulator: Emulator, *queues: str) -> None:
    """``queues`` declared as a client that names no type declares them (pika's
    ``queue_declare(name, durable=True)``)."""
    connection = emulator.connect(client_properties=PIKA)
    channel = await connection.channel()
    for queue in queues:
        await channel.queue_declare(queue)
    await connection.close()


def test_a_quorum_default_makes_none_of_the_files_classic_queues_quorum(tmp_path: Path) -> None:
    emulator = Emulator(server_version="4.3.6", default_queue_type="quorum")
    topology = written(tmp_path, CLASSIC)

    first = rr(emulator, "declare", topology, "--management-url", UNREACHABLE, "-o", "json")
    again = rr(emulator, "declare", topology, "--management-url", UNREACHABLE, "-o", "json")
    table = rr(emulator, "declare", topology, "--management-url", UNREACHABLE)

    created = document(first)
    assert [(op["name"], op["status"], op["broker_type"]) for op in created["operations"]] == [
        ("work.dead", "created", None),
        ("work", "created", None),
        ("work.retry", "created", None),
    ]
    assert created["vhost_default_queue_type"] == "quorum"
    assert {name: emulator.queue(name).kind for name in emulator.queue_names()} == {
        "work": "classic",
        "work.dead": "classic",
        "work.retry": "classic",
    }
    assert {(op["status"], op["broker_type"]) for op in document(again)["operations"]} == {
        ("unchanged", "classic")
    }
    assert "the vhost's default queue type: quorum (from the management API)" in table.stdout

    status = document(
        rr(emulator, "status", "-t", topology, "--management-url", UNREACHABLE, "-o", "json")
    )
    assert [(q["name"], q["type"], q["file_type"], q["matches"]) for q in status["queues"]] == [
        ("work.dead", "classic", "classic", True),
        ("work", "classic", "classic", True),
        ("work.retry", "classic", "classic", True),
    ]
    assert status["vhost_default_queue_type"] == "quorum"

    doctor = rr(emulator, "doctor", "-t", topology, "--management-url", UNREACHABLE, "-o", "json")
    assert doctor.exit_code == 0, doctor.output
    found = {f["code"]: f for f in document(doctor)["findings"]}
    assert found["vhost-default-queue-type"]["message"].startswith(
        "the vhost's default queue type is quorum (from the management API)"
    )
    assert "declare-matches" in found


def test_queues_made_first_by_another_client_are_conflicts_everywhere(tmp_path: Path) -> None:
    """What the issue measured on 4.3.6: a classic topology's queues made first, without a
    type, on a vhost whose default is quorum: rr declare, rr status and rr doctor each say
    they are quorum queues (the same words), rr topology show --live marks the type and what
    is missing."""
    emulator = Emulator(server_version="4.3.6", default_queue_type="quorum")
    topology = written(tmp_path, CLASSIC)
    asyncio.run(declared_by_another_client(emulator, "work", "work.dead"))

    declare = rr(emulator, "declare", topology, "-o", "json")
    assert declare.exit_code == 1
    conflicts = {
        op["name"]: op for op in document(declare)["operations"] if op["status"] == "conflict"
    }
    assert set(conflicts) == {"work", "work.dead"}
    for op in conflicts.values():
        assert op["broker_type"] == "quorum"
        assert op["detail"].startswith(
            "exists with other arguments: x-queue-type: file 'classic', broker 'quorum'"
        )
    assert emulator.queue_names() == ["work", "work.dead"]  # nothing was changed

    status = rr(emulator, "status", "-t", topology, "-o", "json")
    assert status.exit_code == 1
    by_name = {q["name"]: q for q in document(status)["queues"]}
    assert (by_name["work"]["type"], by_name["work"]["file_type"]) == ("quorum", "classic")
    assert "x-queue-type: file 'classic', broker 'quorum'" in by_name["work"]["differences"]
    assert (by_name["work.retry"]["present"], by_name["work.retry"]["type"]) == (False, None)

    doctor = rr(emulator, "doctor", "-t", topology, "-o", "json")
    assert doctor.exit_code == 1
    report = document(doctor)
    assert report["safe"] is False
    said = {f["queue"]: f["message"] for f in report["findings"] if f["code"] == "declare-conflict"}
    assert set(said) == {"work", "work.dead"}
    for name, message in said.items():
        assert message.startswith(f"queue {name!r}: {conflicts[name]['detail']}")
    assert [f["level"] for f in report["findings"] if f["code"] == "declare-conflict"] == [
        "unsafe",
        "unsafe",
    ]
    table = rr(emulator, "doctor", "-t", topology)
    assert table.stdout.rstrip().endswith("unsafe on this server")

    live = rr(
        emulator,
        "topology",
        "show",
        topology,
        "--live",
        "--management-url",
        UNREACHABLE,
        "-o",
        "json",
    )
    assert live.exit_code == 0, live.output
    queues = {q["queue"]: q for q in document(live)["live"]}
    work = queues["work"]
    assert (work["exists"], work["type"]) == (True, "quorum")
    rows = {row["key"]: row for row in work["settings"]}
    assert (rows["x-queue-type"]["file"], rows["x-queue-type"]["effective"]) == (
        "classic",
        "quorum",
    )
    assert rows["x-queue-type"]["state"] == "type differs"
    retry = queues["work.retry"]
    assert (retry["exists"], retry["type"], retry["settings"]) == (False, None, [])
    assert retry["missing"] == [
        "x-dead-letter-exchange",
        "x-dead-letter-routing-key",
        "x-queue-type",
    ]
    shown = rr(emulator, "topology", "show", topology, "--live", "--management-url", UNREACHABLE)
    assert "work.retry │ (no such queue)" in shown.stdout
    assert "type differs" in shown.stdout


def test_show_live_marks_a_setting_the_broker_lacks(tmp_path: Path) -> None:
    """A quorum queue declared first without its delivery limit and dead-letter route: each
    is marked missing, with the file's value beside it."""
    emulator = Emulator(server_version="4.3.6")
    topology = written(
        tmp_path,
        '[queues.jobs]\ntype = "quorum"\nmax_attempts = 3\ndead_letter = "jobs.dead"\n',
    )

    async def quorum_without_settings() -> None:
        connection = emulator.connect(client_properties=PIKA)
        channel = await connection.channel()
        await channel.queue_declare("jobs", arguments={"x-queue-type": "quorum"})
        await connection.close()

    asyncio.run(quorum_without_settings())
    live = rr(
        emulator,
        "topology",
        "show",
        topology,
        "--live",
        "--management-url",
        UNREACHABLE,
        "-o",
        "json",
    )
    jobs = next(q for q in document(live)["live"] if q["queue"] == "jobs")
    assert jobs["missing"] == [
        "x-dead-letter-exchange",
        "x-dead-letter-routing-key",
        "x-dead-letter-strategy",
        "x-delivery-limit",
        "x-overflow",
    ]
    rows = {row["key"]: row for row in jobs["settings"]}
    assert rows["x-delivery-limit"] == {
        "key": "x-delivery-limit",
        "file": 2,
        "argument": None,
        "policy": None,
        "operator_policy": None,
        "effective": None,
        "state": "missing",
    }
    assert rows["x-queue-type"]["state"] is None
    doctor = document(rr(emulator, "doctor", "-t", topology, "-o", "json"))
    [conflict] = [f for f in doctor["findings"] if f["code"] == "declare-conflict"]
    assert "x-delivery-limit: file 2, broker (none)" in conflict["message"]
    assert "x-dead-letter-exchange: file '', broker (none)" in conflict["message"]


FOREIGN = """
[queues.work]
max_attempts = 3
dead_letter = "work.dead"

[queues.kept]
max_attempts = 3
dead_letter = "kept.dead"
rejected = "kept.rejected"

[queues.jobs]
type = "quorum"
max_attempts = 3
dead_letter = "jobs.dead"
"""


async def consumed(emulator: Emulator, client: dict[str, str] | None, *queues: str) -> None:
    """A consumer of each of ``queues`` on one connection of ``client`` (None: rr's)."""
    connection = emulator.connect(client_properties=client)
    channel = await connection.channel()

    async def hold(delivery: object) -> None:
        return None

    for queue in queues:
        await channel.consume(queue, hold)


def foreign_setup(tmp_path: Path, version: str) -> tuple[Emulator, str]:
    emulator = Emulator(server_version=version)
    topology = written(tmp_path, FOREIGN)
    assert rr(emulator, "declare", topology).exit_code == 0

    async def consumers() -> None:
        await consumed(emulator, PIKA, "work", "kept", "jobs")
        await consumed(emulator, None, "work", "jobs")  # rr's own

    asyncio.run(consumers())
    return emulator, topology


def test_doctor_and_status_name_the_consumers_that_are_not_rr(tmp_path: Path) -> None:
    emulator, topology = foreign_setup(tmp_path, "4.3.6")

    doctor = rr(emulator, "doctor", "-t", topology, "--management-url", UNREACHABLE, "-o", "json")
    assert doctor.exit_code == 0, doctor.output  # warnings: safe, if the consumers behave
    notes = {
        f["queue"]: f
        for f in document(doctor)["findings"]
        if f["code"].startswith(("foreign-", "quorum-foreign-"))
    }
    assert {name: (f["code"], f["level"]) for name, f in notes.items()} == {
        "work": ("foreign-consumer-rejects-dropped", "warning"),
        "kept": ("foreign-consumer-rejects-kept", "info"),
        "jobs": ("quorum-foreign-consumer-nack", "warning"),
    }
    pika = "Pika Python Client Library 1.4.4 ('svc-a', emulator connection"
    assert all(pika in f["message"] for f in notes.values())
    assert all("rr run: " in f["message"] and ", 'rr'" not in f["message"] for f in notes.values())
    assert "1 consumer that is not rr run" in notes["work"]["message"]
    assert "is dropped (the queue has no dead-letter route" in notes["work"]["message"]
    assert 'rejected = "work.rejected" in [queues.work]' in notes["work"]["message"]
    assert "goes to the queue 'kept.rejected'" in notes["kept"]["message"]
    assert "basic.nack(requeue=true) gets it again at once" in notes["jobs"]["message"]
    assert "cannot tell which they send" in notes["jobs"]["message"]

    status = rr(emulator, "status", "-t", topology, "--management-url", UNREACHABLE, "-o", "json")
    report = document(status)
    assert [(n["queue"], n["code"]) for n in report["consumer_notes"]] == [
        ("work", "foreign-consumer-rejects-dropped"),
        ("kept", "foreign-consumer-rejects-kept"),
        ("jobs", "quorum-foreign-consumer-nack"),
    ]
    by_name = {q["name"]: q for q in report["queues"]}
    assert [c.startswith(pika) for c in by_name["work"]["consumers_not_rr"]] == [True]
    assert by_name["work.dead"]["consumers_not_rr"] == []
    table = rr(emulator, "status", "-t", topology, "--management-url", UNREACHABLE)
    assert "warning: 'work' (classic, attempts counted by rr run) has 1 consumer" in table.stdout


def test_before_4_3_a_quorum_queue_counts_a_nack(tmp_path: Path) -> None:
    emulator, topology = foreign_setup(tmp_path, "4.0.5")
    doctor = document(
        rr(emulator, "doctor", "-t", topology, "--management-url", UNREACHABLE, "-o", "json")
    )
    codes = {f["code"] for f in doctor["findings"]}
    assert "foreign-consumer-rejects-dropped" in codes
    assert "quorum-foreign-consumer-nack" not in codes


def test_without_a_management_url_the_consumers_are_not_checked(tmp_path: Path) -> None:
    emulator, topology = foreign_setup(tmp_path, "4.3.6")
    doctor = document(rr(emulator, "doctor", "-t", topology, "-o", "json"))
    [unchecked] = [f for f in doctor["findings"] if f["code"] == "foreign-consumers-not-checked"]
    assert unchecked["level"] == "info"
    assert "give --management-url" in unchecked["message"]
    assert not [f for f in doctor["findings"] if f["code"].startswith("foreign-consumer-")]
