"""Stopping and losing the connection lose nothing (real RabbitMQ).

* SIGTERM to ``rr run`` while 100 messages are in flight: every message was handled or is
  still in its queue.
* A forced close of the connection (``rabbitmqctl close_connection``) while processing: the
  runtime reconnects and every message is handled (at least once).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from rabbitctl_retry import Message
from rabbitctl_retry.runtime.handlers import Subscriber
from rabbitctl_retry.runtime.loader import HandlerSet
from rabbitctl_retry.runtime.service import RunOptions, Service
from rabbitctl_retry.topology.load import load_text
from tests.backends import RabbitBackend, publish
from tests.observe import depth, peek
from tests.shared_node import ctl_command

pytestmark = pytest.mark.broker

TOPOLOGY = """
[queues.work]
max_attempts = 5
dead_letter = "work.dead"
"""

HANDLER_MODULE = """
import asyncio, os
from rabbitctl_retry import Message, subscriber

DONE = os.environ["RR_TEST_DONE_FILE"]
STARTED = os.environ["RR_TEST_STARTED_FILE"]
SLEEP_S = float(os.environ["RR_TEST_SLEEP_S"])

@subscriber("work")
async def handle(msg: Message) -> None:
    with open(STARTED, "a") as f:
        f.write(msg.text() + "\\n")
    await asyncio.sleep(SLEEP_S)
    with open(DONE, "a") as f:
        f.write(msg.text() + "\\n")
"""


@pytest.fixture
async def rabbit(amqp_url: str) -> RabbitBackend:
    backend = RabbitBackend(amqp_url)
    backend.setup()
    yield backend  # type: ignore[misc]
    await backend.close()


def _lines(path: Path) -> list[str]:
    return path.read_text().split() if path.exists() else []


@pytest.mark.parametrize(
    ("sleep_s", "shutdown_timeout_s"),
    [(5.0, 30.0), (30.0, 0.5)],
    ids=["in-flight-finish", "in-flight-returned"],
)
async def test_sigterm_with_100_in_flight_loses_nothing(
    rabbit: RabbitBackend, tmp_path: Path, sleep_s: float, shutdown_timeout_s: float
) -> None:
    (tmp_path / "topology.toml").write_text(TOPOLOGY)
    (tmp_path / "slow_handlers.py").write_text(textwrap.dedent(HANDLER_MODULE))
    done, started = tmp_path / "done.txt", tmp_path / "started.txt"
    env = dict(os.environ)
    env.update(
        RR_TEST_DONE_FILE=str(done),
        RR_TEST_STARTED_FILE=str(started),
        RR_TEST_SLEEP_S=str(sleep_s),
        RR_URL=rabbit.url,
    )
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "rabbitctl_retry",
            "run",
            str(tmp_path / "slow_handlers.py"),
            "--topology",
            str(tmp_path / "topology.toml"),
            "--prefetch",
            "100",
            "--shutdown-timeout",
            str(shutdown_timeout_s),
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        await _until(lambda: _queue_exists_sync(rabbit), "the service to declare its queue")
        ids = [str(n) for n in range(100)]
        for message_id in ids:
            await publish(rabbit, "work", message_id.encode())
        await _until(lambda: len(_lines(started)) >= 100, "100 handlers in flight")
        assert len(_lines(done)) < 100
        process.send_signal(signal.SIGTERM)
        output, _ = await asyncio.to_thread(process.communicate, timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0, output.decode()
    left = [delivery.body.decode() for delivery in await peek(rabbit, "work")]
    handled = _lines(done)
    assert sorted(set(handled) | set(left), key=int) == ids
    if shutdown_timeout_s > sleep_s:
        assert sorted(handled, key=int) == ids
        assert left == []
    else:
        assert handled == []
        assert sorted(left, key=int) == ids
    assert await depth(rabbit, "work.dead") == 0


def _queue_exists_sync(rabbit: RabbitBackend) -> bool:
    result = subprocess.run(
        ctl_command("-q", "list_queues", "-p", rabbit.vhost, "name"),
        capture_output=True,
        text=True,
    )
    return "work" in result.stdout.split()


async def _until(predicate: object, what: str, timeout_s: float = 60) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not predicate():  # type: ignore[operator]
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


async def test_forced_connection_close_reconnects_and_loses_nothing(
    rabbit: RabbitBackend,
) -> None:
    handled: list[str] = []
    closed = asyncio.Event()

    async def handle(msg: Message) -> None:
        await asyncio.sleep(0.25)
        if len(handled) >= 30:  # the rest waits for the forced close, however long it takes
            await closed.wait()
        handled.append(msg.text())

    service = Service(
        HandlerSet(module="test", subscribers=(Subscriber("work", handle, "test:handle"),)),
        topology=load_text(TOPOLOGY),
        connect=rabbit.connect,
        options=RunOptions(prefetch=20, shutdown_timeout_s=5),
    )
    task = asyncio.ensure_future(service.run())
    await service.wait_ready()
    ids = [str(n) for n in range(200)]
    for message_id in ids:
        await publish(rabbit, "work", message_id.encode())
    try:
        await _until(lambda: len(handled) >= 30, "30 handled")
        await asyncio.to_thread(rabbit.close_all_connections)
        closed.set()
        await _until(lambda: set(handled) >= set(ids), "every message handled", timeout_s=90)
    finally:
        service.stop()
        await task
    assert service.connections >= 2
    assert set(handled) == set(ids)
    assert await depth(rabbit, "work") == 0
    assert await depth(rabbit, "work.dead") == 0
    duplicates = len(handled) - len(set(handled))
    assert duplicates <= 20  # at most the prefetch window in flight at the close
    print(json.dumps({"handled": len(handled), "duplicates": duplicates}))
