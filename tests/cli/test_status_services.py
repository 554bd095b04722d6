"""``rr status --service URL`` (docs/reference/cli.md, "rr status"): a queue a running ``rr run``
paused shows as paused, with the time it resumes, read from the service's metrics page; a
real ``rr run`` process on RabbitMQ."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from rabbitctl_retry.transport.base import Properties
from tests.backends import RabbitBackend
from tests.dlq.support import publish_all, rr
from tests.metrics_page import answers, free_port, get, sample, until

SERVICE = """
from rabbitctl_retry import Outcome, subscriber


@subscriber("held")
async def handle(msg):
    return Outcome.pause(600)  # a dependency down for long
"""

TOPOLOGY = """
[queues.held]
"""


@pytest.mark.broker
async def test_status_shows_the_queue_a_service_paused(amqp_url: str, tmp_path: Path) -> None:
    backend = RabbitBackend(amqp_url)
    backend.setup()
    try:
        await _paused_and_shown(backend, tmp_path)
    finally:
        await backend.close()


async def _paused_and_shown(backend: RabbitBackend, tmp_path: Path) -> None:
    port = free_port()
    (tmp_path / "held_svc.py").write_text(SERVICE, encoding="utf-8")
    (tmp_path / "topology.toml").write_text(TOPOLOGY, encoding="utf-8")
    command = [sys.executable, "-m", "rabbitctl_retry", "run", "held_svc", "-t", "topology.toml"]
    process = subprocess.Popen(
        [*command, "--url", backend.url, "--metrics-port", str(port)],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ},
    )
    service = f"http://127.0.0.1:{port}/metrics"
    nobody = f"http://127.0.0.1:{free_port()}/metrics"  # nothing listens there
    try:
        until(lambda: answers(process, f"http://127.0.0.1:{port}/healthz"), lambda a: a[0] == 200)
        await publish_all(backend, "held", [(b"m1", Properties())])
        until(lambda: get(service)[1], lambda page: sample(page, "rr_paused", queue="held") == 1)

        shown = await rr(backend, "status", "held", "--service", service, "-o", "json")
        assert shown.exit_code == 0, shown.output
        document = json.loads(shown.stdout)
        (queue,) = document["queues"]
        assert queue["consumers"] == 0  # the broker's side: cancelled
        assert queue["paused_by"] == [service]
        resumes = datetime.fromisoformat(queue["paused_until"].replace("Z", "+00:00"))
        assert resumes > datetime.now(UTC)
        assert document["services"] == [{"url": service, "read": True, "error": None}]

        table = await rr(backend, "status", "held", "--service", service)
        assert table.exit_code == 0, table.output
        assert "paused, resumes in " in table.stdout
        assert table.stderr == ""

        # without --service: the document of before, no field more
        plain = await rr(backend, "status", "held", "-o", "json")
        assert plain.exit_code == 0, plain.output
        (before,) = json.loads(plain.stdout)["queues"]
        assert "services" not in json.loads(plain.stdout)
        assert set(queue) - set(before) == {"paused_until", "paused_by"}
        assert {key: before[key] for key in before} == {key: queue[key] for key in before}
        plain_table = await rr(backend, "status", "held")
        assert "service" not in plain_table.stdout.splitlines()[0]
        assert "paused" not in plain_table.stdout

        # a service that cannot be read: a warning naming it, the reading as it is
        mixed = await rr(
            backend, "status", "held", "--service", nobody, "--service", service, "-o", "json"
        )
        assert mixed.exit_code == 0, mixed.output
        assert f"rr: warning: service {nobody}: cannot read it" in mixed.stderr
        (queue,) = json.loads(mixed.stdout)["queues"]
        assert queue["paused_by"] == [service]
        services = json.loads(mixed.stdout)["services"]
        assert [(s["url"], s["read"]) for s in services] == [(nobody, False), (service, True)]
    finally:
        process.send_signal(signal.SIGTERM)  # stops at once, in the middle of the pause
        process.communicate(timeout=30)
    assert process.returncode == 0
