"""Pure. The dead letters of a read that carry one message id: how ``rr dlq edit`` and the
console find the letter to edit (the ``nth`` of them in queue order), what they say when there
is none or more than one, and how the run that publishes an edit makes sure it takes the very
letter that was read (docs/reference/dlq.md, "Edit and retry").

A letter is known again by its place among the letters with its id (the ``nth``, 1: the first
in queue order) and by :class:`Checksums` of what it is: its body, its properties and its
headers, byte for byte, less the two counts a broker raises each time it hands a letter out
(``x-delivery-count``, ``x-acquired-count``). Its place in the whole queue is not used: letters
ahead of it come and go (a group retried by a colleague), and a quorum queue hands its letters
back in another order after a read (measured on RabbitMQ 3.10.8 and 4.3.6: the head moves to
the tail).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Generic, TypeVar

from rabbitctl_retry.dlq.choice import Skip, Stop
from rabbitctl_retry.dlq.jsonl import headers_document
from rabbitctl_retry.dlq.letter import Read
from rabbitctl_retry.dlq.report import TransferReport
from rabbitctl_retry.fields import FieldValue, like
from rabbitctl_retry.retry.headers import ACQUIRED_COUNT_HEADER, DELIVERY_COUNT_HEADER
from rabbitctl_retry.retry.properties import PROPERTY_NAMES

R = TypeVar("R", bound=Read)

SHOWN_POSITIONS = 10
"""Positions of letters with the id an error message lists."""

READ_COUNTS = frozenset({DELIVERY_COUNT_HEADER, ACQUIRED_COUNT_HEADER})
"""Headers a broker rewrites each time it hands a letter out: not part of what the letter is."""

NOT_THE_ONE = "not the letter asked for"
"""Why an edit's run leaves every other letter (:class:`LetterPick`)."""


@dataclass(slots=True)
class SameId(Generic[R]):
    message_id: str
    nth: int = 1
    """Which of them is wanted (1: the first in the queue)."""
    letter: R | None = None
    """The ``nth``, once read."""
    position: int = 0
    """Its position in the queue (1: the head)."""
    positions: list[int] = field(default_factory=list)
    """The positions of the first :data:`SHOWN_POSITIONS` with the id."""
    count: int = 0
    """How many letters read carry the id."""
    read: int = 0

    def look(self, delivery: R) -> bool:
        """A ``scan_messages`` callback: every letter is looked at (the count is needed)."""
        self.read += 1
        if delivery.properties.message_id == self.message_id:
            self.count += 1
            if len(self.positions) < SHOWN_POSITIONS:
                self.positions.append(self.read)
            if self.count == self.nth:
                self.letter, self.position = delivery, self.read
        return True


# --------------------------------------------------------------------------- checksums

_HEX64 = re.compile(r"[0-9a-f]{64}")
_PARTS = ("body", "properties", "headers")


@dataclass(frozen=True, slots=True)
class Checksums:
    """SHA-256 (hex) of a letter's body, of its properties and of its headers (less
    :data:`READ_COUNTS`); written ``BODY.PROPERTIES.HEADERS`` (the console's edit form)."""

    body: str
    properties: str
    headers: str

    def __str__(self) -> str:
        return f"{self.body}.{self.properties}.{self.headers}"

    @classmethod
    def parse(cls, text: str) -> Checksums | None:
        """The checksums written by ``str()``, or None for any other text."""
        parts = text.split(".")
        if len(parts) != len(_PARTS) or not all(_HEX64.fullmatch(part) for part in parts):
            return None
        return cls(*parts)

    def changed(self, now: Checksums) -> tuple[str, ...]:
        """What differs in ``now``: ``body``, ``properties``, ``headers``, in that order."""
        return tuple(part for part in _PARTS if getattr(self, part) != getattr(now, part))


