"""Field tables as the wire would carry them: private copies, normalised values.

A table the broker stores is copied on the way in (the publisher may mutate its dict) and on
the way out (a consumer may mutate what it got). On the way in its keys are sorted, at every
level, because that is what reaches the server: the client (pamqp) encodes tables sorted.
Values are normalised to what a client decodes from the wire: a ``datetime`` becomes whole
seconds in UTC (an AMQP timestamp), ``bytearray`` becomes ``bytes``, tuples become lists.

Names are checked as the client library checks them before it sends a frame
(:func:`name_problem`, :func:`routing_key_problem`): what it refuses never reaches a server.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime
from functools import lru_cache

from rabbitctl_retry.fields import FieldTable, FieldValue
from rabbitctl_retry.transport.base import Properties


def copy_table(table: Mapping[str, FieldValue]) -> FieldTable:
    """A deep copy of ``table`` with wire-normalised values, keys in the same order."""
    return {key: _copy_value(value, False) for key, value in table.items()}


def wire_table(table: Mapping[str, FieldValue]) -> FieldTable:
    """``table`` as the server receives it from a client: a deep copy with every table's keys
    sorted (pamqp encodes tables sorted; the server keeps that order)."""
    return {key: _copy_value(table[key], True) for key in sorted(table)}


def _copy_value(value: object, sort: bool) -> FieldValue:
    if isinstance(value, str | int | float | bytes) or value is None:
        return value
    if isinstance(value, dict):
        keys = sorted(value) if sort else value
        return {str(k): _copy_value(value[k], sort) for k in keys}
    if isinstance(value, list | tuple):
        return [_copy_value(v, sort) for v in value]
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


def with_message_id(p: Properties, message_id: str) -> Properties:
    """``p`` with another ``message_id`` (hot path, as :func:`with_headers`)."""
    return Properties(
        content_type=p.content_type,
        content_encoding=p.content_encoding,
        headers=p.headers,
        delivery_mode=p.delivery_mode,
        priority=p.priority,
        correlation_id=p.correlation_id,
        reply_to=p.reply_to,
        expiration=p.expiration,
        message_id=message_id,
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
