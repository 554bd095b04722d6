"""Pure. The file format of ``rr dlq export`` and ``rr dlq import``: JSON Lines.

One JSON object per line, one line per message, in queue order::

    {"body": "eyJpZCI6IDF9", "body_size": 9, "exchange": "", "routing_key": "refunds.dead",
     "redelivered": false,
     "properties": {"message_id": "r-1", "timestamp": "2024-05-01T10:00:00+00:00", ...},
     "headers": {"x-death": [{"count": {"$int64": 1},
                              "time": {"$timestamp": "2024-05-01T10:00:00+00:00"}, ...}],
                 "x-ruststream-retry-count": "5"}}

* ``body`` is base64 of the exact bytes; ``body_size`` their number (checked on import).
* ``properties`` holds every property that is set, except ``headers``; ``timestamp`` as
  ISO 8601.
* ``headers`` records each value's AMQP type, in the table's order, so that an import writes
  every header with the type tag and bytes it was exported with (docs/reference/dlq.md, "Export
  format"): a UTF-8 long string is a JSON string, a boolean ``true``/``false``, void
  ``null``, a double a JSON number; the other types are tagged: ``{"$int8": N}``,
  ``$uint8``, ``$int16``, ``$uint16``, ``$int32``, ``$uint32``, ``$int64``, ``$uint64``,
  ``{"$float": N}`` (32-bit), ``{"$decimal": "1.50"}`` (its scale kept), ``{"$bytes":
  BASE64}`` (a byte array), ``{"$longstr": BASE64}`` (a long string that is not UTF-8),
  ``{"$timestamp": ISO 8601}`` (whole seconds; a number of seconds past 2**32 - 1);
  ``{"$double": "NaN"}`` (and ``"Infinity"``, ``"-Infinity"``, for either float). Arrays
  and tables nest. A table that itself has exactly one key starting with ``$`` is wrapped as
  ``{"$table": {...}}``, so it is never read as a tag.
* Files written before the typed format (no ``$int8``... tags; read as before): a plain JSON
  integer is written as the smallest integer type that holds it, a JSON number with a
  fraction as a double, ``$bytes``, ``$timestamp`` and ``$table`` as above.

Lines are written with every character a terminal could act on (C0 and C1 controls, DEL, bidi
controls, U+2028/U+2029, lone surrogates) as a ``\\uXXXX`` escape: the same JSON value, and a
file that ``cat`` shows as it is (:func:`~rabbitctl_retry.json_text.escape_unsafe`).

Before ``rr dlq import`` publishes anything, :func:`record_problem` checks every line for what
RabbitMQ or the AMQP client would refuse (docs/reference/dlq.md, "Import"): a message refused
half-way would leave the file half imported.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal, InvalidOperation
from typing import Any

from rabbitctl_retry.dlq.origin import parse_time
from rabbitctl_retry.errors import DataError
from rabbitctl_retry.field_codec import (
    DECIMAL_LAYOUT,
    DOUBLE_LAYOUT,
    EPOCH,
    FLOAT_LAYOUT,
    INTEGER_LAYOUTS,
    TIMESTAMP_LAYOUT,
    RawField,
    decode_fields,
    encode_fields,
    name_bytes,
    raw_fields,
    raw_items,
    sized,
)
from rabbitctl_retry.field_codec import (
    encode_value as encode_field,
)
from rabbitctl_retry.fields import EncodedTable, FieldTable, FieldValue
from rabbitctl_retry.json_text import escape_unsafe
from rabbitctl_retry.retry.properties import PROPERTY_NAMES

_INT_PROPERTIES = frozenset({"delivery_mode", "priority"})

SHORT_STRING_MAX_BYTES = 255
"""AMQP short strings (string properties, routing keys, queue names) hold at most 255 bytes."""

HEADER_KEY_MAX_BYTES = 255
"""Header names are AMQP short strings: at most 255 bytes (rr writes them whole)."""

HEADER_MAX_DEPTH = 100
"""Header tables and arrays nest at most this deep (``x-death`` entries are 3 levels)."""

EXPIRATION_MAX_MS = 4_294_967_295
"""RabbitMQ takes an ``expiration`` of 0 to 2**32 - 1 ms (a decimal integer string)."""

_INT64 = range(-(2**63), 2**63)
_READ_INTEGERS = range(-(2**63), 2**64)
"""The integers a header read with its bytes may hold (``L``: unsigned 64-bit)."""
_TIMESTAMP_S = range(2**64)
"""An AMQP timestamp: unsigned 64-bit seconds since the Unix epoch."""
_EXPIRATION = re.compile(r"[+-]?[0-9]+")

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
    headers: Mapping[str, FieldValue] | None = None


def encode_value(value: FieldValue) -> Any:
    """A plain header value as JSON, as older files hold it (``$bytes``, ``$timestamp``,
    ``$table``; no AMQP types)."""
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


def decode_value(value: Any, where: str) -> FieldValue:
    """A header value of the export as a plain value (the inverse of :func:`encode_value`;
    typed values as a handler would see them); :class:`DataError` naming ``where`` if
    malformed."""
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
        if tag == "$timestamp" and isinstance(inner, str):
            if (parsed := parse_time(inner)) is None:
                raise DataError(f"{where}: $timestamp must be an ISO 8601 time, not {inner!r}")
            return parsed
        if tag == "$table":
            if not isinstance(inner, dict):
                raise DataError(f"{where}: $table must hold an object")
            return {
                key: decode_value(item, f"{where}.{field_name(key)}") for key, item in inner.items()
            }
        if tag.startswith("$"):
            tagged = _tagged_bytes(value, where)  # DataError for an unknown or malformed tag
            assert tagged is not None
            return _plain(tagged, where)
    return {key: decode_value(item, f"{where}.{field_name(key)}") for key, item in value.items()}


def _base64(value: object, where: str) -> bytes:
    if not isinstance(value, str):
        raise DataError(f"{where}: base64 text expected, not {type(value).__name__}")
    try:
        return base64.b64decode(value.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError):
        raise DataError(f"{where}: not valid base64") from None


# --------------------------------------------------------------------------- typed headers

INTEGER_TAGS = {
    name: (tag, INTEGER_LAYOUTS[tag])
    for name, tag in (
        ("$int8", "b"),
        ("$uint8", "B"),
        ("$int16", "s"),
        ("$uint16", "u"),
        ("$int32", "I"),
        ("$uint32", "i"),
        ("$int64", "l"),
        ("$uint64", "L"),
    )
}
"""The export's tag of each AMQP integer type (module doc), with its tag and layout."""
_INTEGER_NAMES = {tag: name for name, (tag, _) in INTEGER_TAGS.items()}
_TAGS = (*INTEGER_TAGS, "$float", "$double", "$decimal", "$bytes", "$longstr", "$timestamp")
_NOT_FINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
_SECONDS_SHOWN_AS_TIME = 0xFFFFFFFF
"""A timestamp is exported as an ISO 8601 time up to 2**32 - 1 seconds (as it reads), as its
number of seconds past it."""


