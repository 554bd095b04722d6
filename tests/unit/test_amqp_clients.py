"""RR_AMQP_CLIENT: the pure choice of rr's AMQP client, and the client a command really uses."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import traceback
from pathlib import Path

import pytest

from rabbitctl_retry import transport
from rabbitctl_retry.errors import BrokerUnreachable, ExitCode, UsageError
from rabbitctl_retry.transport import clients


@pytest.mark.parametrize(
    ("setting", "expected"),
    [
        (None, "native"),
        ("", "native"),
        ("  ", "native"),
        ("aiormq", "aiormq"),
        (" AIORMQ ", "aiormq"),
        ("native", "native"),
        ("Native", "native"),
    ],
)
def test_the_choice(setting: str | None, expected: str) -> None:
    assert clients.choose(setting) == expected


def test_an_unknown_client_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="use aiormq or native"):
        clients.choose("pika")


@pytest.mark.parametrize(("setting", "module"), [("aiormq", "amqp"), ("native", "native")])
async def test_connect_goes_through_the_client_chosen(setting: str, module: str) -> None:
    # A closed port: each client refuses with its own connect, named in the traceback.
    url = "amqp://guest:guest@127.0.0.1:1/"
    with pytest.raises(BrokerUnreachable, match="connection refused") as caught:
        await clients.connect(url, timeout_s=2.0, environ={clients.ENV: setting})
    files = {frame.filename for frame in traceback.extract_tb(caught.value.__traceback__)}
    assert any(name.endswith(f"transport/{module}.py") for name in files), files


def test_a_command_refuses_an_unknown_client_with_the_usage_exit_code() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "rabbitctl_retry", "dlq", "inspect", "q", "--url", "amqp://x/"],
        capture_output=True,
        text=True,
        env={**os.environ, clients.ENV: "bogus", "COLUMNS": "200"},
        timeout=60,
        check=False,
    )
    assert result.returncode == ExitCode.USAGE, result.stderr
    assert "RR_AMQP_CLIENT='bogus' is not a client rr knows" in result.stderr
    assert result.stdout == ""


async def test_aiormq_asked_for_and_not_installed_is_a_usage_error_that_says_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "aiormq", None)  # import aiormq fails, as if not installed
    monkeypatch.delitem(sys.modules, "rabbitctl_retry.transport.amqp", raising=False)
    monkeypatch.delitem(sys.modules, "rabbitctl_retry.transport.aiormq_errors", raising=False)
    monkeypatch.delattr(transport, "amqp", raising=False)  # imported by a test before
    with pytest.raises(UsageError, match=r"needs aiormq.*rabbitctl-retry\[aiormq\]"):
        await clients.connect("amqp://127.0.0.1:1/", environ={clients.ENV: "aiormq"})


WITHOUT_AIORMQ = """
import runpy, sys
sys.modules["aiormq"] = None  # as if the aiormq extra were not installed
sys.modules["yarl"] = None
sys.argv = ["rr", *sys.argv[1:]]
runpy.run_module("rabbitctl_retry", run_name="__main__")
"""


def rr_without_aiormq(*args: str, client: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if key != clients.ENV}
    if client is not None:
        env[clients.ENV] = client
    return subprocess.run(
        [sys.executable, "-c", WITHOUT_AIORMQ, *args],
        capture_output=True,
        text=True,
        env={**env, "COLUMNS": "200"},
        timeout=60,
        check=False,
    )


def test_rr_runs_without_aiormq() -> None:
    """The default install holds no aiormq: rr's commands, its own client and --version
    run without it; asking for aiormq then is a usage error that says what to install."""
    version = rr_without_aiormq("--version")
    assert version.returncode == 0, version.stderr
    assert version.stdout.startswith("rr ")
    url = "amqp://guest:guest@127.0.0.1:1/"
    native = rr_without_aiormq("dlq", "inspect", "q", "--url", url)
    assert native.returncode == ExitCode.UNAVAILABLE, native.stderr
    assert "connection refused" in native.stderr
    assert "aiormq" not in native.stderr
    asked = rr_without_aiormq("dlq", "inspect", "q", "--url", url, client="aiormq")
    assert asked.returncode == ExitCode.USAGE, asked.stderr
    assert "RR_AMQP_CLIENT=aiormq needs aiormq" in asked.stderr


EXAMPLES = Path(__file__).parents[2] / "examples"


def rr_modules_imported_by(folder: Path) -> set[str]:
    """Every module of rr that a script under ``folder`` imports."""
    modules: set[str] = set()
    for script in folder.rglob("*.py"):
        for node in ast.walk(ast.parse(script.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module:
                modules.add(node.module)
            elif isinstance(node, ast.Import):
                modules.update(alias.name for alias in node.names)
    return {name for name in modules if name.split(".")[0] == "rabbitctl_retry"}


def test_the_examples_run_without_aiormq() -> None:
    """The README's demo installs rr alone (scripts/demo.sh: no extra): what its scripts import
    of rr imports without aiormq (they once connected through transport/amqp.py)."""
    modules = sorted(rr_modules_imported_by(EXAMPLES))
    assert "rabbitctl_retry.transport.clients" in modules
    code = (
        "import importlib, sys\n"
        "sys.modules['aiormq'] = None\n"
        "sys.modules['yarl'] = None\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
