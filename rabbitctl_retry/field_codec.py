"""Pure. AMQP 0-9-1 field tables as bytes and back, each value's type kept.

**Reading** (:func:`decode_table`): a table's plain values, in the order of the bytes, as an
:class:`~rabbitctl_retry.fields.EncodedTable` that keeps the bytes beside them. Every type
RabbitMQ takes (:data:`TYPE_TAGS`; measured on 3.10.8, 4.0.5 and 4.3.6,
docs/explanation/attempts.md, "What a copy keeps") is read: ``t`` as ``bool``; ``b B s u I i l L``
(8 to 64 bits, signed and unsigned) as ``int``; ``f`` (32-bit), ``d`` (64-bit) and ``D`` (decimal)
as ``float``; ``S`` as
``str`` (``bytes`` when it is not UTF-8); ``x`` as ``bytes``; ``T`` as an aware UTC
``datetime`` (past 2**32 - 1 it is read as milliseconds, as pamqp reads it); ``F`` as a
``dict``; ``A`` as a ``list``; ``V`` as ``None``. What cannot be read (another tag, a length
past the end, a name that is not UTF-8, a time past the year 9999) raises ``ValueError``.

**Writing** (:func:`encode_table`): a table's fields in the order of the mapping, never sorted.
A value still equal to the one read from the table's bytes (an :class:`EncodedTable`'s
``encoded``: same Python type, same value, nested alike) is written as those bytes; nested
tables and arrays that changed keep the bytes of what did not. Any other value is written by
its Python type, as pamqp writes it (what rr sends of its own: queue arguments, its headers):
``bool`` ``t``; ``int`` the smallest of ``b s u I i l`` that holds it; ``float`` ``d`` (a
64-bit double: ``0.1`` stays ``0.1``); ``Decimal`` ``D``; ``str`` ``S``; ``bytes`` ``x``;
``datetime`` ``T`` (whole seconds, naive means UTC); ``dict`` ``F``; ``list`` and ``tuple``
``A``; ``None`` ``V``. Names are written whole, up to 255 bytes of UTF-8. What cannot be
written raises ``TypeError`` or ``ValueError``, naming the field.

**Raw fields** (:func:`raw_fields`, :func:`raw_items`): a table's or an array's values as their
tags and bytes, for what reads the types themselves (the export format, ``dlq/jsonl.py``; the
emulator's model of how RabbitMQ writes a table again).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any, Final

from rabbitctl_retry.fields import EncodedTable, FieldValue

TYPE_TAGS: Final = "tbBsuIilLfdDSxTFVA"
"""Every field type RabbitMQ takes in a table (3.10.8, 4.0.5 and 4.3.6 close the connection,
541 INTERNAL_ERROR, on any other tag)."""

FIXED_SIZES: Final = {
    "t": 1,
    "b": 1,
    "B": 1,
    "s": 2,
    "u": 2,
    "I": 4,
    "i": 4,
    "l": 8,
    "L": 8,
    "f": 4,
    "d": 8,
    "D": 5,
    "T": 8,
    "V": 0,
}
"""The bytes a value of each fixed-size type takes after its tag."""
SIZED: Final = frozenset("SxFA")
"""The types whose value is a 32-bit length and that many bytes."""

NAME_MAX_BYTES: Final = 255
"""A field name is a short string: at most 255 bytes of UTF-8."""

_LENGTH = struct.Struct(">I")
INTEGER_LAYOUTS: Final = {
    "b": struct.Struct(">b"),
    "B": struct.Struct(">B"),
    "s": struct.Struct(">h"),
    "u": struct.Struct(">H"),
    "I": struct.Struct(">i"),
    "i": struct.Struct(">I"),
    "l": struct.Struct(">q"),
    "L": struct.Struct(">Q"),
}
"""The layout of each AMQP integer type's value, by its tag (``dlq/jsonl.py`` reads and writes
the export's typed integers with them too)."""
FLOAT_LAYOUT = struct.Struct(">f")
DOUBLE_LAYOUT = struct.Struct(">d")
DECIMAL_LAYOUT = struct.Struct(">BI")
_DECIMAL_OUT = struct.Struct(">Bi")
TIMESTAMP_LAYOUT = struct.Struct(">Q")
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
"""Time zero of an AMQP timestamp (seconds past it)."""
_SECONDS_NOT_MILLISECONDS = 0xFFFFFFFF
"""A larger timestamp is read as milliseconds (pamqp's rule: handlers saw this before)."""


# --------------------------------------------------------------------------- reading


