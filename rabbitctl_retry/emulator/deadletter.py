"""Dead-letter headers and cycle detection, pure, as RabbitMQ writes them.

Measured on RabbitMQ 3.10.8 (``rabbit_dead_letter``):

* ``x-death`` is a list of tables, newest first. A new entry is
  ``{count: 1, reason, queue, time, exchange, routing-keys}`` plus ``original-expiration`` when
  the message carried an ``expiration`` property, whatever the reason (the dead-lettered copy
  loses the property).
* The headers table comes back with its keys sorted, as do entries the server rebuilt (all but
  the very first entry, which keeps the order above); dict equality does not care, output
  that lists headers does.
* An existing entry with the same ``(queue, reason)`` is not rewritten: its ``count`` goes up by
  one and it moves to the front; its ``time``, ``exchange`` and ``routing-keys`` stay those of
  the first such death.
* Before adding to a list of two or more entries the server regroups it, which reverses the
  older entries: ``[B, A]`` + ``C`` -> ``[C, A, B]``; ``[C, A, B]`` + ``B`` again ->
  ``[B(2), A, C]``. Newest first holds for the front entry only.
* ``x-first-death-reason``, ``-queue`` and ``-exchange`` are written when the message has no
  ``x-death`` yet (replacing any the client put there), and never touched afterwards.
* An ``x-death`` that is not a list is replaced by a fresh one-entry list.
* RabbitMQ 3.13+ also writes ``x-last-death-reason``, ``-queue``, ``-exchange`` on every death
  (``mc:record_death``): this death's reason and queue, and the exchange the message was last
  published or dead-lettered to (not the merged entry's first exchange).
* A dead-lettered message is not delivered to a queue it already died in when every death
  from the newest back to that queue's was automatic (not ``rejected``): the cycle is dropped.

Measured on RabbitMQ 4.0.5 (message containers, :func:`broker_dead_letter_headers`):

* The broker keeps the deaths itself (a message annotation) and renders ``x-death`` from them;
  an ``x-death`` a client published (list or not) is not read: the first death the broker
  records replaces it with a one-entry list and writes ``x-first-death-*`` (4.0.1 release
  notes, "AMQP 0.9.1 x-death header"). Counts therefore restart when a client republishes.
* The list is strictly most recent first: a repeated ``(queue, reason)`` moves to the front
  with ``count`` + 1 (``time``, ``exchange``, ``routing-keys``, ``original-expiration`` of its
  first death), the others keep their order; no regrouping, no reversal.
* Every entry's keys come in one order: ``original-expiration`` (when present), ``count``,
  ``reason``, ``queue``, ``time``, ``exchange``, ``routing-keys``; the headers table is sorted.
* ``x-first-death-*`` and ``x-last-death-*`` are the broker's (a client's are replaced).
* Cycle detection reads the broker's deaths only (the same rule as above).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from rabbitctl_retry.fields import FieldTable, FieldValue

DeathReason = Literal["rejected", "expired", "maxlen", "delivery_limit"]

X_DEATH = "x-death"


def death_time(now_s: float) -> datetime:
    """The ``time`` of an ``x-death`` entry: whole seconds, UTC (an AMQP timestamp)."""
    return datetime.fromtimestamp(int(now_s), tz=UTC)


@dataclass(frozen=True, slots=True, kw_only=True)
class Death:
    """One death of a message: it died in ``queue`` for ``reason`` at ``time``; ``exchange``
    and ``routing_keys`` are those it was last published (or dead-lettered) with;
    ``original_expiration``, its ``expiration`` property, if it had one."""

    reason: DeathReason
    queue: str
    exchange: str
    routing_keys: Sequence[str]
    time: datetime
    original_expiration: str | None


def _entry_fields(death: Death) -> FieldTable:
    """What a new ``x-death`` entry says of ``death`` besides its count and original
    expiration (each writer puts those where its release does)."""
    return {
        "reason": death.reason,
        "queue": death.queue,
        "time": death.time,
        "exchange": death.exchange,
        "routing-keys": list(death.routing_keys),
    }


def dead_letter_headers(
    headers: FieldTable | None, death: Death, *, write_last_death: bool = False
) -> FieldTable:
    """The headers a message carries after ``death``. ``headers`` is not modified."""
    result: FieldTable = dict(headers) if headers else {}
    info = _entry_fields(death)
    if death.original_expiration is not None:
        info["original-expiration"] = death.original_expiration
    existing = result.get(X_DEATH)
    if existing is None:
        _write_death(result, "first", death)
        deaths: list[FieldValue] = [{"count": 1, **info}]
    elif not isinstance(existing, list):
        deaths = [{"count": 1, **info}]
    else:
        grouped = _group_by_queue_and_reason(existing)
        match_index = _index_of_death(grouped, death.queue, death.reason)
        if match_index is None:
            deaths = [_sorted({"count": 1, **info}), *grouped]
        else:
            matched = grouped[match_index]
            assert isinstance(matched, dict)
            bumped = _counted_again(matched)
            deaths = [_sorted(bumped), *grouped[:match_index], *grouped[match_index + 1 :]]
    result[X_DEATH] = deaths
    if write_last_death:
        _write_death(result, "last", death)
    return _sorted(result)


def broker_dead_letter_headers(
    headers: FieldTable | None, death: Death, *, died_before: bool
) -> FieldTable:
    """The headers a message carries after ``death``, as RabbitMQ 4.0 writes them.

    ``died_before``: the broker dead-lettered this message before, so the ``x-death`` and
    ``x-first-death-*`` of ``headers`` are its own record; otherwise they are a client's
    and are replaced. ``headers`` is not modified.
    """
    result: FieldTable = dict(headers) if headers else {}
    existing = result.get(X_DEATH) if died_before else None
    if not isinstance(existing, list):
        _write_death(result, "first", death)
        existing = []
    match_index = _index_of_death(existing, death.queue, death.reason)
    if match_index is None:
        entry: FieldTable = {}
        if death.original_expiration is not None:
            entry["original-expiration"] = death.original_expiration
        entry.update({"count": 1, **_entry_fields(death)})
        deaths = [entry, *(_copy_entry(e) for e in existing)]
    else:
        matched = existing[match_index]
        assert isinstance(matched, dict)
        bumped = _counted_again(matched)
        rest = [_copy_entry(e) for i, e in enumerate(existing) if i != match_index]
        deaths = [bumped, *rest]
    result[X_DEATH] = deaths
    _write_death(result, "last", death)
    return _sorted(result)


def _write_death(headers: FieldTable, which: str, death: Death) -> None:
    """``x-first-death-*`` (``which`` "first") or ``x-last-death-*`` ("last", 3.13+): this
    death, with the exchange the message died from."""
    headers[f"x-{which}-death-reason"] = death.reason
    headers[f"x-{which}-death-queue"] = death.queue
    headers[f"x-{which}-death-exchange"] = death.exchange


def _index_of_death(deaths: list[FieldValue], queue: str, reason: str) -> int | None:
    """Where the entry of ``(queue, reason)`` stands in ``deaths``, if it does."""
    return next(
        (
            i
            for i, entry in enumerate(deaths)
            if isinstance(entry, dict)
            and entry.get("queue") == queue
            and entry.get("reason") == reason
        ),
        None,
    )


def _counted_again(entry: dict[str, FieldValue]) -> FieldTable:
    """A copy of the ``x-death`` entry with its count one more (1 if it has none)."""
    bumped = dict(entry)
    count = bumped.get("count")
    bumped["count"] = count + 1 if isinstance(count, int) and not isinstance(count, bool) else 1
    return bumped


def _sorted(table: FieldTable) -> FieldTable:
    """The server rewrites a table it changed with its keys sorted (``set_table_value``)."""
    return dict(sorted(table.items()))


def _group_by_queue_and_reason(entries: list[FieldValue]) -> list[FieldValue]:
    """Collapse repeated ``(queue, reason)`` entries (pre-3.5 style), keeping the first.

    Like the server's fold, this *reverses* a list of two or more entries (a single entry is
    left alone): measured on 3.10.8, ``[B, A]`` plus a new death ``C`` becomes ``[C, A, B]``.
    """
    if len(entries) <= 1:
        return [_copy_entry(e) for e in entries]
    seen: set[tuple[object, object]] = set()
    grouped: list[FieldValue] = []
    for entry in entries:
        if not isinstance(entry, dict):
            grouped.append(entry)
            continue
        key = (_hashable(entry.get("queue")), _hashable(entry.get("reason")))
        if key in seen:
            continue
        seen.add(key)
        copy = dict(entry)
        if "count" not in copy:
            copy["count"] = sum(
                1
                for other in entries
                if isinstance(other, dict)
                and (_hashable(other.get("queue")), _hashable(other.get("reason"))) == key
            )
        grouped.append(copy)
    grouped.reverse()
    return grouped


def _copy_entry(entry: FieldValue) -> FieldValue:
    return dict(entry) if isinstance(entry, dict) else entry


def _hashable(value: FieldValue) -> object:
    return value if isinstance(value, str | int | float | bool | bytes | None) else repr(value)


def is_cycle(queue: str, deaths: Iterable[FieldValue]) -> bool:
    """True when dead-lettering into ``queue`` closes a fully automatic cycle."""
    passed: list[FieldValue] = []
    for entry in deaths:
        passed.append(entry)
        if isinstance(entry, dict) and entry.get("queue") == queue:
            return all(isinstance(e, dict) and e.get("reason") != "rejected" for e in passed)
    return False


def without_cycles(
    reason: DeathReason, headers: FieldTable | None, queues: Sequence[str]
) -> tuple[list[str], list[str]]:
    """Split target ``queues`` into (deliver to, dropped as a cycle) for a dead-lettered message."""
    if reason == "rejected" or not headers:
        return list(queues), []
    deaths = headers.get(X_DEATH)
    if not isinstance(deaths, list):
        return list(queues), []
    keep: list[str] = []
    cycling: list[str] = []
    for name in queues:
        (cycling if is_cycle(name, deaths) else keep).append(name)
    return keep, cycling
