"""rr on the local three-node cluster (docs/reference/cli.md, "Several hosts";
docs/reference/topology.md,
``replicas``): a quorum queue declared with ``replicas = 3`` has a member on every node, and
every command given the three nodes' URLs reaches the cluster through the next node while the
first one's application is stopped."""

from __future__ import annotations

import asyncio
import json
import secrets
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rabbitctl_retry.cli import app
from rabbitctl_retry.cli._common import amqp_connector
from rabbitctl_retry.transport.base import Properties
from tests.cluster.conftest import LocalCluster
from tests.dlq.support import death

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(300)]

runner = CliRunner()


@pytest.fixture
def names(cluster: LocalCluster) -> Iterator[str]:
    """A fresh queue name prefix; every queue under it is deleted afterwards."""
    prefix = f"rr-cluster-cli-{secrets.token_hex(4)}"
    yield prefix
    cluster.delete_queues(cluster.queue_names(prefix))


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


def publish_dead_letters(url: str, queue: str, origin: str, count: int) -> None:
    async def publish() -> None:
        connection = await amqp_connector(url)
        try:
            channel = await connection.channel(confirms=True)
            died = datetime(2026, 12, 1, tzinfo=UTC)
            for number in range(count):
                await channel.publish(
                    f"letter {number}".encode(),
                    routing_key=queue,
                    properties=Properties(
                        message_id=f"m{number}",
                        headers={"x-death": [death(origin, "rejected", died)]},
                    ),
                    mandatory=True,
                )
        finally:
            await connection.close()

    asyncio.run(publish())


def test_with_the_first_node_stopped_every_command_uses_the_next(
    cluster: LocalCluster, names: str, tmp_path: Path
) -> None:
    """declare, doctor, dlq inspect / export / replay / move / purge / import: each given the
    three URLs, with node 1 stopped, succeeds through node 2 (rr run: test_failover.py)."""
    dead, target = f"{names}.dead", f"{names}.target"
    topology = tmp_path / "topology.toml"
    topology.write_text(
        f'[queues."{target}"]\ntype = "quorum"\n\n[queues."{dead}"]\ntype = "quorum"\n',
        encoding="utf-8",
    )
    urls = url_arguments(cluster)
    exported = tmp_path / "dead.jsonl"
    cluster.stop_app(1)
    try:
        declared = runner.invoke(app, ["declare", str(topology), *urls])
        assert declared.exit_code == 0, declared.output
        publish_dead_letters(cluster.url(2), dead, target, 3)

        doctor = runner.invoke(app, ["doctor", *urls, "-o", "json"])
        assert doctor.exit_code == 0, doctor.output
        assert json.loads(doctor.stdout)["server"]["url"].endswith("@127.0.0.1:5682/")

        inspect = runner.invoke(app, ["dlq", "inspect", dead, *urls, "--yes", "-o", "json"])
        assert inspect.exit_code == 0, inspect.output
        assert json.loads(inspect.stdout)["count"] == 3

        export = runner.invoke(app, ["dlq", "export", dead, str(exported), *urls, "--yes"])
        assert export.exit_code == 0, export.output
        assert len(exported.read_text(encoding="utf-8").splitlines()) == 3

        replay = runner.invoke(app, ["dlq", "replay", dead, *urls, "--yes", "-o", "json"])
        assert replay.exit_code == 0, replay.output
        assert json.loads(replay.stdout)["replayed"] == 3

        move = runner.invoke(
            app, ["dlq", "move", target, "--to", dead, *urls, "--yes", "-o", "json"]
        )
        assert move.exit_code == 0, move.output
        assert json.loads(move.stdout)["moved"] == 3

        purge = runner.invoke(app, ["dlq", "purge", dead, *urls, "--yes"])
        assert purge.exit_code == 0, purge.output

        imported = runner.invoke(app, ["dlq", "import", str(exported), "--to", dead, *urls])
        assert imported.exit_code == 0, imported.output
        again = runner.invoke(app, ["dlq", "inspect", dead, *urls, "--yes", "-o", "json"])
        assert json.loads(again.stdout)["count"] == 3

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


