"""``rr run --workers N`` without a broker (docs/reference/runtime.md, "Running it"): usage errors,
a worker that fails at its first start ends the supervisor with its code (no restart loop),
and the supervisor's ``/healthz`` says ``starting`` while its workers load."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.metrics_page import GATED, NOWHERE, answers, free_port, until, while_loading


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("0", "--workers must be at least 1"),
        ("65", "--workers must be at most 64"),
        ("abc", "--workers must be a whole number"),
    ],
)
def test_a_bad_workers_count_is_a_usage_error(value: str, message: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "rabbitctl_retry", "run", "svc", "--workers", value],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr == f"rr: error: rr run: {message} (see rr run --help)\n"


@pytest.mark.parametrize(
    ("module", "code"),
    [
        ("x = 1 / 0\n", 78),  # the handler module does not import
        ("from rabbitctl_retry import subscriber\n\n@subscriber('q')\nasync def h(m): ...\n", 69),
    ],
)
def test_a_worker_failing_at_start_ends_the_supervisor_with_its_code(
    tmp_path: Path, module: str, code: int
) -> None:
    (tmp_path / "failing_svc.py").write_text(module, encoding="utf-8")
    command = [sys.executable, "-m", "rabbitctl_retry", "run", str(tmp_path / "failing_svc.py")]
    done = subprocess.run(
        [*command, "--url", NOWHERE, "--workers", "3"],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert done.returncode == code, done.stderr
    assert "worker 1 (pid " in done.stderr
    assert f"exited with exit {code} before it consumed; stopping the others" in done.stderr
    assert "restarting" not in done.stderr
    assert "worker 2 started" not in done.stderr  # the others wait for worker 1 to consume


def test_healthz_says_starting_and_which_worker_while_they_load(tmp_path: Path) -> None:
    loading = while_loading(tmp_path, "--workers", "2")
    # worker 1 waits at the gate; worker 2 starts only once worker 1 consumes
    assert loading.health == (503, "starting\nworker 1: starting\nworker 2: starting\n")
    assert loading.metrics_status == 200
    assert "rr_consuming 0.0" in loading.metrics_page
    assert loading.returncode == 69, loading.stderr  # worker 1 loaded, found no broker on :1


def test_workers_stop_by_themselves_when_the_supervisor_is_killed(tmp_path: Path) -> None:
    """SIGKILL to the supervisor (no chance to stop its workers): worker 1, waiting for a
    broker that does not answer, notices that its supervisor is gone and stops."""
    module = "from rabbitctl_retry import subscriber\n\n@subscriber('q')\nasync def h(m): ...\n"
    (tmp_path / "orphan_svc.py").write_text(module, encoding="utf-8")
    command = [sys.executable, "-m", "rabbitctl_retry", "run", str(tmp_path / "orphan_svc.py")]
    command += ["--url", NOWHERE, "--workers", "2", "--wait-for-broker", "600"]
    log = tmp_path / "supervisor.log"
    with log.open("wb") as output:
        process = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT)
    try:
        started = until(
            lambda: re.search(r"worker 1 started worker=1 pid=(\d+)", log.read_text()),
            lambda found: found is not None,
        )
        assert started is not None
        worker = int(started[1])
        until(lambda: log.read_text(), lambda text: "waiting" in text)  # it waits for the broker
        process.kill()
        process.wait(60)
        until(lambda: _alive(worker), lambda alive: not alive)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(60)
    text = log.read_text()
    assert "the supervisor is gone; stopping" in text, text
    assert "stopped worker=1/2" in text, text


def _alive(pid: int) -> bool:
    """Whether process ``pid`` still runs (an orphan's zombie is reaped by init)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_while_the_workers_start_is_a_clean_stop(tmp_path: Path, signum: int) -> None:
    """SIGTERM or SIGINT to the supervisor while worker 1 still starts (before it could catch
    the signal): it ends by the signal, having consumed nothing, and the supervisor exits 0."""
    (tmp_path / "gated_svc.py").write_text(GATED, encoding="utf-8")
    port = free_port()
    command = [sys.executable, "-m", "rabbitctl_retry", "run", str(tmp_path / "gated_svc.py")]
    command += ["--url", NOWHERE, "--metrics-port", str(port), "--workers", "2"]
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ}
    )
    try:
        # worker 1 still starts (it waits at the gate, or is not even serving yet)
        until(
            lambda: answers(process, f"http://127.0.0.1:{port}/healthz"),
            lambda a: a == (503, "starting\nworker 1: starting\nworker 2: starting\n"),
        )
        process.send_signal(signum)
        _, stderr = process.communicate(timeout=300)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(60)
    assert process.returncode == 0, stderr
    assert "workers stopped" in stderr
