"""``rr --version`` and ``-h`` (docs/reference/cli.md)."""

from __future__ import annotations

import platform
import re
import subprocess
import sys
from importlib import metadata

import pytest
from typer.testing import CliRunner

from rabbitctl_retry.cli import app

runner = CliRunner()


def test_version_names_rr_python_and_aiormq() -> None:
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0, result.output
    assert result.stdout == (
        f"rr {metadata.version('rabbitctl-retry')} (Python {platform.python_version()}, "
        f"aiormq {metadata.version('aiormq')})\n"
    )


def test_version_from_the_console_script() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "rabbitctl_retry", "--version"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert re.fullmatch(r"rr \S+ \(Python \S+, aiormq \S+\)\n", done.stdout)


@pytest.mark.parametrize(
    "command", [[], ["declare"], ["dlq"], ["dlq", "replay"], ["topology", "show"], ["run"]]
)
def test_dash_h_is_help_everywhere(command: list[str]) -> None:
    short = runner.invoke(app, [*command, "-h"])
    long = runner.invoke(app, [*command, "--help"])
    assert short.exit_code == 0, short.output
    assert short.stdout == long.stdout
    assert short.stdout.startswith("Usage: ")


def every_command() -> list[list[str]]:
    """Every command path of rr, groups included, from the loaded command tree."""
    from typer.core import TyperGroup
    from typer.main import get_command

    found: list[list[str]] = []

    def walk(command: object, path: list[str]) -> None:
        found.append(path)
        if isinstance(command, TyperGroup):
            context = command.make_context("rr", ["--help"], resilient_parsing=True)
            for name in command.list_commands(context):
                walk(command.get_command(context, name), [*path, name])

    walk(get_command(app), [])
    return found


def test_every_command_is_found() -> None:
    paths = {" ".join(path) for path in every_command()}
    assert {"", "declare", "dlq", "dlq inspect", "topology validate", "status"} <= paths
    assert len(paths) >= 18, sorted(paths)


@pytest.mark.parametrize("command", every_command(), ids=lambda path: " ".join(path) or "rr")
def test_help_names_values_in_plain_capitals(command: list[str]) -> None:
    """docs/reference/cli.md, "Help": ``QUEUE``, ``--url URL``, ``[table|json]``; never typer's
    ``{queue}``, ``<str>``, ``<list[str]>`` or ``<int range>``."""
    result = CliRunner(env={"COLUMNS": "200"}).invoke(app, [*command, "--help"])
    assert result.exit_code == 0, result.output
    text = result.stdout
    assert not re.search(r"\{[a-z_]+\}", text), text
    assert not re.search(r"<[a-z][a-z_ \[\]|]*>", text), text
    usage = text.splitlines()[0]
    for word in usage.split()[2 + len(command) :]:
        assert word.strip("[].") == word.strip("[].").upper(), usage


@pytest.mark.parametrize(
    ("typed", "said"),
    [
        (["stat"], "rr: No such command 'stat'. Did you mean 'status'?"),
        (["simulat"], "rr: No such command 'simulat'. Did you mean 'simulate'?"),
        (["dlq", "inspet"], "rr dlq: No such command 'inspet'. Did you mean 'inspect'?"),
        (["xyz"], "rr: No such command 'xyz'. (see rr --help)"),
    ],
)
def test_a_mistyped_command_gets_a_suggestion(typed: list[str], said: str) -> None:
    """Every command is suggested, loaded or not (the root group loads its commands on first
    use: cli/lazy.py), in a fresh process as a user types it."""
    done = subprocess.run(
        [sys.executable, "-m", "rabbitctl_retry", *typed],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert said in done.stderr