def checksums(letter: Read) -> Checksums:
    """What ``letter`` is, as :class:`Checksums`: every property that is set (and the bytes of
    those the codec could not decode) and every header by name, AMQP type and value (the export
    format's encoding, dlq/jsonl.py), a header table's order aside (RabbitMQ 4 hands headers
    out sorted by name)."""
    properties = letter.properties
    values: dict[str, object] = {}
    for name in PROPERTY_NAMES:
        value = getattr(properties, name, None)
        if value is not None:
            values[name] = value.isoformat() if isinstance(value, datetime) else value
    raw = getattr(properties, "raw", None)
    if isinstance(raw, bytes):
        values["(raw)"] = raw.hex()
    if properties.undecodable:
        values["(undecodable)"] = list(properties.undecodable)
    headers: Mapping[str, FieldValue] = properties.headers or {}
    kept = headers_document(
        like(headers, {name: value for name, value in headers.items() if name not in READ_COUNTS})
    )
    return Checksums(
        body=hashlib.sha256(letter.body).hexdigest(),
        properties=_sha256_of(values),
        headers=_sha256_of(kept),
    )


def _sha256_of(document: object) -> str:
    text = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode("ascii")).hexdigest()


# --------------------------------------------------------------------------- the one letter


@dataclass(slots=True)
class LetterPick(Generic[R]):
    """The letter an edit was made on, found again: the ``nth`` letter with ``message_id``,
    taken only if it has the ``expected`` checksums; the letters before it are left, and the
    search ends at it, the same or not.

    Called on each delivery of the transfer engine's run that publishes the edited copy and
    acks the letter (``TransferOptions.only``): so the check is made on the very delivery the
    run acks, in the same pass. :meth:`look` is the same test as a ``scan_messages`` callback
    (the console's look before it shows a diff or keeps the original)."""

    message_id: str
    nth: int
    expected: Checksums
    read: int = 0
    """Letters handed to it."""
    seen: int = 0
    """Letters with the id among them."""
    position: int = 0
    """Where the ``nth`` letter with the id was (1: the head), once read; 0 before."""
    changed: tuple[str, ...] = ()
    """What differed in it (``body``, ``properties``, ``headers``)."""
    letter: R | None = None
    """The letter, when it is the one expected."""

    def __call__(self, delivery: R) -> Skip | Stop | None:
        """``None``: this is the letter (the chooser decides); a :class:`Skip` for the letters
        before it; a :class:`Stop` at the ``nth`` letter with the id when it is not the same."""
        self.read += 1
        if self.position or delivery.properties.message_id != self.message_id:
            return Skip(NOT_THE_ONE)
        self.seen += 1
        if self.seen < self.nth:
            return Skip(NOT_THE_ONE)
        self.position = self.read
        self.changed = self.expected.changed(checksums(delivery))
        if self.changed:
            return Stop(self.problem() or "")
        self.letter = delivery
        return None

    def look(self, delivery: R) -> bool:
        """A ``scan_messages`` callback: read on until the ``nth`` letter with the id."""
        self(delivery)
        return not self.position

    def refused(self, report: TransferReport) -> str | None:
        """Why the run ``report`` tells of published nothing because the letter is not there
        as it was read, or None: it was taken, or the run ended otherwise (cut, or no letter
        came: its report says so)."""
        if self.letter is not None or report.interrupted is not None:
            return None
        if self.changed or report.stopped is None:
            return self.problem()
        return None

    def problem(self) -> str | None:
        """Why the letter read is not there as it was (after a run or a scan), or None once
        it was found the same."""
        if self.letter is not None:
            return None
        which = f"letter #{self.nth} with id {self.message_id!r}" if self.nth > 1 else "letter"
        if self.changed:
            parts = " and ".join(self.changed)
            return (
                f"the {which} is not the one read: its {parts} changed since (found at "
                f"#{self.position:,} of the queue)"
            )
        return (
            f"the {which} is not in the queue any more ({self.seen:,} with this id among "
            f"{self.read:,} read): it was taken or changed since it was read"
        )
