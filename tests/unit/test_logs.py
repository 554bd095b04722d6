"""rr run's log lines: one per event, text or JSON, control characters and passwords never shown."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import pytest

from rabbitctl_retry.cli.logs import JsonFormatter, TextFormatter


def record(message: str, fields: dict[str, object]) -> logging.LogRecord:
    entry = logging.LogRecord("rr.runtime", logging.WARNING, __file__, 1, message, None, None)
    entry.created = 1_790_000_000.5
    entry.rr = fields  # type: ignore[attr-defined]
    return entry


FIELDS = {"queue": "refunds", "message_id": "m\x1b[2J", "attempt": 5, "outcome": "dead-lettered"}


def test_text_line_has_the_fields_and_escapes_control_characters() -> None:
    line = TextFormatter().format(record("dead-lettered", FIELDS))
    assert line == (
        "2026-09-21T14:13:20.500Z WARNING rr.runtime dead-lettered queue=refunds "
        'message_id="m\\u001b[2J" attempt=5 outcome=dead-lettered'
    )
    assert "\x1b" not in line


def test_json_line_is_one_object() -> None:
    document = json.loads(JsonFormatter().format(record("dead-lettered", FIELDS)))
    assert document == {
        "time": "2026-09-21T14:13:20.500Z",
        "level": "warning",
        "logger": "rr.runtime",
        "event": "dead-lettered",
        **FIELDS,
    }


def test_urls_in_messages_are_censored() -> None:
    line = TextFormatter().format(record("cannot reach amqp://svc:hunter2@mq/ now", {}))
    assert "hunter2" not in line
    assert "amqp://svc:******@mq/" in line


@pytest.fixture(autouse=True)
def root_as_it_was() -> Iterator[None]:
    """configure_logging sets the root logger and rr's: put both back after each test."""
    loggers = [logging.getLogger(), logging.getLogger("rr")]
    saved = [(lg, lg.handlers[:], lg.level, lg.propagate) for lg in loggers]
    fallback = logging.lastResort
    yield
    for logger, handlers, level, propagate in saved:
        logger.handlers[:] = handlers
        logger.setLevel(level)
        logger.propagate = propagate
    logging.lastResort = fallback


def test_a_worker_of_rr_run_workers_tags_every_line(capsys: pytest.CaptureFixture[str]) -> None:
    """``rr run --workers``: each worker's lines say which worker wrote them, first among the
    fields, whatever the record carried (docs/reference/runtime.md, "Logs")."""
    from rabbitctl_retry.cli.logs import LogFormat, configure_logging

    configure_logging("info", LogFormat.TEXT, worker="2/4")
    log = logging.getLogger("rr.runtime")
    log.info("consuming", extra={"rr": {"queues": "work"}})
    log.warning("plain")
    configure_logging("info", LogFormat.JSON, worker="2/4")
    log.info("consuming", extra={"rr": {"queues": "work"}})
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].endswith(" INFO rr.runtime consuming worker=2/4 queues=work")
    assert lines[1].endswith(" WARNING rr.runtime plain worker=2/4")
    document = json.loads(lines[2])
    assert (document["worker"], document["queues"]) == ("2/4", "work")


def test_a_line_inside_a_handler_call_carries_the_call(capsys: pytest.CaptureFixture[str]) -> None:
    """A handler's own logger prints at the level, with the call's fields before its own
    (docs/reference/handlers.md, "Logs from handlers")."""
    from rabbitctl_retry.cli.logs import LogFormat, configure_logging
    from rabbitctl_retry.runtime import handler_context
    from rabbitctl_retry.runtime.handler_context import HandlerCall

    configure_logging("info", LogFormat.TEXT, worker="1/2")
    log = logging.getLogger("myapp")
    log.debug("not shown")
    log.info("outside")
    token = handler_context.current.set(HandlerCall(queue="q", message_id="m\x1b", attempt=2))
    try:
        log.info("charged %s", "4111", extra={"rr": {"card": "4111", "attempt": 9}})
    finally:
        handler_context.current.reset(token)
    lines = capsys.readouterr().err.splitlines()
    assert [line.split(" ", 1)[1] for line in lines] == [
        "INFO myapp outside worker=1/2",
        'INFO myapp charged 4111 worker=1/2 queue=q message_id="m\\u001b" attempt=9 card=4111',
    ]


def test_a_root_handler_of_the_handler_modules_replaces_rrs(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from rabbitctl_retry.cli.logs import LogFormat, configure_logging, defer_to_the_handlers

    logging.getLogger().handlers[:] = []  # as rr run starts (pytest's own put back after)
    configure_logging("info", LogFormat.JSON)
    assert not defer_to_the_handlers()  # nothing of theirs: rr's stays
    logging.basicConfig(format="MINE %(message)s")  # does nothing: the root has a handler
    assert not defer_to_the_handlers()
    theirs = logging.StreamHandler()
    logging.getLogger().addHandler(theirs)
    assert defer_to_the_handlers()
    assert logging.getLogger().handlers[-1:] == [theirs]
    assert not defer_to_the_handlers()

    logging.getLogger("rr.runtime").info("rr's own")
    assert json.loads(capsys.readouterr().err)["event"] == "rr's own"


def test_a_root_handler_there_before_the_handler_modules_is_not_theirs() -> None:
    """A handler on the root logger before the handler modules were imported (a test
    runner's, an embedding program's) is not theirs: rr's stays beside it."""
    from rabbitctl_retry.cli.logs import LogFormat, configure_logging, defer_to_the_handlers

    runner = logging.StreamHandler()
    logging.getLogger().handlers[:] = [runner]
    configure_logging("info", LogFormat.TEXT)
    present = tuple(logging.getLogger().handlers)
    assert not defer_to_the_handlers(present)
    assert len(logging.getLogger().handlers) == 2
    theirs = logging.StreamHandler()
    logging.getLogger().addHandler(theirs)
    assert defer_to_the_handlers(present)
    assert logging.getLogger().handlers == [runner, theirs]
