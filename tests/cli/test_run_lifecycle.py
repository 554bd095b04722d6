"""``rr run`` in production (docs/reference/runtime.md, "Running it"): the connection carries a name
that says what it is (``rr run MODULE on HOST``), and the log says when rr starts, consumes,
stops, and why a connection was lost."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from rabbitctl_retry import Outcome
from rabbitctl_retry.runtime.handlers import Subscriber
from rabbitctl_retry.runtime.loader import HandlerSet
from rabbitctl_retry.runtime.service import RunOptions, Service
from tests.backends import EmulatorBackend, RabbitBackend
from tests.dlq.support import declare
from tests.shared_node import ctl_command

SERVICE = """
from rabbitctl_retry import Outcome, subscriber


@subscriber("lifecycle")
async def handle(msg):
    return Outcome.ack()
"""


@pytest.mark.broker
async def test_the_connection_is_named_and_start_and_stop_are_logged(
    amqp_url: str, tmp_path: Path
) -> None:
    backend = RabbitBackend(amqp_url)
    backend.setup()
    try:
        await declare(backend, "lifecycle")
        (tmp_path / "lifecycle_svc.py").write_text(SERVICE, encoding="utf-8")
        command = [sys.executable, "-m", "rabbitctl_retry", "run", "lifecycle_svc"]
        process = subprocess.Popen(
            [*command, "--url", backend.url, "--log-format", "json"],
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ},
        )
        try:
            assert process.stderr is not None
            started = [json.loads(process.stderr.readline()) for _ in range(2)]
            if process.poll() is not None:
                pytest.fail(process.communicate()[1])
            assert [line["event"] for line in started] == ["connected", "consuming"]

            name = f"rr run lifecycle_svc on {socket.gethostname()}"
            vhost = backend.url.rsplit("/", 1)[1]
            listed = ""
            for _ in range(50):  # the management of connections is eventually consistent
                done = subprocess.run(
                    ctl_command("list_connections", "-q", "vhost", "client_properties"),
                    capture_output=True,
                    text=True,
                    check=True,
                )
                listed = done.stdout
                if name in listed:
                    break
                time.sleep(0.1)
            assert name in listed, (vhost, listed)

            process.send_signal(signal.SIGTERM)
            _, rest = process.communicate(timeout=30)
            assert process.returncode == 0, rest
            messages = [json.loads(line)["event"] for line in rest.splitlines() if line]
            assert messages[-2:] == ["stopping", "stopped"]
        finally:
            if process.poll() is None:
                process.kill()
                process.communicate()
    finally:
        await backend.close()


async def test_a_lost_connection_is_logged_with_its_reason(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(logging.getLogger("rr"), "propagate", True)
    caplog.set_level(logging.INFO, logger="rr")
    backend = EmulatorBackend()
    try:
        await declare(backend, "lifecycle")

        async def handle(msg: object) -> Outcome:
            return Outcome.ack()

        service = Service(
            HandlerSet(module="m", subscribers=(Subscriber("lifecycle", handle, "m:handle"),)),
            topology=None,
            connect=backend.connect,
            options=RunOptions(reconnect_max_s=0.1),
        )
        async with service.running():
            backend.emulator.drop_connections()
            for _ in range(100):
                if service.connections >= 2:
                    break
                await asyncio.sleep(0.01)
        # One logger may reach the capture twice (an earlier in-process command configured
        # rr's logging): count distinct records by their text and fields.
        records = ((r.getMessage(), str(getattr(r, "rr", ""))) for r in caplog.records)
        seen = list(dict.fromkeys(records))
        lost = [fields for message, fields in seen if message.startswith("connection lost")]
        assert len(lost) == 1
        assert "CONNECTION_FORCED" in lost[0]
        assert [message for message, _ in seen][-2:] == ["stopping", "stopped"]
    finally:
        await backend.close()


@dataclass
class RunningModule:
    backend: RabbitBackend
    process: subprocess.Popen[bytes]
    log: Path

    async def stop(self) -> int:
        """SIGTERM; the exit code (within a minute)."""
        self.process.send_signal(signal.SIGTERM)
        return await asyncio.to_thread(self.process.wait, 60)


@asynccontextmanager
async def running_module(
    amqp_url: str, tmp_path: Path, source: str, *args: str, **popen: Any
) -> AsyncIterator[RunningModule]:
    """``rr run`` of ``source`` (a module of its own) on queue ``lifecycle`` of a fresh vhost,
    its output in ``tmp_path/rr.log``; killed at the end if still running."""
    backend = RabbitBackend(amqp_url)
    backend.setup()
    try:
        await declare(backend, "lifecycle")
        (tmp_path / "lifecycle_module.py").write_text(source, encoding="utf-8")
        command = [sys.executable, "-m", "rabbitctl_retry", "run", "lifecycle_module"]
        with (tmp_path / "rr.log").open("wb") as log:
            process = subprocess.Popen(
                [*command, "--url", backend.url, *args], cwd=tmp_path, stderr=log, **popen
            )
        try:
            yield RunningModule(backend, process, tmp_path / "rr.log")
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
    finally:
        await backend.close()


STUCK_SERVICE = """
import pathlib, time
from rabbitctl_retry import subscriber


@subscriber("lifecycle")
def stuck(msg):
    pathlib.Path("started").write_text("")
    time.sleep(3600)
"""


@pytest.mark.broker
async def test_a_sync_handler_that_never_returns_does_not_keep_rr_run_alive(
    amqp_url: str, tmp_path: Path
) -> None:
    """A thread cannot be stopped, and Python waits for its worker threads at exit: rr run
    stayed alive (here: an hour) after it logged `stopped`. It now ends at once after the
    stop, and says so; the delivery went back to its queue."""
    async with running_module(
        amqp_url, tmp_path, STUCK_SERVICE, "--shutdown-timeout", "1", stdout=subprocess.DEVNULL
    ) as run:
        channel = await run.backend.channel()
        await channel.publish(b"x", routing_key="lifecycle")
        await run.backend.until(lambda: (tmp_path / "started").exists(), "the handler to start")
        code = await run.stop()  # it took an hour before
        output = run.log.read_text()
        assert code == 0, output
        assert "synchronous handlers still run after the stop" in output
        assert output.index("stopped") < output.index("synchronous handlers still run")

        async def back() -> bool:
            return (await channel.queue_declare("lifecycle", passive=True)).message_count == 1

        await run.backend.until(back, "the message back in its queue")


PRINTING_SERVICE = """
import pathlib
from rabbitctl_retry import subscriber


@subscriber("lifecycle")
def printing(msg):
    with pathlib.Path("calls").open("a") as calls:
        calls.write("call\\n")
    print("handled", msg.message_id)
"""


@pytest.mark.broker
async def test_a_handler_that_prints_with_stdout_closed_is_not_failed(
    amqp_url: str, tmp_path: Path
) -> None:
    """stdout is the handlers' in rr run: a print() with stdout closed does nothing, as in
    Python, and never fails the message (rr's rule for its own output does not apply)."""
    async with running_module(
        amqp_url, tmp_path, PRINTING_SERVICE, preexec_fn=lambda: os.close(1)
    ) as run:
        channel = await run.backend.channel()
        await channel.publish(b"x", routing_key="lifecycle")

        async def acked() -> bool:
            info = await channel.queue_declare("lifecycle", passive=True)
            return (tmp_path / "calls").exists() and info.message_count == 0

        await run.backend.until(acked, "the message handled")
        code = await run.stop()
        output = run.log.read_text()
    assert code == 0, output
    assert (tmp_path / "calls").read_text() == "call\n", output  # handled once, not retried