def headers_document(headers: Mapping[str, FieldValue]) -> dict[str, Any]:
    """The export's ``headers``: each value by its AMQP type, from the bytes the table goes
    out as (``field_codec.py``: a table read from the wire is written as it came). A table
    the client could not write (it would not reach a broker either) is written as plain
    values, as older files hold them."""
    try:
        fields = encode_fields(headers)
    except (TypeError, ValueError, OverflowError, RecursionError):
        return {key: encode_value(value) for key, value in headers.items()}
    document = _table_document(fields)
    return document["$table"] if "$table" in document and len(document) == 1 else document


def _table_document(fields: bytes) -> dict[str, Any]:
    table = {name: _value_document(raw) for name, raw in raw_fields(fields)}
    if len(table) == 1 and next(iter(table)).startswith("$"):
        return {"$table": table}
    return table


def _value_document(raw: RawField) -> Any:
    tag, data = raw.tag, raw.content
    if tag == "S":
        try:
            return data.decode()
        except UnicodeDecodeError:
            return {"$longstr": base64.b64encode(data).decode("ascii")}
    if tag == "x":
        return {"$bytes": base64.b64encode(data).decode("ascii")}
    if tag == "t":
        return data != b"\x00"
    if tag == "V":
        return None
    integer = _INTEGER_NAMES.get(tag)
    if integer is not None:
        return {integer: INTEGER_TAGS[integer][1].unpack(data)[0]}
    if tag == "d":
        value = DOUBLE_LAYOUT.unpack(data)[0]
        return value if math.isfinite(value) else {"$double": _not_finite(value)}
    if tag == "f":
        value = FLOAT_LAYOUT.unpack(data)[0]
        return {"$float": value if math.isfinite(value) else _not_finite(value)}
    if tag == "D":
        scale, unscaled = DECIMAL_LAYOUT.unpack(data)
        return {"$decimal": str(Decimal(unscaled).scaleb(-scale))}
    if tag == "T":
        (seconds,) = TIMESTAMP_LAYOUT.unpack(data)
        if seconds > _SECONDS_SHOWN_AS_TIME:
            return {"$timestamp": seconds}
        return {"$timestamp": (EPOCH + timedelta(seconds=seconds)).isoformat()}
    if tag == "F":
        return _table_document(data)
    return [_value_document(item) for item in raw_items(data)]  # A


