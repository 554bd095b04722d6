"""``rr doctor --management-url`` on the local three-node RabbitMQ 3.10 cluster and on the
emulator's twin stating the same cluster (``emulator.cluster``): the same checks of the
nodes and the queues now (docs/reference/cli.md, "rr doctor"). Nothing is changed on the shared
cluster: a vhost of the test's own with the topology declared, deleted after; no alarm is
raised and no node stopped (those are the twin's: tests/cli/test_doctor_health_twin.py)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from rabbitctl_retry.cli import app
from rabbitctl_retry.emulator import Emulator
from rabbitctl_retry.transport.management import ManagementApi
from rabbitctl_retry.transport.management_http import HttpManagementApi
from tests.broker.test_doctor_health_on_servers import health
from tests.cli.test_management_twin import UNREACHABLE, settings
from tests.cluster.conftest import LocalCluster
from tests.contract.test_management_api import nodes_view

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(300)]

runner = CliRunner()

TOPOLOGY = """
[queues.orders]
max_attempts = 3
dead_letter = "orders.dead"
delay_tiers = ["1s"]

[queues.payments]
type = "quorum"
replicas = 3
"""


@pytest.fixture
def vhost(cluster: LocalCluster) -> Iterator[str]:
    with cluster.own_vhost("rr-health") as name:
        yield name


def test_the_cluster_and_its_twin_give_the_same_findings(
    cluster: LocalCluster, vhost: str, tmp_path: Path
) -> None:
    topology = tmp_path / "topology.toml"
    topology.write_text(TOPOLOGY, encoding="utf-8")
    url = cluster.url(1, vhost)
    declared = runner.invoke(app, ["declare", str(topology), "--url", url])
    assert declared.exit_code == 0, declared.output
    asked = ["doctor", "--topology", str(topology), "-o", "json", "--management-url"]

    real = runner.invoke(app, [*asked, cluster.management_url(2), "--url", url])

    emulator = Emulator(server_version="3.10.8")
    emulator.cluster.add_nodes("rabbit@twin2", "rabbit@twin3")
    twin_declared = runner.invoke(app, ["declare", str(topology)], obj=settings(emulator))
    assert twin_declared.exit_code == 0, twin_declared.output
    twin = runner.invoke(app, [*asked, UNREACHABLE], obj=settings(emulator))

    assert real.exit_code == 0, real.output
    assert twin.exit_code == 0, twin.output
    wanted = [
        ("no-consumer", "warning", "orders"),
        ("no-consumer", "warning", "payments"),
    ]
    assert health(json.loads(real.stdout)) == wanted
    assert health(json.loads(twin.stdout)) == wanted


def test_the_nodes_and_the_members_as_the_twin_states_them(
    cluster: LocalCluster, vhost: str, tmp_path: Path
) -> None:
    topology = tmp_path / "topology.toml"
    topology.write_text(TOPOLOGY, encoding="utf-8")
    url = cluster.url(1, vhost)
    declared = runner.invoke(app, ["declare", str(topology), "--url", url])
    assert declared.exit_code == 0, declared.output
    emulator = Emulator(server_version="3.10.8")
    emulator.cluster.add_nodes("rabbit@twin2", "rabbit@twin3")
    assert runner.invoke(app, ["declare", str(topology)], obj=settings(emulator)).exit_code == 0

    async def view(api: ManagementApi) -> tuple[Any, ...]:
        nodes = await api.node_resources()
        named = {node.name: f"node {index}" for index, node in enumerate(nodes)}
        queues = {
            queue.name: (
                queue.kind,
                None if queue.members is None else sorted(named[m] for m in queue.members),
                None if queue.online is None else sorted(named[m] for m in queue.online),
            )
            for queue in await api.queue_health()
        }
        return nodes_view(nodes), queues

    real = asyncio.run(view(HttpManagementApi(cluster.management_url(3), vhost=vhost)))
    twin = asyncio.run(view(emulator.management(UNREACHABLE, vhost=vhost)))

    every = ["node 0", "node 1", "node 2"]
    assert real == twin
    assert real[1]["payments"] == ("quorum", every, every)
    assert real[1]["orders"] == ("classic", None, None)
