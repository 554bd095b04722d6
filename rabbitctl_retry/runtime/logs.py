"""Log lines of ``rr run``: ``--log-format text|json`` and ``--log-level``.

One line per event. Structured fields travel in ``extra={"rr": {...}}``; the text format
prints them as ``key=value`` (values with control characters escaped, so a message id cannot
move the terminal), the JSON format as one object per line. URLs in messages are censored.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from rabbitctl_retry.errors import censor_url


class LogFormat(StrEnum):
    TEXT = "text"
    JSON = "json"


def _fields(record: logging.LogRecord) -> dict[str, Any]:
    fields = getattr(record, "rr", None)
    return dict(fields) if isinstance(fields, dict) else {}


def _time(record: logging.LogRecord) -> str:
    stamp = datetime.fromtimestamp(record.created, UTC)
    return stamp.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _censor(text: str) -> str:
    return " ".join(censor_url(word) if "://" in word else word for word in text.split(" "))


def _escape(value: object) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    if text.isprintable() and " " not in text and text:
        return text
    return json.dumps(text)


class TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        parts = [_time(record), record.levelname, record.name, _censor(record.getMessage())]
        parts += [f"{key}={_escape(value)}" for key, value in _fields(record).items()]
        line = " ".join(parts)
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        document: dict[str, Any] = {
            "time": _time(record),
            "level": record.levelname.lower(),
            "logger": record.name,
            "event": _censor(record.getMessage()),
        }
        document.update(_fields(record))
        if record.exc_info:
            document["exception"] = self.formatException(record.exc_info)
        return json.dumps(document, default=str, ensure_ascii=False)


def configure_logging(level: str = "info", log_format: LogFormat = LogFormat.TEXT) -> None:
    """Send rr's logs to stderr in ``log_format`` at ``level``; quiet the AMQP driver."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if log_format is LogFormat.JSON else TextFormatter())
    root = logging.getLogger("rr")
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    root.propagate = False
    logging.getLogger("aiormq").setLevel(logging.CRITICAL)
