"""``rr run --metrics-port`` (docs/runtime.md, "Metrics and health"): the Prometheus page
counts exactly what rr did, and ``/healthz`` says whether rr consumes; scraped from a real
``rr run`` process on RabbitMQ."""

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
from pathlib import Path

import pytest

from rabbitctl_retry.transport.base import Properties
from tests.backends import RabbitBackend
from tests.dlq.support import publish_all

SERVICE = """
from rabbitctl_retry import Outcome, subscriber


@subscriber("metered")
async def handle(msg):
    return Outcome.retry() if msg.body == b"bad" else Outcome.ack()
"""

TOPOLOGY = """
[queues.metered]
max_attempts = 2
dead_letter = "metered.dead"

[queues."metered.dead"]
"""


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


def sample(page: str, name: str, **labels: str) -> float:
    """The value of one sample of the Prometheus text format."""
    wanted = ",".join(f'{key}="{value}"' for key, value in sorted(labels.items()))
    for line in page.splitlines():
        match = re.fullmatch(r"([a-z_]+)(?:\{(.*)\})? (\S+)", line)
        if match and match[1] == name and (match[2] or "") == wanted:
            return float(match[3])
    return 0.0


@pytest.mark.broker
async def test_the_metrics_count_what_rr_did_and_healthz_says_it_consumes(
    amqp_url: str, tmp_path: Path
) -> None:
    backend = RabbitBackend(amqp_url)
    backend.setup()
    try:
        await _count_and_check(backend, tmp_path)
    finally:
        await backend.close()


async def _count_and_check(backend: RabbitBackend, tmp_path: Path) -> None:
    port = free_port()
    (tmp_path / "metered_svc.py").write_text(SERVICE, encoding="utf-8")
    (tmp_path / "topology.toml").write_text(TOPOLOGY, encoding="utf-8")
    command = [sys.executable, "-m", "rabbitctl_retry", "run", "metered_svc", "-t", "topology.toml"]
    process = subprocess.Popen(
        [*command, "--url", backend.url, "--metrics-port", str(port)],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ},
    )
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(200):
            if process.poll() is not None:
                pytest.fail(process.communicate()[1])
            try:
                if get(f"{base}/healthz") == (200, "consuming\n"):
                    break
            except OSError:
                pass  # not listening yet
            time.sleep(0.05)
        assert get(f"{base}/healthz") == (200, "consuming\n")

        bodies = [b"ok", b"ok", b"ok", b"bad"]
        await publish_all(backend, "metered", [(body, Properties()) for body in bodies])
        page = ""
        for _ in range(200):  # until the dead letter is decided and both copies confirmed
            page = get(f"{base}/metrics")[1]
            if (
                sample(page, "rr_decisions_total", queue="metered", outcome="dead-lettered")
                and sample(page, "rr_copies_confirmed_total") >= 2
            ):
                break
            time.sleep(0.05)

        def decisions(outcome: str) -> float:
            return sample(page, "rr_decisions_total", queue="metered", outcome=outcome)

        assert (decisions("acked"), decisions("retried"), decisions("dead-lettered")) == (3, 1, 1)
        assert sample(page, "rr_handler_seconds_count", queue="metered") == 5
        assert sample(page, "rr_copies_published_total") == 2  # the retry and the dead letter
        assert sample(page, "rr_copies_confirmed_total") == 2
        assert sample(page, "rr_copies_refused_total") == 0
        assert sample(page, "rr_connections_total") == 1
        assert sample(page, "rr_consuming") == 1
        assert get(f"{base}/nowhere")[0] == 404
    finally:
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=30)
    assert process.returncode == 0


def test_healthz_is_503_until_rr_consumes() -> None:
    from rabbitctl_retry.runtime.metrics import MetricsServer, RunMetrics

    server = MetricsServer(RunMetrics(), 0, host="127.0.0.1")
    server.start()
    try:
        assert get(f"http://127.0.0.1:{server.port}/healthz") == (503, "not consuming\n")
        page = get(f"http://127.0.0.1:{server.port}/metrics")[1]
        assert sample(page, "rr_consuming") == 0
    finally:
        server.stop()


