"""Pure. One page of a group's letters (docs/reference/console.md, "A group's letters"): every
letter of the queue is handed to :meth:`GroupLetters.add` in queue order; those of the group are
counted, and the ones of the page asked for are kept as rows (at most ``per_page``: a group
of 100,000 letters holds one page in memory, plus a count per message id, which the links
need: a letter is opened by its id and which of the letters with that id it is, ``?n=``)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime

from rabbitctl_retry.dlq.groups import Dimension, key_of
from rabbitctl_retry.dlq.letter import Letter, Read
from rabbitctl_retry.dlq.same_id import Checksums, checksums
from rabbitctl_retry.fields import FieldValue
from rabbitctl_retry.retry.headers import ERROR_MESSAGE_HEADER, ERROR_TYPE_HEADER

PER_PAGE = 50
MAX_PER_PAGE = 500
"""The most rows a page shows (``?per=``)."""
ERROR_CHARACTERS = 160
"""How much of a letter's error a row shows."""


@dataclass(frozen=True, slots=True)
class LetterRow:
    position: int
    """1 for the head of the queue."""
    message_id: str | None
    nth: int
    """Which of the letters with its id it is (1: the first in the queue)."""
    failed_at: datetime | None
    retry_count: int | None
    error: str
    """``rr-error-type: rr-error-message``, or ``(reason)`` when rr wrote no failure."""
    shown: Checksums | None = None
    """What a letter without an id is (``dlq/same_id.py``): selected by its place, it is
    taken only if that place still holds it (console/selection.py)."""


def error_text(headers: Mapping[str, FieldValue] | None, reason: str | None) -> str:
    table = headers or {}
    kind, text = (_text(table.get(name)) for name in (ERROR_TYPE_HEADER, ERROR_MESSAGE_HEADER))
    if kind is None and text is None:
        return f"({reason or 'unknown'})"
    shown = f"{kind or 'error'}: {text}" if text is not None else str(kind)
    return shown if len(shown) <= ERROR_CHARACTERS else shown[: ERROR_CHARACTERS - 1] + "…"


def _text(value: object) -> str | None:
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    return value if isinstance(value, str) and value else None


@dataclass(slots=True)
class GroupLetters:
    """The letters of group ``group_id`` (over ``dimensions``), page ``page`` of them."""

    group_id: str
    dimensions: tuple[Dimension, ...]
    page: int = 1
    per_page: int = PER_PAGE
    read: int = 0
    """Letters of the queue read."""
    matched: int = 0
    """Letters of the group among them (that ``keep`` kept)."""
    rows: list[LetterRow] = field(default_factory=list)
    keep: Callable[[Letter[Read]], bool] | None = None
    """Only the letters it keeps are listed (a search, console/search.py); ``None``: all."""
    _ids: Counter[str] = field(default_factory=Counter)

    def add(self, letter: Letter[Read]) -> None:
        self.read += 1
        message_id = letter.delivery.properties.message_id
        nth = 0
        if message_id is not None:
            self._ids[message_id] += 1
            nth = self._ids[message_id]
        headers = letter.delivery.properties.headers
        key = key_of(self.dimensions, headers=headers, origin=letter.origin, reason=letter.reason)
        if key.id != self.group_id or (self.keep is not None and not self.keep(letter)):
            return
        self.matched += 1
        first = (self.page - 1) * self.per_page
        if first < self.matched <= first + self.per_page:
            self.rows.append(
                LetterRow(
                    position=letter.position,
                    message_id=message_id,
                    nth=nth,
                    failed_at=letter.failed_at,
                    retry_count=letter.retry_count,
                    error=error_text(headers, letter.reason),
                    shown=checksums(letter.delivery) if message_id is None else None,
                )
            )

    @property
    def pages(self) -> int:
        return max(1, -(-self.matched // self.per_page))
