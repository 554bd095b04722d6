"""A queue name given on the command line that rr's AMQP client cannot send is a usage error
(exit 2) with one clear line, before rr connects (docs/reference/exit-codes.md, "Exit codes";
docs/reference/dlq.md, "Queue names"); before, the client's refusal came back as a broker error,
exit 65.

The URL is unreachable: a name that passes the check ends in exit 69 (rr tried to connect),
one that does not in exit 2 without trying.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rabbitctl_retry.cli import app

UNREACHABLE_URL = "amqp://guest:guest@127.0.0.1:1/"
runner = CliRunner(env={"COLUMNS": "200", "RR_URL": UNREACHABLE_URL})

ALLOWED = "letters, digits, - _ . : @ # , / + space and non-ASCII characters"
RECORD = '{"body": "aGk=", "body_size": 2, "exchange": "", "routing_key": "q", "properties": {}}'


def commands(name: str, tmp_path: Path) -> dict[str, list[str]]:
    (tmp_path / "in.jsonl").write_text(RECORD + "\n", encoding="utf-8")
    return {
        "status": ["status", name],
        "inspect": ["dlq", "inspect", name],
        "export": ["dlq", "export", name, str(tmp_path / "out.jsonl")],
        "export -": ["dlq", "export", name, "-"],
        "purge": ["dlq", "purge", name, "--yes"],
        "replay": ["dlq", "replay", name, "--yes"],
        "move": ["dlq", "move", name, "--to", "elsewhere", "--yes"],
        "import --to": ["dlq", "import", str(tmp_path / "in.jsonl"), "--to", name],
    }


COMMANDS = ["status", "inspect", "export", "export -", "purge", "replay", "move", "import --to"]


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("a!b", f"holds '!'; a queue name rr can send holds only {ALLOWED}"),
        ("a\tb", f"holds U+0009; a queue name rr can send holds only {ALLOWED}"),
        ("q\x1b[31m", f"holds U+001B; a queue name rr can send holds only {ALLOWED}"),
        ("", "is empty; a queue name is 1 to 255 bytes"),
    ],
    ids=["bang", "tab", "escape", "empty"],
)
def test_a_name_rr_cannot_send_is_a_usage_error(
    tmp_path: Path, command: str, name: str, problem: str
) -> None:
    what = "--to" if command == "import --to" else "queue"
    result = runner.invoke(app, commands(name, tmp_path)[command])
    assert result.exit_code == 2, result.output
    assert result.stderr == (
        f"rr: error: {what} {name!r} cannot be sent to RabbitMQ: it {problem}\n".replace(
            "\x1b", "\\x1b"
        ).replace("\t", "\\t")
    )
    assert result.stdout == ""
    assert not (tmp_path / "out.jsonl").exists()


@pytest.mark.parametrize("command", ["status", "inspect", "export -", "purge"])
def test_a_name_too_long(tmp_path: Path, command: str) -> None:
    result = runner.invoke(app, commands("x" * 256, tmp_path)[command])
    assert result.exit_code == 2, result.output
    assert result.stderr == (
        f"rr: error: queue {'x' * 40!r}... cannot be sent to RabbitMQ: it is 256 bytes long; "
        "a queue name is at most 255\n"
    )


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("name", ["dead.é", "a b", "a:b@c#d,e/f+g-h_i.j", "x" * 255, "é" * 127])
def test_a_name_rr_can_send_goes_on_to_connect(tmp_path: Path, command: str, name: str) -> None:
    result = runner.invoke(app, commands(name, tmp_path)[command])
    assert result.exit_code == 69, result.output
    assert [path.name for path in tmp_path.iterdir()] == ["in.jsonl"]  # no export file left


def test_bytes_that_are_not_utf8_on_a_real_command_line() -> None:
    result = subprocess.run(
        [os.fsencode(sys.executable), b"-m", b"rabbitctl_retry", b"status", b"dead.\xff"],
        capture_output=True,
        timeout=60,
        env={**os.environ, "RR_URL": UNREACHABLE_URL},
        check=False,
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr == (
        b"rr: error: queue 'dead.\\udcff' cannot be sent to RabbitMQ: it is not UTF-8 text (it "
        b"holds U+DCFF: a byte the command line could not decode)\n"
    )


def test_the_rule_itself() -> None:
    from rabbitctl_retry.cli.queue_names import queue_name_problem

    assert queue_name_problem("payouts.dead") is None
    assert queue_name_problem("\u202e") is None  # RabbitMQ holds it; rr prints it escaped
    assert queue_name_problem("a" * 255) is None
    assert queue_name_problem("é" * 128) == "is 256 bytes long; a queue name is at most 255"
