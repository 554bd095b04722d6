"""Read-only views of the emulated broker for tests: a queue, a queued message."""

from __future__ import annotations

from dataclasses import dataclass

from rabbitctl_retry.emulator.args import QueueKind
from rabbitctl_retry.fields import FieldTable
from rabbitctl_retry.transport.base import Properties


@dataclass(frozen=True, slots=True)
class QueuedMessage:
    """A message sitting in a queue (or held unacked), as a consumer would see its content."""

    message: int
    """The emulator's number for it (see ``events.py``)."""
    body: bytes
    properties: Properties
    exchange: str
    routing_key: str
    redelivered: bool
    delivery_count: int
    """Counted returns (quorum queues)."""
    enqueued_at_s: float
    expires_at_s: float | None

    @property
    def headers(self) -> FieldTable:
        return self.properties.headers or {}


@dataclass(frozen=True, slots=True)
class QueueSnapshot:
    name: str
    kind: QueueKind
    durable: bool
    exclusive: bool
    auto_delete: bool
    arguments: FieldTable
    ready: int
    unacked: int
    consumers: int
