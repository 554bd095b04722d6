"""``rr doctor --topology --management-url`` on the emulator and its management twin stating
a cluster (``emulator.cluster``: more nodes, stopped ones, resource alarms): the checks of the
node and the queues now (docs/reference/cli.md, "rr doctor"), with the exit code and the verdict
line. The states a shared server must never be put in (an alarm, a node down) are played here."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from rabbitctl_retry.cli import app
from rabbitctl_retry.emulator import Emulator
from rabbitctl_retry.transport.base import Delivery
from tests.cli.test_management_twin import UNREACHABLE, settings

runner = CliRunner()

TOPOLOGY = """
[queues.orders]
max_attempts = 3
dead_letter = "orders.dead"
delay_tiers = ["1s"]

[queues.payments]
type = "quorum"
replicas = 3
max_attempts = 3
dead_letter = "payments.dead"
"""


@pytest.fixture
def topology(tmp_path: Path) -> Path:
    path = tmp_path / "topology.toml"
    path.write_text(TOPOLOGY, encoding="utf-8")
    return path


def declared(topology: Path, version: str = "4.3.6", *nodes: str) -> Emulator:
    emulator = Emulator(server_version=version)
    emulator.cluster.add_nodes(*nodes)
    result = runner.invoke(app, ["declare", str(topology)], obj=settings(emulator))
    assert result.exit_code == 0, result.output
    return emulator


def doctor(emulator: Emulator, topology: Path | None, *args: str) -> Result:
    file = ["--topology", str(topology)] if topology is not None else []
    return runner.invoke(app, ["doctor", *file, *args], obj=settings(emulator))


def findings(result: Result, *codes: str) -> list[tuple[str, str, str | None]]:
    document: dict[str, Any] = json.loads(result.stdout)
    return [(f["code"], f["level"], f["queue"]) for f in document["findings"] if f["code"] in codes]


async def consume(emulator: Emulator, *queues: str) -> None:
    """A consumer on each of ``queues``, left running (its connection stays open)."""
    connection = emulator.connect()
    channel = await connection.channel()

    async def hold(delivery: Delivery) -> None:
        return None

    for queue in queues:
        await channel.consume(queue, hold)


ALARMS = ("node-alarm", "node-not-running", "alarms-not-checked")


def test_an_alarm_on_the_twin_is_an_error_and_exit_1(topology: Path) -> None:
    emulator = declared(topology)
    asyncio.run(consume(emulator, "orders", "payments"))
    emulator.cluster.raise_alarm("memory")

    result = doctor(emulator, topology, "--management-url", UNREACHABLE, "-o", "json")

    assert result.exit_code == 1, result.output
    assert findings(result, *ALARMS) == [("node-alarm", "error", None)]
    document = json.loads(result.stdout)
    assert (document["safe"], document["healthy"]) == (True, False)
    [alarm] = [f["message"] for f in document["findings"] if f["code"] == "node-alarm"]
    assert alarm.startswith("node 'rabbit@emulator' has a memory alarm: 1.1 GB used, its limit ")

    table = doctor(emulator, topology, "--management-url", UNREACHABLE)
    assert table.exit_code == 1
    assert table.stdout.rstrip().endswith("safe on this server; not healthy now: 1 error")

    emulator.cluster.clear_alarm("memory")
    cleared = doctor(emulator, topology, "--management-url", UNREACHABLE, "-o", "json")
    assert cleared.exit_code == 0, cleared.output
    assert findings(cleared, *ALARMS) == []


@pytest.mark.parametrize("version", ["3.10.8", "4.3.6"])
def test_without_a_management_url_the_alarms_are_not_checked(version: str) -> None:
    result = doctor(Emulator(server_version=version), None, "-o", "json")

    assert result.exit_code == 0, result.output
    assert findings(result, *ALARMS) == [("alarms-not-checked", "info", None)]


def test_a_stopped_node_is_a_warning(topology: Path) -> None:
    emulator = declared(topology, "3.10.8", "rabbit@b", "rabbit@c")
    asyncio.run(consume(emulator, "orders", "payments"))
    emulator.cluster.stop("rabbit@c")

    result = doctor(emulator, topology, "--management-url", UNREACHABLE, "-o", "json")

    assert result.exit_code == 0, result.output
    assert findings(result, *ALARMS, "quorum-members-offline", "quorum-queue-unavailable") == [
        ("node-not-running", "warning", None),
        ("quorum-members-offline", "warning", "payments"),
    ]

    emulator.cluster.stop("rabbit@b")
    result = doctor(emulator, topology, "--management-url", UNREACHABLE, "-o", "json")
    assert result.exit_code == 1, result.output
    assert findings(result, "quorum-members-offline", "quorum-queue-unavailable") == [
        ("quorum-queue-unavailable", "error", "payments"),
    ]


CONSUMERS = ("no-consumer", "wait-queue-consumer", "dead-letter-queue-messages")


def test_consumers_expected_from_the_topology_without_a_management_api(topology: Path) -> None:
    """By passive declares alone: 3.10.8 without a management URL."""
    emulator = declared(topology, "3.10.8")

    result = doctor(emulator, topology, "-o", "json")

    assert result.exit_code == 0, result.output
    assert findings(result, *CONSUMERS) == [
        ("no-consumer", "warning", "orders"),
        ("no-consumer", "warning", "payments"),
    ]

    asyncio.run(consume(emulator, "orders", "payments", "orders.retry.1s"))
    result = doctor(emulator, topology, "-o", "json")

    assert result.exit_code == 1, result.output
    assert findings(result, *CONSUMERS) == [("wait-queue-consumer", "error", "orders.retry.1s")]


def test_a_dead_letter_queue_with_messages_and_growing(topology: Path) -> None:
    emulator = declared(topology)
    asyncio.run(consume(emulator, "orders", "payments"))

    async def dead_letters() -> None:
        connection = emulator.connect()
        channel = await connection.channel(confirms=True)
        for number in range(3):
            await channel.publish(b"x%d" % number, routing_key="orders.dead")
        await connection.close()

    asyncio.run(dead_letters())
    emulator.cluster.depth_rates["orders.dead"] = 0.6
    codes = (*CONSUMERS, "dead-letter-queue-growing")

    result = doctor(emulator, topology, "--management-url", UNREACHABLE, "-o", "json")

    assert result.exit_code == 0, result.output
    assert findings(result, *codes) == [
        ("dead-letter-queue-messages", "info", "orders.dead"),
        ("dead-letter-queue-growing", "warning", "orders.dead"),
    ]
    without_api = doctor(emulator, topology, "-o", "json")
    assert findings(without_api, *codes) == [("dead-letter-queue-messages", "info", "orders.dead")]
