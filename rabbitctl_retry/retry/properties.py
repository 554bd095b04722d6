"""Pure. The message properties, and the one rule for which of them a copy keeps.

Every copy rr publishes of a message it read (a retry or dead-letter copy of ``rr run``, a
replayed or moved dead letter) keeps :data:`COPIED_PROPERTIES` and sets its own headers. Two
properties never travel with a copy:

* ``expiration``: RabbitMQ removes it when it dead-letters a message; one still set would make
  the copy expire again (a retry copy that waits in a TTL queue sets its own);
* ``user_id``: RabbitMQ refuses a publish whose ``user_id`` is not the connection's user and
  closes the channel.

A retry copy is also made persistent; a replayed or moved one keeps the message's
``delivery_mode``. The rule stays here, in the core, since ``dlq/`` reads the property names;
a copy's properties are built by ``ops/copies/properties.py``.
"""

from __future__ import annotations

PROPERTY_NAMES = (
    "content_type",
    "content_encoding",
    "delivery_mode",
    "priority",
    "correlation_id",
    "reply_to",
    "expiration",
    "message_id",
    "timestamp",
    "type",
    "user_id",
    "app_id",
)
"""Every basic property but ``headers``, by the transport port's names."""

NOT_COPIED = frozenset({"expiration", "user_id"})

COPIED_PROPERTIES = tuple(name for name in PROPERTY_NAMES if name not in NOT_COPIED)
"""The properties a copy keeps (see the module doc)."""