REPLICATED = (
    '[queues."{prefix}.payouts"]\ntype = "quorum"\nmax_attempts = 3\n'
    'dead_letter = "{prefix}.payouts.dead"\ndelay = "dlx-ttl"\nreplicas = {replicas}\n\n'
    '[queues."{prefix}.payouts.dead"]\ntype = "quorum"\nreplicas = {replicas}\n\n'
    '[queues."{prefix}.refunds"]\n'
)


def queue_names(cluster: LocalCluster, prefix: str) -> list[str]:
    listed = json.loads(cluster.ctl(1, "list_queues", "name", "--formatter", "json") or "[]")
    return sorted(str(row["name"]) for row in listed if str(row["name"]).startswith(prefix))


def test_more_replicas_than_nodes_changes_nothing_and_says_why(
    cluster: LocalCluster, names: str, tmp_path: Path
) -> None:
    topology = tmp_path / "topology.toml"
    topology.write_text(REPLICATED.format(prefix=names, replicas=5), encoding="utf-8")
    arguments = ["declare", str(topology), "--url", cluster.url(1), "-o", "json"]

    result = runner.invoke(app, [*arguments, "--management-url", cluster.management_url(2)])

    assert result.exit_code == 1, result.output
    nodes = ", ".join(cluster.nodes)
    detail = (
        f"replicas = 5, but the cluster has 3 nodes ({nodes}): RabbitMQ would give the "
        "queue 3 without saying so"
    )
    conflicts = {
        op["name"]: op["detail"]
        for op in json.loads(result.stdout)["operations"]
        if op["status"] == "conflict"
    }
    assert conflicts == {
        f"{names}.payouts": detail,
        f"{names}.payouts.retry": detail,
        f"{names}.payouts.dead": detail,
    }
    assert queue_names(cluster, names) == []  # nothing was declared, not even refunds
    # Without the management URL rr cannot know the cluster's size: RabbitMQ decides.
    assert runner.invoke(app, arguments).exit_code == 0
    assert members(cluster, f"{names}.payouts") == list(cluster.nodes)


def test_declare_says_where_each_queue_lives(
    cluster: LocalCluster, names: str, tmp_path: Path
) -> None:
    topology = tmp_path / "topology.toml"
    text = REPLICATED.format(prefix=names, replicas=2)
    topology.write_text(
        f'[broker]\nmanagement_url = "{cluster.management_url(3)}"\n\n{text}', encoding="utf-8"
    )

    result = runner.invoke(app, ["declare", str(topology), "--url", cluster.url(1), "-o", "json"])

    assert result.exit_code == 0, result.output
    placed = {op["name"]: op["placement"] for op in json.loads(result.stdout)["operations"]}
    for queue in (f"{names}.payouts", f"{names}.payouts.retry", f"{names}.payouts.dead"):
        assert placed[queue]["members"] == members(cluster, queue)
        assert len(placed[queue]["members"]) == 2
        assert placed[queue]["leader"] in placed[queue]["members"]
    # a classic queue lives on the node it was declared through
    assert placed[f"{names}.refunds"] == {"leader": "rrc1@localhost", "members": ["rrc1@localhost"]}

    table = runner.invoke(
        app, ["declare", str(topology), "--url", cluster.url(1)], env={"COLUMNS": "250"}
    )
    assert table.exit_code == 0, table.output
    assert "members" in table.stdout
    assert "(leader)" in table.stdout


def test_a_management_login_refused_is_exit_77(
    cluster: LocalCluster, names: str, tmp_path: Path
) -> None:
    topology = tmp_path / "topology.toml"
    topology.write_text(REPLICATED.format(prefix=names, replicas=3), encoding="utf-8")
    wrong = "http://guest:wrong-password@127.0.0.1:15681/"

    result = runner.invoke(
        app, ["declare", str(topology), "--url", cluster.url(1), "--management-url", wrong]
    )

    assert result.exit_code == 77, result.output
    assert "the management API at http://guest:******@127.0.0.1:15681/ refused the login" in (
        result.stderr
    )
    assert "wrong-password" not in result.output
    assert queue_names(cluster, names) == []
