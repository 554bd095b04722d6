"""Nothing rr writes on stderr carries ESC, a C0 or C1 control, DEL or a bidi control, and
one error or one log record is one line (docs/reference/cli.md, "Output").

Checked on real ``python -m rabbitctl_retry`` processes, on the bytes they write: a
broker's reply text that quotes a vhost name, an exception's text, pamqp's warning about a
header name it truncates, and the log lines of ``rr run`` (text and JSON).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import queue
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from rabbitctl_retry.cli.logs import JsonFormatter, TextFormatter, json_line
from rabbitctl_retry.errors import censor_url, escape_unprintable
from rabbitctl_retry.transport.amqp import connect
from rabbitctl_retry.transport.base import Properties
from tests.backends import RabbitBackend, vhost_url
from tests.hostile.output import UNSAFE
from tests.target_line import after_target

HOSTILE_TEXT = "evil\x1b[31m\u202e\u2066\u200f\x07\x85\x9b\r\nrr: error: forged"
"""ESC and a CSI, bidi overrides and isolates, BEL, C1 NEL and CSI, CR LF and a forged line."""

ESCAPED_TEXT = "evil\\x1b[31m\\u202e\\u2066\\u200f\\x07\\x85\\x9b\\r\\nrr: error: forged"


def safe_text(data: bytes) -> str:
    """``data`` as UTF-8 text, asserting it holds nothing :data:`UNSAFE`."""
    text = data.decode("utf-8")
    found = UNSAFE.search(text)
    assert found is None, f"unsafe character {found.group()!r} in {text!r}"
    return text


def rr(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "COLUMNS": "200", "PYTHONIOENCODING": "utf-8"}
    env.pop("RR_URL", None)
    return subprocess.run(
        [sys.executable, "-m", "rabbitctl_retry", *args],
        capture_output=True,
        env=env,
        cwd=cwd,
        timeout=60,
        check=False,
    )


# --- the checker and the escaping themselves ------------------------------------------------


def test_the_checker_catches_each_kind_of_unsafe_character() -> None:
    for char in "\x1b\x00\x7f\x85\x9b\u202e\u2066\u200e\u061c\u2028":
        with pytest.raises(AssertionError):
            safe_text(f"a{char}b".encode())
    assert safe_text("tab\there\nné 😀".encode()) == "tab\there\nné 😀"


def test_escape_unprintable_makes_one_visible_line() -> None:
    assert escape_unprintable(HOSTILE_TEXT) == ESCAPED_TEXT
    assert escape_unprintable("plain é 😀 text") == "plain é 😀 text"
    assert escape_unprintable("\ud800\U000e0001\u2028") == "\\ud800\\U000e0001\\u2028"


def _record(message: str, fields: dict[str, object], name: str = "rr.runtime") -> logging.LogRecord:
    entry = logging.LogRecord(name, logging.WARNING, __file__, 1, message, None, None)
    entry.created = 1_790_000_000.5
    entry.rr = fields
    return entry


def test_text_log_lines_escape_message_logger_and_fields() -> None:
    entry = _record(HOSTILE_TEXT, {"message_id": HOSTILE_TEXT}, name="pamqp\x1b.encode")
    line = TextFormatter().format(entry)
    assert line == (
        f"2026-09-21T14:13:20.500Z WARNING pamqp\\x1b.encode {ESCAPED_TEXT} message_id="
        + json.dumps(HOSTILE_TEXT)
    )
    safe_text(line.encode())
    assert "\n" not in line


def test_text_log_traceback_lines_are_indented_and_escaped() -> None:
    try:
        raise RuntimeError(HOSTILE_TEXT)
    except RuntimeError:
        entry = logging.LogRecord(
            "rr.runtime", logging.ERROR, __file__, 1, "failed", None, sys.exc_info()
        )
    line = TextFormatter().format(entry)
    first, *rest = line.split("\n")
    assert first.endswith(" ERROR rr.runtime failed")
    assert rest[0] == "    Traceback (most recent call last):"
    # a line break of the exception's text starts an indented line: it cannot pass for a record
    assert rest[-2:] == [
        "    RuntimeError: evil\\x1b[31m\\u202e\\u2066\\u200f\\x07\\x85\\x9b\\r",
        "    rr: error: forged",
    ]
    assert all(extra.startswith("    ") for extra in rest)
    safe_text(line.encode())


def test_json_log_lines_escape_everything_unsafe_and_stay_the_same_value() -> None:
    entry = _record(HOSTILE_TEXT, {"message_id": HOSTILE_TEXT, "attempt": 2})
    line = JsonFormatter().format(entry)
    safe_text(line.encode())
    assert "\n" not in line
    assert "\\u202e" in line
    assert json.loads(line) == {
        "time": "2026-09-21T14:13:20.500Z",
        "level": "warning",
        "logger": "rr.runtime",
        "event": HOSTILE_TEXT,
        "message_id": HOSTILE_TEXT,
        "attempt": 2,
    }
    assert json_line({"name": "né 😀"}) == '{"name": "né 😀"}'


# --- real processes -----------------------------------------------------------------------


@pytest.fixture
def broker(amqp_url: str) -> str:
    if urlsplit(amqp_url).scheme != "amqp":
        pytest.skip("builds amqp:// URLs to the test broker")
    return amqp_url


HANDLER = "from rabbitctl_retry import subscriber\n@subscriber('rr-hostile-q')\ndef h(m): pass\n"


@pytest.mark.parametrize("command", ["declare", "dlq-inspect", "run-no-declare"])
def test_broker_reply_text_naming_a_hostile_vhost_is_one_escaped_line(
    broker: str, tmp_path: Path, command: str
) -> None:
    vhost = "rr\x1b[31m\u202ev\u2066\x85\nrr: error: forged"
    url = vhost_url(broker, vhost)
    (tmp_path / "t.toml").write_text("[queues.rr-hostile-q]\n", encoding="utf-8")
    (tmp_path / "handler_rr_vhost.py").write_text(HANDLER, encoding="utf-8")
    args = {
        "declare": ["declare", str(tmp_path / "t.toml")],
        "dlq-inspect": ["dlq", "inspect", "rr-hostile-q"],
        "run-no-declare": ["run", str(tmp_path / "handler_rr_vhost.py"), "--no-declare"],
    }[command]

    result = rr(*args, "--url", url)

    assert result.returncode == 77
    assert safe_text(result.stdout) == ""
    # rr declare names its broker first (docs/reference/cli.md, "Where the broker is"), escaped
    stderr = safe_text(result.stderr)
    assert (after_target(stderr) if command == "declare" else stderr) == (
        f"rr: error: {censor_url(url)} refused the virtual host: NOT_ALLOWED - vhost "
        "rr\\x1b[31m\\u202ev\\u2066\\x85\\nrr: error: forged not found\n"
    )


def test_exception_text_is_one_escaped_line(tmp_path: Path) -> None:
    module = tmp_path / "raises_rr_hostile.py"
    module.write_text(f"raise RuntimeError({HOSTILE_TEXT!r})\n", encoding="utf-8")

    result = rr("run", str(module), "--url", "amqp://guest:guest@127.0.0.1:1/")

    assert result.returncode == 78
    assert safe_text(result.stdout) == ""
    assert safe_text(result.stderr) == (
        f"rr: error: importing {module} failed: RuntimeError: {ESCAPED_TEXT} "
        f"(at {module.resolve()}:1, in <module>)\n"
    )


LONG_KEY = "x-k\x1b[31m\u202e" + "y" * 140
"""A header name over pamqp's 128 bytes, as pamqp's warning ``Truncating key <key>`` names it."""

LOG_PREFIX = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z "


def test_after_the_cli_started_a_driver_warning_is_escaped(tmp_path: Path) -> None:
    """pamqp logs ``Truncating key <raw key>``; no handler of its own takes it, so Python's
    last resort would write it raw. Once the CLI ran, that record goes through rr's
    formatter."""
    topology = tmp_path / "t.toml"
    topology.write_text("[queues.rr-hostile-q]\n", encoding="utf-8")
    program = (
        "import logging\n"
        "from rabbitctl_retry.cli import app\n"
        f"app(['topology', 'validate', {str(topology)!r}], standalone_mode=False)\n"
        "logging.getLogger('pamqp.encode')"
        f".warning('Truncating key %s to 128 bytes', {LONG_KEY!r})\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    stderr = safe_text(result.stderr)
    expected = "WARNING pamqp.encode Truncating key x-k\\x1b[31m\\u202e" + "y" * 140
    assert re.fullmatch(LOG_PREFIX + re.escape(expected + " to 128 bytes") + "\n", stderr), stderr


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_records_no_handler_takes_go_through_rrs_formatter(log_format: str) -> None:
    program = (
        "from rabbitctl_retry.cli.logs import LogFormat, install_stderr_fallback\n"
        "from pamqp import encode\n"
        f"install_stderr_fallback(LogFormat({log_format!r}))\n"
        f"encode.field_table({{{LONG_KEY!r}: 1}})\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    stderr = safe_text(result.stderr)
    message = f"Truncating key {LONG_KEY} to 128 bytes"
    if log_format == "json":
        assert stderr.endswith("\n")
        assert stderr.count("\n") == 1
        document = json.loads(stderr)
        assert (document["level"], document["logger"], document["event"]) == (
            "warning",
            "pamqp.encode",
            message,
        )
    else:
        escaped = escape_unprintable(message)
        assert re.fullmatch(
            LOG_PREFIX + "WARNING pamqp.encode " + re.escape(escaped) + "\n", stderr
        )


SERVICE = """\
from rabbitctl_retry import subscriber