def _not_finite(value: float) -> str:
    return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")


class _Unencodable(Exception):
    """A plain value of an older file that AMQP cannot carry: :func:`record_problem` says
    what, once the record is read as plain values."""


def headers_of_document(document: Mapping[str, Any], where: str) -> FieldTable:
    """The headers of an export's ``headers`` object: with the type tag and bytes each value
    was exported with (an ``EncodedTable``); as plain values when one cannot be written (an
    older file's integer past 64 bits, ...: :func:`record_problem` names it)."""
    try:
        fields = b"".join(
            _name(key) + _value_bytes(value, f"{where}.{field_name(key)}")
            for key, value in document.items()
        )
    except _Unencodable:
        return {
            key: decode_value(value, f"{where}.{field_name(key)}")
            for key, value in document.items()
        }
    return decode_fields(fields)


def _name(key: str) -> bytes:
    try:
        return name_bytes(key)
    except (TypeError, ValueError):
        raise _Unencodable from None


def _value_bytes(value: Any, where: str) -> bytes:
    """One header value of the export as its AMQP tag and bytes (module doc)."""
    if isinstance(value, list):
        return sized(
            "A", b"".join(_value_bytes(item, f"{where}[{i}]") for i, item in enumerate(value))
        ).encoded()
    if isinstance(value, dict):
        tagged = _tagged_bytes(value, where)
        if tagged is not None:
            return tagged
        inner = value["$table"] if len(value) == 1 and "$table" in value else value
        if not isinstance(inner, dict):
            raise DataError(f"{where}: $table must hold an object")
        return sized(
            "F",
            b"".join(
                _name(key) + _value_bytes(item, f"{where}.{field_name(key)}")
                for key, item in inner.items()
            ),
        ).encoded()
    if value is None or isinstance(value, bool | int | float | str):
        try:
            return encode_field(value)
        except (TypeError, ValueError, OverflowError):
            raise _Unencodable from None
    raise DataError(f"{where}: {type(value).__name__} is not a header value")


