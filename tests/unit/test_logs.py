"""rr run's log lines: one per event, text or JSON, control characters and passwords never shown."""

from __future__ import annotations

import json
import logging

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


def test_a_worker_of_rr_run_workers_tags_every_line(capsys: pytest.CaptureFixture[str]) -> None:
    """``rr run --workers``: each worker's lines say which worker wrote them, first among the
    fields, whatever the record carried (docs/runtime.md, "Logs")."""
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
