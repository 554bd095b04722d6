"""``rr doctor --topology`` on each shared server, in a vhost of the test's own: the consumers
the topology expects, by passive declares (every line, with or without a management API), and
on 4.3.6 with its management API the nodes' alarms and the quorum queues' members
(docs/reference/cli.md, "rr doctor"). A shared server runs without an alarm and with its one node
up: those findings must be absent here; the states that make them are played on the twin
(tests/cli/test_doctor_health_twin.py), never on a shared server."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from rabbitctl_retry.cli import app
from rabbitctl_retry.transport.base import Delivery
from rabbitctl_retry.transport.management_http import HttpManagementApi
from tests.backends import RabbitBackend
from tests.broker.test_doctor_deprecated_on_servers import MANAGEMENT_URLS, doctor
from tests.shared_node import current

runner = CliRunner()

TOPOLOGY = """
[queues.orders]
max_attempts = 3
dead_letter = "orders.dead"
delay_tiers = ["1s"]

[queues.payments]
type = "quorum"
max_attempts = 3
dead_letter = "payments.dead"
"""

HEALTH = {
    "node-alarm",
    "node-not-running",
    "alarms-not-checked",
    "no-consumer",
    "wait-queue-consumer",
    "dead-letter-queue-messages",
    "dead-letter-queue-growing",
    "queue-not-declared",
    "quorum-members-offline",
    "quorum-queue-unavailable",
    "quorum-members-not-checked",
}


@pytest.fixture
async def backend(amqp_url: str) -> AsyncIterator[RabbitBackend]:
    rabbit = RabbitBackend(amqp_url)
    rabbit.setup()
    try:
        yield rabbit
    finally:
        await rabbit.close()


def health(document: dict[str, Any]) -> list[tuple[str, str, str | None]]:
    return [
        (f["code"], f["level"], f["queue"]) for f in document["findings"] if f["code"] in HEALTH
    ]


async def test_the_consumers_the_topology_expects(backend: RabbitBackend, tmp_path: Path) -> None:
    management_url = MANAGEMENT_URLS.get(current().version)
    topology = tmp_path / "topology.toml"
    topology.write_text(TOPOLOGY, encoding="utf-8")
    declared = await asyncio.to_thread(
        runner.invoke, app, ["declare", str(topology), "--url", backend.url]
    )
    assert declared.exit_code == 0, declared.output
    given = ("--management-url", management_url) if management_url else ()
    not_checked = (
        []
        if management_url
        else [
            ("alarms-not-checked", "info", None),
            ("quorum-members-not-checked", "info", None),
        ]
    )

    code, document = await asyncio.to_thread(
        doctor, backend.url, "--topology", str(topology), *given
    )

    assert code == 0
    assert document["healthy"] is True
    assert sorted(health(document), key=str) == sorted(
        [
            ("no-consumer", "warning", "orders"),
            ("no-consumer", "warning", "payments"),
            *not_checked,
        ],
        key=str,
    )

    channel = await backend.channel()

    async def hold(delivery: Delivery) -> None:
        return None

    for queue in ("orders", "payments", "orders.retry.1s"):
        await channel.consume(queue, hold)

    code, document = await asyncio.to_thread(
        doctor, backend.url, "--topology", str(topology), *given
    )

    assert code == 1
    assert document["healthy"] is False
    assert sorted(health(document), key=str) == sorted(
        [("wait-queue-consumer", "error", "orders.retry.1s"), *not_checked], key=str
    )


async def test_the_quorum_members_online_and_no_alarm(backend: RabbitBackend) -> None:
    """What the findings rest on, read from 4.3.6's management API: its one node runs
    without an alarm, and a quorum queue has its member on it, online."""
    management_url = MANAGEMENT_URLS.get(current().version)
    if management_url is None:
        pytest.skip(f"the shared RabbitMQ {current().version} has no management API")
    api = HttpManagementApi(management_url, vhost=backend.vhost)
    channel = await backend.channel()
    await channel.queue_declare("health.q", arguments={"x-queue-type": "quorum"})
    [node] = await api.node_resources()
    assert (node.running, node.mem_alarm, node.disk_free_alarm) == (True, False, False)

    async def online() -> bool:
        found = {queue.name: queue for queue in await api.queue_health()}
        queue = found.get("health.q")
        return queue is not None and queue.members == queue.online == (node.name,)

    await backend.until(online, "health.q's member online")
