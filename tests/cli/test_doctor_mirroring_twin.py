"""``rr doctor --management-url`` on the emulator at RabbitMQ 3.10.8, whose twin takes an
``ha-mode`` policy as 3.10.8 does (``emulator/policies.py``): a classic queue of the topology
that the policy mirrors is a ``classic-mirroring`` warning (exit 0: safe on this server), and
at 4.0.5 the twin refuses the policy as the server does (docs/reference/cli.md, "rr doctor")."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from rabbitctl_retry.cli import app
from rabbitctl_retry.emulator import Emulator
from rabbitctl_retry.errors import BrokerRefused
from rabbitctl_retry.server import Policy
from tests.cli.test_management_twin import UNREACHABLE, settings

runner = CliRunner()

TOPOLOGY = """
[queues.orders]

[queues.payments]
type = "quorum"
"""

HA_ALL = Policy.of("ha-all", "^orders$", {"ha-mode": "all", "ha-sync-mode": "automatic"})


def doctor(emulator: Emulator, *args: str) -> tuple[int, dict[str, Any]]:
    result = runner.invoke(app, ["doctor", *args, "-o", "json"], obj=settings(emulator))
    return result.exit_code, json.loads(result.stdout)


def test_a_mirrored_classic_queue_on_3_10(tmp_path: Path) -> None:
    emulator = Emulator(server_version="3.10.8")
    topology = tmp_path / "topology.toml"
    topology.write_text(TOPOLOGY, encoding="utf-8")
    emulator.put_policy(HA_ALL)
    declared = runner.invoke(app, ["declare", str(topology)], obj=settings(emulator))
    assert declared.exit_code == 0, declared.output

    code, document = doctor(emulator, "--topology", str(topology), "--management-url", UNREACHABLE)

    assert code == 0
    assert document["safe"] is True
    mirroring = [f for f in document["findings"] if f["code"].startswith("classic-mirroring")]
    assert [(f["code"], f["level"], f["queue"]) for f in mirroring] == [
        ("classic-mirroring-policy", "info", None),
        ("classic-mirroring", "warning", "orders"),
    ]
    assert "mirrored by the policy 'ha-all'" in mirroring[1]["message"]
    assert 'type = "quorum"' in mirroring[1]["message"]


def test_not_checked_without_a_management_url_on_3_10() -> None:
    code, document = doctor(Emulator(server_version="3.10.8"))

    assert code == 0
    [found] = [f for f in document["findings"] if f["code"].startswith("classic-mirroring")]
    assert (found["code"], found["level"]) == ("classic-mirroring-not-checked", "info")


def test_nothing_on_4_0_which_refuses_ha_keys() -> None:
    emulator = Emulator(server_version="4.0.5")
    with pytest.raises(BrokerRefused, match="not recognised policy settings"):
        emulator.put_policy(HA_ALL)

    code, document = doctor(emulator, "--management-url", UNREACHABLE)

    assert code == 0
    assert [f for f in document["findings"] if f["code"].startswith("classic-mirroring")] == []
