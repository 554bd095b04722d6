"""``rr status``'s result: its table, its JSON document and how it ends (docs/reference/cli.md,
"rr status").

One reading is rendered from plain data: the statuses, the time of the reading (UTC) and
whether a management API was read. Without one, the columns only the API can fill (unacked,
prefetch, publish/s, deliver/s) are left out, and one line under the table says how to get
them; the JSON fields are ``null``. ``--watch`` readings start with a heading line that
holds their time and end with an empty line, so that frames written to a pipe, one after
another, stay apart (the terminal is cleared before each instead: ``cli/finish.py``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from rabbitctl_retry.cli.finish import Outcome, Piece, Unwrapped

if TYPE_CHECKING:
    from rich.table import Table
    from rich.text import Text

    from rabbitctl_retry.cli.status_services import QueuePause, ServicePage
    from rabbitctl_retry.ops.status import QueueStatus
    from rabbitctl_retry.server import QueueConsumer
    from rabbitctl_retry.topology.consumers import ConsumerNote

NO_MANAGEMENT_LINE = (
    "unacked messages, consumers' prefetch and publish/deliver rates: give --management-url "
    '(rr docs cli "rr status")'
)
"""Under the table of a reading without a management API: how to get what it leaves out."""

UNKNOWN_TYPE = "?"
"""The type of an existing queue the broker would not tell (an exclusive queue of another
connection, without a management API)."""


@dataclass(frozen=True, slots=True)
class Services:
    """What the services of ``--service`` said at a reading (``cli/status_services.py``)."""

    pauses: Mapping[str, QueuePause]
    """Queue -> its pause, of the services that answered."""
    pages: Sequence[ServicePage]
    """Every service given, in order, with its page or its error."""
    errors: Mapping[str, str]
    """URL -> why its page could not be read."""


@dataclass(frozen=True, slots=True)
class Reading:
    """One reading of ``rr status``, as rendered."""

    statuses: Sequence[QueueStatus]
    read_at: datetime
    """When the reading began (timezone-aware)."""
    management: bool = False
    """A management API was read: its columns are shown."""
    default_queue_type: str | None = None
    """The vhost's default queue type, as the management API states it."""
    consumers: Sequence[QueueConsumer] | None = None
    """Every consumer of the vhost with its client (the management API; None: not read)."""
    notes: Sequence[ConsumerNote] = ()
    """What the consumers that are not rr mean for the file's queues
    (``topology/consumers.py``), each a line under the table."""
    services: Services | None = None
    """What ``--service``'s services paused (None: no ``--service``: nothing is shown)."""


def timestamp(moment: datetime) -> str:
    """``2026-12-04T01:33:12.345Z``: ISO 8601, UTC, to the millisecond."""
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def heading(reading: Reading, every_s: float) -> str:
    """A ``--watch`` frame's first line: when the reading was taken, and how often."""
    return f"rr status at {timestamp(reading.read_at)} (every {every_s:g} s; Ctrl-C ends)"


def status_outcome(
    reading: Reading,
    *,
    watch_s: float | None = None,
    notes: Sequence[str] = (),
    first: bool = True,
) -> Outcome:
    """A table and its count line, or the JSON document (``watch_s``: one per line, the
    table under a heading, cleared on a terminal; in TSV a section under ``# HEADING``);
    exit 1 when a queue is not as expected (a watch exits 0, on Ctrl-C). The line saying
    how to get the management API's columns is under the ``first`` reading only."""
    statuses = reading.statuses

    def table() -> list[Piece]:
        bad = [status for status in statuses if not status.ok]
        count = f"{len(statuses)} queue(s); " + (f"{len(bad)} not as expected" if bad else "ok")
        pieces: list[Piece] = []
        if watch_s is not None:
            pieces.append(Unwrapped(heading(reading, watch_s)))
        pieces += [status_table(reading), count]
        if not reading.management and first:
            pieces.append(Unwrapped(NO_MANAGEMENT_LINE))
        if reading.default_queue_type is not None:
            from rabbitctl_retry.cli.render import default_type_line

            pieces.append(Unwrapped(default_type_line(reading.default_queue_type)))
        from rabbitctl_retry.cli.render import cell as shown

        pieces += [shown(f"{note.level.value}: {note.message}") for note in reading.notes]
        live = [status.live for status in statuses if status.live is not None]
        if live:
            from rabbitctl_retry.cli.render import live_rows, rich_table

            pieces += ["", rich_table(live_rows(live))]
        if watch_s is not None:
            pieces.append("")
        return pieces

    from rabbitctl_retry.cli.declare import warning_line
    from rabbitctl_retry.cli.render import cell

    watching = watch_s is not None
    unread = [] if reading.services is None else list(reading.services.errors.items())
    return Outcome(
        document=lambda: status_document(reading),
        table=table,
        notes=[
            *(cell(note) for note in notes),
            *(
                warning_line(f"service {url}: {error}; the queues it paused are not shown")
                for url, error in unread
            ),
        ],
        code=0 if watching or all(status.ok for status in statuses) else 1,
        one_line=watching,
        clear=watching,
        tsv_title=heading(reading, watch_s) if watch_s is not None else None,
    )


def type_of(status: QueueStatus) -> str:
    """The table's type: the broker's when known (a queue of the file whose type differs
    shows the broker's, and its state says so); else the file's (a queue of the file that
    does not exist); ``-`` for a queue only named that does not exist, ``?`` for one whose
    type the broker would not tell."""
    if status.kind is not None:
        return status.kind
    if status.listed:
        return file_type(status)
    return UNKNOWN_TYPE if status.present else "-"


