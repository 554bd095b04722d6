"""rr on the local three-node cluster (docs/cli.md, "Several hosts"; docs/topology.md,
``replicas``): a quorum queue declared with ``replicas = 3`` has a member on every node, and
every command given the three nodes' URLs reaches the cluster through the next node while the
first one's application is stopped."""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rabbitctl_retry.cli import app
from tests.cluster.conftest import LocalCluster

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(300)]

runner = CliRunner()


@pytest.fixture
def names(cluster: LocalCluster) -> Iterator[str]:
    """A fresh queue name prefix; every queue under it is deleted afterwards."""
    prefix = f"rr-cluster-cli-{secrets.token_hex(4)}"
    yield prefix
    listed = cluster.ctl(1, "list_queues", "name", "--formatter", "json")
    for row in json.loads(listed or "[]"):
        if str(row["name"]).startswith(prefix):
            cluster.ctl(1, "delete_queue", str(row["name"]))


def url_arguments(cluster: LocalCluster) -> list[str]:
    return [part for url in cluster.urls for part in ("--url", url)]


def declare(tmp_path: Path, topology_text: str, url: str) -> None:
    """``rr declare`` of a topology file holding ``topology_text``, through ``url``."""
    topology = tmp_path / "topology.toml"
    topology.write_text(topology_text, encoding="utf-8")
    declared = runner.invoke(app, ["declare", str(topology), "--url", url])
    assert declared.exit_code == 0, declared.output


def members(cluster: LocalCluster, queue: str) -> list[str]:
    listed = cluster.ctl(1, "list_queues", "name", "members", "--formatter", "json")
    for row in json.loads(listed):
        if row["name"] == queue:
            return sorted(str(member) for member in row["members"])
    raise AssertionError(f"no queue {queue!r} on the cluster")


def test_replicas_put_the_queue_and_its_wait_queue_on_every_node(
    cluster: LocalCluster, names: str, tmp_path: Path
) -> None:
    topology = tmp_path / "topology.toml"
    topology.write_text(
        f'[queues."{names}.payouts"]\ntype = "quorum"\nmax_attempts = 3\n'
        f'dead_letter = "{names}.payouts.dead"\ndelay = "dlx-ttl"\nreplicas = 3\n\n'
        f'[queues."{names}.single"]\ntype = "quorum"\nreplicas = 1\n',
        encoding="utf-8",
    )

    result = runner.invoke(app, ["declare", str(topology), *url_arguments(cluster)])

    assert result.exit_code == 0, result.output
    assert members(cluster, f"{names}.payouts") == list(cluster.nodes)
    assert members(cluster, f"{names}.payouts.retry") == list(cluster.nodes)
    assert len(members(cluster, f"{names}.single")) == 1


def test_with_the_first_node_stopped_every_command_uses_the_next(
    cluster: LocalCluster, names: str, tmp_path: Path
) -> None:
    queue = f"{names}.dead"
    declare(tmp_path, f'[queues."{queue}"]\ntype = "quorum"\n', cluster.url(2))
    cluster.stop_app(1)
    try:
        doctor = runner.invoke(app, ["doctor", *url_arguments(cluster), "-o", "json"])
        assert doctor.exit_code == 0, doctor.output
        assert json.loads(doctor.stdout)["server"]["url"].endswith("@127.0.0.1:5682/")

        inspect = runner.invoke(
            app, ["dlq", "inspect", queue, *url_arguments(cluster), "-o", "json"]
        )
        assert inspect.exit_code == 0, inspect.output
        assert json.loads(inspect.stdout)["count"] == 0

        only_first = runner.invoke(app, ["doctor", "--url", cluster.url(1)])
        assert only_first.exit_code == 69, only_first.output
    finally:
        cluster.start_app(1)


def test_a_classic_queue_whose_node_is_down_is_named_with_its_node(
    cluster: LocalCluster, names: str, tmp_path: Path
) -> None:
    queue = f"{names}.classic"
    declare(tmp_path, f'[queues."{queue}"]\n', cluster.url(1))
    cluster.stop_app(1)
    try:
        inspect = runner.invoke(app, ["dlq", "inspect", queue, *url_arguments(cluster)])
    finally:
        cluster.start_app(1)
    assert inspect.exit_code == 1, inspect.output
    assert inspect.stderr == (
        f"rr: error: home node 'rrc1@localhost' of durable queue '{queue}' in vhost '/' is "
        "down or inaccessible\n"
    )
