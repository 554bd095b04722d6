"""One message to publish, built from a typed value and the options of a publish: the
one rule of :class:`rabbitctl_retry.Publisher` and of a handler's outputs
(docs/publishing.md).

The body and its ``content_type`` come from the value's type (``runtime/encoding.py``); the
message goes to queue ``to`` (through the default exchange) or to ``exchange`` with
``routing_key``; it is persistent unless told otherwise, stamped with the time (whole
seconds), and carries a ``message_id``: the one given, else the caller's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from rabbitctl_retry.fields import FieldValue
from rabbitctl_retry.runtime.encoding import encode
from rabbitctl_retry.transport.base import Properties

PERSISTENT = 2
TRANSIENT = 1


@dataclass(frozen=True, slots=True)
class Outgoing:
    """A message ready for ``basic.publish`` (always ``mandatory``)."""

    body: bytes
    exchange: str
    routing_key: str
    properties: Properties

    @property
    def message_id(self) -> str:
        assert self.properties.message_id is not None
        return self.properties.message_id

    @property
    def destination(self) -> str:
        """Where it goes, as rr's reports name it: the exchange, or the queue."""
        return self.exchange or self.routing_key


def outgoing(
    message: object,
    *,
    message_id: str,
    to: str | None,
    exchange: str,
    routing_key: str | None,
    headers: Mapping[str, FieldValue] | None,
    content_type: str | None,
    persistent: bool,
    properties: dict[str, Any],
) -> Outgoing:
    """``message`` encoded and addressed (module doc); :class:`TypeError` for a target given
    twice or not at all, :class:`~rabbitctl_retry.runtime.encoding.EncodeFailure` for a value
    rr cannot encode. ``properties``: any other message property (``correlation_id``,
    ``expiration``, ``type``...), consumed."""
    if (to is None) == (routing_key is None):
        raise TypeError("give to=QUEUE, or exchange= with routing_key=, not both")
    if to is not None and exchange:
        raise TypeError("to= publishes through the default exchange: give routing_key=")
    body, encoded_type = encode(message)
    timestamp = properties.pop("timestamp", None) or datetime.now(UTC).replace(microsecond=0)
    sent = Properties(
        content_type=content_type or encoded_type,
        headers=dict(headers) if headers else None,
        delivery_mode=PERSISTENT if persistent else TRANSIENT,
        message_id=message_id,
        timestamp=timestamp,
        **properties,
    )
    key = to if to is not None else routing_key
    assert key is not None
    return Outgoing(body, exchange, key, sent)