def decode_table(data: bytes, offset: int = 0) -> tuple[int, EncodedTable]:
    """The table at ``offset`` of ``data`` (a 32-bit length, then its fields): where it ends,
    and its values with its bytes (module doc). ``ValueError`` if it cannot be read."""
    try:
        (size,) = _LENGTH.unpack_from(data, offset)
    except struct.error:
        raise ValueError("a field table cut short") from None
    start = offset + 4
    end = start + size
    if end > len(data):
        raise ValueError("a field table longer than its frame")
    fields = bytes(data[start:end])
    return end, EncodedTable(_read_fields(fields, 0, size), encoded=fields)


def decode_fields(fields: bytes) -> EncodedTable:
    """A table's fields (without their length in front) as an :class:`EncodedTable`."""
    return EncodedTable(_read_fields(fields, 0, len(fields)), encoded=bytes(fields))


def _field_name(data: bytes, at: int, end: int) -> tuple[str, int]:
    """The name of the field at ``at`` (a byte of length, then the name), and where its value
    starts. ``IndexError`` past the data's end, ``ValueError`` past the table's."""
    name_end = at + 1 + data[at]
    if name_end > end:
        raise ValueError("a field name past the end of its table")
    return data[at + 1 : name_end].decode(), name_end


def _read_fields(data: bytes, at: int, end: int) -> dict[str, FieldValue]:
    table: dict[str, FieldValue] = {}
    try:
        while at < end:
            name, name_end = _field_name(data, at, end)
            table[name], at = _read_value(data, name_end, end)
    except IndexError:
        raise ValueError("a field table cut short") from None
    if at != end:
        raise ValueError("a field value past the end of its table")
    return table


def _read_items(data: bytes, at: int, end: int) -> list[FieldValue]:
    items: list[FieldValue] = []
    try:
        while at < end:
            value, at = _read_value(data, at, end)
            items.append(value)
    except IndexError:
        raise ValueError("a field array cut short") from None
    if at != end:
        raise ValueError("a field value past the end of its array")
    return items


def _read_value(data: bytes, at: int, end: int) -> tuple[FieldValue, int]:
    """One value (its tag at ``at``) and where it ends; never past ``end``."""
    tag = chr(data[at])
    at += 1
    size = FIXED_SIZES.get(tag)
    if size is None:
        length = _content_length(data, tag, at, end)
        start = at + 4
        stop = start + length
        if stop > end:
            raise ValueError(f"a field of type {tag!r} longer than what holds it")
        if tag == "S":
            raw = data[start:stop]
            try:
                return raw.decode(), stop
            except UnicodeDecodeError:
                return bytes(raw), stop
        if tag == "x":
            return bytes(data[start:stop]), stop
        if tag == "F":
            return _read_fields(data, start, stop), stop
        return _read_items(data, start, stop), stop
    stop = at + size
    if stop > end:
        raise ValueError(f"a field of type {tag!r} cut short")
    integer = INTEGER_LAYOUTS.get(tag)
    if integer is not None:
        return integer.unpack_from(data, at)[0], stop
    if tag == "t":
        return data[at] != 0, stop
    if tag == "d":
        return DOUBLE_LAYOUT.unpack_from(data, at)[0], stop
    if tag == "f":
        return FLOAT_LAYOUT.unpack_from(data, at)[0], stop
    if tag == "T":
        return _time(TIMESTAMP_LAYOUT.unpack_from(data, at)[0]), stop
    if tag == "D":
        scale, unscaled = DECIMAL_LAYOUT.unpack_from(data, at)
        return float(Decimal(unscaled).scaleb(-scale)), stop
    return None, stop  # V


def _content_length(data: bytes, tag: str, at: int, end: int) -> int:
    """The length in front of the content of a value of type ``tag`` not of a fixed size
    (``S x F A``), read at ``at``."""
    if tag not in SIZED:
        raise ValueError(f"unknown field type {tag!r}")
    if at + 4 > end:
        raise ValueError(f"a field of type {tag!r} cut short")
    length: int = _LENGTH.unpack_from(data, at)[0]
    return length


def _time(seconds: int) -> datetime:
    try:
        if seconds > _SECONDS_NOT_MILLISECONDS:
            return EPOCH + timedelta(milliseconds=seconds)
        return EPOCH + timedelta(seconds=seconds)
    except OverflowError:
        raise ValueError(f"a timestamp past the year 9999: {seconds}") from None


# --------------------------------------------------------------------------- raw fields


@dataclass(frozen=True, slots=True)
class RawField:
    """One value as a table or array holds it: its type tag and the bytes after it (for
    ``S x F A``, the 32-bit length first)."""

    tag: str
    data: bytes

    @property
    def content(self) -> bytes:
        """The bytes of ``S x F A`` after their length; the value's bytes for the others."""
        return self.data[4:] if self.tag in SIZED else self.data

    def encoded(self) -> bytes:
        return self.tag.encode("ascii") + self.data


