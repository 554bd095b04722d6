"""Files named by the user (docs/reference/cli.md, "Files rr reads"): each reader refuses
``/dev/zero`` (a device), a FIFO (without waiting for a writer) and a file over its limit, with one
``rr: error:`` line naming the file and its documented exit code, never reading more than
its limit; and a real ``rr`` process fed ``/dev/zero`` as a password file stays small."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from rabbitctl_retry.cli import app
from rabbitctl_retry.user_files import (
    BODY_LIMIT_BYTES,
    CONFIG_FILE_LIMIT_BYTES,
    HANDLER_FILE_LIMIT_BYTES,
    IMPORT_LINE_LIMIT_BYTES,
    PASSWORD_FILE_LIMIT_BYTES,
    PUBLISH_FILE_LIMIT_BYTES,
    TLS_FILE_LIMIT_BYTES,
    TOKEN_FILE_LIMIT_BYTES,
    size_words,
)
from tests.backends import EmulatorBackend
from tests.dlq.support import declare, publish_all, rr, synthesized
from tests.hostile.output import one_error_line
from tests.observe import peek

runner = CliRunner(env={"COLUMNS": "200"})
EXAMPLE = Path(__file__).parents[2] / "examples" / "refunds"
NOWHERE = "amqp://guest:guest@127.0.0.1:1/"
"""A URL no broker answers at: every refusal here comes before rr connects."""

KINDS = ("dev-zero", "fifo", "oversized")
DEVICE = "is a device, not a regular file"
FIFO = "is a FIFO, not a regular file"


def hostile(kind: str, tmp_path: Path, limit_bytes: int, name: str = "file") -> Path:
    """``/dev/zero``, a FIFO no one writes to, or a (sparse) file one byte over the limit."""
    if kind == "dev-zero":
        return Path("/dev/zero")
    path = tmp_path / name
    if kind == "fifo":
        os.mkfifo(path)
    else:
        with path.open("wb") as out:
            out.truncate(limit_bytes + 1)
    return path


def reason(kind: str, limit_bytes: int) -> str:
    return {
        "dev-zero": DEVICE,
        "fifo": FIFO,
        "oversized": f"is larger than {size_words(limit_bytes)}, the most rr reads",
    }[kind]


def refused(result: Result, code: int) -> str:
    """The one error line of a command that ended with ``code``."""
    assert result.exit_code == code, (result.exit_code, result.output)
    return one_error_line(result.stderr)


def profile_file(tmp_path: Path, extra: str = "") -> Path:
    config = tmp_path / "config.toml"
    config.write_text(f'[brokers.a]\nurl = "amqp://guest@127.0.0.1:1/"\n{extra}', encoding="utf-8")
    return config


def status_with(config: Path) -> Result:
    return runner.invoke(app, ["status", "q", "-b", "a"], env={"RR_CONFIG": str(config)})


@pytest.mark.parametrize("kind", KINDS)
def test_the_profiles_file(tmp_path: Path, kind: str) -> None:
    config = hostile(kind, tmp_path, CONFIG_FILE_LIMIT_BYTES, "config.toml")
    line = refused(status_with(config), 78)
    assert line == f"rr: error: {config}: {reason(kind, CONFIG_FILE_LIMIT_BYTES)}"


@pytest.mark.parametrize("kind", KINDS)
def test_a_profiles_password_file(tmp_path: Path, kind: str) -> None:
    secret = hostile(kind, tmp_path, PASSWORD_FILE_LIMIT_BYTES, "secret")
    config = profile_file(tmp_path, f'password_file = "{secret}"\n')
    line = refused(status_with(config), 78)
    assert line == (
        f"rr: error: {config}: brokers.a.password_file: the password file {secret}: "
        f"{reason(kind, PASSWORD_FILE_LIMIT_BYTES)}"
    )


@pytest.mark.parametrize("kind", KINDS)
def test_the_console_token_file(tmp_path: Path, kind: str) -> None:
    token = hostile(kind, tmp_path, TOKEN_FILE_LIMIT_BYTES, "token")
    result = runner.invoke(app, ["console", "q.dead", "--token-file", str(token), "--url", NOWHERE])
    line = refused(result, 78)
    assert line == f"rr: error: --token-file {token}: {reason(kind, TOKEN_FILE_LIMIT_BYTES)}"


def edit_with_body(body: str, stdin: bytes | None = None) -> Result:
    return runner.invoke(
        app, ["dlq", "edit", "q.dead", "--id", "m1", "--body", body, "--url", NOWHERE], input=stdin
    )


@pytest.mark.parametrize("kind", KINDS)
def test_dlq_edit_body(tmp_path: Path, kind: str) -> None:
    body = hostile(kind, tmp_path, BODY_LIMIT_BYTES, "body.json")
    line = refused(edit_with_body(str(body)), 65)
    assert line == f"rr: error: --body {body}: {reason(kind, BODY_LIMIT_BYTES)}"


def test_dlq_edit_body_on_stdin_over_its_limit() -> None:
    line = refused(edit_with_body("-", b"x" * (BODY_LIMIT_BYTES + 1)), 65)
    assert line == (f"rr: error: --body - (stdin): {reason('oversized', BODY_LIMIT_BYTES)}")


def test_dlq_edit_body_dot_slash_dash_is_a_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only a bare ``-`` is stdin: ``./-`` is the file named ``-`` (here, a FIFO)."""
    monkeypatch.chdir(tmp_path)
    os.mkfifo(tmp_path / "-")
    line = refused(edit_with_body("./-", b"from stdin"), 65)
    assert line == f"rr: error: --body ./-: {FIFO}"


