"""Pure. Dead letters as text: bodies, the ``x-death`` timeline, rr's error headers.

A body is *text* when it is UTF-8 without control characters other than tab, line feed and
carriage return (no C0, DEL, C1 or bidi control: U+202A-U+202E, U+2066-U+2069, U+200E,
U+200F, U+061C); text that parses as JSON is shown pretty-printed (as the text when it nests
too deep to pretty-print); anything else is shown (and exported) as base64. A body longer
than the display limit is cut, with a marker saying how many bytes of the body were not
shown. The terminal layer escapes what remains of control
characters; nothing here decides colours or markup.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC
from typing import Literal

from rabbitctl_retry.fields import FieldValue
from rabbitctl_retry.retry.headers import ERROR_MESSAGE_HEADER, ERROR_TYPE_HEADER, Death

BODY_DISPLAY_CHARS = 2000
"""How many characters of a body the table shows before cutting it."""

BodyEncoding = Literal["utf-8", "base64"]
BodyKind = Literal["empty", "text", "json", "binary"]

_CONTROL = re.compile(
    "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]"
)
"""The control characters that make a body binary: C0 but tab, line feed and carriage return;
DEL; C1; the bidi controls."""


def body_text(body: bytes) -> str | None:
    """The body as text, or ``None`` when it is binary (see the module doc)."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if text.isprintable() or _CONTROL.search(text) is None:
        return text
    return None


def encode_body(body: bytes) -> tuple[str, BodyEncoding]:
    """The whole body for JSON output: the text, or base64 for a binary body."""
    text = body_text(body)
    if text is None:
        return base64.b64encode(body).decode("ascii"), "base64"
    return text, "utf-8"


@dataclass(frozen=True, slots=True)
class BodyView:
    """A body as a table shows it."""

    text: str
    kind: BodyKind
    size: int
    """The body's size in bytes."""
    hidden: int = 0
    """Bytes of the body the cut text does not show (0: shown whole)."""

    @property
    def marker(self) -> str:
        """``… (N more bytes)`` when the body was cut, else ``""``."""
        return f"… ({self.hidden:,} more bytes)" if self.hidden else ""

    def display(self) -> str:
        """The text with its cut marker, and a ``base64:`` label for binary bodies."""
        if self.kind == "empty":
            return "(empty body)"
        label = "base64: " if self.kind == "binary" else ""
        if not self.hidden:
            return label + self.text
        return f"{label}{self.text} {self.marker}"


def show_body(body: bytes, *, limit: int = BODY_DISPLAY_CHARS) -> BodyView:
    """How a table shows ``body``: pretty JSON, text, or base64, cut at ``limit`` characters.

    Pretty JSON that would be cut is shown as the raw text instead, so the marker can count
    the bytes of the body exactly.
    """
    size = len(body)
    if not body:
        return BodyView(text="", kind="empty", size=0)
    text = body_text(body)
    if text is None:
        encoded = base64.b64encode(body).decode("ascii")
        if len(encoded) <= limit:
            return BodyView(text=encoded, kind="binary", size=size)
        shown = max(4, limit - limit % 4)
        return BodyView(
            text=encoded[:shown], kind="binary", size=size, hidden=size - shown // 4 * 3
        )
    stripped = text.lstrip()
    if stripped[:1] in ("{", "[", '"') or stripped[:1].isdigit():
        pretty = _pretty_json(text)
        if pretty is not None and len(pretty) <= limit:
            return BodyView(text=pretty, kind="json", size=size)
    if len(text) <= limit:
        return BodyView(text=text, kind="text", size=size)
    shown_text = text[:limit]
    return BodyView(
        text=shown_text, kind="text", size=size, hidden=size - len(shown_text.encode("utf-8"))
    )


def _pretty_json(text: str) -> str | None:
    """``text`` pretty-printed when it is JSON; None when it is not, or nests too deep for
    Python's JSON reader or writer (then it shows as text)."""
    try:
        return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    except (ValueError, RecursionError):
        return None


def death_line(death: Death) -> str:
    """One ``x-death`` entry: ``payouts  delivery_limit  x3  2024-05-01T10:00:00Z``."""
    when = "-"
    if death.time is not None:
        stamp = death.time if death.time.tzinfo is not None else death.time.replace(tzinfo=UTC)
        when = stamp.astimezone(UTC).isoformat().replace("+00:00", "Z")
    return f"{death.queue or '?'}  {death.reason or '?'}  x{death.count}  {when}"


def error_lines(headers: Mapping[str, FieldValue] | None) -> list[str]:
    """``rr-error-type`` and ``rr-error-message`` (and any other ``rr-error-*``) as lines."""
    lines: list[str] = []
    if not headers:
        return lines
    ordered = [ERROR_TYPE_HEADER, ERROR_MESSAGE_HEADER]
    ordered += sorted(
        name for name in headers if name.startswith("rr-error-") and name not in ordered
    )
    for name in ordered:
        if name in headers:
            value = headers[name]
            shown = value.decode("utf-8", "replace") if isinstance(value, bytes) else value
            lines.append(f"{name}: {shown}")
    return lines