def raw_fields(fields: bytes) -> list[tuple[str, RawField]]:
    """A table's fields (without their length in front), in order, as names and raw values.
    ``ValueError`` if they cannot be read."""
    found: list[tuple[str, RawField]] = []
    at, end = 0, len(fields)
    try:
        while at < end:
            name, name_end = _field_name(fields, at, end)
            stop = _value_end(fields, name_end, end)
            raw = RawField(chr(fields[name_end]), bytes(fields[name_end + 1 : stop]))
            found.append((name, raw))
            at = stop
    except IndexError:
        raise ValueError("a field table cut short") from None
    return found


def raw_items(items: bytes) -> list[RawField]:
    """An array's values (without its length in front), in order, as raw values."""
    found: list[RawField] = []
    at, end = 0, len(items)
    try:
        while at < end:
            stop = _value_end(items, at, end)
            found.append(RawField(chr(items[at]), bytes(items[at + 1 : stop])))
            at = stop
    except IndexError:
        raise ValueError("a field array cut short") from None
    return found


def _value_end(data: bytes, at: int, end: int) -> int:
    """Where the value whose tag is at ``at`` ends (its type checked, not its content)."""
    tag = chr(data[at])
    size = FIXED_SIZES.get(tag)
    if size is None:
        size = 4 + _content_length(data, tag, at + 1, end)
    stop = at + 1 + size
    if stop > end:
        raise ValueError(f"a field of type {tag!r} longer than what holds it")
    return stop


def sized(tag: str, content: bytes) -> RawField:
    """A raw ``S x F A`` value holding ``content``."""
    return RawField(tag, _LENGTH.pack(len(content)) + content)


def join_fields(fields: Iterable[tuple[str, RawField]]) -> bytes:
    """Raw fields as a table's bytes (without the length in front)."""
    return b"".join(name_bytes(name) + field.encoded() for name, field in fields)


def join_items(items: Iterable[RawField]) -> bytes:
    """Raw values as an array's bytes (without the length in front)."""
    return b"".join(item.encoded() for item in items)


# --------------------------------------------------------------------------- writing


ValueEncoder = Callable[[Any], bytes]
"""How a value not read from a table's bytes is written: its tag and bytes."""


def encode_table(table: Mapping[str, Any]) -> bytes:
    """``table`` as a field table: its length, then its fields in the mapping's order, each
    value read from ``table``'s bytes written as it was read (module doc)."""
    fields = encode_fields(table)
    return _LENGTH.pack(len(fields)) + fields


def encode_fields(table: Mapping[str, Any], new_value: ValueEncoder | None = None) -> bytes:
    """``table``'s fields without the length in front (:func:`encode_table`); values not read
    from its bytes written by ``new_value`` (default :func:`encode_value`)."""
    if not isinstance(table, Mapping):
        raise TypeError(f"dict required, received {type(table)}")
    encoded = table.encoded if isinstance(table, EncodedTable) else None
    write = new_value or encode_value
    if not encoded:
        return _fields_like(table, {}, write)
    return _fields_like(table, _read_segments(encoded), write)


def _fields_like(
    table: Mapping[str, Any], read: dict[str, tuple[FieldValue, bytes]], write: ValueEncoder
) -> bytes:
    """``table``'s fields, each value still equal to the one ``read`` holds for its name
    written as it was read, the others by ``write``."""
    parts: list[bytes] = []
    for name, value in table.items():
        before = read.get(name)
        try:
            parts.append(name_bytes(name))
            if before is None:
                parts.append(write(value))
            elif same_value(value, before[0]):
                parts.append(before[1])
            else:
                parts.append(_changed(value, before[1], write))
        except TypeError as error:
            raise TypeError(f"{str(name)[:64]!r} error: {error}") from error
    return b"".join(parts)


def _changed(value: Any, raw: bytes, write: ValueEncoder) -> bytes:
    """``value``, which differs from the one ``raw`` (its tag and bytes) holds: a table or an
    array keeps the bytes of what it still holds alike, anything else is written anew."""
    tag = raw[:1]
    if tag == b"F" and isinstance(value, Mapping):
        inner = _fields_like(value, _read_segments(raw[5:]), write)
        return b"F" + _LENGTH.pack(len(inner)) + inner
    if tag == b"A" and isinstance(value, list | tuple):
        read = _read_item_segments(raw[5:])
        parts = []
        for index, item in enumerate(value):
            if index >= len(read):
                parts.append(write(item))
            elif same_value(item, read[index][0]):
                parts.append(read[index][1])
            else:
                parts.append(_changed(item, read[index][1], write))
        items = b"".join(parts)
        return b"A" + _LENGTH.pack(len(items)) + items
    return write(value)


