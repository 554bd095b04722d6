"""What happened inside the emulated broker, in order, each with its virtual time.

Every message the broker accepts gets a ``message`` number when it is published; the number
stays with it through requeues and dead-lettering (a fanout copy in each queue shares it), so
a test can follow one message through a topology.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from rabbitctl_retry.emulator.deadletter import DeathReason

RequeueCause = Literal["reject", "nack", "channel_closed"]
DropCause = Literal[
    "rejected",
    "expired",
    "maxlen",
    "delivery_limit",
    "reject_publish",
    "queue_deleted",
    "purged",
    "cycle",
]


@dataclass(frozen=True, slots=True)
class _MessageEvent:
    """What every event holds: when it happened and to which message."""

    at_s: float
    """Virtual seconds (the clock's)."""
    message: int
    """The message's number (the module docstring)."""


@dataclass(frozen=True, slots=True)
class Published(_MessageEvent):
    exchange: str
    routing_key: str
    queues: tuple[str, ...]
    """The queues it was enqueued in (empty when unroutable or delayed)."""
    message_id: str | None = field(default=None, compare=False)
    """Its ``message_id`` property, to follow it by the publisher's id (not compared: the
    ``message`` number is the event's identity)."""


@dataclass(frozen=True, slots=True)
class Returned(_MessageEvent):
    """A mandatory message no queue took (basic.return 312 NO_ROUTE)."""

    exchange: str
    routing_key: str


@dataclass(frozen=True, slots=True)
class Unroutable(_MessageEvent):
    """A non-mandatory message no queue took: silently dropped."""

    exchange: str
    routing_key: str


@dataclass(frozen=True, slots=True)
class Delayed(_MessageEvent):
    """A message held by an ``x-delayed-message`` exchange for ``delay_ms``."""

    exchange: str
    delay_ms: int


@dataclass(frozen=True, slots=True)
class Released(_MessageEvent):
    """A delayed message whose delay ran out, routed by its exchange (``x-delay`` negated)."""

    exchange: str
    queues: tuple[str, ...]
    """Empty when nothing was bound for it any more: then it is dropped."""


@dataclass(frozen=True, slots=True)
class Delivered(_MessageEvent):
    queue: str
    delivery_tag: int
    consumer_tag: str | None
    """None for basic.get."""
    redelivered: bool
    delivery_count: int
    """Counted returns so far (quorum queues; always 0 on classic queues)."""


@dataclass(frozen=True, slots=True)
class Acked(_MessageEvent):
    queue: str
    delivery_tag: int


@dataclass(frozen=True, slots=True)
class Rejected(_MessageEvent):
    """basic.reject or basic.nack of one delivery."""

    queue: str
    delivery_tag: int
    requeue: bool
    method: Literal["reject", "nack"]


@dataclass(frozen=True, slots=True)
class Requeued(_MessageEvent):
    queue: str
    cause: RequeueCause
    delivery_count: int
    """The message's count after this return (quorum; 0 on classic queues)."""


@dataclass(frozen=True, slots=True)
class Expired(_MessageEvent):
    queue: str


@dataclass(frozen=True, slots=True)
class DeadLettered(_MessageEvent):
    reason: DeathReason
    from_queue: str
    exchange: str
    """The dead-letter exchange."""
    routing_keys: tuple[str, ...]
    to_queues: tuple[str, ...]
    """Where it went; empty when the dead-letter exchange is missing or routes nowhere."""


@dataclass(frozen=True, slots=True)
class Dropped(_MessageEvent):
    """A message removed without going anywhere (no dead-letter exchange, purge, delete...)."""

    queue: str
    cause: DropCause


Event = (
    Published
    | Returned
    | Unroutable
    | Delayed
    | Released
    | Delivered
    | Acked
    | Rejected
    | Requeued
    | Expired
    | DeadLettered
    | Dropped
)
