"""Pure. ``rr dlq groups``: dead letters grouped by cause, in bounded memory.

A dead letter's cause has up to four dimensions (:class:`Dimension`):

``type``     rr's ``rr-error-type`` (the exception's type); a letter without it (a quorum
             queue's ``delivery_limit``, a TTL, a foreign producer, ``Outcome.retry()``
             without an exception) has its reason in brackets instead: ``(delivery_limit)``
``message``  ``rr-error-message``, normalised (:func:`normalise_message`): UUIDs, long hex
             ids and numbers replaced, white space folded, cut to
             :data:`MAX_NORMALISED_CHARACTERS`, so "card 4242 declined" and "card 1111
             declined" are one group
``origin``   the queue it failed in (dlq/origin.py)
``handler``  ``rr-handler``: the ``module:function`` whose last attempt failed

A group's id is the dimensions' letters (``t``, ``m``, ``o``, ``h``, always in that order) then
``-`` and 12 hex digits of a SHA-256 over the values: ``tmoh-3f9a0c1b2d4e``. It is computed from
the letter alone, so ``--where group=ID`` (dlq/filters.py) picks the same letters in any later
command, and the same key gives the same id on every machine (with the same rr version: a
change of the normalisation would change ids; docs/reference/dlq.md, "Groups").

Memory: at most :data:`MAX_GROUPS` groups, each bounded (its origins and dead-letter queues
at most :data:`MAX_NAMES` names, its texts cut); a letter of a group past the limit is counted
in :attr:`Grouping.ungrouped`. Reading 100,000 letters holds what reading 1,000 of the same
causes holds (docs/reference/dlq.md, "Big queues").
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum

from rabbitctl_retry.dlq.letter import Letter, Read
from rabbitctl_retry.fields import FieldValue
from rabbitctl_retry.retry.headers import ERROR_MESSAGE_HEADER, ERROR_TYPE_HEADER, HANDLER_HEADER


class Dimension(StrEnum):
    TYPE = "type"
    MESSAGE = "message"
    ORIGIN = "origin"
    HANDLER = "handler"

    @property
    def code(self) -> str:
        return self.value[0]


ALL_DIMENSIONS: tuple[Dimension, ...] = tuple(Dimension)
"""The canonical order, and ``--by``'s default."""

MAX_GROUPS = 1000
"""Groups one read keeps; letters of further groups are only counted
(:attr:`Grouping.ungrouped`)."""
MAX_NAMES = 20
"""Origin queues (and dead-letter queues) a group lists; more are counted as others."""
MAX_READ_CHARACTERS = 2000
"""How much of an error message the normaliser reads (rr writes at most 1,000 characters; a
foreign producer may write more)."""
MAX_NORMALISED_CHARACTERS = 200
"""How long a normalised message is at most (cut with ``…``)."""
MAX_SAMPLE_CHARACTERS = 300
"""How much of the first letter's own error message a group keeps as its example."""
_ID_DIGITS = 12
_CACHED_MESSAGES = 1024
"""Normalised messages remembered (a queue's letters repeat a few causes): at most
1,024 x :data:`MAX_READ_CHARACTERS` characters."""

_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_HEX = re.compile(r"(?<![0-9A-Za-z])(?:0x)?[0-9a-fA-F]{8,}(?![0-9A-Za-z])")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_SPACE = re.compile(r"\s+")
_ID_PATTERN = re.compile(rf"(t?m?o?h?)-([0-9a-f]{{{_ID_DIGITS}}})")


def parse_dimensions(text: str) -> tuple[Dimension, ...]:
    """``--by type,origin`` -> the dimensions in canonical order; :class:`ValueError` naming
    what is wrong (an unknown name, none at all)."""
    names = [part.strip() for part in text.split(",") if part.strip()]
    if not names:
        raise ValueError("name at least one of type, message, origin, handler")
    chosen: set[Dimension] = set()
    for name in names:
        try:
            chosen.add(Dimension(name))
        except ValueError:
            raise ValueError(
                f"unknown dimension {name[:40]!r}: use type, message, origin, handler"
            ) from None
    return tuple(d for d in ALL_DIMENSIONS if d in chosen)