@subscriber("rr-hostile-logs")
def fail(message):
    raise RuntimeError({text!r})
"""

SERVICE_TOPOLOGY = """\
[queues.rr-hostile-logs]
max_attempts = 2
dead_letter = "rr-hostile-logs.dead"

[queues."rr-hostile-logs.dead"]
"""


@contextmanager
def _running(args: list[str]) -> Iterator[tuple[subprocess.Popen[bytes], queue.Queue[bytes]]]:
    """``rr ARGS`` in the background; its stderr lines arrive on the queue."""
    env = {**os.environ, "PYTHONIOENCODING": "utf-8"}
    lines: queue.Queue[bytes] = queue.Queue()
    with subprocess.Popen(
        [sys.executable, "-m", "rabbitctl_retry", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env,
    ) as process:

        def read() -> None:
            assert process.stderr is not None
            for line in process.stderr:
                lines.put(line)

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        try:
            yield process, lines
        finally:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
            process.wait(timeout=60)
            reader.join(timeout=60)


def _wait_for(lines: queue.Queue[bytes], needle: bytes, seen: list[bytes]) -> None:
    while True:
        line = lines.get(timeout=60)
        seen.append(line)
        if needle in line:
            return


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_rr_run_log_lines_escape_message_ids_and_errors(
    broker: str, tmp_path: Path, log_format: str
) -> None:
    (tmp_path / "svc_rr_hostile_logs.py").write_text(
        SERVICE.format(text=HOSTILE_TEXT), encoding="utf-8"
    )
    (tmp_path / "topology.toml").write_text(SERVICE_TOPOLOGY, encoding="utf-8")
    rabbit = RabbitBackend(broker)
    rabbit.setup()
    seen: list[bytes] = []
    try:
        args = [
            "run",
            str(tmp_path / "svc_rr_hostile_logs.py"),
            "--topology",
            str(tmp_path / "topology.toml"),
            "--url",
            rabbit.url,
            "--log-format",
            log_format,
        ]
        with _running(args) as (process, lines):
            _wait_for(lines, b"consuming", seen)
            asyncio.run(_publish(rabbit.url, message_id=HOSTILE_TEXT))
            _wait_for(lines, b"dead-lettered", seen)
            process.send_signal(signal.SIGTERM)
            assert process.wait(timeout=60) == 0
        while not lines.empty():
            seen.append(lines.get())
    finally:
        asyncio.run(rabbit.close())

    text = safe_text(b"".join(seen))
    records = text.splitlines()
    outcomes = [r for r in records if "retried" in r or "dead-lettered" in r]
    assert len(outcomes) == 2
    if log_format == "json":
        documents = [json.loads(r) for r in outcomes]
        assert [(d["outcome"], d["message_id"], d["error"]) for d in documents] == [
            ("retried", HOSTILE_TEXT, HOSTILE_TEXT),
            ("dead-lettered", HOSTILE_TEXT, HOSTILE_TEXT),
        ]
    else:
        for record, outcome in zip(outcomes, ["retried", "dead-lettered"], strict=True):
            assert f" outcome={outcome} " in record
            assert f"message_id={json.dumps(HOSTILE_TEXT)}" in record
            assert f"error={json.dumps(HOSTILE_TEXT)}" in record
    assert not any(r.startswith("rr: error: forged") for r in records)


async def _publish(url: str, *, message_id: str) -> None:
    connection = await connect(url)
    try:
        channel = await connection.channel(confirms=True)
        await channel.publish(
            b"{}", routing_key="rr-hostile-logs", properties=Properties(message_id=message_id)
        )
    finally:
        await connection.close()
