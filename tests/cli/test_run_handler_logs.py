"""A handler's own log lines under ``rr run`` (docs/reference/handlers.md, "Logs from handlers"):
they print at ``--log-level``, in rr's format (text or JSON), with the message id, queue and
attempt of the call they were made in; a handler module that puts a handler of its own on
the root logger prints its way, once. ``rr run`` as a process against RabbitMQ."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from rabbitctl_retry.transport.base import Properties
from tests.backends import RabbitBackend, publish
from tests.dlq.support import declare

SERVICE = """
import logging
{setup}
from rabbitctl_retry import subscriber

log = logging.getLogger("myapp")


@subscriber("charges")
async def charge(msg):
    log.info("charged %s", msg.body.decode())
    log.warning("balance low after %s", msg.body.decode())
"""

BASIC_CONFIG = 'logging.basicConfig(level=logging.DEBUG, format="MINE %(message)s")'
"""Does nothing: rr's handler is on the root logger already."""

OWN_HANDLER = """import sys
_own = logging.StreamHandler(sys.stderr)
_own.setFormatter(logging.Formatter("MINE %(levelname)s %(message)s"))
logging.getLogger().addHandler(_own)"""

WORKERS = "# rr run --workers 2"
"""No setup: the case runs with two worker processes."""

DEADLINE_S = 60.0


class Lines:
    """The process's stderr, line by line, read in a thread (a read never blocks the test
    past its deadline)."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.seen: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        assert process.stderr is not None
        stream = process.stderr
        threading.Thread(target=self._read, args=(stream,), daemon=True).start()

    def _read(self, stream: object) -> None:
        with stream:  # type: ignore[attr-defined]
            for line in stream:  # type: ignore[attr-defined]
                self._queue.put(line.rstrip("\n"))
        self._queue.put(None)

    def until(self, needle: str) -> str:
        """The first line from now on that holds ``needle``."""
        while True:
            line = self._queue.get(timeout=DEADLINE_S)
            if line is None:
                pytest.fail(f"rr run ended before a line with {needle!r}: {self.seen}")
            self.seen.append(line)
            if needle in line:
                return line

    def rest(self) -> list[str]:
        while (line := self._queue.get(timeout=DEADLINE_S)) is not None:
            self.seen.append(line)
        return self.seen


@contextmanager
def rr_run(tmp_path: Path, url: str, *options: str) -> Iterator[Lines]:
    command = [sys.executable, "-m", "rabbitctl_retry", "run", "charges_svc", "--url", url]
    process = subprocess.Popen(
        [*command, *options],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ},
    )
    lines = Lines(process)
    try:
        yield lines
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=DEADLINE_S) == 0, lines.rest()
        lines.rest()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
            lines.rest()  # its stderr read to the end, and closed


@pytest.mark.broker
@pytest.mark.parametrize(
    ("log_format", "level", "setup"),
    [
        ("text", "info", ""),
        ("json", "info", BASIC_CONFIG),
        ("text", "warning", ""),
        ("text", "info", OWN_HANDLER),
        ("json", "info", WORKERS),
    ],
    ids=["text", "json-basicConfig", "warning", "own-handler", "workers"],
)
async def test_a_handlers_own_lines_print_with_the_message_id_and_attempt(
    amqp_url: str, tmp_path: Path, log_format: str, level: str, setup: str
) -> None:
    backend = RabbitBackend(amqp_url)
    backend.setup()
    try:
        await declare(backend, "charges")
        (tmp_path / "charges_svc.py").write_text(SERVICE.format(setup=setup), encoding="utf-8")
        options = ("--log-format", log_format, "--log-level", level)
        if setup == WORKERS:
            options += ("--workers", "2")
        with rr_run(tmp_path, backend.url, *options) as lines:
            if level == "info":
                lines.until("consuming")
            if setup == WORKERS:  # both workers consume
                lines.until("consuming")
            await publish(backend, "charges", b"card-1", Properties(message_id="m-1"))
            warned = lines.until("balance low after card-1")
            await publish(backend, "charges", b"card-2", Properties(message_id="m-2"))
            lines.until("balance low after card-2")
        seen = lines.seen
        about_one = [line for line in seen if "card-1" in line]
        if setup == OWN_HANDLER:  # theirs prints, rr's left the root: each line once
            assert about_one == [
                "MINE INFO charged card-1",
                "MINE WARNING balance low after card-1",
            ]
            assert any("the handler modules configured the root logger" in s for s in seen)
            return
        if level == "warning":  # the INFO line is below --log-level
            assert len(about_one) == 1
            assert about_one[0].split(" ")[1:4] == ["WARNING", "myapp", "balance"]
            return
        assert len(about_one) == 2  # once each: the module's basicConfig did nothing
        if log_format == "json":
            charged, low = (json.loads(line) for line in about_one)
            expected = {"logger": "myapp", "queue": "charges", "message_id": "m-1", "attempt": 1}
            if setup == WORKERS:  # the worker's tag, first, as on rr's own lines
                assert charged["worker"] in ("1/2", "2/2")
                expected["worker"] = charged["worker"]
            assert charged == {
                **expected,
                "time": charged["time"],
                "level": "info",
                "event": "charged card-1",
            }
            assert low["level"] == "warning"
            assert json.loads(warned)["message_id"] == "m-1"
        else:
            charged_line, _ = about_one
            assert charged_line.split(" ", 1)[1] == (
                "INFO myapp charged card-1 queue=charges message_id=m-1 attempt=1"
            )
    finally:
        await backend.close()