def test_a_busy_port_is_one_error_line(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        port = taken.getsockname()[1]
        (tmp_path / "busy_svc.py").write_text(SERVICE, encoding="utf-8")
        command = [sys.executable, "-m", "rabbitctl_retry", "run", str(tmp_path / "busy_svc.py")]
        done = subprocess.run(
            [*command, "--url", "amqp://guest:guest@127.0.0.1:1/", "--metrics-port", str(port)],
            capture_output=True,
            text=True,
            check=False,
        )
    assert done.returncode == 1, done.stderr
    assert done.stderr.startswith(f"rr: error: cannot serve metrics on port {port}: ")


def test_a_client_that_says_nothing_does_not_silence_the_others() -> None:
    """One connection that sends half a request and waits held the one-threaded server:
    /healthz timed out for every probe until it closed (an orchestrator then kills the
    service). Each client now has a thread of its own, and a silent one is dropped."""
    from rabbitctl_retry.runtime.metrics import MetricsServer, RunMetrics

    server = MetricsServer(RunMetrics(), 0, host="127.0.0.1")
    server.start()
    try:
        with socket.create_connection(("127.0.0.1", server.port)) as idle:
            idle.sendall(b"GET /metr")
            for _ in range(3):
                assert get(f"http://127.0.0.1:{server.port}/healthz")[0] == 503
            idle.settimeout(60)
            assert idle.recv(1024) == b""  # the server gave up on the silent client
    finally:
        server.stop()


def test_queue_names_reach_the_page_escaped() -> None:
    from rabbitctl_retry.retry.policy import Decision, Event, RejectAction
    from rabbitctl_retry.runtime.metrics import MetricsServer, RunMetrics

    metrics = RunMetrics()
    hostile = "q\u202eevil\x9b2028\u2028x"
    decision = Decision(action=RejectAction(requeue=True), event=Event.REQUEUED, attempt=1)
    metrics.on_decision(hostile, None, decision)  # type: ignore[arg-type]
    server = MetricsServer(metrics, 0, host="127.0.0.1")
    server.start()
    try:
        page = get(f"http://127.0.0.1:{server.port}/metrics")[1]
    finally:
        server.stop()
    assert "\u202e" not in page
    assert "\x9b" not in page
    assert "\u2028" not in page
    assert (
        sample(
            page, "rr_decisions_total", queue=r"q\\u202eevil\\x9b2028\\u2028x", outcome="requeued"
        )
        == 1
    )


def test_metrics_bind_chooses_the_address(tmp_path: Path) -> None:
    """--metrics-bind 127.0.0.1 listens there only (the default is every interface)."""
    (tmp_path / "bind_svc.py").write_text(SERVICE, encoding="utf-8")
    port = free_port()
    command = [sys.executable, "-m", "rabbitctl_retry", "run", str(tmp_path / "bind_svc.py")]
    command += ["--url", "amqp://guest:guest@127.0.0.1:1/", "--metrics-port", str(port)]
    with socket.socket() as taken:  # the port is taken on another address than 127.0.0.1
        taken.bind(("127.0.0.2", port))
        taken.listen()
        done = subprocess.run(
            [*command, "--metrics-bind", "127.0.0.1"], capture_output=True, text=True, check=False
        )
        assert done.returncode == 69, done.stderr  # it listened, then found no broker on :1
        everywhere = subprocess.run(command, capture_output=True, text=True, check=False)
    assert everywhere.returncode == 1, everywhere.stderr
    assert everywhere.stderr.startswith(f"rr: error: cannot serve metrics on port {port}: ")
    bad = subprocess.run(
        [*command, "--metrics-bind", "no such host!"], capture_output=True, text=True, check=False
    )
    assert bad.returncode == 1, bad.stderr
    assert bad.stderr.startswith(f"rr: error: cannot serve metrics on no such host! port {port}")
