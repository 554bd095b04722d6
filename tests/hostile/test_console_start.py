"""``rr console`` that cannot listen where it was told (docs/reference/console.md, "Security";
docs/reference/exit-codes.md, "Exit codes"): a port in use, a ``--bind`` that does not resolve or is
not an address of this machine, and ``--bind ''``. Each ends with one ``rr: error:`` line naming the
address and its documented code, never exit 70 or a traceback."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from tests.hostile.console_process import NO_BROKER, rr_console

FAILURE, USAGE = 1, 2


def _one_error_line(stderr: str) -> str:
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("rr: error: "), stderr
    assert "Traceback" not in stderr
    return lines[0]


def test_a_port_in_use_is_one_line_and_exit_1() -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        done = rr_console("dead", "--port", str(port), "--url", NO_BROKER)
    line = _one_error_line(done.stderr)
    assert done.returncode == FAILURE, done.stderr
    assert f"127.0.0.1 port {port}" in line
    assert "in use" in line


@pytest.mark.parametrize(
    ("bind", "says"),
    [
        ("nosuchhost.invalid", "no such host name"),
        ("192.0.2.99", "not an address of this machine"),
    ],
)
def test_a_bind_address_that_is_not_this_machines_is_a_usage_error(bind: str, says: str) -> None:
    done = rr_console("dead", "--bind", bind, "--port", "0", "--url", NO_BROKER)
    line = _one_error_line(done.stderr)
    assert done.returncode == USAGE, done.stderr
    assert f"--bind {bind}" in line
    assert says in line


@pytest.mark.parametrize("bind", ["", "  "])
def test_an_empty_bind_is_refused(bind: str) -> None:
    done = rr_console("dead", "--bind", bind, "--port", "0", "--url", NO_BROKER, timeout_s=60)
    line = _one_error_line(done.stderr)
    assert done.returncode == USAGE, done.stderr
    assert "--bind ''" in line


def test_an_audit_log_that_cannot_be_written_is_refused_before_it_serves(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-dir" / "audit.jsonl"
    done = rr_console("dead", "--port", "0", "--url", NO_BROKER, "--audit-log", str(missing))
    line = _one_error_line(done.stderr)
    assert done.returncode == USAGE, done.stderr
    assert f"--audit-log {missing}: No such file or directory" in line
