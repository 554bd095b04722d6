"""Field tables as the wire would carry them: private copies, normalised values.

A table the broker stores is copied on the way in (the publisher may mutate its dict) and on
the way out (a consumer may mutate what it got). Arguments are copied with their values
normalised to what a client decodes from the wire: a ``datetime`` becomes whole seconds in
UTC (an AMQP timestamp), ``bytearray`` becomes ``bytes``, tuples become lists.

A message's headers travel as bytes, as on the wire (docs/reference/testing.md, "Headers"): the
client writes them with rr's codec (:func:`client_table`: each value read keeps its type tag and
bytes, a new one is typed by its Python type, in the table's order), the server keeps them as
RabbitMQ does (:func:`server_table`), and a consumer gets an ``EncodedTable`` read from them.

Names are checked as the client library checks them before it sends a frame
(:func:`name_problem`, :func:`routing_key_problem`): what it refuses never reaches a server.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime
from functools import lru_cache

from rabbitctl_retry.field_codec import (
    RawField,
    decode_fields,
    encode_fields,
    encode_value,
    join_fields,
    join_items,
    raw_fields,
    raw_items,
    sized,
)
from rabbitctl_retry.fields import EncodedTable, FieldTable, FieldValue
from rabbitctl_retry.transport.base import Properties


def copy_table(table: Mapping[str, FieldValue]) -> FieldTable:
    """A deep copy of ``table`` with wire-normalised values, keys in the same order."""
    return {key: _copy_value(value) for key, value in table.items()}


def client_table(headers: Mapping[str, FieldValue]) -> EncodedTable:
    """``headers`` as a client of the port writes them and the server reads them: rr's codec
    (``field_codec.py``; a value it cannot write raises ``TypeError`` or ``ValueError``)."""
    return decode_fields(encode_fields(headers))


def server_table(headers: Mapping[str, FieldValue], *, sort: bool) -> EncodedTable:
    """A table as RabbitMQ writes it again once it read it (measured on 3.10.8, 4.0.5 and
    4.3.6; docs/reference/testing.md, "Headers"): each value as it was, but every unsigned 64-bit
    ``L`` as a signed ``l`` with the same bytes, at every depth; a value the server adds typed as
    it types one (:func:`server_value`); with ``sort``, the top-level names sorted (nested
    tables keep their order), as when the server adds a header to the table."""
    fields = raw_fields(encode_fields(headers, server_value))
    kept = [(name, _signed_longs(field)) for name, field in fields]
    if sort:
        kept.sort(key=lambda item: item[0].encode())
    return decode_fields(join_fields(kept))


def server_value(value: object) -> bytes:
    """A value the server writes of its own (``x-death`` and its entries, ``x-delivery-count``,
    ``x-first-death-*``): integers as signed 64-bit ``l``, text and binaries as long strings,
    times as timestamps, lists as arrays, tables as tables."""
    if isinstance(value, bool):
        return b"t\x01" if value else b"t\x00"
    if isinstance(value, int):
        return b"l" + value.to_bytes(8, "big", signed=True)
    if isinstance(value, str | bytes):
        raw = value.encode() if isinstance(value, str) else value
        return sized("S", raw).encoded()
    if isinstance(value, Mapping):
        return sized("F", encode_fields(value, server_value)).encoded()
    if isinstance(value, list | tuple):
        return sized("A", b"".join(server_value(item) for item in value)).encoded()
    return encode_value(value)  # any other type as a client writes it


def _signed_longs(field: RawField) -> RawField:
    if field.tag == "L":
        return RawField("l", field.data)
    if field.tag == "F":
        inner = [(name, _signed_longs(each)) for name, each in raw_fields(field.content)]
        return sized("F", join_fields(inner))
    if field.tag == "A":
        return sized("A", join_items(_signed_longs(each) for each in raw_items(field.content)))
    return field


def copy_headers(headers: FieldTable) -> FieldTable:
    """A private copy of stored headers, for a consumer: read again from their bytes."""
    if isinstance(headers, EncodedTable):
        return decode_fields(headers.encoded)
    return copy_table(headers)


def _copy_value(value: object) -> FieldValue:
    if isinstance(value, str | int | float | bytes) or value is None:
        return value
    if isinstance(value, dict):
        return {str(k): _copy_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_copy_value(v) for v in value]
    if isinstance(value, datetime):
        return timestamp(value)
    if isinstance(value, bytearray | memoryview):
        return bytes(value)
    raise TypeError(f"cannot put {type(value).__name__} in an AMQP field table: {value!r}")


def timestamp(value: datetime) -> datetime:
    """``value`` as an AMQP timestamp decodes: whole seconds, aware UTC (naive means UTC)."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC).replace(microsecond=0)


