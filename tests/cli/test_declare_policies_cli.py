"""``rr declare`` with ``settings = "policy"`` against the emulator and its management twin
(``CliSettings(management=emulator.management)``; docs/how-to/migrate-to-quorum.md, "Changing a
topology"): rr's policy is put before its queue is declared, a changed setting it holds is ``live``
and applied to the existing queue without losing a message, what cannot change is a
``migration`` (exit 1, nothing changed), another policy that outranks rr's is a conflict,
and without a management API nothing is tried (exit 78)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner, Result

from rabbitctl_retry.cli import app
from rabbitctl_retry.cli._common import CliSettings
from rabbitctl_retry.emulator import Emulator
from rabbitctl_retry.errors import BrokerRefused
from rabbitctl_retry.server import Policy
from rabbitctl_retry.transport.base import Connection
from rabbitctl_retry.transport.management import ManagementApi
from tests.target_line import after_target

runner = CliRunner()

MANAGEMENT = "http://guest:guest@rr-no-such-host.invalid:15672/"

JOBS = """
[broker]
settings = "policy"

[queues.jobs]
type = "quorum"
max_attempts = {attempts}
dead_letter = "jobs.dead"
delay = "dlx-ttl"
replicas = 1

[queues."jobs.dead"]
"""


def settings(emulator: Emulator, management: Any = None) -> CliSettings:
    async def connect(url: str) -> Connection:
        return emulator.connect()

    return CliSettings(connector=connect, management=management or emulator.management)


def declare(
    emulator: Emulator, tmp_path: Path, text: str, *args: str, management: Any = None
) -> Result:
    topology = tmp_path / "topology.toml"
    topology.write_text(text, encoding="utf-8")
    return runner.invoke(
        app,
        ["declare", str(topology), *args],
        obj=settings(emulator, management),
    )


def document(result: Result) -> dict[str, Any]:
    parsed: dict[str, Any] = json.loads(result.stdout)
    return parsed


def operation(result: Result, name: str) -> dict[str, Any]:
    return next(op for op in document(result)["operations"] if op["name"] == name)


def changes(op: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    return [
        (row["key"], row["current"], row["desired"], row["change"])
        for row in op["settings"]
        if row["change"] != "unchanged"
    ]


def rr_policies(emulator: Emulator) -> dict[str, Policy]:
    return {p.name: p for p in emulator.policies() if p.name.startswith("rr.")}


async def _publish(emulator: Emulator, queue: str, count: int) -> None:
    connection = emulator.connect()
    channel = await connection.channel()
    for index in range(count):
        await channel.publish(str(index).encode(), routing_key=queue)
    await connection.close()


async def _deliveries_until_dead(emulator: Emulator, queue: str, dead: str) -> int:
    """Take the one message of ``queue`` and return it (reject, requeue) until it is gone;
    how many times it was delivered."""
    connection = emulator.connect()
    channel = await connection.channel()
    deliveries = 0
    while (delivery := await channel.get(queue)) is not None:
        deliveries += 1
        await channel.reject(delivery.delivery_tag, requeue=True)
        assert deliveries < 50
    await connection.close()
    assert emulator.queue(dead).ready == 1
    return deliveries


def test_policy_mode_without_a_management_api_changes_nothing(tmp_path: Path) -> None:
    emulator = Emulator(server_version="4.3.6")

    result = declare(emulator, tmp_path, JOBS.format(attempts=3), "-o", "json")

    assert result.exit_code == 78
    assert result.stdout == ""
    assert after_target(result.stderr).startswith(
        'rr: error: settings = "policy" puts queue settings in'
    )
    assert "--management-url" in result.stderr
    assert emulator.queue_names() == []
    assert emulator.policies() == ()


def test_a_dry_run_plans_every_setting_and_puts_nothing(tmp_path: Path) -> None:
    emulator = Emulator(server_version="4.3.6")

    result = declare(
        emulator, tmp_path, JOBS.format(attempts=3), "--dry-run", "--management-url",
        MANAGEMENT, "-o", "json",
    )  # fmt: skip

    assert result.exit_code == 0, result.output
    jobs = operation(result, "jobs")
    assert jobs["status"] == "planned"
    assert jobs["policy"] == "rr.jobs"
    assert jobs["arguments"] == {"x-queue-type": "quorum", "x-quorum-initial-group-size": 1}
    assert {row["change"] for row in jobs["settings"]} == {"planned"}
    assert ("delivery-limit", "policy", "2") in {
        (row["key"], row["held_by"], row["desired"]) for row in jobs["settings"]
    }
    assert operation(result, "jobs.dead")["policy"] is None
    assert emulator.queue_names() == []
    assert emulator.policies() == ()


def test_declare_puts_the_policies_and_the_queue_follows_them(tmp_path: Path) -> None:
    emulator = Emulator(server_version="4.3.6")

    result = declare(
        emulator, tmp_path, JOBS.format(attempts=3), "--management-url", MANAGEMENT, "-o", "json"
    )

    assert result.exit_code == 0, result.output
    assert [op["status"] for op in document(result)["operations"]] == ["created"] * 3
    assert rr_policies(emulator) == {
        "rr.jobs": Policy.of(
            "rr.jobs",
            "^jobs$",
            {
                "dead-letter-exchange": "",
                "dead-letter-routing-key": "jobs.dead",
                "dead-letter-strategy": "at-least-once",
                "delivery-limit": 2,
                "overflow": "reject-publish",
            },
            priority=100,
            apply_to="queues",
        ),
        "rr.jobs.retry": Policy.of(
            "rr.jobs.retry",
            "^jobs\\.retry$",
            {
                "dead-letter-exchange": "",
                "dead-letter-routing-key": "jobs",
                "dead-letter-strategy": "at-least-once",
                "overflow": "reject-publish",
            },
            priority=100,
            apply_to="queues",
        ),
    }
    assert emulator.queue("jobs").arguments == {
        "x-queue-type": "quorum",
        "x-quorum-initial-group-size": 1,
    }
    asyncio.run(_publish(emulator, "jobs", 1))
    # a delivery limit of 2 (max_attempts 3): three deliveries, then jobs.dead
    assert asyncio.run(_deliveries_until_dead(emulator, "jobs", "jobs.dead")) == 3

    again = declare(
        emulator, tmp_path, JOBS.format(attempts=3), "--management-url", MANAGEMENT, "-o", "json"
    )
    assert again.exit_code == 0, again.output
    assert [op["status"] for op in document(again)["operations"]] == ["unchanged"] * 3


def test_a_live_change_applies_to_the_existing_queue_and_keeps_its_messages(
    tmp_path: Path,
) -> None:
    emulator = Emulator(server_version="4.3.6")
    first = declare(emulator, tmp_path, JOBS.format(attempts=3), "--management-url", MANAGEMENT)
    assert first.exit_code == 0, first.output
    asyncio.run(_publish(emulator, "jobs", 4))

    planned = declare(
        emulator, tmp_path, JOBS.format(attempts=6), "--dry-run", "--management-url",
        MANAGEMENT, "-o", "json",
    )  # fmt: skip
    assert planned.exit_code == 0, planned.output
    jobs = operation(planned, "jobs")
    assert jobs["status"] == "live"
    assert changes(jobs) == [("delivery-limit", "2", "5", "live")]
    assert rr_policies(emulator)["rr.jobs"].keys["delivery-limit"] == 2

    table = declare(emulator, tmp_path, JOBS.format(attempts=6), "--management-url", MANAGEMENT)
    assert table.exit_code == 0, table.output
    assert "jobs: delivery-limit 2 -> 5 (live: held by rr's policy rr.jobs" in table.stdout
    assert "1 changed" in table.stdout
    assert rr_policies(emulator)["rr.jobs"].keys["delivery-limit"] == 5
    assert emulator.queue("jobs").ready == 4  # no message lost
    asyncio.run(_drain(emulator, "jobs", keep=1))
    assert asyncio.run(_deliveries_until_dead(emulator, "jobs", "jobs.dead")) == 6


async def _drain(emulator: Emulator, queue: str, *, keep: int) -> None:
    connection = emulator.connect()
    channel = await connection.channel()
    while emulator.queue(queue).ready > keep:
        delivery = await channel.get(queue)
        assert delivery is not None
        await channel.ack(delivery.delivery_tag)
    await connection.close()


def test_moving_settings_from_arguments_to_a_policy_is_a_migration(tmp_path: Path) -> None:
    emulator = Emulator(server_version="4.3.6")
    arguments = JOBS.format(attempts=3).replace('settings = "policy"', "")
    assert declare(emulator, tmp_path, arguments).exit_code == 0

    result = declare(
        emulator, tmp_path, JOBS.format(attempts=3), "--management-url", MANAGEMENT, "-o", "json"
    )

    assert result.exit_code == 1
    jobs = operation(result, "jobs")
    assert jobs["status"] == "conflict"
    assert "the queue must be rebuilt" in jobs["detail"]
    assert "rr migrate TOPOLOGY rebuilds it with its messages" in jobs["detail"]
    migrations = [row for row in jobs["settings"] if row["change"] == "migration"]
    assert migrations
    assert all(row["current"] != "(none)" and row["desired"] == "(none)" for row in migrations)
    assert "rr: error: the broker conflicts with the file (jobs, jobs.retry)" in result.stderr
    assert emulator.policies() == ()  # nothing was put


def test_a_policy_above_rr_is_a_conflict_and_one_below_a_warning(tmp_path: Path) -> None:
    emulator = Emulator(server_version="4.3.6")
    emulator.put_policy(Policy.of("ops.all", ".*", {"max-length": 1000}, priority=100))

    refused = declare(
        emulator, tmp_path, JOBS.format(attempts=3), "--management-url", MANAGEMENT, "-o", "json"
    )

    assert refused.exit_code == 1
    assert "rr's settings would not apply" in operation(refused, "jobs")["detail"]
    assert emulator.queue_names() == []

    emulator.put_policy(Policy.of("ops.all", ".*", {"max-length": 1000}, priority=1))
    warned = declare(emulator, tmp_path, JOBS.format(attempts=3), "--management-url", MANAGEMENT)

    assert warned.exit_code == 0, warned.output
    assert (
        "rr: warning: rr's policy 'rr.jobs' (priority 100) outranks 'ops.all' (priority 1: "
        "max-length) on queue 'jobs'"
    ) in warned.stderr
    assert emulator.queue_names() == ["jobs", "jobs.dead", "jobs.retry"]


class RefusingApi:
    """The twin, except that it refuses every policy put."""

    def __init__(self, inner: ManagementApi) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def put_policy(self, policy: Policy, *, operator: bool = False) -> None:
        raise BrokerRefused("Validation failed")


def test_a_refused_policy_stops_before_any_queue_is_declared(tmp_path: Path) -> None:
    emulator = Emulator(server_version="4.3.6")

    def management(url: str, *, vhost: str) -> Any:
        return RefusingApi(emulator.management(url, vhost=vhost))

    result = declare(
        emulator,
        tmp_path,
        JOBS.format(attempts=3),
        "--management-url",
        MANAGEMENT,
        management=management,
    )

    assert result.exit_code == 1
    assert "the declare stopped at policy 'rr.jobs' (put): Validation failed" in result.stderr
    assert "not declared: policy 'rr.jobs.retry' (put), queue 'jobs.dead'" in result.stderr
    assert emulator.queue_names() == []


def test_topology_show_names_rr_policies(tmp_path: Path) -> None:
    topology = tmp_path / "topology.toml"
    topology.write_text(JOBS.format(attempts=3), encoding="utf-8")

    shown = runner.invoke(app, ["topology", "show", str(topology), "-o", "json"])
    table = runner.invoke(app, ["topology", "show", str(topology)], env={"COLUMNS": "200"})

    assert shown.exit_code == 0, shown.output
    queues = {queue["name"]: queue for queue in document(shown)["queues"]}
    assert queues["jobs"]["policy"] == {
        "name": "rr.jobs",
        "pattern": "^jobs$",
        "apply-to": "queues",
        "priority": 100,
        "definition": {
            "dead-letter-exchange": "",
            "dead-letter-routing-key": "jobs.dead",
            "dead-letter-strategy": "at-least-once",
            "delivery-limit": 2,
            "overflow": "reject-publish",
        },
    }
    assert queues["jobs.dead"]["policy"] is None
    assert table.exit_code == 0, table.output
    assert "policy rr.jobs:" in table.stdout
    assert "delivery-limit=2" in table.stdout


def test_topology_show_live_gives_each_settings_effective_value(tmp_path: Path) -> None:
    emulator = Emulator(server_version="4.3.6")
    declared = declare(emulator, tmp_path, JOBS.format(attempts=3), "--management-url", MANAGEMENT)
    assert declared.exit_code == 0, declared.output
    emulator.put_policy(Policy.of("limits", "^jobs$", {"delivery-limit": 1}), operator=True)
    topology = tmp_path / "topology.toml"

    shown = runner.invoke(
        app,
        ["topology", "show", str(topology), "--live", "--management-url", MANAGEMENT, "-o", "json"],
        obj=settings(emulator),
    )
    table = runner.invoke(
        app,
        ["topology", "show", str(topology), "--live", "--management-url", MANAGEMENT],
        obj=settings(emulator),
        env={"COLUMNS": "250"},
    )

    assert shown.exit_code == 0, shown.output
    live = {queue["queue"]: queue for queue in document(shown)["live"]}
    jobs = live["jobs"]
    assert (jobs["exists"], jobs["policy"], jobs["operator_policy"]) == (True, "rr.jobs", "limits")
    rows = {row["key"]: row for row in jobs["settings"]}
    assert rows["x-delivery-limit"] == {
        "key": "x-delivery-limit",
        "file": 2,
        "argument": None,
        "policy": 2,
        "operator_policy": 1,
        "effective": 1,
        "state": None,
    }
    assert (jobs["type"], jobs["missing"]) == ("quorum", [])
    assert rows["x-queue-type"]["argument"] == rows["x-queue-type"]["effective"] == "quorum"
    assert rows["x-dead-letter-routing-key"]["effective"] == "jobs.dead"
    assert [row["key"] for row in live["jobs.dead"]["settings"]] == ["x-queue-type"]
    assert table.exit_code == 0, table.output
    assert "live settings" in table.stdout
    assert "x-delivery-limit" in table.stdout


def test_topology_show_live_needs_a_management_url(tmp_path: Path) -> None:
    topology = tmp_path / "topology.toml"
    topology.write_text(JOBS.format(attempts=3), encoding="utf-8")

    result = runner.invoke(app, ["topology", "show", str(topology), "--live"])

    assert result.exit_code == 2
    assert result.stderr.startswith("rr: error: --live reads the broker's management API")


def test_status_shows_each_settings_effective_value(tmp_path: Path) -> None:
    emulator = Emulator(server_version="4.3.6")
    declared = declare(emulator, tmp_path, JOBS.format(attempts=3), "--management-url", MANAGEMENT)
    assert declared.exit_code == 0, declared.output
    topology = str(tmp_path / "topology.toml")

    shown = runner.invoke(
        app,
        ["status", "--topology", topology, "--management-url", MANAGEMENT, "-o", "json"],
        obj=settings(emulator),
    )
    plain = runner.invoke(
        app, ["status", "--topology", topology, "-o", "json"], obj=settings(emulator)
    )
    table = runner.invoke(
        app,
        ["status", "--topology", topology, "--management-url", MANAGEMENT],
        obj=settings(emulator),
        env={"COLUMNS": "250"},
    )

    assert shown.exit_code == 0, shown.output
    queues = {queue["name"]: queue for queue in document(shown)["queues"]}
    assert queues["jobs"]["matches"] is True
    assert queues["jobs"]["live"]["policy"] == "rr.jobs"
    limit = next(
        row for row in queues["jobs"]["live"]["settings"] if row["key"] == "x-delivery-limit"
    )
    assert (limit["policy"], limit["effective"]) == (2, 2)
    assert all("live" not in queue for queue in document(plain)["queues"])
    assert table.exit_code == 0, table.output
    assert "live settings" in table.stdout
