"""``rr run`` takes a changed ``max_attempts`` while it runs (docs/reference/runtime.md, "Changing
max_attempts while it runs"), as a process on the real servers:

- a classic queue on every server (rr counts the attempts): the file edited, ``SIGHUP``
  (``--reload-interval 0``: the signal alone), the reload's log line waited for; the message
  published after it gets the new number of deliveries;
- a quorum queue with ``settings = "policy"`` on RabbitMQ 4.3.6 (the shared server with a
  management API): the file edited, ``rr declare`` puts ``delivery-limit`` in ``rr.jobs``,
  ``rr run`` sees the file change by itself (its default ``--reload-interval``); the next
  message is delivered the new number of times and dead-lettered by the server (reason
  ``delivery_limit``).

Every wait is for progress (the log line, a depth), never a sleep.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rabbitctl_retry.cli import app
from rabbitctl_retry.transport.base import Properties
from tests.backends import RabbitBackend, vhost_pool
from tests.broker.test_doctor_deprecated_on_servers import MANAGEMENT_URLS
from tests.observe import depth, peek
from tests.shared_node import require_broker

pytestmark = pytest.mark.broker

runner = CliRunner(env={"COLUMNS": "200"})

SERVICE = """
import pathlib
from rabbitctl_retry import Outcome, subscriber


@subscriber("jobs")
async def handle(msg):
    with pathlib.Path("attempts").open("a") as attempts:
        attempts.write(f"{msg.message_id} {msg.attempt}\\n")
    return Outcome.retry()
"""

CLASSIC = """
[queues.jobs]
max_attempts = {attempts}
dead_letter = "jobs.dead"

[queues."jobs.dead"]
"""

QUORUM_IN_A_POLICY = """
[broker]
settings = "policy"

[queues.jobs]
type = "quorum"
max_attempts = {attempts}
dead_letter = "jobs.dead"
replicas = 1

