"""Headers of every field type RabbitMQ takes, written and read as bytes, for the tests that
check on the wire that a copy keeps each header's type tag and bytes (docs/explanation/attempts.md,
"What a copy keeps").

Independent of rr's codec: the table below is written by hand, and :func:`parse` reads a table
itself. :func:`publish_typed` and :func:`take_typed` go over a raw socket on RabbitMQ
(tests/hostile/raw_amqp.py), so nothing of rr's transport writes or reads the bytes compared;
on the emulator, which has no wire, they go through the port and read the bytes the emulated
server holds (``EncodedTable.encoded``).

What RabbitMQ itself does to a table (measured on 3.10.8, 4.0.5 and 4.3.6, docs/reference/testing.md
"Headers"): once it writes a table again it writes an unsigned 64-bit ``L`` as a signed ``l``
with the same bytes, at every depth; 4.0 and 4.3 write every table again with its top-level
names sorted; 3.10 keeps the bytes in a classic queue, writes them again (names in their
order) in a quorum queue, and sorts the names when it adds a header (a dead letter's
``x-death``, a quorum queue's ``x-delivery-count``, which ``basic.get`` adds on 3.10).
:func:`as_the_server_writes_it` applies that to the bytes a test published.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from rabbitctl_retry.field_codec import decode_fields
from rabbitctl_retry.transport.base import Properties
from tests.backends import Backend, EmulatorBackend, RabbitBackend
from tests.hostile.raw_amqp import RawPublish, get_raw, send_raw


def _sized(data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + data


def _name(name: str) -> bytes:
    raw = name.encode()
    return bytes((len(raw),)) + raw


def field(name: str, tag: str, data: bytes) -> bytes:
    return _name(name) + tag.encode() + data


NESTED = (
    field("zz", "L", struct.pack(">Q", 2**63 + 7))
    + field("aa", "D", struct.pack(">BI", 3, 1250))
    + field("mm", "f", struct.pack(">f", 0.5))
)
"""A table inside a header, its names unsorted, an unsigned 64-bit value among them."""

ARRAY = (
    b"l"
    + struct.pack(">q", 5)
    + b"u"
    + struct.pack(">H", 40000)
    + b"S"
    + _sized(b"\xff\xfe")
    + b"F"
    + _sized(field("k", "b", struct.pack(">b", -3)))
    + b"d"
    + struct.pack(">d", 0.1)
)

TYPED_FIELDS: tuple[tuple[str, str, bytes], ...] = (
    ("t-bool", "t", b"\x01"),
    ("b-int8", "b", struct.pack(">b", -5)),
    ("B-uint8", "B", struct.pack(">B", 200)),
    ("s-int16", "s", struct.pack(">h", -300)),
    ("u-uint16", "u", struct.pack(">H", 60000)),
    ("I-int32", "I", struct.pack(">i", 7)),
    ("i-uint32", "i", struct.pack(">I", 3_000_000_000)),
    ("l-int64", "l", struct.pack(">q", 5)),
    ("L-uint64", "L", struct.pack(">Q", 2**63 + 5)),
    ("f-float", "f", struct.pack(">f", 1.5)),
    ("d-double", "d", struct.pack(">d", 0.1)),
    ("D-decimal", "D", struct.pack(">BI", 2, 12345)),
    ("S-text", "S", _sized("héllo".encode())),
    ("S-not-utf8", "S", _sized(b"\xff\xfe\x00")),
    ("x-bytes", "x", _sized(b"\x00\x01\x02")),
    ("T-time", "T", struct.pack(">Q", 1_700_000_000)),
    ("F-table", "F", _sized(NESTED)),
    ("V-void", "V", b""),
    ("A-array", "A", _sized(ARRAY)),
)
"""One header of each of the 18 field types RabbitMQ takes (``t b B s u I i l L f d D S x T F V
A``; ``S`` twice, UTF-8 and not), in no sorted order: ``t-bool`` sorts after the others."""

TYPED_NAMES = tuple(name for name, _, _ in TYPED_FIELDS)
TYPED_TABLE = b"".join(field(name, tag, data) for name, tag, data in TYPED_FIELDS)
"""The fields of the headers table, without the length in front."""


@dataclass(frozen=True, slots=True)
class Field:
    name: str
    tag: str
    data: bytes
    """The bytes after the tag (for ``S x F A`` the length first)."""


_FIXED = {"t": 1, "b": 1, "B": 1, "s": 2, "u": 2, "I": 4, "i": 4, "l": 8, "L": 8}
_FIXED |= {"f": 4, "d": 8, "D": 5, "T": 8, "V": 0}


def _value_end(data: bytes, at: int) -> int:
    tag = chr(data[at])
    if tag in _FIXED:
        return at + 1 + _FIXED[tag]
    assert tag in "SxFA", f"not a type RabbitMQ takes: {tag!r}"
    (size,) = struct.unpack_from(">I", data, at + 1)
    return int(at + 5 + size)


def parse(table: bytes) -> list[Field]:
    """A table's fields (without the length in front), in order."""
    fields: list[Field] = []
    at = 0
    while at < len(table):
        size = table[at]
        name = table[at + 1 : at + 1 + size].decode()
        at += 1 + size
        end = _value_end(table, at)
        fields.append(Field(name, chr(table[at]), table[at + 1 : end]))
        at = end
    assert at == len(table), "a table that does not end where its last field does"
    return fields


