"""Pure. The file format of ``rr dlq export`` and ``rr dlq import``: JSON Lines.

One JSON object per line, one line per message, in queue order::

    {"body": "eyJpZCI6IDF9", "body_size": 9, "exchange": "", "routing_key": "refunds.dead",
     "redelivered": false,
     "properties": {"message_id": "r-1", "timestamp": "2024-05-01T10:00:00+00:00", ...},
     "headers": {"x-death": [{"count": 1, "time": {"$timestamp": "2024-05-01T10:00:00+00:00"},
                              ...}], "x-ruststream-retry-count": "5"}}

* ``body`` is base64 of the exact bytes; ``body_size`` their number (checked on import).
* ``properties`` holds every property that is set, except ``headers``; ``timestamp`` as
  ISO 8601.
* ``headers`` keeps each value's type, so an import restores it exactly: strings, integers,
  floats, booleans and null are plain JSON; values JSON cannot hold exactly are tagged:
  ``{"$bytes": BASE64}`` (a byte array), ``{"$timestamp": ISO 8601}`` (an AMQP timestamp);
  lists and tables nest. A table that itself has exactly one key starting with ``$`` is
  wrapped as ``{"$table": {...}}``, so it is never read as a tag.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from rabbitctl_retry.dlq.origin import parse_time
from rabbitctl_retry.errors import DataError
from rabbitctl_retry.retry.headers import HeaderValue

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

_INT_PROPERTIES = frozenset({"delivery_mode", "priority"})

PropertyValue = str | int | datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class Record:
    """One message of an export file."""

    body: bytes
    exchange: str = ""
    routing_key: str = ""
    redelivered: bool = False
    properties: Mapping[str, PropertyValue] = field(default_factory=dict)
    """The set properties (not ``headers``), by :data:`PROPERTY_NAMES`."""
    headers: Mapping[str, HeaderValue] | None = None


def encode_value(value: HeaderValue) -> Any:
    """A header value as type-preserving JSON (see the module doc)."""
    if isinstance(value, bytes):
        return {"$bytes": base64.b64encode(value).decode("ascii")}
    if isinstance(value, datetime):
        return {"$timestamp": value.isoformat()}
    if isinstance(value, list):
        return [encode_value(item) for item in value]
    if isinstance(value, dict):
        table = {key: encode_value(item) for key, item in value.items()}
        if len(table) == 1 and next(iter(table)).startswith("$"):
            return {"$table": table}
        return table
    return value


def decode_value(value: Any, where: str) -> HeaderValue:
    """The inverse of :func:`encode_value`; :class:`DataError` naming ``where`` if malformed."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, list):
        return [decode_value(item, f"{where}[{index}]") for index, item in enumerate(value)]
    if not isinstance(value, dict):
        raise DataError(f"{where}: {type(value).__name__} is not a header value")
    if len(value) == 1:
        ((tag, inner),) = value.items()
        if tag == "$bytes":
            return _base64(inner, where)
        if tag == "$timestamp":
            if not isinstance(inner, str) or (parsed := parse_time(inner)) is None:
                raise DataError(f"{where}: $timestamp must be an ISO 8601 time, not {inner!r}")
            return parsed
        if tag == "$table":
            if not isinstance(inner, dict):
                raise DataError(f"{where}: $table must hold an object")
            return {key: decode_value(item, f"{where}.{key}") for key, item in inner.items()}
        if tag.startswith("$"):
            raise DataError(f"{where}: unknown tag {tag!r} (known: $bytes, $timestamp, $table)")
    return {key: decode_value(item, f"{where}.{key}") for key, item in value.items()}


def _base64(value: object, where: str) -> bytes:
    if not isinstance(value, str):
        raise DataError(f"{where}: base64 text expected, not {type(value).__name__}")
    try:
        return base64.b64decode(value.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError):
        raise DataError(f"{where}: not valid base64") from None


def record_document(record: Record) -> dict[str, Any]:
    """One export line's object."""
    properties: dict[str, Any] = {}
    for name in PROPERTY_NAMES:
        value = record.properties.get(name)
        if value is None:
            continue
        properties[name] = value.isoformat() if isinstance(value, datetime) else value
    return {
        "body": base64.b64encode(record.body).decode("ascii"),
        "body_size": len(record.body),
        "exchange": record.exchange,
        "routing_key": record.routing_key,
        "redelivered": record.redelivered,
        "properties": properties,
        "headers": {key: encode_value(value) for key, value in (record.headers or {}).items()},
    }


def record_line(record: Record) -> str:
    """One export line, without the line break."""
    return json.dumps(record_document(record), ensure_ascii=False, separators=(",", ":"))


def parse_record(line: str, where: str) -> Record:
    """One line of an export file; :class:`DataError` (exit 65) naming ``where`` if bad."""
    try:
        document = json.loads(line)
    except ValueError as error:
        raise DataError(f"{where}: not JSON ({error})") from None
    if not isinstance(document, dict):
        raise DataError(f"{where}: a JSON object per line expected")
    if "body" not in document:
        raise DataError(f"{where}: no 'body'")
    body = _base64(document["body"], f"{where}: body")
    size = document.get("body_size")
    if size is not None and size != len(body):
        raise DataError(
            f"{where}: body_size says {size} bytes but the body holds {len(body)}: "
            "the file is damaged"
        )
    properties: dict[str, PropertyValue] = {}
    raw_properties = document.get("properties") or {}
    if not isinstance(raw_properties, dict):
        raise DataError(f"{where}: 'properties' must be an object")
    for name, value in raw_properties.items():
        properties[name] = _property(name, value, where)
    raw_headers = document.get("headers")
    if raw_headers is not None and not isinstance(raw_headers, dict):
        raise DataError(f"{where}: 'headers' must be an object")
    headers = (
        {key: decode_value(value, f"{where}: headers.{key}") for key, value in raw_headers.items()}
        if raw_headers
        else None
    )
    exchange = document.get("exchange", "")
    routing_key = document.get("routing_key", "")
    redelivered = document.get("redelivered", False)
    if not isinstance(exchange, str) or not isinstance(routing_key, str):
        raise DataError(f"{where}: 'exchange' and 'routing_key' must be strings")
    if not isinstance(redelivered, bool):
        raise DataError(f"{where}: 'redelivered' must be true or false")
    return Record(
        body=body,
        exchange=exchange,
        routing_key=routing_key,
        redelivered=redelivered,
        properties=properties,
        headers=headers,
    )


def _property(name: str, value: object, where: str) -> PropertyValue:
    if name not in PROPERTY_NAMES:
        known = ", ".join(PROPERTY_NAMES)
        raise DataError(f"{where}: unknown property {name!r} (known: {known})")
    if name == "timestamp":
        parsed = parse_time(value) if isinstance(value, str) else None
        if parsed is None:
            raise DataError(f"{where}: timestamp must be an ISO 8601 time, not {value!r}")
        return parsed
    if name in _INT_PROPERTIES:
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 255:
            raise DataError(f"{where}: {name} must be an integer 0-255, not {value!r}")
        return value
    if not isinstance(value, str):
        raise DataError(f"{where}: {name} must be a string, not {value!r}")
    return value