[queues."jobs.dead"]
"""

RELOADED = "retry settings reloaded"


@dataclass
class RunningService:
    backend: RabbitBackend
    process: subprocess.Popen[bytes]
    directory: Path

    @property
    def log(self) -> str:
        return (self.directory / "rr.log").read_text(encoding="utf-8")

    def attempts(self) -> list[tuple[str, int]]:
        path = self.directory / "attempts"
        if not path.exists():
            return []
        pairs = (line.split() for line in path.read_text(encoding="utf-8").splitlines())
        return [(message_id, int(attempt)) for message_id, attempt in pairs]

    async def publish(self, message_id: str) -> None:
        channel = await self.backend.channel()
        await channel.publish(
            b"x", routing_key="jobs", properties=Properties(message_id=message_id), mandatory=True
        )

    async def until_dead(self, count: int) -> None:
        async def there() -> bool:
            return await depth(self.backend, "jobs.dead") == count

        await self.backend.until(there, f"{count} message(s) in jobs.dead")

    async def until_logged(self, text: str, times: int = 1) -> None:
        def logged() -> bool:
            if self.process.poll() is not None:
                raise AssertionError(f"rr run ended ({self.process.returncode}):\n{self.log}")
            return self.log.count(text) >= times

        await self.backend.until(logged, f"rr run logging {text!r}")

    async def stop(self) -> str:
        self.process.send_signal(signal.SIGTERM)
        code = await asyncio.to_thread(self.process.wait, 60)
        assert code == 0, self.log
        return self.log


@asynccontextmanager
async def running(
    backend: RabbitBackend, directory: Path, topology: Path, *args: str
) -> AsyncIterator[RunningService]:
    """``rr run`` of SERVICE on ``backend``'s vhost with ``topology``, logging to
    ``directory/rr.log``; killed at the end if still running."""
    (directory / "jobs_service.py").write_text(SERVICE, encoding="utf-8")
    command = [sys.executable, "-m", "rabbitctl_retry", "run", "jobs_service"]
    with (directory / "rr.log").open("wb") as log:
        process = subprocess.Popen(
            [*command, "--topology", str(topology), "--url", backend.url, *args],
            cwd=directory,
            stderr=log,
            stdout=subprocess.DEVNULL,
            env={**os.environ},
        )
    service = RunningService(backend, process, directory)
    try:
        await service.until_logged("consuming")
        yield service
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


async def test_sighup_gives_a_classic_queue_its_new_max_attempts(
    amqp_url: str, tmp_path: Path
) -> None:
    backend = RabbitBackend(amqp_url)
    backend.setup()
    topology = tmp_path / "topology.toml"
    topology.write_text(CLASSIC.format(attempts=2), encoding="utf-8")
    try:
        async with running(backend, tmp_path, topology, "--reload-interval", "0") as service:
            await service.publish("m1")
            await service.until_dead(1)
            topology.write_text(CLASSIC.format(attempts=4), encoding="utf-8")
            service.process.send_signal(signal.SIGHUP)
            await service.until_logged(RELOADED)
            await service.publish("m2")
            await service.until_dead(2)
            log = await service.stop()
        assert service.attempts() == [
            ("m1", 1),
            ("m1", 2),
            ("m2", 1),
            ("m2", 2),
            ("m2", 3),
            ("m2", 4),
        ], log
        (line,) = [line for line in log.splitlines() if RELOADED in line]
        assert 'changes="jobs.max_attempts 2 -> 4"' in line
        assert await depth(backend, "jobs") == 0
        letters = await peek(backend, "jobs.dead")
        retries = [
            (d.properties.message_id, (d.properties.headers or {}).get("x-ruststream-retry-count"))
            for d in letters
        ]
        assert retries == [("m1", "2"), ("m2", "4")]
    finally:
        await backend.close()


@pytest.fixture
async def backend_43() -> AsyncIterator[RabbitBackend]:
    """RabbitMQ 4.3.6 (the shared server with a management API), in a fresh vhost."""
    broker = require_broker("4.3")
    pool = vhost_pool(broker)
    rabbit = RabbitBackend(broker, pool=pool, vhost=pool.take_now())
    try:
        yield rabbit
    finally:
        await rabbit.close()  # gives the vhost back


def rr_declare(backend: RabbitBackend, topology: Path) -> str:
    result = runner.invoke(
        app,
        [
            "declare",
            str(topology),
            "--url",
            backend.url,
            "--management-url",
            MANAGEMENT_URLS["4.3"],
        ],
    )
    assert result.exit_code == 0, result.output
    return result.output


async def test_a_quorum_queue_in_a_policy_takes_the_limit_rr_declare_puts(
    backend_43: RabbitBackend, tmp_path: Path
) -> None:
    backend = backend_43
    topology = tmp_path / "topology.toml"
    topology.write_text(QUORUM_IN_A_POLICY.format(attempts=2), encoding="utf-8")
    await asyncio.to_thread(rr_declare, backend, topology)
    async with running(backend, tmp_path, topology) as service:
        await service.publish("m1")
        await service.until_dead(1)
        topology.write_text(QUORUM_IN_A_POLICY.format(attempts=4), encoding="utf-8")
        output = await asyncio.to_thread(rr_declare, backend, topology)
        assert "delivery-limit 1 -> 3" in output, output
        await service.until_logged(RELOADED)  # the file seen changed (every 1 s)
        await service.publish("m2")
        await service.until_dead(2)
        log = await service.stop()
    seen = service.attempts()
    assert Counter(message_id for message_id, _ in seen) == {"m1": 2, "m2": 4}, log
    assert [attempt for message_id, attempt in seen if message_id == "m2"] == [1, 2, 3, 4]
    (line,) = [line for line in log.splitlines() if RELOADED in line]
    assert 'changes="jobs.max_attempts 2 -> 4"' in line
    assert await depth(backend, "jobs") == 0
    letters = await peek(backend, "jobs.dead")
    assert [d.properties.message_id for d in letters] == ["m1", "m2"]
    reasons = [(d.properties.headers or {})["x-death"][0]["reason"] for d in letters]  # type: ignore[index,call-overload]
    assert reasons == ["delivery_limit", "delivery_limit"]
