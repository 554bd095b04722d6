"""Pure. The queue a dead letter failed in, why it was dead-lettered, and when.

The origin of a dead letter, in this order:

1. ``rr-origin-queue``: rr's own dead-letter copies (a classic queue's last attempt) carry it.
2. Otherwise the first ``x-death`` entry, in list order, whose queue is not a wait queue.
   RabbitMQ keeps ``x-death`` newest first (index 0 is the latest dead-lettering), one entry
   per (queue, reason).

Never ``x-first-death-queue``: a message that once waited in a wait queue (``delay =
"dlx-ttl"``) was first dead-lettered *by the wait queue* (reason ``expired``), so its first
death names the wait queue, and a replay there would only bounce it back after the TTL.
Likewise a wait queue's name is never an origin, even when it is the newest entry, and even
in ``rr-origin-queue`` (rr never writes one there; a letter that says so is passed over to
its ``x-death``, and fails when nothing else names an origin: :func:`wait_queue_named`).

Wait queues are every name of the shape rr derives for one (``<queue>.retry`` and
``<queue>.retry.<duration>``, see ``topology/naming.py``) and, with ``--topology``, the
topology's own wait queues; a queue the topology declares is never one, whatever its name
looks like (docs/reference/dlq.md, "Where a dead letter goes back to").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from rabbitctl_retry.fields import FieldValue
from rabbitctl_retry.retry.headers import FAILED_AT_HEADER, ORIGIN_QUEUE_HEADER, Death, deaths
from rabbitctl_retry.topology.model import Topology
from rabbitctl_retry.topology.naming import is_derived_wait_queue

REASON_MAX_ATTEMPTS = "max_attempts"
"""The reason rr gives its own dead-letter copies (the classic queue's last attempt failed)."""


@dataclass(frozen=True, slots=True)
class WaitQueues:
    """The queues that are never an origin (see the module doc)."""

    names: frozenset[str] = frozenset()
    """A topology's wait queues."""
    declared: frozenset[str] = frozenset()
    """A topology's other queues: never wait queues, whatever their names look like."""

    @classmethod
    def of(cls, topology: Topology | None) -> WaitQueues:
        if topology is None:
            return cls()
        names = frozenset(topology.wait_queue_owners)
        declared = frozenset(queue.name for queue in topology.queues) - names
        return cls(names=names, declared=declared)

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str):
            return False
        if name in self.names:
            return True
        return name not in self.declared and is_derived_wait_queue(name)


def _text(value: object) -> str | None:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value if isinstance(value, str) else None


def origin_queue(headers: Mapping[str, FieldValue] | None, wait_queues: WaitQueues) -> str | None:
    """The queue the dead letter failed in (see the module doc), or ``None`` if unknown."""
    if not headers:
        return None
    named = _text(headers.get(ORIGIN_QUEUE_HEADER))
    if named and named not in wait_queues:
        return named
    history = headers.get("x-death")
    if not isinstance(history, list):
        return None
    for entry in history:  # the hot path of a replay: no Death objects
        if isinstance(entry, dict):
            queue = _text(entry.get("queue"))
            if queue and queue not in wait_queues:
                return queue
    return None


def wait_queue_named(
    headers: Mapping[str, FieldValue] | None, wait_queues: WaitQueues
) -> str | None:
    """The first wait queue ``rr-origin-queue`` or ``x-death`` names, or ``None``: why a dead
    letter without an origin has none (cold path: only for letters that fail)."""
    table: Mapping[str, FieldValue] = headers or {}
    named = _text(table.get(ORIGIN_QUEUE_HEADER))
    if named and named in wait_queues:
        return named
    for death in deaths(table):
        if death.queue and death.queue in wait_queues:
            return death.queue
    return None


def death_reason(headers: Mapping[str, FieldValue] | None, origin: str | None) -> str | None:
    """Why the dead letter left ``origin``.

    The reason of the ``x-death`` entry for ``origin`` (``delivery_limit``, ``rejected``,
    ``expired``, ``maxlen``); for rr's own copies :data:`REASON_MAX_ATTEMPTS`; else the
    newest entry's reason; ``None`` when nothing says.
    """
    return _reason(deaths(headers), headers, origin)