def file_type(status: QueueStatus) -> str:
    kind = status.entity.arguments.get("x-queue-type")
    return str(kind) if isinstance(kind, str) else "classic"


LOCKED_STATE = "locked: exclusive to another connection"


def _state_of(status: QueueStatus) -> str:
    if status.locked:
        return LOCKED_STATE
    if not status.present:
        return "missing"
    if status.drift is not None:
        return f"differs: {status.drift}"
    return "ok" if status.listed else "exists"


def pause_text(pause: QueuePause | None) -> str:
    """The table's ``service`` cell: ``paused, resumes in 42 s``, ``paused`` when no service
    said until when; empty when no service paused the queue."""
    if pause is None:
        return ""
    if pause.left_s is None:
        return "paused"
    return f"paused, resumes in {math.ceil(pause.left_s):,} s"


def rate_text(rate_per_s: float | None) -> str:
    """A rate as the table shows it: one decimal; ``-`` when the API states none."""
    return "-" if rate_per_s is None else f"{rate_per_s:,.1f}"


def prefetch_text(prefetches: Sequence[int]) -> str:
    """Each distinct prefetch of a queue's consumers, ascending (``unlimited`` for 0);
    empty without consumers."""
    return ", ".join(
        "unlimited" if count == 0 else f"{count:,}" for count in sorted(set(prefetches))
    )


def status_document(reading: Reading) -> dict[str, Any]:
    """``rr status --output json`` (docs/reference/cli.md, "rr status")."""
    from rabbitctl_retry.cli.render import json_arguments, live_document
    from rabbitctl_retry.errors import censor_url
    from rabbitctl_retry.topology.consumers import describe, foreign

    others = None if reading.consumers is None else foreign(reading.consumers)

    def queue(status: QueueStatus) -> dict[str, Any]:
        activity = status.activity
        return {
            "name": status.entity.name,
            "type": status.kind if status.kind is not None or not status.listed else None,
            "file_type": file_type(status) if status.listed else None,
            "role": status.entity.role if status.listed else None,
            "present": status.present,
            "locked": status.locked,
            "messages": status.messages,
            "unacked": None if activity is None else activity.unacked,
            "consumers": status.consumers,
            "prefetch": None if activity is None else list(activity.prefetches),
            "publish_per_s": None if activity is None else activity.publish_per_s,
            "deliver_per_s": None if activity is None else activity.deliver_per_s,
            "matches": (
                status.drift is None
                if status.present and status.listed and not status.locked
                else None
            ),
            "differences": status.drift,
            "arguments": json_arguments(status.entity.arguments) if status.listed else None,
            "consumers_not_rr": None
            if others is None
            else [describe(c) for c in others if c.queue == status.entity.name],
            **({} if status.live is None else {"live": live_document([status.live])[0]}),
            **({} if services is None else paused(status.entity.name)),
        }

    services = reading.services

    def paused(name: str) -> dict[str, Any]:
        assert services is not None
        pause = services.pauses.get(name)
        return {
            "paused_until": None
            if pause is None or pause.until is None
            else timestamp(pause.until),
            "paused_by": [] if pause is None else [censor_url(url) for url in pause.by],
        }

    return {
        "read_at": timestamp(reading.read_at),
        "vhost_default_queue_type": reading.default_queue_type,
        "queues": [queue(status) for status in reading.statuses],
        "consumer_notes": [
            {
                "code": note.code,
                "level": note.level.value,
                "queue": note.queue,
                "message": note.message,
            }
            for note in reading.notes
        ],
        "ok": all(status.ok for status in reading.statuses),
        **(
            {}
            if services is None
            else {
                "services": [
                    {"url": censor_url(page.url), "read": page.error is None, "error": page.error}
                    for page in services.pages
                ]
            }
        ),
    }


def status_table(reading: Reading) -> Table:
    from rich.table import Table

    from rabbitctl_retry.cli.render import Cell, cell, count_cell

    def rate_cell(rate_per_s: float | None) -> Text:
        return Cell("" if rate_per_s is None else repr(rate_per_s), rate_text(rate_per_s))

    management = reading.management
    columns = ["queue", "type", "messages"]
    columns += (
        ["unacked", "consumers", "prefetch", "publish/s", "deliver/s"]
        if management
        else ["consumers"]
    )
    table = Table(show_edge=False, pad_edge=False, header_style="bold")
    services = reading.services
    extra = [] if services is None else ["service"]
    for column in [*columns, "state", "role", *extra]:
        table.add_column(column, overflow="fold")
    for status in reading.statuses:
        activity = status.activity
        row: list[Text] = [
            cell(status.entity.name),
            cell(type_of(status)),
            count_cell(status.messages),
        ]
        if management:
            prefetch = "-" if activity is None else prefetch_text(activity.prefetches)
            row += [
                count_cell(None if activity is None else activity.unacked),
                count_cell(status.consumers),
                cell(prefetch),
                rate_cell(None if activity is None else activity.publish_per_s),
                rate_cell(None if activity is None else activity.deliver_per_s),
            ]
        else:
            row.append(count_cell(status.consumers))
        row += [
            cell(_state_of(status), "" if status.ok else "red"),
            cell(status.entity.role if status.listed else ""),
        ]
        if services is not None:
            row.append(cell(pause_text(services.pauses.get(status.entity.name))))
        table.add_row(*row)
    return table


__all__ = [
    "NO_MANAGEMENT_LINE",
    "Reading",
    "Services",
    "heading",
    "pause_text",
    "prefetch_text",
    "rate_text",
    "status_document",
    "status_outcome",
    "status_table",
    "timestamp",
    "type_of",
]
