"""RR_EVENT_LOOP: the pure choice of rr's event loop, and the loop a command really runs on."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys

import pytest

from rabbitctl_retry import event_loop
from rabbitctl_retry.errors import ExitCode, UsageError


@pytest.mark.parametrize(
    ("setting", "installed", "expected"),
    [
        (None, True, "uvloop"),
        (None, False, "asyncio"),
        ("", True, "uvloop"),
        ("auto", True, "uvloop"),
        (" AUTO ", False, "asyncio"),
        ("uvloop", True, "uvloop"),
        ("asyncio", True, "asyncio"),
        ("Asyncio", False, "asyncio"),
    ],
)
def test_the_choice(setting: str | None, installed: bool, expected: str) -> None:
    assert event_loop.choose(setting, uvloop_installed=installed) == expected


@pytest.mark.parametrize("setting", [None, "auto", "uvloop", "asyncio"])
def test_a_closed_standard_descriptor_means_asyncio(setting: str | None) -> None:
    assert event_loop.choose(setting, uvloop_installed=True, stdio_closed=True) == "asyncio"


def test_uvloop_asked_for_but_missing_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="uvloop is not installed"):
        event_loop.choose("uvloop", uvloop_installed=False)


def test_an_unknown_loop_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="auto, uvloop or asyncio"):
        event_loop.choose("trio", uvloop_installed=True)


def test_a_refused_choice_closes_the_coroutine() -> None:
    async def never() -> None:  # pragma: no cover - must not run
        raise AssertionError

    coroutine = never()
    os.environ[event_loop.ENV] = "bogus"
    try:
        with pytest.raises(UsageError):
            event_loop.run(coroutine)
    finally:
        del os.environ[event_loop.ENV]
    assert coroutine.cr_frame is None  # closed, not left unawaited


@pytest.mark.parametrize("name", ["asyncio", "uvloop"])
def test_run_uses_the_loop_named(name: str) -> None:
    if name == "uvloop":
        pytest.importorskip("uvloop")

    async def loop_module() -> str:
        return type(asyncio.get_running_loop()).__module__

    module = event_loop.run(loop_module(), name=name)  # type: ignore[arg-type]
    assert module.startswith(name)


def test_a_command_refuses_an_unknown_loop_with_the_usage_exit_code() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "rabbitctl_retry", "dlq", "inspect", "q", "--url", "amqp://x/"],
        capture_output=True,
        text=True,
        env={**os.environ, event_loop.ENV: "bogus", "COLUMNS": "200"},
        timeout=60,
        check=False,
    )
    assert result.returncode == ExitCode.USAGE, result.stderr
    assert "RR_EVENT_LOOP='bogus' is not a loop rr knows" in result.stderr
    assert result.stdout == ""