def test_dlq_edit_the_file_the_editor_saved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An editor that leaves a device where the body was: refused, nothing published."""

    async def scenario() -> tuple[Result, int, int]:
        backend = EmulatorBackend()
        try:
            await declare(backend, "dead", "refunds", "orders")
            now = datetime.now(UTC).replace(microsecond=0)
            letters = [synthesized("rr", n, now) for n in range(2)]
            await publish_all(backend, "dead", letters)
            message_id = str(letters[0][1].message_id)
            result = await rr(backend, "dlq", "edit", "dead", "--id", message_id, "--yes")
            return result, len(await peek(backend, "dead")), len(await peek(backend, "refunds"))
        finally:
            await backend.close()

    editor = tmp_path / "editor.sh"
    editor.write_text('#!/bin/sh\nrm "$1" && ln -s /dev/zero "$1"\n', encoding="utf-8")
    editor.chmod(0o755)
    monkeypatch.setenv("EDITOR", str(editor))
    monkeypatch.delenv("VISUAL", raising=False)
    monkeypatch.chdir(tmp_path)
    result, dead, home = asyncio.run(scenario())
    line = refused(result, 65)
    assert line.startswith("rr: error: the file the editor saved (")
    assert line.endswith(f") {DEVICE}; nothing was changed")
    assert (dead, home) == (2, 0)


@pytest.mark.parametrize("kind", KINDS)
def test_dlq_import_file(tmp_path: Path, kind: str) -> None:
    path = hostile(kind, tmp_path, IMPORT_LINE_LIMIT_BYTES, "letters.jsonl")
    result = runner.invoke(app, ["dlq", "import", str(path), "--to", "q", "--url", NOWHERE])
    line = refused(result, 65)
    if kind == "oversized":  # the file has no size limit; one line has
        expected = (
            f"{path}:1: the line is longer than {size_words(IMPORT_LINE_LIMIT_BYTES)}, the most "
            "rr reads of a line"
        )
    else:
        expected = f"{path}: {reason(kind, IMPORT_LINE_LIMIT_BYTES)}"
    assert line == f"rr: error: {expected}; nothing was imported"


def test_dlq_import_names_the_line_that_is_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "letters.jsonl"
    path.write_bytes(b"\n\n\xff\n")
    result = runner.invoke(app, ["dlq", "import", str(path), "--to", "q", "--url", NOWHERE])
    line = refused(result, 65)
    assert line == (
        f"rr: error: {path}:3: the line is not UTF-8 text (byte 0xff); nothing was imported"
    )


def simulate(*args: str) -> Result:
    return runner.invoke(app, ["simulate", str(EXAMPLE / "topology.toml"), *args])


@pytest.mark.parametrize("kind", KINDS)
def test_simulate_publish_file(tmp_path: Path, kind: str) -> None:
    path = hostile(kind, tmp_path, PUBLISH_FILE_LIMIT_BYTES, "publish.jsonl")
    result = simulate(str(EXAMPLE / "service.py"), "--publish-file", str(path))
    line = refused(result, 65)
    assert line == f"rr: error: --publish-file {path}: {reason(kind, PUBLISH_FILE_LIMIT_BYTES)}"


@pytest.mark.parametrize("kind", KINDS)
def test_a_handler_file(tmp_path: Path, kind: str) -> None:
    path = hostile(kind, tmp_path, HANDLER_FILE_LIMIT_BYTES, "handlers.py")
    line = refused(simulate(str(path)), 78)
    assert line == f"rr: error: {path}: {reason(kind, HANDLER_FILE_LIMIT_BYTES)}"


@pytest.mark.parametrize("client", ["native", "aiormq"])
@pytest.mark.parametrize("kind", KINDS)
def test_a_broker_urls_tls_file(tmp_path: Path, kind: str, client: str) -> None:
    """OpenSSL opens a cafile itself: a FIFO would hold rr for ever (exit 69 as before for a
    TLS file that cannot be read, now naming it)."""
    cafile = hostile(kind, tmp_path, TLS_FILE_LIMIT_BYTES, "ca.pem")
    url = f"amqps://guest:guest@127.0.0.1:1/?cafile={cafile}"
    result = runner.invoke(app, ["status", "q", "--url", url], env={"RR_AMQP_CLIENT": client})
    line = refused(result, 69)
    assert line == (
        f"rr: error: cannot connect to amqps://guest:******@127.0.0.1:1/?cafile={cafile}: "
        f"cafile {cafile}: {reason(kind, TLS_FILE_LIMIT_BYTES)}"
    )


# --- a real process ---------------------------------------------------------------------------

CAP_BYTES = 1024 * 1024 * 1024
"""The address space the child may take: a whole read of /dev/zero fails within it at once,
rather than growing on a shared machine (as it did: 9.8 GB in 12 s)."""


MEASURE = """
import os, resource, sys
cap, argv = int(sys.argv[1]), sys.argv[2:]
pid = os.fork()
if pid == 0:
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    os.execv(argv[0], argv)
_, status, usage = os.wait4(pid, 0)
print(os.waitstatus_to_exitcode(status), usage.ru_maxrss * 1024)
"""
"""Runs a command and prints its exit code and peak memory (bytes; ru_maxrss is KiB on Linux).
A child's peak counts the memory of the process it was forked from, so the command is forked
from this small process, not from the test's (a worker of hundreds of MB)."""


