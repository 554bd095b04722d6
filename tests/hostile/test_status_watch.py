"""``rr status --watch SECONDS`` takes a finite number of seconds within a day, and Ctrl-C
ends a watch with exit 0 whenever it comes, in the middle of a reading too; a plain
``rr status`` interrupted exits 130 (docs/reference/cli.md, "rr status" and "Exit codes").

The interrupts are sent to real ``python -m rabbitctl_retry`` processes reading from a
server that never answers (tests/hostile/silent_broker.py): the signal lands inside the
reading, known, not guessed.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from rabbitctl_retry.cli import app
from tests.hostile.silent_broker import SilentBroker

UNREACHABLE_URL = "amqp://guest:guest@127.0.0.1:1/"
runner = CliRunner(env={"COLUMNS": "200", "RR_URL": UNREACHABLE_URL})

REFUSED = (
    "give the seconds between two readings, a number from 0.5 to 86400 (a day), e.g. --watch 5 "
    "or --watch 5s"
)


@pytest.mark.parametrize(
    "value",
    [
        "inf",
        "1e308",
        "nan",
        "-1",
        "0",
        "0.1",
        "86401",
        "5x",
        "",
        "1e3",
        "0x10",
        "1_0",
        "2d",
        "100ms",
    ],
)
def test_watch_takes_only_seconds_within_a_day(value: str) -> None:
    result = runner.invoke(app, ["status", "q", "--watch", value])
    assert result.exit_code == 2, result.output
    assert result.stderr == f"rr: error: --watch {value!r}: {REFUSED}\n"


@pytest.mark.parametrize(
    ("value", "seconds"),
    [("0.5", 0.5), ("5", 5.0), ("86400", 86_400.0), ("5s", 5.0), ("500ms", 0.5), ("1m", 60.0)],
)
def test_watch_seconds_within_the_range(value: str, seconds: float) -> None:
    from rabbitctl_retry.cli.status_watch import parse_watch_s

    assert parse_watch_s(value) == seconds


def _status(broker: SilentBroker, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "rabbitctl_retry", "status", "q", *args, "--url", broker.url],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
    )


def _interrupted_in_the_reading(*args: str) -> subprocess.CompletedProcess[str]:
    with SilentBroker() as broker:
        process = _status(broker, *args)
        try:
            assert broker.declared.wait(timeout=60), process.communicate(timeout=60)
            process.send_signal(signal.SIGINT)
            stdout, stderr = process.communicate(timeout=60)
        finally:
            if process.poll() is None:
                process.kill()
                process.communicate()
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


def test_ctrl_c_in_the_middle_of_a_watch_reading_exits_0() -> None:
    result = _interrupted_in_the_reading("--watch", "1")
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert result.stdout == ""


def test_ctrl_c_in_the_middle_of_a_plain_status_exits_130() -> None:
    result = _interrupted_in_the_reading()
    assert result.returncode == 130, result.stderr
    assert result.stderr == "rr: interrupted\n"
    assert result.stdout == ""
