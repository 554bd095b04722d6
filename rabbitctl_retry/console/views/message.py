"""Pure. One message's page: the timeline of its deaths, its properties and headers, its body
(text escaped, or a hex dump), and its retry and edit forms."""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from rabbitctl_retry.console.views.base import (
    body_path,
    counted,
    csrf_field,
    e,
    page,
    path_part,
    stamp,
)
from rabbitctl_retry.console.views.edit import FORCE_LABEL, edit_command, letter_fields
from rabbitctl_retry.fields import FieldValue
from rabbitctl_retry.retry.headers import (
    REPLAYED_AT_HEADER,
    REPLAYED_COUNT_HEADER,
    Death,
    count_value,
    utc_stamp,
)

MAX_BODY_BYTES = 64 * 1024
"""How much of a body a page shows."""
HEX_ROW = 16


@dataclass(frozen=True, slots=True)
class MessageView:
    queue: str
    message_id: str
    nth: int
    """Which of the letters with this id (1: the first in the queue)."""
    position: int
    properties: Mapping[str, object]
    headers: Mapping[str, FieldValue]
    deaths: Sequence[Death]
    body: bytes
    editable: str | None
    """The body as the edit box holds it: its text, as it is (None: not editable here)."""
    others: int = 0
    """More dead letters with the same id (the first is shown)."""
    not_editable: str | None = None
    """Why the edit box cannot hand the body back byte for byte (dlq/edit.py
    ``box_problem``)."""
    checksums: str = ""
    """What the letter shown is (dlq/same_id.py ``Checksums``): the edit form carries it, and
    the console publishes only that letter."""
    by_position: bool = False
    """Opened by its place in the queue (it has no message id): shown only."""


def came_back(headers: Mapping[str, FieldValue]) -> list[str]:
    """A letter that was retried (by the console or ``rr dlq replay``: ``rr-replayed-count``)
    and is a dead letter again: marked as such, with when it was last sent back."""
    times = count_value(headers.get(REPLAYED_COUNT_HEADER))
    if not times:
        return []
    at = headers.get(REPLAYED_AT_HEADER)
    when = f", last at {_field(at)}" if at is not None else ""
    return [
        f'<p class="came-back" data-replayed="{times}">Came back: retried '
        f"{counted(times, 'time')} before{e(when)}, and dead-lettered again.</p>"
    ]


def message_page(view: MessageView, *, read_only: bool, csrf: str, note: str | None = None) -> str:
    """``note``: what reading the queue cost (a read that counts, asked for), shown first;
    every read the page's forms make costs the same."""
    queue = view.queue
    props = "".join(
        f"<tr><th>{e(name)}</th><td>{e(value)}</td></tr>"
        for name, value in view.properties.items()
        if value is not None
    )
    headers = "".join(
        f"<tr><th>{e(name)}</th><td>{e(_field(value))}</td></tr>"
        for name, value in sorted(view.headers.items())
        if name != "x-death"
    )
    timeline = "".join(
        f"<tr><td>{stamp(death.time)}</td><td>{e(death.queue)}</td><td>{e(death.reason)}</td>"
        f"<td>{death.count:,}</td><td>{e(death.exchange or '(default)')}</td>"
        f"<td>{e(', '.join(death.routing_keys))}</td></tr>"
        for death in view.deaths
    )
    parts = [f'<p class="note">{e(note)}</p>'] if note else []
    parts += came_back(view.headers)
    parts += [
        f'<p class="where">#{view.position:,} in {e(queue)}'
        + (f" ({view.others:,} more with this id)" if view.others else "")
        + "</p>",
        "<h2>Deaths (newest first)</h2>",
        '<table class="timeline"><thead><tr><th>time</th><th>queue</th><th>reason</th>'
        "<th>count</th><th>exchange</th><th>routing keys</th></tr></thead><tbody>"
        + (timeline or '<tr><td colspan="6">no x-death</td></tr>')
        + "</tbody></table>",
        f'<h2>Properties</h2><table class="props">{props}</table>',
        f'<h2>Headers</h2><table class="headers">{headers}</table>',
        "<h2>Body</h2>" + body_html(view.body) + _download(view),
    ]
    if view.by_position:
        parts.append(
            '<p class="note no-id">This letter has no message id: it is shown by its place in '
            "the queue, which changes as letters come and go, so it is not retried or edited "
            "alone here; its group's retry, move or discard takes it.</p>"
        )
    if not read_only and not view.by_position:
        retry = f"/queues/{path_part(queue)}/messages/{path_part(view.message_id)}/retry"
        parts.append(
            f'<h2>Retry</h2><form method="post" action="{retry}" class="retry">'
            + csrf_field(csrf)
            + letter_fields(view.nth, view.checksums)
            + "<button>Retry this letter unchanged</button></form>"
        )
    if not read_only and view.editable is not None:
        action = f"/queues/{path_part(queue)}/messages/{path_part(view.message_id)}/edit"
        parts.append(
            f'<h2>Edit and retry</h2><form method="post" action="{action}">{csrf_field(csrf)}'
            + letter_fields(view.nth, view.checksums)
            # the body's text as it is, escaped only (a tab, a line break, a digit must come
            # back as they were): HTML drops the line break right after <textarea>, the one
            # written here, so that a body's own first line break stays
            + '<textarea name="body" rows="16" cols="100">\n'
            f"{html.escape(view.editable, quote=False)}</textarea><br>"
            f'<label><input type="checkbox" name="force" value="1"> {FORCE_LABEL}</label><br>'
            '<button name="step" value="preview">Show the change</button></form>'
        )
    elif not read_only and view.not_editable is not None:
        command = edit_command(queue, view.message_id, view.nth)
        parts.append(
            f'<h2>Edit and retry</h2><p class="note not-editable">This body cannot be edited '
            f"here: {e(view.not_editable)}; an edit box would not send it back as it is. "
            f"Edit it with <code>{e(command)}</code> (the file is published byte for byte).</p>"
        )
    title = f"Letter #{view.position:,} of {queue}" if view.by_position else view.message_id
    return page(title if view.by_position else f"Message {title}", "".join(parts))


def _download(view: MessageView) -> str:
    if view.by_position:
        return f'<p class="size">{len(view.body):,} bytes</p>'
    path = body_path(view.queue, view.message_id, view.nth)
    return (
        f'<p><a class="download" href="{e(path)}">download the whole body</a> '
        f"({len(view.body):,} bytes)</p>"
    )


def _field(value: FieldValue) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, datetime):
        return utc_stamp(value)
    if isinstance(value, list):
        return "[" + ", ".join(_field(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_field(v)}" for k, v in value.items()) + "}"
    return str(value)


def body_html(body: bytes) -> str:
    shown = body[:MAX_BODY_BYTES]
    more = (
        f'<p class="note">{len(body) - len(shown):,} more bytes not shown</p>'
        if len(body) > len(shown)
        else ""
    )
    try:
        text = shown.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is not None and all(c.isprintable() or c in "\n\t\r" for c in text):
        return f'<pre class="body">{html.escape(text, quote=True)}</pre>{more}'
    rows = []
    for at in range(0, len(shown), HEX_ROW):
        chunk = shown[at : at + HEX_ROW]
        printable = "".join(chr(b) if 32 <= b < 127 else "." for b in chunk)
        rows.append(f"{at:08x}  {chunk.hex(' '):<47}  {printable}")
    return f'<pre class="body hex">{html.escape(chr(10).join(rows), quote=True)}</pre>{more}'
