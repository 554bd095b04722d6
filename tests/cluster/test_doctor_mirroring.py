"""``rr doctor --management-url`` on the local three-node RabbitMQ 3.10 cluster: a classic
queue of the topology that an ``ha-mode`` policy mirrors (set with ``rabbitmqctl set_policy``
in a vhost of the test's own, deleted after) is a ``classic-mirroring`` warning that names
the queue and the policy, and says what RabbitMQ 4.0 does to it; exit 0, since mirroring
works on 3.10 (docs/reference/cli.md, "rr doctor")."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rabbitctl_retry.cli import app
from tests.cluster.conftest import LocalCluster

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(300)]

runner = CliRunner()

TOPOLOGY = """
[queues.orders]

[queues.payments]
type = "quorum"
replicas = 3
"""


@pytest.fixture
def vhost(cluster: LocalCluster) -> Iterator[str]:
    """A vhost of the test's own, with an ha-mode policy for ``orders``; deleted after."""
    with cluster.own_vhost("rr-mirroring") as name:
        cluster.ctl(
            1,
            "set_policy",
            "-p",
            name,
            "--apply-to",
            "queues",
            "ha-two",
            "^orders$",
            '{"ha-mode":"exactly","ha-params":2,"ha-sync-mode":"automatic"}',
        )
        yield name


def test_doctor_names_the_mirrored_classic_queue(
    cluster: LocalCluster, vhost: str, tmp_path: Path
) -> None:
    topology = tmp_path / "topology.toml"
    topology.write_text(TOPOLOGY, encoding="utf-8")
    url = cluster.url(2, vhost)
    declared = runner.invoke(app, ["declare", str(topology), "--url", url])
    assert declared.exit_code == 0, declared.output

    result = runner.invoke(
        app,
        [
            "doctor",
            "--topology",
            str(topology),
            "--url",
            url,
            "--management-url",
            cluster.management_url(1),
            "-o",
            "json",
        ],
    )

    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["server"]["version"] == "3.10.8"
    mirroring = [f for f in document["findings"] if f["code"].startswith("classic-mirroring")]
    assert [(f["code"], f["level"], f["queue"]) for f in mirroring] == [
        ("classic-mirroring-policy", "info", None),
        ("classic-mirroring", "warning", "orders"),
    ]
    message = mirroring[1]["message"]
    assert "'orders' is a classic queue mirrored by the policy 'ha-two'" in message
    assert "ha-mode = 'exactly', ha-params = 2" in message
    assert "losing that node loses its messages" in message
    assert 'type = "quorum"' in message


POLICY_MODE = """
[broker]
settings = "policy"

[queues.orders]
max_attempts = 3
delay = "dlx-ttl"
"""


def test_rrs_policy_shadows_the_ha_policy(
    cluster: LocalCluster, vhost: str, tmp_path: Path
) -> None:
    """The wait queue ``orders.retry`` is held by rr's policy (priority 100), which outranks
    ``ha-two`` (priority 0): it is not mirrored, and rr declare's plan warns of it."""
    cluster.ctl(1, "set_policy", "-p", vhost, "ha-two", "^orders", '{"ha-mode":"all"}')
    topology = tmp_path / "topology.toml"
    topology.write_text(POLICY_MODE, encoding="utf-8")
    url = cluster.url(1, vhost)
    api = ["--url", url, "--management-url", cluster.management_url(1)]
    declared = runner.invoke(app, ["declare", str(topology), *api])
    assert declared.exit_code == 0, declared.output
    assert "outranks 'ha-two'" in declared.output

    result = runner.invoke(app, ["doctor", "--topology", str(topology), *api, "-o", "json"])

    assert result.exit_code == 0, result.output
    mirroring = [
        (f["code"], f["queue"])
        for f in json.loads(result.stdout)["findings"]
        if f["code"].startswith("classic-mirroring")
    ]
    assert mirroring == [
        ("classic-mirroring-policy", None),
        ("classic-mirroring", "orders"),
        ("classic-mirroring-shadowed", "orders.retry"),
    ]


def test_doctor_without_the_api_says_mirroring_was_not_checked(
    cluster: LocalCluster, vhost: str
) -> None:
    url = cluster.url(1, vhost)
    result = runner.invoke(app, ["doctor", "--url", url, "-o", "json"])

    assert result.exit_code == 0, result.output
    codes = {f["code"]: f["level"] for f in json.loads(result.stdout)["findings"]}
    assert codes["classic-mirroring-not-checked"] == "info"
