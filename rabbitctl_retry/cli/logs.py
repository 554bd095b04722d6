"""Log lines on stderr, for every command: the escaping fallback every command installs, the
driver's logs quieted, and ``rr run``'s ``--log-format text|json`` and ``--log-level``.

One line per event. Structured fields travel in ``extra={"rr": {...}}``; the text format
prints them as ``key=value`` (values with control characters escaped, so a message id cannot
move the terminal), the JSON format as one object per line. URLs in messages are censored.

Every record, from any logger (rr's, pamqp's, asyncio's), is written escaped: no ESC, no C0
or C1 control, no line break inside one record, no bidi control (docs/reference/cli.md, "Output"). A
record no handler takes would reach Python's last-resort handler, which writes it raw; rr
puts its own escaping handler there (:func:`install_stderr_fallback`).

Under ``rr run`` the handlers' own loggers print too: rr puts the same handler on the root
logger, at ``--log-level``, and every record made inside a handler call carries the call's
queue, message id and attempt (:class:`HandlerCallFields`); if the handler modules configure
the root logger themselves, theirs prints and rr's leaves the root (:func:`defer_to_the_handlers`;
docs/reference/handlers.md, "Logs from handlers").
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Collection
from contextvars import ContextVar
from datetime import UTC, datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from rabbitctl_retry.errors import censor_urls, escape_unprintable
from rabbitctl_retry.retry.headers import utc_stamp

if TYPE_CHECKING:
    from rabbitctl_retry.runtime.handler_context import CallFacts


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


DRIVER_LOGGERS = {"aiormq": logging.CRITICAL, "pamqp": logging.WARNING}
"""The AMQP driver's loggers and the level below which they say nothing: aiormq logs every
failed connect at ERROR (rr reports the same failure once, censored), pamqp every frame at
DEBUG."""


def quiet_the_driver() -> None:
    """The driver says only what rr does not (every command does this first,
    ``cli/__init__.py``): :data:`DRIVER_LOGGERS`."""
    for name, level in DRIVER_LOGGERS.items():
        logging.getLogger(name).setLevel(level)


class _WorkerTag(logging.Filter):
    """Adds ``worker`` to every record's fields (first, so a line says it at once)."""

    def __init__(self, worker: str) -> None:
        super().__init__()
        self._worker = worker

    def filter(self, record: logging.LogRecord) -> bool:
        record.rr = {"worker": self._worker, **_fields(record)}
        return True


class HandlerCallFields(logging.Filter):
    """Adds the handler call's ``queue``, ``message_id`` and ``attempt`` to the fields of a
    record made inside one (``runtime/handler_context.py``: ``current``, given by
    :func:`configure_logging`, which alone loads the runtime); the record's own fields win."""

    def __init__(self, current: ContextVar[CallFacts | None]) -> None:
        super().__init__()
        self._current = current

    def filter(self, record: logging.LogRecord) -> bool:
        call = self._current.get()
        if call is not None:
            fields: dict[str, Any] = {"queue": call.queue}
            if call.message_id is not None:
                fields["message_id"] = call.message_id
            fields["attempt"] = call.attempt
            record.rr = {**fields, **_fields(record)}
        return True


class _RootHandler(StderrHandler):
    """rr's handler on the root logger (the handlers' own loggers), told from others."""


def configure_logging(
    level: str = "info", log_format: LogFormat = LogFormat.TEXT, *, worker: str | None = None
) -> None:
    """Send rr's logs to stderr in ``log_format`` at ``level``, and the root logger's (the
    handlers' own loggers) the same way at the same level; warnings that reach no handler in
    the same format too (:func:`install_stderr_fallback`). The driver is quiet already
    (:func:`quiet_the_driver`). ``worker`` (``"2/4"``): every line of a worker of ``rr run
    --workers`` says which worker it is (``worker=2/4``; docs/reference/runtime.md, "Running it").

    rr's own logger keeps a handler of its own (it does not propagate): a handler module
    that reconfigures the root logger changes its own lines, never rr's."""
    numeric = logging.getLevelName(level.upper())
    rr_logger = logging.getLogger("rr")
    rr_logger.handlers[:] = [_handler(log_format, worker)]
    rr_logger.setLevel(numeric)
    rr_logger.propagate = False
    root = logging.getLogger()
    root.handlers[:] = [h for h in root.handlers if not isinstance(h, _RootHandler)]
    root.addHandler(_handler(log_format, worker, root=True))
    root.setLevel(numeric)
    install_stderr_fallback(log_format)


def _handler(log_format: LogFormat, worker: str | None, *, root: bool = False) -> StderrHandler:
    handler = _RootHandler() if root else StderrHandler()
    handler.setFormatter(formatter_for(log_format))
    # added first, run last: the worker's tag goes before the call's fields
    from rabbitctl_retry.runtime import handler_context

    handler.addFilter(HandlerCallFields(handler_context.current))
    if worker is not None:
        handler.addFilter(_WorkerTag(worker))
    return handler


def defer_to_the_handlers(before: Collection[logging.Handler] = ()) -> bool:
    """Once the handler modules are imported: if they put a handler of their own on the root
    logger (``logging.config.dictConfig``, ``addHandler``; ``basicConfig`` does nothing on
    a root logger that has one), rr takes its own off, so no line prints twice and theirs
    decides how their loggers print (rr's own lines print as before). ``before``: the root's
    handlers before they were imported (someone else's, such as a test runner's, are not
    theirs). ``True`` if it did."""
    root = logging.getLogger()
    ours = [h for h in root.handlers if isinstance(h, _RootHandler)]
    added = [h for h in root.handlers if not isinstance(h, _RootHandler) and h not in before]
    if not ours or not added:
        return False
    theirs = [h for h in root.handlers if not isinstance(h, _RootHandler)]
    root.handlers[:] = theirs
    return True
