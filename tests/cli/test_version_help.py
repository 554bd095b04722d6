"""``rr --version`` and ``-h`` (docs/cli.md)."""

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