def _tagged_bytes(value: dict[str, Any], where: str) -> bytes | None:
    """A tagged value (``{"$int32": 7}``) as its tag and bytes; ``None`` for a table."""
    if len(value) != 1:
        return None
    ((tag, inner),) = value.items()
    if tag == "$table" or not tag.startswith("$"):
        return None
    integer = INTEGER_TAGS.get(tag)
    if integer is not None:
        amqp, layout = integer
        if isinstance(inner, bool) or not isinstance(inner, int):
            raise DataError(f"{where}: {tag} must hold an integer, not {inner!r}")
        try:
            return amqp.encode() + layout.pack(inner)
        except struct.error:
            raise DataError(f"{where}: {_integer(inner)} does not fit {tag}") from None
    if tag in ("$float", "$double"):
        number = _NOT_FINITE.get(inner) if isinstance(inner, str) else inner
        if isinstance(number, bool) or not isinstance(number, int | float):
            raise DataError(f"{where}: {tag} must hold a number, not {inner!r}")
        try:
            return (
                b"f" + FLOAT_LAYOUT.pack(number)
                if tag == "$float"
                else b"d" + DOUBLE_LAYOUT.pack(number)
            )
        except (OverflowError, struct.error):
            raise DataError(f"{where}: {inner!r} does not fit {tag}") from None
    if tag == "$decimal":
        return b"D" + _decimal(inner, where)
    if tag == "$bytes":
        return sized("x", _base64(inner, where)).encoded()
    if tag == "$longstr":
        return sized("S", _base64(inner, where)).encoded()
    if tag == "$timestamp":
        return b"T" + TIMESTAMP_LAYOUT.pack(_seconds(inner, where))
    known = ", ".join((*_TAGS, "$table"))
    raise DataError(f"{where}: unknown tag {tag!r} (known: {known})")


def _decimal(value: object, where: str) -> bytes:
    """An AMQP decimal: a scale of 0 to 255 and an unsigned 32-bit value (as RabbitMQ reads
    it), from its text: ``"1.50"`` is 150 at scale 2."""
    try:
        number = Decimal(value) if isinstance(value, str) else None
    except InvalidOperation:
        number = None
    exponent = number.as_tuple().exponent if number is not None else None
    if number is None or not isinstance(exponent, int) or number < 0:
        raise DataError(f"{where}: $decimal must hold a decimal number as text, not {value!r}")
    scale = max(0, -exponent)
    unscaled = int(number.scaleb(scale))
    if scale > 255 or unscaled > 0xFFFFFFFF:
        raise DataError(f"{where}: {value!r} does not fit an AMQP decimal")
    return DECIMAL_LAYOUT.pack(scale, unscaled)


def _seconds(value: object, where: str) -> int:
    """A timestamp's seconds: from an ISO 8601 time, or a number of seconds."""
    if isinstance(value, int) and not isinstance(value, bool):
        if value not in _TIMESTAMP_S:
            raise DataError(f"{where}: {_integer(value)} seconds do not fit an AMQP timestamp")
        return value
    parsed = parse_time(value) if isinstance(value, str) else None
    if parsed is None:
        raise DataError(f"{where}: $timestamp must be an ISO 8601 time, not {value!r}")
    seconds = int(parsed.timestamp())
    if seconds not in _TIMESTAMP_S:
        raise _Unencodable
    return seconds


def _plain(field: bytes, where: str) -> FieldValue:
    """The plain value of one field's tag and bytes (what a handler sees of it)."""
    try:
        return decode_fields(b"\x00" + field)[""]
    except ValueError as error:
        raise DataError(f"{where}: rr cannot read it back: {error}") from None


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
        "headers": headers_document(record.headers or {}),
    }


def record_line(record: Record) -> str:
    """One export line, without the line break; no raw control characters (module doc)."""
    return escape_unsafe(
        json.dumps(record_document(record), ensure_ascii=False, separators=(",", ":"))
    )