def _items(array: bytes) -> list[tuple[str, bytes]]:
    items = []
    at = 0
    while at < len(array):
        end = _value_end(array, at)
        items.append((chr(array[at]), array[at + 1 : end]))
        at = end
    return items


def _signed(tag: str, data: bytes) -> tuple[str, bytes]:
    """A value as RabbitMQ writes it again: ``L`` as ``l``, inside tables and arrays too."""
    if tag == "L":
        return "l", data
    if tag == "F":
        fields = (field(each.name, *_signed(each.tag, each.data)) for each in parse(data[4:]))
        return "F", _sized(b"".join(fields))
    if tag == "A":
        items = (_signed(item_tag, item) for item_tag, item in _items(data[4:]))
        return "A", _sized(b"".join(item_tag.encode() + item for item_tag, item in items))
    return tag, data


def as_the_server_writes_it(
    fields: list[Field], *, written_again: bool, sorted_names: bool
) -> list[Field]:
    """``fields`` as RabbitMQ hands them out (module doc): ``written_again``, every ``L`` is an
    ``l``; ``sorted_names``, the names are sorted."""
    result = list(fields)
    if written_again:
        result = [Field(f.name, *_signed(f.tag, f.data)) for f in result]
    if sorted_names:
        result.sort(key=lambda f: f.name.encode())
    return result


def written_again(version: str, *, quorum: bool, dead_lettered: bool) -> bool:
    """Whether RabbitMQ ``version`` writes a message's table again on the way (module doc)."""
    return version != "3.10" or quorum or dead_lettered


def sorted_by_the_server(version: str, *, dead_lettered: bool, read_from_quorum: bool) -> bool:
    """Whether RabbitMQ ``version`` hands the table out with its names sorted (module doc):
    ``read_from_quorum``, the test reads it with ``basic.get`` from a quorum queue."""
    return version != "3.10" or dead_lettered or read_from_quorum


def properties(table: bytes, *, message_id: str | None = None) -> bytes:
    """Raw basic properties: the headers ``table`` (its fields), and a ``message_id``."""
    flags = 1 << 13
    values = _sized(table)
    if message_id is not None:
        flags |= 1 << 7
        values += _name(message_id)
    return struct.pack(">H", flags) + values


def header_table(raw_properties: bytes) -> bytes:
    """The headers table's fields of raw basic properties (one flags word)."""
    (flags,) = struct.unpack_from(">H", raw_properties, 0)
    assert not flags & 1, "a second flags word"
    at = 2
    for bit in (15, 14):  # content_type, content_encoding: short strings before the headers
        if flags & (1 << bit):
            at += 1 + raw_properties[at]
    assert flags & (1 << 13), "no headers"
    (size,) = struct.unpack_from(">I", raw_properties, at)
    return raw_properties[at + 4 : at + 4 + size]


def message_id_of(raw_properties: bytes) -> str | None:
    """The ``message_id`` of raw basic properties (one flags word), or ``None``."""
    (flags,) = struct.unpack_from(">H", raw_properties, 0)
    at = 2
    for bit in range(15, 7, -1):
        if not flags & (1 << bit):
            continue
        if bit == 13:
            at += 4 + struct.unpack_from(">I", raw_properties, at)[0]
        elif bit in (12, 11):  # delivery_mode, priority: octets
            at += 1
        else:
            at += 1 + raw_properties[at]
    if not flags & (1 << 7):
        return None
    return raw_properties[at + 1 : at + 1 + raw_properties[at]].decode()


async def publish_typed(
    backend: Backend,
    queue: str,
    body: bytes,
    *,
    message_id: str | None = None,
    table: bytes = TYPED_TABLE,
) -> None:
    """Publish ``body`` to ``queue`` with the headers ``table`` (its fields; confirmed): on
    RabbitMQ the bytes go over a raw socket as they are; on the emulator through the port."""
    if isinstance(backend, RabbitBackend):
        raw = properties(table, message_id=message_id)
        await send_raw(backend.url, [RawPublish(b"", queue.encode(), body, raw)])
        return
    assert isinstance(backend, EmulatorBackend)
    channel = await backend.channel(confirms=True)
    headers = decode_fields(table)
    await channel.publish(
        body, routing_key=queue, properties=Properties(headers=headers, message_id=message_id)
    )


@dataclass(frozen=True, slots=True)
class Taken:
    body: bytes
    fields: list[Field]
    message_id: str | None


async def take_typed(backend: Backend, queue: str) -> Taken | None:
    """Take the message at the head of ``queue`` (``basic.get``, acked): its body, its headers'
    fields as the server hands them out, its message id; ``None`` if the queue is empty."""
    if isinstance(backend, RabbitBackend):
        raw = await get_raw(backend.url, queue)
        if raw is None:
            return None
        return Taken(raw.body, parse(header_table(raw.properties)), message_id_of(raw.properties))
    channel = await backend.channel()
    got = await channel.get(queue, no_ack=True)
    if got is None:
        return None
    headers = got.properties.headers
    encoded = getattr(headers, "encoded", None)
    assert isinstance(encoded, bytes), f"the emulator handed out headers without bytes: {headers}"
    return Taken(got.body, parse(encoded), got.properties.message_id)
