"""The CLI reaches a management API through the management port, picked in one place as the
AMQP adapter is (docs/architecture.md, "One place picks the adapter"): handed the emulator's
twin (``CliSettings(management=emulator.management)``), ``rr declare`` and ``rr doctor`` read
the emulated server's nodes, placements and deprecated features, and nothing goes over HTTP
(the management URL names a host that does not exist)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from rabbitctl_retry.cli import app
from rabbitctl_retry.cli._common import CliSettings
from rabbitctl_retry.emulator import Emulator
from rabbitctl_retry.transport.base import Connection

runner = CliRunner()

UNREACHABLE = "http://guest:guest@rr-no-such-host.invalid:15672/"

TOPOLOGY = """
[queues.orders]
type = "quorum"
replicas = 1

[queues.audit]
"""


def settings(emulator: Emulator) -> CliSettings:
    async def connect(url: str) -> Connection:
        return emulator.connect()

    return CliSettings(connector=connect, management=emulator.management)


def invoke(emulator: Emulator, *args: str) -> dict[str, Any]:
    result = runner.invoke(app, [*args, "-o", "json"], obj=settings(emulator))
    assert result.exit_code == 0, result.output
    parsed: dict[str, Any] = json.loads(result.stdout)
    return parsed


def test_declare_reads_where_each_queue_lives_from_the_twin(tmp_path: Path) -> None:
    emulator = Emulator(server_version="4.3.6")
    topology = tmp_path / "topology.toml"
    topology.write_text(TOPOLOGY, encoding="utf-8")

    document = invoke(emulator, "declare", str(topology), "--management-url", UNREACHABLE)

    placements = {op["name"]: op["placement"] for op in document["operations"] if op["placement"]}
    one_node = {"leader": "rabbit@emulator", "members": ["rabbit@emulator"]}
    assert placements == {"orders": one_node, "audit": one_node}
    assert emulator.queue_names() == ["audit", "orders"]


def test_doctor_reads_the_deprecated_features_from_the_twin() -> None:
    emulator = Emulator(server_version="4.3.6")

    document = invoke(emulator, "doctor", "--management-url", UNREACHABLE)

    table = document["server"]["deprecated_features"]
    assert table["checked"] is True
    assert {"name": "transient_nonexcl_queues", "state": "permitted"}.items() <= next(
        row for row in table["features"] if row["name"] == "transient_nonexcl_queues"
    ).items()


def test_doctor_on_a_twin_without_the_table() -> None:
    document = invoke(Emulator(server_version="3.10.8"), "doctor", "--management-url", UNREACHABLE)

    assert document["server"]["deprecated_features"] == {
        "checked": False,
        "not_checked": "missing",
        "detail": None,
    }
