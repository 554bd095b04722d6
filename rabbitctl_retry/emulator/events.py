"""What happened inside the emulated broker, in order, each with its virtual time.

Every message the broker accepts gets a ``message`` number when it is published; the number
stays with it through requeues and dead-lettering (a fanout copy in each queue shares it), so
a test can follow one message through a topology.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from rabbitctl_retry.emulator.deadletter import DeathReason

RequeueCause = Literal["reject", "nack", "channel_closed", "consumer_timeout"]
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
class _ExchangeEvent(_MessageEvent):
    """An event of a message at ``exchange``."""

    exchange: str


@dataclass(frozen=True, slots=True)
class _RoutedEvent(_ExchangeEvent):
    """An event of a message published to its exchange with ``routing_key``."""

    routing_key: str


@dataclass(frozen=True, slots=True)
class _QueueEvent(_MessageEvent):
    """An event of a message in ``queue``."""

    queue: str


@dataclass(frozen=True, slots=True)
class _DeliveryEvent(_QueueEvent):
    """An event of one delivery from its queue: ``delivery_tag`` on its channel."""

    delivery_tag: int


@dataclass(frozen=True, slots=True)
class Published(_RoutedEvent):
    queues: tuple[str, ...]
    """The queues it was enqueued in (empty when unroutable or delayed)."""
    message_id: str | None = field(default=None, compare=False)
    """Its ``message_id`` property, to follow it by the publisher's id (not compared: the
    ``message`` number is the event's identity)."""


@dataclass(frozen=True, slots=True)
class Returned(_RoutedEvent):
    """A mandatory message no queue took (basic.return 312 NO_ROUTE)."""


@dataclass(frozen=True, slots=True)
class Unroutable(_RoutedEvent):
    """A non-mandatory message no queue took: silently dropped."""


@dataclass(frozen=True, slots=True)
class Delayed(_ExchangeEvent):
    """A message held by an ``x-delayed-message`` exchange for ``delay_ms``."""

    delay_ms: int


@dataclass(frozen=True, slots=True)
class Released(_ExchangeEvent):
    """A delayed message whose delay ran out, routed by its exchange (``x-delay`` negated)."""

    queues: tuple[str, ...]
    """Empty when nothing was bound for it any more: then it is dropped."""


@dataclass(frozen=True, slots=True)
class Delivered(_DeliveryEvent):
    consumer_tag: str | None
    """None for basic.get."""
    redelivered: bool
    delivery_count: int
    """Counted returns so far (quorum queues; always 0 on classic queues)."""


@dataclass(frozen=True, slots=True)
class Acked(_DeliveryEvent):
    """basic.ack of one delivery."""


@dataclass(frozen=True, slots=True)
class Rejected(_DeliveryEvent):
    """basic.reject or basic.nack of one delivery."""

    requeue: bool
    method: Literal["reject", "nack"]


@dataclass(frozen=True, slots=True)
class Requeued(_QueueEvent):
    cause: RequeueCause
    delivery_count: int
    """The message's count after this return (quorum; 0 on classic queues)."""


@dataclass(frozen=True, slots=True)
class Expired(_QueueEvent):
    """A message its queue's TTL removed."""


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
class Dropped(_QueueEvent):
    """A message removed without going anywhere (no dead-letter exchange, purge, delete...)."""

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
