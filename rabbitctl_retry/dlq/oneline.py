"""Pure. ``rr dlq inspect --format lines``: one dead letter per line, for big queues and grep.

A line holds, separated by two spaces: the position, the message id, the origin queue, the
reason, ``retries=N`` (``-`` without a retry header), ``age=...`` (how long ago it was
dead-lettered: ``42s``, ``17m``, ``5h``, ``3d``; ``-`` when nothing says), and the body's start
on one line (whitespace runs become one space; ``base64:`` for a binary body; cut with ``…``
after :data:`SNIPPET_CHARS` characters). The terminal layer escapes control characters.
"""

from __future__ import annotations

import base64
from datetime import datetime

from rabbitctl_retry.dlq.letter import Letter, Read
from rabbitctl_retry.dlq.view import body_text

SNIPPET_CHARS = 80
"""How many characters of a body one line shows."""

_UNITS = (("d", 86_400), ("h", 3_600), ("m", 60))


def age_text(failed_at: datetime | None, now: datetime) -> str:
    """``42s``, ``17m``, ``5h``, ``3d`` (whole units, rounded down); ``-`` when unknown."""
    if failed_at is None:
        return "-"
    age_s = max(0, int((now - failed_at).total_seconds()))
    for unit, size_s in _UNITS:
        if age_s >= size_s:
            return f"{age_s // size_s}{unit}"
    return f"{age_s}s"


def body_snippet(body: bytes, limit: int = SNIPPET_CHARS) -> str:
    """The start of ``body`` on one line (see the module doc)."""
    if not body:
        return "(empty body)"
    text = body_text(body)
    if text is None:
        label = "base64:"
        text = base64.b64encode(body[:limit]).decode("ascii")
        cut = len(body) > limit or len(text) > limit
    else:
        label = ""
        text = " ".join(text.split())
        cut = len(text) > limit
    return label + (text[:limit] + "…" if cut else text)


def letter_line(letter: Letter[Read], now: datetime, *, with_body: bool = True) -> str:
    """One dead letter on one line (see the module doc)."""
    retries = "-" if letter.retry_count is None else str(letter.retry_count)
    fields = [
        str(letter.position),
        letter.delivery.properties.message_id or "(no id)",
        letter.origin or "(unknown)",
        letter.reason or "(unknown)",
        f"retries={retries}",
        f"age={age_text(letter.failed_at, now)}",
    ]
    if with_body:
        fields.append(body_snippet(letter.delivery.body))
    return "  ".join(fields)