def _rr_process(args: list[str], env: dict[str, str], cwd: Path) -> tuple[int, str, int]:
    """Run ``python -m rabbitctl_retry ARGS`` in ``cwd``: its exit code, stderr and peak
    memory (bytes)."""
    command = [sys.executable, "-m", "rabbitctl_retry", *args]
    done = subprocess.run(
        [sys.executable, "-c", MEASURE, str(CAP_BYTES), *command],
        env={**os.environ, **env},
        cwd=cwd,
        capture_output=True,
        stdin=subprocess.DEVNULL,
        check=True,
    )
    code, peak_bytes = (int(word) for word in done.stdout.split())
    return code, done.stderr.decode("utf-8", "replace"), peak_bytes


@pytest.mark.skipif(sys.platform != "linux", reason="ru_maxrss in KiB and /dev/zero: Linux")
def test_a_process_fed_dev_zero_as_password_file_stays_small(tmp_path: Path) -> None:
    config = profile_file(tmp_path, 'password_file = "/dev/zero"\n')
    code, stderr, peak_bytes = _rr_process(
        ["status", "q", "-b", "a"], {"RR_CONFIG": str(config)}, tmp_path
    )
    assert code == 78, stderr
    assert one_error_line(stderr) == (
        f"rr: error: {config}: brokers.a.password_file: the password file /dev/zero: {DEVICE}"
    )
    assert peak_bytes < 100 * 1024 * 1024
