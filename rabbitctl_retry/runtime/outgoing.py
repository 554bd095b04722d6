"""One message to publish, built from a typed value and the options of a publish: the
one rule of :class:`rabbitctl_retry.Publisher` and of a handler's outputs
(docs/reference/publishing.md).

The body and its ``content_type`` come from the value's type (``runtime/encoding.py``); the
message goes to queue ``to`` (through the default exchange) or to ``exchange`` with
``routing_key``; it is persistent unless told otherwise, stamped with the time (whole
seconds), and carries a ``message_id``: the one given, else the caller's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypedDict

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


class PublishOptions(TypedDict, total=False):
    """What a publish may say besides the message (docs/reference/publishing.md): ``rr.Publisher``'s
    and a handler's ``Outputs``'."""

    to: str
    """A queue: the message goes through the default exchange."""
    exchange: str
    routing_key: str
    message_id: str
    """Else a fresh UUID (a publisher's) or one derived from the original (an output's)."""
    headers: Mapping[str, FieldValue]
    content_type: str
    """Else the encoding's (``runtime/encoding.py``)."""
    content_encoding: str
    persistent: bool
    """``delivery_mode`` 2 (the default) or 1."""
    priority: int
    correlation_id: str
    reply_to: str
    expiration: str
    timestamp: datetime
    """Else now, in whole seconds."""
    type: str
    user_id: str
    app_id: str


_ADDRESS = ("to", "exchange", "routing_key", "message_id", "headers", "content_type", "persistent")
"""The options :func:`outgoing` reads itself; the others are message properties as named."""


def outgoing(message: object, *, message_id: str, options: PublishOptions) -> Outgoing:
    """``message`` encoded and addressed (module doc), with ``message_id`` unless ``options``
    name one; :class:`TypeError` for a target given twice or not at all (or an option that
    is not one), :class:`~rabbitctl_retry.runtime.encoding.EncodeFailure` for a value rr
    cannot encode."""
    to = options.get("to")
    exchange = options.get("exchange", "")
    routing_key = options.get("routing_key")
    if (to is None) == (routing_key is None):
        raise TypeError("give to=QUEUE, or exchange= with routing_key=, not both")
    if to is not None and exchange:
        raise TypeError("to= publishes through the default exchange: give routing_key=")
    body, encoded_type = encode(message)
    properties: dict[str, Any] = {k: v for k, v in options.items() if k not in _ADDRESS}
    if properties.get("timestamp") is None:
        properties["timestamp"] = datetime.now(UTC).replace(microsecond=0)
    headers = options.get("headers")
    sent = Properties(
        content_type=options.get("content_type") or encoded_type,
        headers=dict(headers) if headers else None,
        delivery_mode=PERSISTENT if options.get("persistent", True) else TRANSIENT,
        message_id=options.get("message_id") or message_id,
        **properties,
    )
    key = to if to is not None else routing_key
    assert key is not None
    return Outgoing(body, exchange, key, sent)
