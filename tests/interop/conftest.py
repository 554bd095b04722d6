"""rr among other clients (docs/how-to/other-clients.md): each test runs on every shared RabbitMQ,
in a vhost of its own where ``rr declare`` put the topology below, and talks to it with real clients
from PyPI (pika, aio-pika, FastStream, kombu) and, where ``node`` is installed, Node's amqplib
(``tests/interop/node``; ``scripts/test.sh`` installs it)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from rabbitctl_retry.transport.base import Properties
from tests.backends import RabbitBackend, backend_of
from tests.dlq.support import rr
from tests.shared_node import BROKERS, chosen_versions

NODE_DIR = Path(__file__).resolve().parent / "node"

TOPOLOGY = """
[queues.jobs]
max_attempts = 3
dead_letter = "jobs.dead"
delay = "dlx-ttl"

[queues.payments]
type = "quorum"
max_attempts = 3
dead_letter = "payments.dead"
"""
"""A classic queue whose attempts rr counts (no argument on the broker) and a quorum queue
whose attempts the server counts (``x-delivery-limit = 2``), each with its dead-letter queue,
the classic one with a wait queue."""

QUEUES = ("jobs", "jobs.retry", "jobs.dead", "payments", "payments.dead")


@pytest.fixture(params=[pytest.param(v, id=v, marks=pytest.mark.broker) for v in chosen_versions()])
async def rabbit(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[RabbitBackend]:
    """A shared server, in a fresh vhost holding :data:`TOPOLOGY` as ``rr declare`` puts it."""
    async with backend_of("rabbitmq", request.param) as backend:
        assert isinstance(backend, RabbitBackend)
        topology = tmp_path / "topology.toml"
        topology.write_text(TOPOLOGY)
        declared = await rr(backend, "declare", str(topology))
        assert declared.exit_code == 0, declared.output
        yield backend


def release_of(backend: RabbitBackend) -> tuple[int, int]:
    version = BROKERS[backend.version].server_version
    return version.major, version.minor


def amqplib_ready() -> bool:
    """Whether Node's amqplib can run here; a test without it skips, but fails in CI when CI
    has ``node`` (CI installs amqplib then: ``scripts/test.sh``)."""
    node = shutil.which("node")
    installed = (NODE_DIR / "node_modules" / "amqplib").is_dir()
    if node is not None and installed:
        return True
    why = "node is not installed" if node is None else f"amqplib is not in {NODE_DIR}"
    if os.environ.get("CI") == "true" and node is not None:
        pytest.fail(f"{why}: scripts/test.sh installs it with npm", pytrace=False)
    pytest.skip(why)


async def amqplib(url: str, *args: str) -> dict[str, Any]:
    """One action of ``tests/interop/node/client.js`` against ``url``; its JSON answer."""
    amqplib_ready()
    done = await asyncio.to_thread(
        subprocess.run,
        ["node", str(NODE_DIR / "client.js"), url, *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    answer: dict[str, Any] = json.loads(done.stdout)
    return answer


async def publish(backend: RabbitBackend, queue: str, ids: list[str]) -> None:
    """Messages with these ids, published to ``queue`` by rr's own client, with confirms."""
    channel = await backend.channel(confirms=True)
    for message_id in ids:
        await channel.publish(
            message_id.encode(),
            routing_key=queue,
            properties=Properties(message_id=message_id, delivery_mode=2),
            mandatory=True,
        )


__all__ = ["QUEUES", "TOPOLOGY", "amqplib", "amqplib_ready", "publish", "rabbit", "release_of"]
