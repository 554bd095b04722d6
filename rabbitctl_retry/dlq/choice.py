"""Pure. What a transfer (``rr dlq replay``, ``rr dlq move``) does with one message.

A *chooser* looks at one message (its headers, the time, the names of the properties the
codec could not decode, its message id and body for ``--where id=``/``text=``) and answers
with one :data:`Choice`; the engine (``ops/transfer.py``) carries it out: :class:`Send`
publishes a copy and removes the message once the broker confirmed the copy,
:class:`Discard` removes it with no copy (``rr dlq purge --where``), :class:`Skip` and
:class:`Fail` leave it where it is, :class:`Stop` ends the run and leaves it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TypeAlias

from rabbitctl_retry.dlq.origin import Contents
from rabbitctl_retry.fields import FieldValue


@dataclass(frozen=True, slots=True)
class Send:
    to: str
    headers: dict[str, FieldValue]
    verbatim: bool = False
    """Publish the message's properties exactly as received (``headers`` unused)."""
    body: bytes | None = None
    """A new body (``rr dlq edit``); ``None``: the message's own."""


@dataclass(frozen=True, slots=True)
class Discard:
    """Ack the message: it is gone, nowhere copied."""


@dataclass(frozen=True, slots=True)
class Skip:
    reason: str


@dataclass(frozen=True, slots=True)
class Fail:
    reason: str
    to: str | None = None


@dataclass(frozen=True, slots=True)
class Stop:
    reason: str


Choice: TypeAlias = Send | Discard | Skip | Fail | Stop

Chooser: TypeAlias = Callable[
    [Mapping[str, FieldValue] | None, datetime, tuple[str, ...], Contents | None], Choice
]
"""``(headers, now, undecodable property names, contents) -> Choice``; ``contents`` is
``None`` when the properties could not be decoded (``dlq/origin.py`` ``contents_of``)."""


def shown(name: str, limit: int = 64) -> str:
    """A queue name for a reason: quoted, escaped, cut after ``limit`` characters."""
    return repr(name) if len(name) <= limit else f"{name[:limit]!r}... ({len(name):,} characters)"