def code_of(dimensions: Iterable[Dimension]) -> str:
    chosen = set(dimensions)
    return "".join(d.code for d in ALL_DIMENSIONS if d in chosen)


def parse_group_id(text: str) -> tuple[tuple[Dimension, ...], str] | None:
    """A group id's dimensions and digest, or ``None`` when ``text`` is not one."""
    found = _ID_PATTERN.fullmatch(text.strip())
    if found is None or not found.group(1):
        return None
    codes = found.group(1)
    return tuple(d for d in ALL_DIMENSIONS if d.code in codes), found.group(2)


def _header_text(value: FieldValue | None) -> str | None:
    """A failure header as text; ``None`` when missing, empty or not text (a table, a list)."""
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    if isinstance(value, str):
        return value or None
    return None


def normalise_message(text: str) -> str:
    """An error message with its variable parts replaced (see the module doc). Linear in the
    length read: no pattern here backtracks more than once over a run of characters."""
    return _normalise(text[:MAX_READ_CHARACTERS])


@functools.lru_cache(maxsize=_CACHED_MESSAGES)
def _normalise(cut: str) -> str:
    cut = _UUID.sub("<uuid>", cut)
    cut = _HEX.sub(_hex_id, cut)
    cut = _NUMBER.sub("<n>", cut)
    cut = _SPACE.sub(" ", cut).strip()
    if len(cut) > MAX_NORMALISED_CHARACTERS:
        cut = cut[: MAX_NORMALISED_CHARACTERS - 1] + "…"
    return cut


def _hex_id(found: re.Match[str]) -> str:
    """A long run of hex digits is an id when it holds a digit (``deadbeefcafe`` is a word)."""
    text = found.group(0)
    return "<hex>" if any(c.isdigit() for c in text.removeprefix("0x")) else text


@dataclass(frozen=True, slots=True)
class GroupKey:
    """The values of one group's dimensions (``None``: the letter does not say)."""

    dimensions: tuple[Dimension, ...]
    error_type: str | None = None
    """``rr-error-type``, or ``(reason)`` when the letter has none."""
    message: str | None = None
    origin: str | None = None
    handler: str | None = None

    @property
    def id(self) -> str:
        return group_id(self)

    def value(self, dimension: Dimension) -> str | None:
        match dimension:
            case Dimension.TYPE:
                return self.error_type
            case Dimension.MESSAGE:
                return self.message
            case Dimension.ORIGIN:
                return self.origin
            case Dimension.HANDLER:
                return self.handler


def key_of(
    dimensions: tuple[Dimension, ...],
    *,
    headers: Mapping[str, FieldValue] | None,
    origin: str | None,
    reason: str | None,
) -> GroupKey:
    """The group of a dead letter with ``headers``, ``origin`` and ``reason`` (dlq/origin.py)
    over ``dimensions``. Never raises, whatever the headers hold."""
    table: Mapping[str, FieldValue] = headers or {}
    error_type = message = handler = None
    if Dimension.TYPE in dimensions:
        error_type = _header_text(table.get(ERROR_TYPE_HEADER))
        if error_type is None:
            error_type = f"({reason or 'unknown'})"
        else:
            error_type = error_type[:MAX_NORMALISED_CHARACTERS]
    if Dimension.MESSAGE in dimensions:
        raw = _header_text(table.get(ERROR_MESSAGE_HEADER))
        message = normalise_message(raw) if raw is not None else None
    if Dimension.HANDLER in dimensions:
        named = _header_text(table.get(HANDLER_HEADER))
        handler = named[:MAX_NORMALISED_CHARACTERS] if named is not None else None
    return GroupKey(
        dimensions=dimensions,
        error_type=error_type,
        message=message,
        origin=origin if Dimension.ORIGIN in dimensions else None,
        handler=handler,
    )


