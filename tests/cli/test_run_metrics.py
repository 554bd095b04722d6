"""``rr run --metrics-port`` (docs/reference/metrics.md, "Metrics and health"): the Prometheus page
counts exactly what rr did, and ``/healthz`` says whether rr consumes; scraped from a real
``rr run`` process on RabbitMQ."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from rabbitctl_retry.transport.base import Properties
from tests.backends import RabbitBackend
from tests.dlq.support import publish_all
from tests.metrics_page import NOWHERE, free_port, get, sample, served_run, until, while_loading

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
    with served_run(backend.url, tmp_path, SERVICE, TOPOLOGY) as (_, base):
        assert get(f"{base}/healthz") == (200, "consuming\n")

        bodies = [b"ok", b"ok", b"ok", b"bad"]
        await publish_all(backend, "metered", [(body, Properties()) for body in bodies])

        # Until every delivery is decided and both copies confirmed: on a busy machine the
        # dead letter can be decided while two "ok" deliveries are still on their way, so the
        # wait is for all the totals; the exact numbers are checked after (a count that
        # never comes ends the wait at its deadline and fails).
        def settled(page: str) -> bool:
            return (
                sample(page, "rr_decisions_total", queue="metered", outcome="acked") >= 3
                and sample(page, "rr_decisions_total", queue="metered", outcome="dead-lettered")
                >= 1
                and sample(page, "rr_handler_seconds_count", queue="metered") >= 5
                and sample(page, "rr_copies_confirmed_total") >= 2
            )

        page = until(lambda: get(f"{base}/metrics")[1], settled)

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


def test_metrics_answer_while_rr_still_loads_the_handlers(tmp_path: Path) -> None:
    """The metrics server is the first thing rr run starts: /healthz says ``starting`` (503)
    and /metrics answers while the handler module still imports (issue #29: nothing
    answered for 12 s on a busy machine)."""
    loading = while_loading(tmp_path)
    assert loading.health == (503, "starting\n")
    assert (loading.metrics_status, sample(loading.metrics_page, "rr_consuming")) == (200, 0)
    # then it loaded them and found no broker on :1
    assert loading.returncode == 69, loading.stderr


def test_healthz_is_503_until_rr_consumes() -> None:
    from rabbitctl_retry.runtime.metrics import RunMetrics
    from rabbitctl_retry.runtime.metrics_server import MetricsServer

    metrics = RunMetrics()
    server = MetricsServer(metrics, 0, host="127.0.0.1")
    server.start()
    try:
        assert get(f"http://127.0.0.1:{server.port}/healthz") == (503, "starting\n")
        page = get(f"http://127.0.0.1:{server.port}/metrics")[1]
        assert sample(page, "rr_consuming") == 0
        metrics.decisions.labels("q", "acked").inc()
        page = get(f"http://127.0.0.1:{server.port}/metrics")[1]
        assert "rr_decisions_total" in page
        assert "_created" not in page  # no creation-time sample beside every series
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
            [*command, "--url", NOWHERE, "--metrics-port", str(port)],
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
    from rabbitctl_retry.runtime.metrics import RunMetrics
    from rabbitctl_retry.runtime.metrics_server import MetricsServer

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
    from rabbitctl_retry.runtime.metrics import RunMetrics
    from rabbitctl_retry.runtime.metrics_server import MetricsServer

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
    """The default, 127.0.0.1, listens there only; --metrics-bind 0.0.0.0 on every
    interface."""
    (tmp_path / "bind_svc.py").write_text(SERVICE, encoding="utf-8")
    port = free_port()
    command = [sys.executable, "-m", "rabbitctl_retry", "run", str(tmp_path / "bind_svc.py")]
    command += ["--url", NOWHERE, "--metrics-port", str(port)]
    with socket.socket() as taken:  # the port is taken on another address than 127.0.0.1
        taken.bind(("127.0.0.2", port))
        taken.listen()
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        assert done.returncode == 69, done.stderr  # it listened, then found no broker on :1
        everywhere = subprocess.run(
            [*command, "--metrics-bind", "0.0.0.0"], capture_output=True, text=True, check=False
        )
    assert everywhere.returncode == 1, everywhere.stderr
    assert everywhere.stderr.startswith(f"rr: error: cannot serve metrics on 0.0.0.0 port {port}: ")
    bad = subprocess.run(
        [*command, "--metrics-bind", "no such host!"], capture_output=True, text=True, check=False
    )
    assert bad.returncode == 1, bad.stderr
    assert bad.stderr.startswith(f"rr: error: cannot serve metrics on no such host! port {port}")
