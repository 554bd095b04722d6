"""Start-up (docs/reference/cli.md, "Start-up"): ``rr --help`` loads no command, and a command loads
only what it runs. Speed itself is measured by ``benchmarks/startup.py``, not asserted here."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import typer

from rabbitctl_retry.cli import app
from rabbitctl_retry.cli.lazy import COMMANDS

REFUNDS = Path(__file__).parents[2] / "examples" / "refunds" / "topology.toml"

LOADED_MODULES = """
import json, sys
from rabbitctl_retry.cli import app
try:
    app(sys.argv[1:], prog_name="rr")
except SystemExit:
    pass
print(json.dumps(sorted(sys.modules)))
"""

RUNTIME = ("aiormq", "rabbitctl_retry.runtime", "rabbitctl_retry.emulator", "rabbitctl_retry.ops")
PREFLIGHT = ("rabbitctl_retry.ops", "rabbitctl_retry.ops.preflight")
"""rr declare's pre-flight (ops/preflight.py: it encodes, never connects): not the runtime."""


def loaded_by(*args: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", LOADED_MODULES, *args],
        capture_output=True,
        text=True,
        check=True,
    )
    modules: list[str] = json.loads(done.stdout.strip().splitlines()[-1])
    return modules


def test_rr_help_loads_no_command_and_no_event_loop() -> None:
    modules = loaded_by("--help")
    assert [m for m in modules if m.startswith("rabbitctl_retry.cli.")] == [
        "rabbitctl_retry.cli.group",
        "rabbitctl_retry.cli.lazy",
    ]
    assert [m for m in modules if m.startswith((*RUNTIME, "asyncio", "rich"))] == []


def test_topology_validate_loads_no_runtime_and_no_amqp_client() -> None:
    modules = loaded_by("topology", "validate", str(REFUNDS))
    assert "rabbitctl_retry.cli.topology" in modules
    assert [m for m in modules if m.startswith(RUNTIME) and m not in PREFLIGHT] == []


@pytest.mark.parametrize("entry", COMMANDS, ids=lambda entry: entry.name)
def test_the_help_rr_help_lists_is_the_commands_own(entry: object) -> None:
    """``rr --help`` lists each command from cli/lazy.py's table: it must say what the
    command's own docstring says."""
    root = typer.main.get_command(app)
    ctx = typer.Context(root)
    name = entry.name
    command = root.get_command(ctx, name)  # type: ignore[attr-defined]
    assert command is not None
    first_paragraph = " ".join((command.help or "").split("\n\n")[0].split())
    assert entry.help == first_paragraph