def group_id(key: GroupKey) -> str:
    code = code_of(key.dimensions)
    values = [key.value(d) for d in key.dimensions]
    canonical = json.dumps([code, values], ensure_ascii=False, separators=(",", ":"))
    digest = hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()
    return f"{code}-{digest[:_ID_DIGITS]}"


@dataclass(slots=True)
class BoundedNames:
    """Counts by name for at most :data:`MAX_NAMES` names; the rest in :attr:`others`."""

    counts: Counter[str] = field(default_factory=Counter)
    others: int = 0

    def add(self, name: str | None) -> None:
        shown = name if name is not None else "(unknown)"
        if shown in self.counts or len(self.counts) < MAX_NAMES:
            self.counts[shown] += 1
        else:
            self.others += 1


@dataclass(frozen=True, slots=True)
class Sample:
    """The first letter of a group: enough to find it and read it."""

    message_id: str | None
    queue: str
    """The dead-letter queue it was read from."""
    position: int
    error_message: str | None
    """Its own ``rr-error-message`` (not normalised), cut to :data:`MAX_SAMPLE_CHARACTERS`."""


@dataclass(slots=True)
class Group:
    key: GroupKey
    sample: Sample
    reason: str | None
    """The reason of the first letter (dlq/origin.py)."""
    count: int = 0
    first_failed_at: datetime | None = None
    last_failed_at: datetime | None = None
    origins: BoundedNames = field(default_factory=BoundedNames)
    queues: BoundedNames = field(default_factory=BoundedNames)
    """The dead-letter queues it was read from."""

    @property
    def id(self) -> str:
        return self.key.id


@dataclass(frozen=True, slots=True)
class Seen:
    """One dead letter as grouping reads it."""

    queue: str
    position: int
    message_id: str | None
    headers: Mapping[str, FieldValue] | None
    origin: str | None
    reason: str | None
    failed_at: datetime | None

    @classmethod
    def of(cls, queue: str, letter: Letter[Read]) -> Seen:
        """The letter ``letter`` of ``queue`` (``rr dlq groups``' and the console's)."""
        properties = letter.delivery.properties
        return cls(
            queue=queue,
            position=letter.position,
            message_id=properties.message_id,
            headers=properties.headers,
            origin=letter.origin,
            reason=letter.reason,
            failed_at=letter.failed_at,
        )


@dataclass(slots=True)
class Grouping:
    """The groups of every letter :meth:`add` was given (see the module doc)."""

    dimensions: tuple[Dimension, ...] = ALL_DIMENSIONS
    max_groups: int = MAX_GROUPS
    count: int = 0
    ungrouped: int = 0
    """Letters of a group past :attr:`max_groups`: counted, not grouped."""
    groups: dict[str, Group] = field(default_factory=dict)

    def add(self, letter: Seen) -> None:
        self.count += 1
        key = key_of(
            self.dimensions, headers=letter.headers, origin=letter.origin, reason=letter.reason
        )
        found = self.groups.get(key.id)
        if found is None:
            if len(self.groups) >= self.max_groups:
                self.ungrouped += 1
                return
            raw = _header_text((letter.headers or {}).get(ERROR_MESSAGE_HEADER))
            found = Group(
                key=key,
                reason=letter.reason,
                sample=Sample(
                    message_id=letter.message_id,
                    queue=letter.queue,
                    position=letter.position,
                    error_message=raw[:MAX_SAMPLE_CHARACTERS] if raw is not None else None,
                ),
            )
            self.groups[key.id] = found
        found.count += 1
        found.origins.add(letter.origin)
        found.queues.add(letter.queue)
        when = letter.failed_at
        if when is not None:
            if found.first_failed_at is None or when < found.first_failed_at:
                found.first_failed_at = when
            if found.last_failed_at is None or when > found.last_failed_at:
                found.last_failed_at = when

    def ranked(self) -> list[Group]:
        """Biggest first; a tie by the earliest failure, then the id (a stable order)."""
        return sorted(
            self.groups.values(),
            key=lambda g: (
                -g.count,
                g.first_failed_at is None,
                g.first_failed_at.timestamp() if g.first_failed_at is not None else 0.0,
                g.id,
            ),
        )
