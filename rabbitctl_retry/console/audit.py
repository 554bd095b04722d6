"""The console's record of what it did (docs/reference/console.md, "The record"): one line per
action on stderr and, with ``--audit-log FILE``, one JSON object per line appended to FILE, written
when the action ends (a run stopped by the console's own stop included: its report says how far it
went). Who acted is the console's ``--label`` (``console`` unless given)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TextIO

from rabbitctl_retry.console.jobs import Job
from rabbitctl_retry.dlq.report import transfer_document
from rabbitctl_retry.errors import escape_unprintable
from rabbitctl_retry.json_text import escape_unsafe, json_default
from rabbitctl_retry.retry.headers import utc_stamp

DEFAULT_LABEL = "console"


def outcome_of(job: Job) -> str:
    """``failed`` (an error ended it), ``stopped`` (the console stopped first) or ``done``."""
    if job.error is not None:
        return "failed"
    if job.stopped_by_the_console:
        return "stopped"
    return "done"


def audit_document(job: Job, who: str) -> dict[str, Any]:
    """One action, as the audit log's JSON line holds it: its report as ``rr dlq replay|move
    --output json`` writes it, every letter's id and outcome included."""
    return {
        "at": utc_stamp(job.ended_at or job.started_at),
        "started_at": utc_stamp(job.started_at),
        "who": who,
        "action": job.action,
        "queue": job.queue,
        "letters": job.letters,
        "to": job.to,
        "run": job.id,
        "outcome": outcome_of(job),
        "error": job.error,
        "summary": job.lines,
        "report": transfer_document(job.report) if job.report is not None else None,
    }


def audit_line(job: Job, who: str) -> str:
    """One action in one line for stderr: who, what, which letters, and the report's summary."""
    to = f" to {job.to}" if job.to else ""
    summary = job.error if job.error is not None else " ".join(job.lines)
    stopped = " (stopped with the console)" if outcome_of(job) == "stopped" else ""
    text = f"rr console: {who}: {job.action} {job.letters} of {job.queue}{to}{stopped}: {summary}"
    return escape_unprintable(text)


class AuditLog:
    """Where the record goes: ``stderr`` always, the file when one is given (opened at start,
    so that a path that cannot be written fails before the console serves)."""

    def __init__(self, who: str, stderr: TextIO, path: Path | None = None) -> None:
        self.who = who
        self._stderr = stderr
        self._file = path.open("a", encoding="utf-8") if path is not None else None

    def write(self, job: Job) -> None:
        self._stderr.write(audit_line(job, self.who) + "\n")
        self._stderr.flush()
        if self._file is None:
            return
        document = audit_document(job, self.who)
        line = json.dumps(document, ensure_ascii=False, default=json_default)
        try:
            self._file.write(escape_unsafe(line) + "\n")
            self._file.flush()
        except OSError as error:  # the action is done: say that its record is not
            self._stderr.write(f"rr console: the audit log did not take run {job.id}: {error}\n")
            self._stderr.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
