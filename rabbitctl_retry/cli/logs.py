"""Log lines on stderr, for every command: the escaping fallback every command installs, the
driver's logs quieted, and ``rr run``'s ``--log-format text|json`` and ``--log-level``.

One line per event. Structured fields travel in ``extra={"rr": {...}}``; the text format
prints them as ``key=value`` (values with control characters escaped, so a message id cannot
move the terminal), the JSON format as one object per line. URLs in messages are censored.

Every record, from any logger (rr's, pamqp's, asyncio's), is written escaped: no ESC, no C0
or C1 control, no line break inside one record, no bidi control (docs/cli.md, "Output"). A
record no handler takes would reach Python's last-resort handler, which writes it raw; rr
puts its own escaping handler there (:func:`install_stderr_fallback`).
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from rabbitctl_retry.errors import censor_urls, escape_unprintable
from rabbitctl_retry.retry.headers import utc_stamp


class LogFormat(StrEnum):
    TEXT = "text"
    JSON = "json"


TRACEBACK_INDENT = "    "
"""Each line of a logged traceback starts with this, so no line of it reads as a record."""


def _fields(record: logging.LogRecord) -> dict[str, Any]:
    fields = getattr(record, "rr", None)
    return dict(fields) if isinstance(fields, dict) else {}


def _time(record: logging.LogRecord) -> str:
    return utc_stamp(datetime.fromtimestamp(record.created, UTC))


def _message(record: logging.LogRecord) -> str:
    """The record's message, censored; never raises (a bad ``%`` format shows as is)."""
    try:
        text = record.getMessage()
    except (TypeError, ValueError):
        text = f"{record.msg!s} {record.args!r}"
    return censor_urls(text)


def _escape(value: object) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    if text.isprintable() and " " not in text and text:
        return text
    return json.dumps(text)


def json_line(document: dict[str, Any]) -> str:
    """``document`` as one JSON line whose every unprintable character is a ``\\uXXXX``
    escape (the same JSON value: outside strings JSON text is printable ASCII)."""
    text = json.dumps(document, default=str, ensure_ascii=False)
    if text.isprintable():
        return text
    return "".join(char if char.isprintable() else json.dumps(char)[1:-1] for char in text)


class TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        parts = [
            _time(record),
            escape_unprintable(record.levelname),
            escape_unprintable(record.name),
            escape_unprintable(_message(record)),
        ]
        parts += [f"{key}={_escape(value)}" for key, value in _fields(record).items()]
        line = " ".join(parts)
        if record.exc_info:
            for traceback_line in self.formatException(record.exc_info).split("\n"):
                line += "\n" + TRACEBACK_INDENT + escape_unprintable(traceback_line)
        return line


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        document: dict[str, Any] = {
            "time": _time(record),
            "level": record.levelname.lower(),
            "logger": record.name,
            "event": _message(record),
        }
        document.update(_fields(record))
        if record.exc_info:
            document["exception"] = self.formatException(record.exc_info)
        return json_line(document)


class StderrHandler(logging.Handler):
    """Writes each record to the ``sys.stderr`` of the moment (not the one it was made
    with), one formatted record per line."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            stream = sys.stderr
            stream.write(self.format(record) + "\n")
            stream.flush()
        except RecursionError:
            raise
        except Exception:
            self.handleError(record)


def formatter_for(log_format: LogFormat) -> logging.Formatter:
    return JsonFormatter() if log_format is LogFormat.JSON else TextFormatter()


def install_stderr_fallback(log_format: LogFormat = LogFormat.TEXT) -> None:
    """Records that no handler takes (warnings of pamqp, asyncio, or rr's own outside
    ``rr run``) go to stderr through rr's formatter, escaped, instead of raw."""
    fallback = StderrHandler(logging.WARNING)
    fallback.setFormatter(formatter_for(log_format))
    logging.lastResort = fallback


def quiet_the_driver() -> None:
    """aiormq logs every failed connect at ERROR; rr reports the same failure once, censored
    (every command does this first, ``cli/__init__.py``)."""
    logging.getLogger("aiormq").setLevel(logging.CRITICAL)


class _WorkerTag(logging.Filter):
    """Adds ``worker`` to every record's fields (first, so a line says it at once)."""

    def __init__(self, worker: str) -> None:
        super().__init__()
        self._worker = worker

    def filter(self, record: logging.LogRecord) -> bool:
        record.rr = {"worker": self._worker, **_fields(record)}
        return True


def configure_logging(
    level: str = "info", log_format: LogFormat = LogFormat.TEXT, *, worker: str | None = None
) -> None:
    """Send rr's logs to stderr in ``log_format`` at ``level``; every other logger's warnings
    in the same format (:func:`install_stderr_fallback`). The driver is quiet already
    (:func:`quiet_the_driver`). ``worker`` (``"2/4"``): every line of a worker of ``rr run
    --workers`` says which worker it is (``worker=2/4``; docs/runtime.md, "Running it")."""
    handler = StderrHandler()
    handler.setFormatter(formatter_for(log_format))
    if worker is not None:
        handler.addFilter(_WorkerTag(worker))
    root = logging.getLogger("rr")
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    root.propagate = False
    install_stderr_fallback(log_format)
