"""rr run: a target that cannot be loaded is a clear error with exit 78, not a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from rabbitctl_retry.cli import app
from rabbitctl_retry.runtime.loader import load_target, split_target

runner = CliRunner(env={"COLUMNS": "200"})
URL = "amqp://guest:guest@127.0.0.1:1/"
ONE_HANDLER = "from rabbitctl_retry import subscriber\n@subscriber('q')\ndef h(m): pass\n"


@pytest.mark.parametrize(
    ("files", "target", "fragment"),
    [
        ({}, "no_such_module_rr", "no module named 'no_such_module_rr'"),
        ({"empty_mod.py": "X = 1\n"}, "{dir}/empty_mod.py", "has no @subscriber handlers"),
        (
            {"one.py": ONE_HANDLER},
            "{dir}/one.py:missing",
            "has no attribute 'missing'",
        ),
        ({"plain.py": "def h(m): pass\n"}, "{dir}/plain.py:h", "is not a handler"),
        ({}, "{dir}/nope.py", "no such file"),
        ({"broken.py": "import not_installed_pkg_rr\n"}, "{dir}/broken.py", "not_installed_pkg_rr"),
        (
            {"raises.py": "raise RuntimeError('boom at import')\n"},
            "{dir}/raises.py",
            "boom at import",
        ),
    ],
)
def test_unloadable_targets_exit_78(
    tmp_path: Path, files: dict[str, str], target: str, fragment: str
) -> None:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    result = runner.invoke(app, ["run", target.format(dir=tmp_path), "--url", URL])
    assert result.exit_code == 78, result.output
    assert fragment in result.stderr
    assert "Traceback" not in result.output + result.stderr


def test_loader_collects_subscribers_and_hooks_in_order(tmp_path: Path) -> None:
    (tmp_path / "svc_rr_test.py").write_text(
        "from rabbitctl_retry import on_shutdown, on_startup, subscriber\n"
        "@on_startup\ndef up(): pass\n"
        "@subscriber('b')\nasync def second(m): pass\n"
        "@subscriber('a')\ndef first(m): pass\n"
        "@on_shutdown\nasync def down(): pass\n"
    )
    handlers = load_target(str(tmp_path / "svc_rr_test.py"))
    assert [s.queue for s in handlers.subscribers] == ["b", "a"]
    assert [s.is_async for s in handlers.subscribers] == [True, False]
    assert [h.__name__ for h in handlers.startup] == ["up"]
    assert [h.__name__ for h in handlers.shutdown] == ["down"]
    one = load_target(f"{tmp_path / 'svc_rr_test.py'}:first")
    assert [s.name for s in one.subscribers] == ["svc_rr_test:first"]


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        ("refunds", ("refunds", None)),
        ("refunds:process", ("refunds", "process")),
        ("pkg.mod:attr", ("pkg.mod", "attr")),
        ("path/to/service.py:h", ("path/to/service.py", "h")),
        ("C:\\svc\\service.py", ("C:\\svc\\service.py", None)),
    ],
)
def test_split_target(target: str, expected: tuple[str, str | None]) -> None:
    assert split_target(target) == expected


def test_bad_topology_for_run_exits_78(tmp_path: Path) -> None:
    (tmp_path / "ok.py").write_text(
        "from rabbitctl_retry import subscriber\n@subscriber('q')\ndef h(m): pass\n"
    )
    (tmp_path / "t.toml").write_text("[queues.q]\nmax_attempts = 'five'\n")
    result = runner.invoke(
        app, ["run", str(tmp_path / "ok.py"), "--topology", str(tmp_path / "t.toml"), "--url", URL]
    )
    assert result.exit_code == 78
    assert "t.toml:2: queues.q.max_attempts" in result.stderr


def test_unreachable_broker_exits_69(tmp_path: Path) -> None:
    (tmp_path / "ok2.py").write_text(
        "from rabbitctl_retry import subscriber\n@subscriber('q')\ndef h(m): pass\n"
    )
    result = runner.invoke(app, ["run", str(tmp_path / "ok2.py"), "--url", URL])
    assert result.exit_code == 69


BUG = "import os\n\n\ndef total():\n    return 1 / 0\n\n\ntotal()\n"


def test_a_module_that_fails_at_import_names_the_file_and_line(tmp_path: Path) -> None:
    (tmp_path / "bug_at_import.py").write_text(BUG)
    target = str(tmp_path / "bug_at_import.py")

    result = runner.invoke(app, ["run", target, "--url", URL])

    assert result.exit_code == 78, result.output
    assert result.stderr == (
        f"rr: error: importing {target} failed: ZeroDivisionError: division by zero "
        f"(at {tmp_path / 'bug_at_import.py'}:5, in total)\n"
    )


def test_a_syntax_error_names_the_file_and_line(tmp_path: Path) -> None:
    (tmp_path / "bad_syntax.py").write_text("x = 1\ndef f(:\n    pass\n")
    result = runner.invoke(app, ["run", str(tmp_path / "bad_syntax.py"), "--url", URL])
    assert result.exit_code == 78
    assert f"(at {tmp_path / 'bad_syntax.py'}:2)" in result.stderr


def test_debug_shows_the_traceback(tmp_path: Path) -> None:
    (tmp_path / "bug_debug.py").write_text(BUG)
    target = str(tmp_path / "bug_debug.py")
    result = runner.invoke(app, ["run", target, "--url", URL, "--log-level", "debug"])
    assert result.exit_code == 78
    assert "Traceback (most recent call last)" in result.stderr
    assert "return 1 / 0" in result.stderr


def test_heartbeat_0_is_warned_about(tmp_path: Path) -> None:
    """A half-open connection is noticed by the heartbeat only: without it rr run waits on a
    dead connection for good (docs/reference/runtime.md, "Running it")."""
    (tmp_path / "ok3.py").write_text(ONE_HANDLER)
    without = runner.invoke(app, ["run", str(tmp_path / "ok3.py"), "--url", URL + "?heartbeat=0"])
    assert without.exit_code == 69  # nothing answers on port 1
    assert "heartbeat=0: a connection that goes silent" in without.stderr
    assert "guest:guest" not in without.stderr  # the URL is shown censored
    default = runner.invoke(app, ["run", str(tmp_path / "ok3.py"), "--url", URL])
    assert "heartbeat=0" not in default.stderr
