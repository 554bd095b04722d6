"""Output that cannot be written: one ``rr: error: cannot write ...`` line and exit 74; a pipe
its reader closed early: a quiet exit 141 (docs/reference/cli.md, "Output" and "Exit codes").

Run on real ``python -m rabbitctl_retry`` processes, since what fails is the process's own
stdout: ``>/dev/full`` (ENOSPC), a closed file descriptor 1 (``>&-``), a pipe whose reader
is gone (closed before rr writes, or ``| head -c 10`` mid-stream), and export files that
cannot be made or written (a missing folder, a path through a file, a file size limit).
Never "Exception ignored", never a traceback, never exit 70.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from rabbitctl_retry.transport.base import Properties
from tests.backends import RabbitBackend
from tests.dlq.support import declare, publish_all

REPO = Path(__file__).resolve().parents[2]
TOPOLOGY = REPO / "examples" / "refunds" / "topology.toml"
UNREACHABLE_URL = "amqp://guest:guest@127.0.0.1:1/"
RR = [sys.executable, "-m", "rabbitctl_retry"]

NO_SPACE = b"rr: error: cannot write to stdout: No space left on device\n"
CLOSED = b"rr: error: cannot write to stdout: it is closed\n"
STDOUTS = ["/dev/full", "closed", "reader gone"]
EXPECTED = {"/dev/full": (74, NO_SPACE), "closed": (74, CLOSED), "reader gone": (141, b"")}

MESSAGES = 1000
"""Enough that every streamed output is far more than a pipe holds (64 KiB; ``--format
lines``, the shortest, about 135 KB): rr is still writing when the reader goes."""


def _env(url: str) -> dict[str, str]:
    return {**os.environ, "COLUMNS": "200", "RR_URL": url}


def rr_to(stdout: str, args: list[str], *, url: str = UNREACHABLE_URL) -> tuple[int, bytes]:
    """Run rr with its stdout one of :data:`STDOUTS`; (exit code, stderr)."""
    command = [*RR, *args]
    kwargs: dict[str, Any] = {"stderr": subprocess.PIPE, "env": _env(url), "timeout": 120}
    if stdout == "/dev/full":
        with open("/dev/full", "wb") as full:
            result = subprocess.run(command, stdout=full, check=False, **kwargs)
    elif stdout == "closed":
        shell = ["sh", "-c", 'exec "$@" >&-', "sh", *command]
        result = subprocess.run(shell, check=False, **kwargs)
    else:
        read_end, write_end = os.pipe()
        os.close(read_end)  # the reader is gone before rr writes a byte
        try:
            result = subprocess.run(command, stdout=write_end, check=False, **kwargs)
        finally:
            os.close(write_end)
    return result.returncode, result.stderr


def assert_the_rule(stdout: str, code: int, stderr: bytes) -> None:
    assert (code, stderr) == EXPECTED[stdout], stderr.decode(errors="replace")


# --- no broker: rr topology show ---------------------------------------------------------


@pytest.mark.parametrize("stdout", STDOUTS)
@pytest.mark.parametrize("output", ["table", "json"])
def test_topology_show(stdout: str, output: str) -> None:
    code, stderr = rr_to(stdout, ["topology", "show", str(TOPOLOGY), "-o", output])
    assert_the_rule(stdout, code, stderr)


@pytest.mark.parametrize("stdout", STDOUTS)
def test_help_and_version(stdout: str) -> None:
    for args in (["--help"], ["--version"], ["status", "--help"]):
        code, stderr = rr_to(stdout, args)
        assert_the_rule(stdout, code, stderr)


# --- export files that cannot be made: refused before rr connects ------------------------


def test_an_export_into_a_missing_folder(tmp_path: Path) -> None:
    file = tmp_path / "missing" / "dead.jsonl"
    result = subprocess.run(
        [*RR, "dlq", "export", "dead", str(file)], capture_output=True, env=_env(UNREACHABLE_URL)
    )
    assert result.returncode == 74, result.stderr
    assert (
        result.stderr == f"rr: error: cannot write to {file}: No such file or directory\n".encode()
    )
    assert result.stdout == b""
    assert list(tmp_path.iterdir()) == []


def test_an_export_through_a_file(tmp_path: Path) -> None:
    (tmp_path / "plain").write_text("a file, not a folder\n")
    file = tmp_path / "plain" / "dead.jsonl"
    result = subprocess.run(
        [*RR, "dlq", "export", "dead", str(file)], capture_output=True, env=_env(UNREACHABLE_URL)
    )
    assert result.returncode == 74, result.stderr
    assert result.stderr == f"rr: error: cannot write to {file}: Not a directory\n".encode()


def test_an_export_to_a_closed_stdout_is_refused_before_connecting() -> None:
    code, stderr = rr_to("closed", ["dlq", "export", "dead", "-"])  # unreachable: 69 if it tried
    assert (code, stderr) == (74, CLOSED)


def test_an_existing_export_file_is_still_a_usage_error(tmp_path: Path) -> None:
    file = tmp_path / "dead.jsonl"
    file.write_text("kept\n")
    result = subprocess.run(
        [*RR, "dlq", "export", "dead", str(file)], capture_output=True, env=_env(UNREACHABLE_URL)
    )
    assert result.returncode == 2, result.stderr
    assert b"exists; rr does not overwrite an export" in result.stderr
    assert file.read_text() == "kept\n"


# --- on RabbitMQ: a queue of dead letters to print -----------------------------------------


@pytest.fixture
async def dead_url(amqp_url: str) -> AsyncIterator[str]:
    """The URL of a fresh vhost whose queue ``dead`` holds :data:`MESSAGES` messages."""
    backend = RabbitBackend(amqp_url)
    backend.setup()
    try:
        await declare(backend, "dead")
        body = b"x" * 300
        await publish_all(
            backend,
            "dead",
            [(body, Properties(message_id=f"m{n}", headers={"n": n})) for n in range(MESSAGES)],
        )
        yield backend.url
    finally:
        await backend.close()


COMMANDS = {
    "export -": ["dlq", "export", "dead", "-"],
    "inspect": ["dlq", "inspect", "dead"],
    "inspect json": ["dlq", "inspect", "dead", "-o", "json"],
    "inspect jsonl": ["dlq", "inspect", "dead", "-o", "jsonl"],
    "inspect lines": ["dlq", "inspect", "dead", "--format", "lines"],
    "inspect summary": ["dlq", "inspect", "dead", "--summary"],
    "status": ["status", "dead"],
    "status json": ["status", "dead", "-o", "json"],
}


@pytest.mark.parametrize("command", COMMANDS)
async def test_a_command_whose_stdout_fails(dead_url: str, command: str) -> None:
    for stdout in STDOUTS:
        code, stderr = rr_to(stdout, COMMANDS[command], url=dead_url)
        assert_the_rule(stdout, code, stderr)


@pytest.mark.parametrize("command", ["export -", "inspect jsonl", "inspect lines"])
async def test_a_reader_that_stops_after_10_bytes(dead_url: str, command: str) -> None:
    """``rr ... | head -c 10``: rr still has most of its output to write when the reader goes."""
    with subprocess.Popen(
        [*RR, *COMMANDS[command]],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=_env(dead_url),
    ) as process:
        assert process.stdout is not None
        assert process.stderr is not None
        first = process.stdout.read(10)
        process.stdout.close()
        stderr = process.stderr.read()
        assert process.wait(timeout=120) == 141, stderr
    assert len(first) == 10
    assert stderr == b""  # no error line, no "Exception ignored ... BrokenPipeError"


async def test_an_export_file_that_cannot_grow(dead_url: str, tmp_path: Path) -> None:
    """A file size limit (``ulimit -f``): the messages are read, the file cannot take them."""
    file = tmp_path / "dead.jsonl"
    limited = ["sh", "-c", 'ulimit -f 8 && exec "$@"', "sh", *RR, "dlq", "export", "dead"]
    result = subprocess.run(
        [*limited, str(file)], capture_output=True, env=_env(dead_url), timeout=120
    )
    assert result.returncode == 74, result.stderr
    assert result.stderr == f"rr: error: cannot write to {file}: File too large\n".encode()
    assert list(tmp_path.iterdir()) == []  # neither the file nor the temporary one beside it