MAX_DELAY_MS = 4_294_967_295
"""The delayed-message exchange delays only ``0 < x-delay <= 2**32 - 1`` (Erlang's timer)."""


MAX_EXPIRATION_MS = 10 * 365 * 24 * 60 * 60 * 1000
"""The longest per-message TTL RabbitMQ takes: ten years (measured on 3.10.8 and 4.0.5)."""


def parse_expiration(expiration: str | None) -> int | None:
    """The per-message TTL in ms from the ``expiration`` property; None when absent.

    Raises :class:`ValueError` with the server's reason (``no_integer``,
    ``{value_negative,-5}``, ``{value_too_large,N}``) for anything but a decimal integer from 0
    to :data:`MAX_EXPIRATION_MS`.
    """
    if expiration is None:
        return None
    text = expiration.strip()
    digits = text[1:] if text[:1] in ("+", "-") else text
    if not digits.isdigit() or not digits.isascii():
        raise ValueError("no_integer")
    value = int(text)
    if value < 0:
        raise ValueError(f"{{value_negative,{value}}}")
    if value > MAX_EXPIRATION_MS:
        raise ValueError(f"{{value_too_large,{value}}}")
    return value


def parse_delay_ms(headers: Mapping[str, FieldValue] | None) -> int | None:
    """The ``x-delay`` a delayed-message exchange honours, or None (route at once).

    Integers count; a numeric string or a float is converted, as the plugin does.
    """
    if not headers or "x-delay" not in headers:
        return None
    value = headers["x-delay"]
    delay: int
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        delay = value
    elif isinstance(value, float):
        delay = int(value)
    elif isinstance(value, str):
        try:
            delay = int(value)
        except ValueError:
            return None
    else:
        return None
    return delay if 0 < delay <= MAX_DELAY_MS else None


def with_headers(p: Properties, headers: FieldTable | None) -> Properties:
    """``p`` with other headers (``dataclasses.replace`` costs twice as much: hot path)."""
    return Properties(
        content_type=p.content_type,
        content_encoding=p.content_encoding,
        headers=headers,
        delivery_mode=p.delivery_mode,
        priority=p.priority,
        correlation_id=p.correlation_id,
        reply_to=p.reply_to,
        expiration=p.expiration,
        message_id=p.message_id,
        timestamp=p.timestamp,
        type=p.type,
        user_id=p.user_id,
        app_id=p.app_id,
        undecodable=p.undecodable,
        raw=p.raw,
    )


_NAME = re.compile("^[a-zA-Z0-9-_.:@#,/+ \u0080-\ud7ff\ue000-\U0010ffff]*$")
"""pamqp's ``DOMAIN_REGEX`` for exchange and queue names (stricter than the server), as
``transport/amqp.py`` widens it: non-ASCII characters too."""

MAX_NAME_LENGTH = 256
"""pamqp refuses a longer exchange or queue name."""

MAX_ROUTING_KEY_LENGTH = 255
"""aiormq refuses to publish with a longer routing key."""


@lru_cache(maxsize=4096)  # publish checks its exchange every time: names repeat
def name_problem(field: str, name: str) -> str | None:
    """Why the client refuses ``name`` as the ``field`` (``"queue"``, ``"exchange"``) of a
    frame, in its words, or None: at most 256 characters from ``[a-zA-Z0-9-_.:@#,/+ ]``."""
    if len(name) > MAX_NAME_LENGTH:
        return f"Max length exceeded for {field}"
    if not _NAME.fullmatch(name):
        return f"Invalid value for {field}"
    return None


def routing_key_problem(routing_key: str) -> str | None:
    """Why aiormq refuses to publish with ``routing_key``, or None."""
    if len(routing_key) > MAX_ROUTING_KEY_LENGTH:
        return "Routing key too long (max 255 bytes)"
    return None
