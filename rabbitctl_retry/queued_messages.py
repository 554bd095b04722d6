"""The items of ``TestBroker.messages()``: a message waiting in a queue, read with the names a
handler's :class:`~rabbitctl_retry.runtime.message.Message` has (docs/reference/testing.md,
"Messages in a queue").

A test asserts on ``broker.messages("orders.dead")[0].message_id``, ``.headers``, ``.body``,
``.json()``, ``.retry_count``, ``.deaths`` as a handler reads them off its ``Message``; the
emulator's own view (``.properties.message_id``, ``.message``, ``.enqueued_at_s``) still
works. ``delivery_count`` and ``attempt`` are what the handler would see were the message
delivered now: the quorum queue's count of returns (``None`` before the first), and
``1 + retry_count + (delivery_count or 0)``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rabbitctl_retry.emulator.snapshots import QueuedMessage
from rabbitctl_retry.retry.headers import DEFAULT_RETRY_HEADER
from rabbitctl_retry.runtime.message import Message
from rabbitctl_retry.transport.base import Delivery


@dataclass(frozen=True)
class WaitingMessage(Message):
    """A message in a queue (or held unacked), as :class:`Message` names its parts."""

    queued: QueuedMessage = field(kw_only=True)
    """The emulator's view of it (its number, its times)."""

    @property
    def message(self) -> int:
        """The emulator's number for it (``rabbitctl_retry/emulator/events.py``)."""
        return self.queued.message

    @property
    def enqueued_at_s(self) -> float:
        return self.queued.enqueued_at_s

    @property
    def expires_at_s(self) -> float | None:
        return self.queued.expires_at_s

    @property
    def delivery_count(self) -> int | None:
        return self.queued.delivery_count or None

    @property
    def attempt(self) -> int:
        return 1 + self.retry_count + (self.delivery_count or 0)


def waiting(
    queued: QueuedMessage, queue: str, retry_header: str = DEFAULT_RETRY_HEADER
) -> WaitingMessage:
    """``queued`` (in ``queue``) as a :class:`WaitingMessage`."""
    delivery = Delivery(
        body=queued.body,
        properties=queued.properties,
        exchange=queued.exchange,
        routing_key=queued.routing_key,
        redelivered=queued.redelivered,
    )
    return WaitingMessage(delivery, queue, retry_header, queued=queued)


__all__ = ["WaitingMessage", "waiting"]