def _depth(value: Any) -> int:
    """How deep lists and objects nest in a decoded JSON value (a scalar: 0); no recursion."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            stack.extend((inner, level + 1) for inner in item.values())
        elif isinstance(item, list):
            stack.extend((inner, level + 1) for inner in item)
        else:
            deepest = max(deepest, level)
            continue
        deepest = max(deepest, level + 1)
    return deepest


def parse_record(line: str, where: str) -> Record:
    """One line of an export file; :class:`DataError` (exit 65) naming ``where`` if bad."""
    try:
        document = json.loads(line)
    except ValueError as error:
        raise DataError(f"{where}: not JSON ({error})") from None
    except RecursionError:
        raise DataError(f"{where}: JSON nested too deeply to read") from None
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
    for key, value in (raw_headers or {}).items():
        if _depth(value) > HEADER_MAX_DEPTH:
            raise DataError(
                f"{where}: headers.{field_name(key)}: nested more than {HEADER_MAX_DEPTH} "
                "levels deep"
            )
    headers = headers_of_document(raw_headers, f"{where}: headers") if raw_headers else None
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
        raise DataError(f"{where}: properties: unknown property {name!r} (known: {known})")
    if name == "timestamp":
        parsed = parse_time(value) if isinstance(value, str) else None
        if parsed is None:
            raise DataError(
                f"{where}: properties.timestamp: must be an ISO 8601 time, not {value!r}"
            )
        return parsed
    if name in _INT_PROPERTIES:
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 255:
            raise DataError(f"{where}: properties.{name}: must be an integer 0-255, not {value!r}")
        return value
    if not isinstance(value, str):
        raise DataError(f"{where}: properties.{name}: must be a string, not {value!r}")
    return value


# --------------------------------------------------------------------------- import checks

_SHORT_STRING_PROPERTIES = tuple(
    name for name in PROPERTY_NAMES if name not in _INT_PROPERTIES and name != "timestamp"
)


def short_string_problem(text: str) -> str | None:
    """Why ``text`` cannot be an AMQP short string (UTF-8, at most 255 bytes), or None."""
    return _utf8_problem(
        text,
        SHORT_STRING_MAX_BYTES,
        lambda size: f"{size:,} bytes long; AMQP carries at most {SHORT_STRING_MAX_BYTES} here",
    )


def _utf8_problem(text: str, max_bytes: int, too_long: Callable[[int], str]) -> str | None:
    """Why ``text`` cannot be sent as UTF-8 of at most ``max_bytes`` bytes (``too_long``: the
    words for its size), or None."""
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError as error:
        return f"holds {_code_point(text[error.start])}, which UTF-8 (and so AMQP) cannot carry"
    return too_long(size) if size > max_bytes else None


def expiration_problem(text: str) -> str | None:
    """Why RabbitMQ refuses ``text`` as an ``expiration``, or None: it takes a decimal
    integer of 0 to 2**32 - 1 milliseconds."""
    if not _EXPIRATION.fullmatch(text):
        return f"{_shown(text)} is not a whole number of milliseconds"
    milliseconds = int(text)
    if not 0 <= milliseconds <= EXPIRATION_MAX_MS:
        return f"{_shown(text)} ms is outside 0 to {EXPIRATION_MAX_MS} ms"
    return None


def timestamp_problem(value: datetime) -> str | None:
    """Why ``value`` cannot be an AMQP timestamp (whole seconds since 1970, unsigned 64-bit;
    naive means UTC, as the client reads it), or None."""
    aware = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    if int(aware.timestamp()) not in _TIMESTAMP_S:
        return f"{aware.isoformat()} is outside what an AMQP timestamp holds (1970 on)"
    return None


def record_problem(record: Record) -> str | None:
    """The first property or header of ``record`` that the AMQP client or RabbitMQ would
    refuse to publish, as ``properties.NAME: why`` or ``headers.KEY...: why``; None if none.

    ``user_id`` is checked as a string only: whether RabbitMQ takes it depends on who logs
    in (the caller decides, docs/reference/dlq.md "Import").
    """
    properties = record.properties
    for name in PROPERTY_NAMES:
        if name not in properties:
            continue
        value = properties[name]
        problem: str | None
        if name in _INT_PROPERTIES:
            problem = _octet_problem(name, value)
        elif name == "timestamp":
            problem = (
                timestamp_problem(value)
                if isinstance(value, datetime)
                else f"must be a time, not {type(value).__name__}"
            )
        elif not isinstance(value, str):
            problem = f"must be a string, not {type(value).__name__}"
        else:
            problem = short_string_problem(value)
            if problem is None and name == "expiration":
                problem = expiration_problem(value)
        if problem is not None:
            return f"properties.{name}: {problem}"
    unknown = sorted(set(properties) - set(PROPERTY_NAMES))
    if unknown:
        return f"properties.{unknown[0]}: not a message property"
    for key, header in (record.headers or {}).items():
        problem = _header_problem(key, header, typed=isinstance(record.headers, EncodedTable))
        if problem is not None:
            return problem
    return None


def without_user_id(record: Record) -> Record:
    """``record`` without its ``user_id`` property."""
    kept = {name: value for name, value in record.properties.items() if name != "user_id"}
    return replace(record, properties=kept)


def _octet_problem(name: str, value: object) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int):
        return f"must be an integer, not {type(value).__name__}"
    if name == "delivery_mode" and value not in (1, 2):
        return f"must be 1 (transient) or 2 (persistent), not {value}"
    if not 0 <= value <= 255:
        return f"must be 0 to 255, not {_integer(value)}"
    return None


def _header_problem(key: str, value: FieldValue, *, typed: bool = False) -> str | None:
    """The first header value (or name) under ``key`` the client cannot encode; no recursion
    (a table nested 100,000 deep is refused, not a RecursionError)."""
    stack: list[tuple[str, object, int]] = [(f"headers.{field_name(key)}", value, 1)]
    problem = _key_problem(key)
    if problem is not None:
        return f"headers.{field_name(key)}: header name {problem}"
    while stack:
        where, item, depth = stack.pop()
        if isinstance(item, dict | list) and depth > HEADER_MAX_DEPTH:
            return f"{where}: nested more than {HEADER_MAX_DEPTH} levels deep"
        if isinstance(item, dict):
            for inner_key, inner in item.items():
                inner_where = f"{where}.{field_name(str(inner_key))}"
                if not isinstance(inner_key, str):
                    return f"{where}: a table key must be a string"
                problem = _key_problem(inner_key)
                if problem is not None:
                    return f"{inner_where}: table key {problem}"
                stack.append((inner_where, inner, depth + 1))
            continue
        if isinstance(item, list):
            stack.extend((f"{where}[{i}]", inner, depth + 1) for i, inner in enumerate(item))
            continue
        problem = _scalar_problem(item, typed)
        if problem is not None:
            return f"{where}: {problem}"
    return None


def _key_problem(key: str) -> str | None:
    return _utf8_problem(
        key,
        HEADER_KEY_MAX_BYTES,
        lambda size: (
            f"of {size:,} bytes; AMQP carries names of at most {HEADER_KEY_MAX_BYTES} bytes"
        ),
    )


def _scalar_problem(value: object, typed: bool = False) -> str | None:
    if value is None or isinstance(value, bool | bytes):
        return None
    if isinstance(value, int):
        if value not in (_READ_INTEGERS if typed else _INT64):
            return f"{_integer(value)} is outside a signed 64-bit integer, which AMQP carries"
        return None
    if isinstance(value, float):
        if not math.isfinite(value):
            return f"{value!r} is not a finite number (RabbitMQ closes the connection on it)"
        return None
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as error:
            return (
                f"holds {_code_point(value[error.start])}, which UTF-8 (and so AMQP) cannot carry"
            )
        return None
    if isinstance(value, datetime):
        return timestamp_problem(value)
    return f"{type(value).__name__} values cannot go in an AMQP table"


def _integer(value: int) -> str:
    digits = len(str(abs(value))) if value.bit_length() < 14_000 else None
    if digits is not None and digits <= 40:
        return str(value)
    return f"an integer of {digits:,} digits" if digits else "a huge integer"


def _shown(text: str, limit: int = 60) -> str:
    """``text`` quoted for a message: escaped (repr), cut after ``limit`` characters."""
    return repr(text if len(text) <= limit else text[:limit] + "…")


def field_name(key: str, limit: int = 60) -> str:
    """A header or table key as an error message names it: as it is when it is short and
    printable ASCII, else quoted and escaped (:func:`_shown`)."""
    if len(key) <= limit and key.isascii() and key.isprintable() and "'" not in key:
        return key
    return _shown(key, limit)


def _code_point(char: str) -> str:
    return f"U+{ord(char):04X}"
