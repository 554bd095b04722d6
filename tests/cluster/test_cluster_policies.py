"""``settings = "policy"`` on the local three-node RabbitMQ 3.10 cluster
(docs/how-to/migrate-to-quorum.md, "Changing a topology"): ``rr declare`` through node 2's AMQP port
and node 1's management API puts rr's policy, the quorum queue gets a member on every node without
its settings as arguments, and a message is dead-lettered after the policy's delivery limit."""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rabbitctl_retry.cli import app
from rabbitctl_retry.cli._common import amqp_connector
from rabbitctl_retry.errors import NotFound
from rabbitctl_retry.server import Policy
from rabbitctl_retry.transport.base import Channel, Delivery
from rabbitctl_retry.transport.management_http import HttpManagementApi
from tests.cluster.conftest import LocalCluster

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(300)]

runner = CliRunner()

DEADLINE_S = 30.0


@pytest.fixture
def names(cluster: LocalCluster) -> Iterator[str]:
    """A fresh queue name prefix; its queues and rr's policies for them are deleted after."""
    prefix = f"rr-cluster-policy-{secrets.token_hex(4)}"
    yield prefix
    api = HttpManagementApi(cluster.management_url(1), vhost="/")
    for name in (f"rr.{prefix}.jobs", f"rr.{prefix}.jobs.retry"):
        with contextlib.suppress(NotFound):
            asyncio.run(api.delete_policy(name))
    cluster.delete_queues(cluster.queue_names(prefix))


async def until(check: Callable[[], Awaitable[bool]], what: str) -> None:
    """Return once ``check()`` holds (polled), else fail after :data:`DEADLINE_S`."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + DEADLINE_S
    while not await check():
        if loop.time() > deadline:
            raise AssertionError(f"the cluster did not get to {what} in {DEADLINE_S:g} s")
        await asyncio.sleep(0.01)


async def _depth(channel: Channel, queue: str) -> int:
    return (await channel.queue_declare(queue, passive=True)).message_count


def deliveries_until_dead(url: str, queue: str, dead: str) -> int:
    async def run() -> int:
        connection = await amqp_connector(url)
        try:
            publisher = await connection.channel(confirms=True)
            await publisher.publish(b"job", routing_key=queue)
            channel = await connection.channel()
            got: list[Delivery] = []

            async def delivered_or_dead() -> bool:
                delivery = await channel.get(queue)
                if delivery is not None:
                    got.append(delivery)
                    return True
                return await _depth(channel, dead) == 1

            deliveries = 0
            while True:
                got.clear()
                await until(delivered_or_dead, f"a delivery of {queue}, or its dead letter")
                if not got:
                    return deliveries
                deliveries += 1
                assert deliveries <= 20
                await channel.reject(got[0].delivery_tag, requeue=True)
        finally:
            await connection.close()

    return asyncio.run(run())


def test_policy_held_settings_on_the_cluster(
    cluster: LocalCluster, names: str, tmp_path: Path
) -> None:
    jobs, dead = f"{names}.jobs", f"{names}.jobs.dead"
    topology = tmp_path / "topology.toml"
    topology.write_text(
        f'[broker]\nsettings = "policy"\n\n[queues."{jobs}"]\ntype = "quorum"\n'
        f'max_attempts = 3\ndead_letter = "{dead}"\ndelay = "dlx-ttl"\nreplicas = 3\n',
        encoding="utf-8",
    )

    result = runner.invoke(
        app,
        [
            "declare",
            str(topology),
            "--url",
            cluster.url(2),
            "--management-url",
            cluster.management_url(1),
            "-o",
            "json",
        ],
    )

    assert result.exit_code == 0, result.output
    statuses = {op["name"]: op["status"] for op in json.loads(result.stdout)["operations"]}
    assert statuses == {dead: "created", jobs: "created", f"{jobs}.retry": "created"}
    api = HttpManagementApi(cluster.management_url(3), vhost="/")
    policies = {p.name: p for p in asyncio.run(api.policies()) if p.name.startswith("rr.")}
    assert policies[f"rr.{jobs}"] == Policy.of(
        f"rr.{jobs}",
        "^" + jobs.replace(".", "\\.").replace("-", "\\-") + "$",
        {
            "dead-letter-exchange": "",
            "dead-letter-routing-key": dead,
            "dead-letter-strategy": "at-least-once",
            "delivery-limit": 2,
            "overflow": "reject-publish",
        },
        priority=100,
    )
    listed = json.loads(
        cluster.ctl(1, "list_queues", "name", "arguments", "members", "--formatter", "json")
    )
    row = next(r for r in listed if r["name"] == jobs)
    assert sorted(str(member) for member in row["members"]) == list(cluster.nodes)
    assert {key for key, _kind, _value in row["arguments"]} == {
        "x-queue-type",
        "x-quorum-initial-group-size",
    }
    assert deliveries_until_dead(cluster.url(1), jobs, dead) == 3
