"""Pure. One dead letter as ``rr dlq inspect`` shows it: what rr reads from its headers.

Every view of ``inspect`` (the table, ``--format lines``, the JSON documents, ``--summary``)
starts from a :class:`Letter`, so they all agree on origin, reason, retry count and the time
the message was dead-lettered (docs/reference/dlq.md, "Inspecting without taking").
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Generic, Protocol, TypeVar

from rabbitctl_retry.dlq.origin import WaitQueues, facts
from rabbitctl_retry.fields import FieldValue
from rabbitctl_retry.retry.headers import count_value, delivery_count


class ReadProperties(Protocol):
    """What rr reads of a delivery's properties (``transport.base.Properties`` has them)."""

    @property
    def headers(self) -> Mapping[str, FieldValue] | None: ...

    @property
    def message_id(self) -> str | None: ...

    @property
    def undecodable(self) -> tuple[str, ...]: ...


class Read(Protocol):
    """A delivery as the core sees it (``transport.base.Delivery`` is one)."""

    @property
    def body(self) -> bytes: ...

    @property
    def properties(self) -> ReadProperties: ...


D = TypeVar("D", bound=Read, covariant=True)
"""The delivery type a letter carries (read only: a ``Letter[Delivery]`` is a ``Letter[Read]``)."""
R = TypeVar("R", bound=Read)


@dataclass(frozen=True, slots=True)
class Letter(Generic[D]):
    """One dead letter as inspect shows it."""

    position: int
    """1 for the message at the head of the queue."""
    delivery: D
    retry_count: int | None
    """The retry header's value; ``None`` when the message has none (or it is no number)."""
    delivery_count: int | None
    """A quorum queue's ``x-delivery-count``; ``None`` elsewhere."""
    origin: str | None
    reason: str | None
    failed_at: datetime | None
    """When it was last dead-lettered: the newest ``x-death`` time or ``rr-failed-at``."""


def letter_of(
    position: int, delivery: R, *, retry_header: str, wait_queues: WaitQueues
) -> Letter[R]:
    """The :class:`Letter` of the ``position``-th delivery read."""
    headers = delivery.properties.headers or {}
    found = facts(headers, wait_queues)
    raw_retry = headers.get(retry_header)
    return Letter(
        position=position,
        delivery=delivery,
        retry_count=count_value(raw_retry) if raw_retry is not None else None,
        delivery_count=delivery_count(headers),
        origin=found.origin,
        reason=found.reason,
        failed_at=found.failed_at,
    )


def numbered_letters(*, retry_header: str, wait_queues: WaitQueues) -> Callable[[R], Letter[R]]:
    """:func:`letter_of` each delivery it is handed, numbered from 1 in the order read."""
    positions = itertools.count(1)

    def letter(delivery: R) -> Letter[R]:
        return letter_of(
            next(positions), delivery, retry_header=retry_header, wait_queues=wait_queues
        )

    return letter
