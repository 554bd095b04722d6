"""A metrics page scraped from a real ``rr run --metrics-port`` process (docs/reference/runtime.md,
"Metrics and health"): start one, wait for its answers, read its samples."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import pytest

T = TypeVar("T")

NOWHERE = "amqp://guest:guest@127.0.0.1:1/"
"""No broker answers there: rr run gives up on it with exit 69."""

GATED = """
import pathlib
import time

from rabbitctl_retry import Outcome, subscriber

# a slow start: the import waits until the test opens the gate
gate = pathlib.Path(__file__).with_name("gate")
while not gate.exists():
    time.sleep(0.05)


@subscriber("metered")
async def handle(msg):
    return Outcome.ack()
"""


@dataclass(frozen=True, slots=True)
class Loading:
    """What an ``rr run`` of :data:`GATED` served while its handler module loaded."""

    health: tuple[int, str]
    """``/healthz``'s first answer: its status and text."""
    metrics_status: int
    metrics_page: str
    returncode: int
    """The process's exit, once the gate opened (69: no broker at :data:`NOWHERE`)."""
    stderr: str


def while_loading(folder: Path, *args: str) -> Loading:
    """``rr run gated_svc.py --url NOWHERE --metrics-port PORT ARGS`` in ``folder``: its
    ``/healthz`` and ``/metrics`` while the handler module's import waits at the gate, then the
    gate opened and the process's end."""
    (folder / "gated_svc.py").write_text(GATED, encoding="utf-8")
    port = free_port()
    command = [sys.executable, "-m", "rabbitctl_retry", "run", str(folder / "gated_svc.py")]
    command += ["--url", NOWHERE, "--metrics-port", str(port), *args]
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ}
    )
    base = f"http://127.0.0.1:{port}"
    try:
        health = until(lambda: answers(process, f"{base}/healthz"), lambda a: a[0] != 0)
        status, page = get(f"{base}/metrics")
    finally:
        (folder / "gate").touch()
        _, stderr = process.communicate(timeout=300)
    return Loading(health, status, page, process.returncode, stderr)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        with error:
            return error.code, error.read().decode()


def until(read: Callable[[], T], done: Callable[[T], bool], deadline_s: float = 300.0) -> T:
    """``read()`` again and again until ``done`` says its answer is the one awaited (a
    generous deadline: rr starts slowly on a busy machine); that answer."""
    give_up = time.monotonic() + deadline_s
    while True:
        answer = read()
        if done(answer):
            return answer
        if time.monotonic() > give_up:
            pytest.fail(f"still {answer!r} after {deadline_s:g} s")
        time.sleep(0.05)


def answers(process: subprocess.Popen[str], url: str) -> tuple[int, str]:
    """``url``'s status and body; (0, "") while nothing listens; the test fails if ``process``
    ended."""
    if process.poll() is not None:
        pytest.fail(process.communicate()[1])
    try:
        return get(url)
    except OSError:
        return 0, ""  # not listening yet


def sample(page: str, name: str, **labels: str) -> float:
    """The value of one sample of the Prometheus text format."""
    wanted = ",".join(f'{key}="{value}"' for key, value in sorted(labels.items()))
    for line in page.splitlines():
        match = re.fullmatch(r"([a-z_]+)(?:\{(.*)\})? (\S+)", line)
        if match and match[1] == name and (match[2] or "") == wanted:
            return float(match[3])
    return 0.0


@contextmanager
def served_run(
    url: str, folder: Path, service: str, topology: str, *, otel: bool = True
) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """``rr run metered_svc -t topology.toml --metrics-port`` in ``folder`` (``service`` and
    ``topology`` written there; without ``otel``, RR_OTEL left out of its environment): the
    process and its page's base URL once ``/healthz`` says it consumes; stopped by SIGTERM
    after, and its exit checked (0: a graceful stop)."""
    port = free_port()
    (folder / "metered_svc.py").write_text(service, encoding="utf-8")
    (folder / "topology.toml").write_text(topology, encoding="utf-8")
    command = [sys.executable, "-m", "rabbitctl_retry", "run", "metered_svc", "-t", "topology.toml"]
    environment = {k: v for k, v in os.environ.items() if otel or k != "RR_OTEL"}
    process = subprocess.Popen(
        [*command, "--url", url, "--metrics-port", str(port)],
        cwd=folder,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environment,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        until(lambda: answers(process, f"{base}/healthz"), lambda a: a[0] == 200)
        yield process, base
    finally:
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=30)
    assert process.returncode == 0
