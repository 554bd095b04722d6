"""Careless command lines and misbehaving handler modules: one ``rr: error:`` line and the
documented exit code each, never a traceback (docs/reference/exit-codes.md, "Exit codes")."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from rabbitctl_retry.cli.group import RrGroup
from rabbitctl_retry.runtime.handlers import HookFailed, Subscriber
from rabbitctl_retry.runtime.loader import HandlerSet
from rabbitctl_retry.runtime.service import RunOptions, Service
from rabbitctl_retry.topology.load import load_text
from tests.backends import EmulatorBackend

REPO = Path(__file__).resolve().parents[2]
TOPOLOGY = REPO / "examples" / "refunds" / "topology.toml"
UNREACHABLE_URL = "amqp://guest:guest@127.0.0.1:1/"


def rr(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "RR_URL": UNREACHABLE_URL, "COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, "-m", "rabbitctl_retry", *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
        env=env,
    )


def one_error_line(result: subprocess.CompletedProcess[str]) -> str:
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("rr: error: "), result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    return lines[0]


def module(tmp_path: Path, name: str, source: str) -> str:
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(source))
    return name


GOOD = """
    from rabbitctl_retry import Outcome, subscriber

    @subscriber("refunds")
    async def handle(msg):
        return Outcome.ack()
"""


@pytest.mark.parametrize(
    ("args", "code", "expected"),
    [
        (
            ("--log-level", "bogus"),
            2,
            "rr: error: rr run: --log-level 'bogus': choose debug, info, warning or error "
            "(see rr run --help)",
        ),
        (
            ("--prefetch", "70000"),
            2,
            "rr: error: rr run: --prefetch must be at most 65535 (see rr run --help)",
        ),
        (
            ("--no-such-option",),
            2,
            "rr: error: rr run: No such option: --no-such-option (see rr run --help)",
        ),
    ],
    ids=["log-level", "prefetch", "unknown option"],
)
def test_bad_run_options_are_one_line_and_exit_2(
    tmp_path: Path, args: tuple[str, ...], code: int, expected: str
) -> None:
    result = rr("run", module(tmp_path, "svc", GOOD), *args, cwd=tmp_path)
    assert result.returncode == code
    assert one_error_line(result) == expected
    assert result.stdout == ""


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        (
            'raise BaseException("at import")\n',
            "rr: error: importing 'bad' failed: BaseException: at import "
            "(at {file}:1, in <module>)",
        ),
        (
            "import sys\nsys.exit(3)\n",
            "rr: error: importing 'bad' failed: SystemExit: 3 (at {file}:2, in <module>)",
        ),
        (
            "raise GeneratorExit()\n",
            "rr: error: importing 'bad' failed: GeneratorExit:  (at {file}:1, in <module>)",
        ),
    ],
    ids=["BaseException", "SystemExit", "GeneratorExit"],
)
def test_a_module_that_raises_anything_at_import_is_a_load_failure(
    tmp_path: Path, source: str, expected: str
) -> None:
    result = rr("run", module(tmp_path, "bad", source), cwd=tmp_path)
    assert result.returncode == 78
    assert one_error_line(result) == expected.format(file=(tmp_path / "bad.py").resolve())


def test_a_raising_startup_hook_stops_rr_run_with_one_line(tmp_path: Path) -> None:
    target = module(
        tmp_path,
        "hooked",
        """
        from rabbitctl_retry import Outcome, on_startup, subscriber

        @on_startup
        async def open_clients():
            raise RuntimeError("the database is down")

        @subscriber("refunds")
        async def handle(msg):
            return Outcome.ack()
        """,
    )
    result = rr("run", target, cwd=tmp_path)
    assert result.returncode == 1
    assert one_error_line(result) == (
        "rr: error: @on_startup hook open_clients failed: RuntimeError: the database is down"
    )


async def test_every_shutdown_hook_runs_and_the_first_failure_ends_the_service() -> None:
    called: list[str] = []

    def failing() -> None:
        called.append("failing")
        raise SystemExit(4)

    async def closing() -> None:
        called.append("closing")

    async def handler(msg: object) -> None:
        return None

    backend = EmulatorBackend()
    service = Service(
        HandlerSet(
            module="test",
            subscribers=(Subscriber("work", handler, "test:work"),),
            shutdown=(failing, closing),
        ),
        topology=load_text("[queues.work]\n"),
        connect=backend.connect,
        options=RunOptions(prefetch=10, shutdown_timeout_s=1),
        clock=backend.clock,
    )
    task = asyncio.ensure_future(service.run())
    await backend.until(lambda: bool(service.consumers), "consuming")
    service.stop()
    with pytest.raises(HookFailed) as caught:
        await task
    assert str(caught.value) == "@on_shutdown hook failing failed: SystemExit: 4"
    assert called == ["failing", "closing"]
    await backend.close()


@pytest.mark.parametrize("body", ["null", "NaN", "1e400", "[[[[[[[[[[", "[" * 100_000])
def test_simulate_publishes_any_body_as_given(tmp_path: Path, body: str) -> None:
    target = module(tmp_path, "svc", GOOD)
    result = rr(
        "simulate",
        str(TOPOLOGY),
        target,
        "--publish",
        f"refunds={body}",
        "-o",
        "json",
        "--for",
        "1s",
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert '"event": "acked"' in result.stdout


def test_an_unexpected_exception_is_one_line_and_exit_70(internal_errors_allowed: None) -> None:
    app = typer.Typer(cls=RrGroup, add_completion=False)

    @app.command()
    def boom() -> None:
        raise ZeroDivisionError("division by zero")

    @app.command()
    def other() -> None:
        return None

    result = CliRunner().invoke(app, ["boom"])
    assert result.exit_code == 70
    assert result.stderr == (
        "rr: error: internal error (a bug in rr): ZeroDivisionError: division by zero\n"
    )