def _reason(
    history: tuple[Death, ...], headers: Mapping[str, FieldValue] | None, origin: str | None
) -> str | None:
    if origin is not None:
        for death in history:
            if death.queue == origin and death.reason:
                return death.reason
    if headers and _text(headers.get(ORIGIN_QUEUE_HEADER)):
        return REASON_MAX_ATTEMPTS
    for death in history:
        if death.reason:
            return death.reason
    return None


def parse_time(text: str) -> datetime | None:
    """An ISO 8601 time (``2024-05-01T10:00:00.123Z``) as an aware datetime, or ``None``."""
    try:
        parsed = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def failed_at(headers: Mapping[str, FieldValue] | None) -> datetime | None:
    """When the message was last dead-lettered: the newest ``x-death`` time or
    ``rr-failed-at``, whichever is later; ``None`` when neither is there."""
    return _failed_at(deaths(headers), headers)


def _failed_at(
    history: tuple[Death, ...], headers: Mapping[str, FieldValue] | None
) -> datetime | None:
    times = [death.time for death in history if death.time is not None]
    stamp = _text((headers or {}).get(FAILED_AT_HEADER))
    if stamp:
        parsed = parse_time(stamp)
        if parsed is not None:
            times.append(parsed)
    aware = [time if time.tzinfo is not None else time.replace(tzinfo=UTC) for time in times]
    return max(aware, default=None)


BODY_SEARCHED_BYTES = 1024
"""How much of a body ``--where text=`` searches (docs/reference/dlq.md, "--where")."""


@dataclass(frozen=True, slots=True)
class Contents:
    """What ``--where id=`` and ``text=`` read of a dead letter beyond its headers."""

    message_id: str | None
    body: bytes
    """The whole body as read; :func:`facts` decodes only its first :data:`BODY_SEARCHED_BYTES`."""


def contents_of(
    message_id: str | None, body: bytes, undecodable: tuple[str, ...] = ()
) -> Contents | None:
    """A delivery's :class:`Contents`; ``None`` when its properties could not be decoded (its
    message id is unknown: it matches no ``id`` or ``text`` condition, docs/reference/dlq.md)."""
    return None if undecodable else Contents(message_id=message_id, body=body)


@dataclass(frozen=True, slots=True)
class Facts:
    """What ``--where`` and the summaries read from one dead letter, computed once."""

    origin: str | None
    reason: str | None
    queues: frozenset[str]
    """Every queue its history names: ``rr-origin-queue`` and each ``x-death`` queue."""
    failed_at: datetime | None
    headers: Mapping[str, FieldValue]
    searchable: bool = False
    """Whether its message id and body were given (:class:`Contents`): without them no
    ``id`` or ``text`` condition holds."""
    message_id: str | None = None
    body_head: str = ""
    """The body's first :data:`BODY_SEARCHED_BYTES`, decoded as UTF-8 with replacement and
    case-folded (what ``text=`` searches)."""


def facts(
    headers: Mapping[str, FieldValue] | None,
    wait_queues: WaitQueues,
    contents: Contents | None = None,
) -> Facts:
    """The :class:`Facts` of a dead letter with ``headers`` (and ``contents``, when known)."""
    table: Mapping[str, FieldValue] = headers or {}
    origin = origin_queue(table, wait_queues)
    history = deaths(table)
    queues = {death.queue for death in history if death.queue}
    named = _text(table.get(ORIGIN_QUEUE_HEADER))
    if named:
        queues.add(named)
    return Facts(
        origin=origin,
        reason=_reason(history, table, origin),
        queues=frozenset(queues),
        failed_at=_failed_at(history, table),
        headers=table,
        searchable=contents is not None,
        message_id=contents.message_id if contents is not None else None,
        body_head=(
            contents.body[:BODY_SEARCHED_BYTES].decode("utf-8", "replace").casefold()
            if contents is not None
            else ""
        ),
    )