def _read_segments(fields: bytes) -> dict[str, tuple[FieldValue, bytes]]:
    """Each field of a table's bytes, by name: its plain value and its tag and bytes."""
    segments: dict[str, tuple[FieldValue, bytes]] = {}
    at, end = 0, len(fields)
    try:
        while at < end:
            size = fields[at]
            start = at + 1 + size
            name = fields[at + 1 : start].decode()
            value, at = _read_value(fields, start, end)
            segments[name] = (value, fields[start:at])
    except IndexError:
        raise ValueError("a field table cut short") from None
    return segments


def _read_item_segments(items: bytes) -> list[tuple[FieldValue, bytes]]:
    """Each value of an array's bytes: its plain value and its tag and bytes."""
    segments: list[tuple[FieldValue, bytes]] = []
    at, end = 0, len(items)
    try:
        while at < end:
            value, stop = _read_value(items, at, end)
            segments.append((value, items[at:stop]))
            at = stop
    except IndexError:
        raise ValueError("a field array cut short") from None
    return segments


def same_value(value: object, other: object) -> bool:
    """Equal, and of the same Python type, nested tables (in the same order) and arrays
    alike: ``1`` is not ``True`` nor ``1.0``."""
    if isinstance(value, Mapping) and isinstance(other, Mapping):
        return list(value) == list(other) and all(same_value(value[k], other[k]) for k in value)
    if type(value) is not type(other):
        return False
    if isinstance(value, list):
        assert isinstance(other, list)
        return len(value) == len(other) and all(map(same_value, value, other))
    return bool(value == other)


def name_bytes(name: object) -> bytes:
    """A field name as a short string: UTF-8, at most 255 bytes, never cut."""
    if not isinstance(name, str):
        raise TypeError(f"a field name must be a string, not {type(name).__name__}")
    raw = name.encode()
    if len(raw) > NAME_MAX_BYTES:
        raise TypeError(f"string exceeds maximum length of {NAME_MAX_BYTES} bytes")
    return bytes((len(raw),)) + raw


def encode_value(value: Any) -> bytes:
    """A plain value as a field: its tag and bytes, by its Python type (module doc)."""
    if isinstance(value, str):
        raw = value.encode()
        return b"S" + _LENGTH.pack(len(raw)) + raw
    if isinstance(value, bool):
        return b"t\x01" if value else b"t\x00"
    if isinstance(value, int):
        return _integer(value)
    if isinstance(value, float):
        return b"d" + DOUBLE_LAYOUT.pack(value)
    if value is None:
        return b"V"
    if isinstance(value, bytes | bytearray | memoryview):
        raw = bytes(value)
        return b"x" + _LENGTH.pack(len(raw)) + raw
    if isinstance(value, Mapping):
        inner = encode_fields(value)
        return b"F" + _LENGTH.pack(len(inner)) + inner
    if isinstance(value, list | tuple):
        items = b"".join(encode_value(item) for item in value)
        return b"A" + _LENGTH.pack(len(items)) + items
    if isinstance(value, datetime):
        aware = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
        return b"T" + TIMESTAMP_LAYOUT.pack(int(aware.timestamp()))
    if isinstance(value, Decimal):
        return b"D" + _decimal(value)
    raise TypeError(f"Unknown type: {type(value)} ({value!r})")


def _integer(value: int) -> bytes:
    """The smallest of ``b s u I i l`` that holds ``value`` (pamqp's rule)."""
    if -128 <= value <= 127:
        return b"b" + INTEGER_LAYOUTS["b"].pack(value)
    if -32768 <= value <= 32767:
        return b"s" + INTEGER_LAYOUTS["s"].pack(value)
    if 0 <= value <= 65535:
        return b"u" + INTEGER_LAYOUTS["u"].pack(value)
    if -2147483648 <= value <= 2147483647:
        return b"I" + INTEGER_LAYOUTS["I"].pack(value)
    if 0 <= value <= 4294967295:
        return b"i" + INTEGER_LAYOUTS["i"].pack(value)
    if -9223372036854775808 <= value <= 9223372036854775807:
        return b"l" + INTEGER_LAYOUTS["l"].pack(value)
    raise TypeError(f"Unsupported numeric value: {value}")


def _decimal(value: Decimal) -> bytes:
    """pamqp's decimal: a scale of 0 to 255 and a signed 32-bit mantissa."""
    exponent = value.as_tuple().exponent
    if not isinstance(exponent, int):
        raise TypeError(f"Cannot encode {value} as a decimal")
    if exponent > 0:
        scale, mantissa = 0, int(value)
    else:
        scale, mantissa = -exponent, int(value.scaleb(-exponent))
    if not 0 <= scale <= 255:
        raise TypeError("Decimal scale range: 0 to 255")
    if not -2147483648 <= mantissa <= 2147483647:
        raise TypeError("Decimal mantissa range: -2147483648 to 2147483647")
    return _DECIMAL_OUT.pack(scale, mantissa)
