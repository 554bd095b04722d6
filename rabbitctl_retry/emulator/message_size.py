"""How many bytes a message's basic properties take in its content header, as the publishing
client encodes them (a computation, no I/O): what a RabbitMQ 4.3 quorum queue counts toward
``x-max-length-bytes`` beside the body (``releases.ServerRelease.quorum_message_bytes``).

The size is the property flags (2 bytes: the 13 basic properties never need a second flags
word) and each property present: a short string its length + 1, an octet (``delivery_mode``,
``priority``) 1, a timestamp 8, the headers table its encoded fields + 4. A property the
codec could not decode keeps the bytes it came in (``raw``). Measured on 4.3.6 by
``scripts/measure_quorum_bytes.py``; docs/reference/testing.md, "What the emulator models".
"""

from __future__ import annotations

from rabbitctl_retry.field_codec import encode_table
from rabbitctl_retry.transport.base import Properties

FLAGS_BYTES = 2
"""The property flags word."""
SHORT_STRINGS = (
    "content_type",
    "content_encoding",
    "correlation_id",
    "reply_to",
    "expiration",
    "message_id",
    "type",
    "user_id",
    "app_id",
)
"""The basic properties that are AMQP short strings (length octet, then the UTF-8 bytes)."""
OCTETS = ("delivery_mode", "priority")
TIMESTAMP_BYTES = 8


def property_bytes(properties: Properties) -> int:
    """The bytes ``properties`` take in a content header after the body size: flags, then
    each property present, as rr's client (and aiormq, pika) encode them."""
    if properties.raw is not None:
        return len(properties.raw)
    size = FLAGS_BYTES
    for name in SHORT_STRINGS:
        value = getattr(properties, name)
        if value is not None:
            size += 1 + len(str(value).encode())
    size += sum(1 for name in OCTETS if getattr(properties, name) is not None)
    if properties.timestamp is not None:
        size += TIMESTAMP_BYTES
    if properties.headers is not None:
        size += len(encode_table(properties.headers))
    return size
