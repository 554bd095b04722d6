"""Saving the in-memory delayed copies a stop could not publish, so that none is lost.

When ``rr run`` stops and the broker has not confirmed every in-memory delayed copy by the
end of ``--shutdown-timeout`` (it is down, it blocks publishers for a resource alarm, or it
refuses the copies), the copies left are written to the pending folder (``--pending-dir``,
default the current directory; the system's temporary folder if that one cannot be written),
one file per queue, in the format of ``rr dlq export``::

    rr-pending-<queue>-<UTC time>-<pid>.jsonl

``rr dlq import FILE --to QUEUE`` publishes them (docs/explanation/guarantees.md, "What is
guaranteed"). A file is written whole or not at all (a temporary name, flushed to disk, then linked
to its name; a file of an earlier stop is never replaced). A copy that can be written nowhere is
logged as lost, one line each.
"""

from __future__ import annotations

import logging
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from urllib.parse import quote

from rabbitctl_retry.dlq.jsonl import record_line
from rabbitctl_retry.ops.copies.properties import retry_copy_properties
from rabbitctl_retry.ops.dlq import message_record
from rabbitctl_retry.runtime.delays import PendingCopy

log = logging.getLogger("rr.runtime")

PREFIX = "rr-pending-"
SUFFIX = ".jsonl"


@dataclass(frozen=True, slots=True)
class SavedFile:
    queue: str
    """Where the copies go: ``rr dlq import PATH --to QUEUE``."""
    path: Path
    count: int


@dataclass(frozen=True, slots=True)
class SaveResult:
    saved: tuple[SavedFile, ...]
    lost: tuple[PendingCopy, ...]
    """Copies that could be written nowhere."""
    error: str | None = None
    """Why the last folder tried could not be written, when some were lost."""


def file_name(queue: str, at: datetime, pid: int) -> str:
    """``rr-pending-<queue>-<YYYYmmddTHHMMSSZ>-<pid>.jsonl``; characters of the queue name
    other than letters, digits, ``.``, ``_`` and ``-`` are percent-encoded (``/`` too)."""
    name = quote(queue, safe="._-") or "%20"
    return f"{PREFIX}{name}-{at.strftime('%Y%m%dT%H%M%SZ')}-{pid}{SUFFIX}"


def saved_files(directory: Path) -> list[Path]:
    """The files of copies an earlier stop saved in ``directory`` (none if it is unreadable)."""
    try:
        return sorted(directory.glob(f"{PREFIX}*{SUFFIX}"))
    except OSError:
        return []


def _line(pending: PendingCopy) -> str:
    copy = pending.copy
    record = message_record(
        pending.original.body,
        retry_copy_properties(pending.original.properties, copy),
        exchange=copy.exchange,
        routing_key=copy.routing_key,
    )
    return record_line(record) + "\n"


def _write_new(folder: Path, name: str, text: str) -> Path:
    """Write ``text`` to a new file ``name`` in ``folder`` (``name-2``, ... if it is taken),
    all or nothing: the file appears under its name only once it is whole on disk."""
    partial = folder / f".{name}.{os.getpid()}.partial"
    try:
        with partial.open("w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        stem = name.removesuffix(SUFFIX)
        for number in range(1, 1000):
            path = folder / (name if number == 1 else f"{stem}-{number}{SUFFIX}")
            try:
                os.link(partial, path)  # never replaces a file of an earlier stop
            except FileExistsError:
                continue
            return path
        raise FileExistsError(f"{folder / name}: taken, as are its next 998 names")
    finally:
        partial.unlink(missing_ok=True)


def save_pending(
    copies: Sequence[PendingCopy], directory: Path, *, now: datetime, pid: int | None = None
) -> SaveResult:
    """Write ``copies`` to files in ``directory`` (else the temporary folder), one per queue."""
    by_queue: dict[str, list[PendingCopy]] = {}
    for pending in copies:
        by_queue.setdefault(pending.copy.routing_key, []).append(pending)
    folders = [directory, Path(tempfile.gettempdir())]
    saved: list[SavedFile] = []
    lost: list[PendingCopy] = []
    error: str | None = None
    for queue, group in by_queue.items():
        name = file_name(queue, now, os.getpid() if pid is None else pid)
        lines: list[str] = []
        kept: list[PendingCopy] = []
        for pending in group:
            try:
                lines.append(_line(pending))
            except Exception as failure:  # one copy rr cannot write never costs the others
                error = f"message {pending.message_id!r}: {type(failure).__name__}: {failure}"
                lost.append(pending)
            else:
                kept.append(pending)
        if not kept:
            continue
        for folder in folders:
            try:
                path = _write_new(folder, name, "".join(lines))
            except OSError as failure:
                error = f"{folder / name}: {failure.strerror or failure}"
                continue
            saved.append(SavedFile(queue, path.absolute(), len(kept)))
            break
        else:
            lost.extend(kept)
    return SaveResult(tuple(saved), tuple(lost), error if lost else None)


def keep_pending(left: Sequence[PendingCopy], directory: Path, *, now: datetime) -> None:
    """The run is over: save the delayed copies the broker has not confirmed, so that ``rr dlq
    import`` can publish them; log each file saved, and each copy that could not be saved as
    lost."""
    if not left:
        return
    result = save_pending(left, directory, now=now)
    for saved in result.saved:
        log.error(
            "delayed copies not published before the stop; saved to a file: "
            "rr dlq import FILE --to QUEUE publishes them",
            extra={"rr": {"queue": saved.queue, "count": saved.count, "file": str(saved.path)}},
        )
    for pending in result.lost:
        log.error(
            "delayed copy lost: it could not be published nor saved before the process ends",
            extra={
                "rr": {
                    "queue": pending.queue,
                    "message_id": pending.message_id,
                    "error": result.error,
                }
            },
        )


def tell_saved_files(directory: Path) -> None:
    """Log the files of copies an earlier stop saved in ``directory``, still waiting to be
    imported."""
    for path in saved_files(directory):
        log.warning(
            "delayed copies saved by an earlier stop wait in a file: "
            "rr dlq import FILE --to QUEUE publishes them (then delete the file)",
            extra={"rr": {"file": str(path.absolute())}},
        )
