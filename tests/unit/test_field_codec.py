"""rr's field-table codec (``field_codec.py``): every type RabbitMQ takes is read, and written
again with its type tag and bytes; what changed is written by its Python type; order is the
table's (docs/explanation/attempts.md, "What a copy keeps")."""

from __future__ import annotations

import struct
from datetime import UTC, datetime
from decimal import Decimal

import pytest
from hypothesis import given

from rabbitctl_retry.field_codec import (
    TYPE_TAGS,
    decode_fields,
    decode_table,
    encode_fields,
    encode_table,
    raw_fields,
    same_value,
)
from rabbitctl_retry.fields import EncodedTable, like
from rabbitctl_retry.ops.copies.properties import copy_properties
from rabbitctl_retry.retry.headers import copy_headers
from rabbitctl_retry.transport.base import Properties
from tests.field_tables import raw_tables
from tests.wire_headers import TYPED_FIELDS, TYPED_NAMES, TYPED_TABLE, field, parse


def test_every_type_rabbitmq_takes_is_in_the_table_the_tests_send() -> None:
    assert sorted({tag for _, tag, _ in TYPED_FIELDS}) == sorted(TYPE_TAGS)


def test_every_type_is_read_as_plain_python_in_the_order_of_the_bytes() -> None:
    table = decode_fields(TYPED_TABLE)
    assert list(table) == list(TYPED_NAMES)
    assert table == {
        "t-bool": True,
        "b-int8": -5,
        "B-uint8": 200,
        "s-int16": -300,
        "u-uint16": 60000,
        "I-int32": 7,
        "i-uint32": 3_000_000_000,
        "l-int64": 5,
        "L-uint64": 2**63 + 5,
        "f-float": 1.5,
        "d-double": 0.1,
        "D-decimal": 123.45,
        "S-text": "héllo",
        "S-not-utf8": b"\xff\xfe\x00",
        "x-bytes": b"\x00\x01\x02",
        "T-time": datetime(2023, 11, 14, 22, 13, 20, tzinfo=UTC),
        "F-table": {"zz": 2**63 + 7, "aa": 1.25, "mm": 0.5},
        "V-void": None,
        "A-array": [5, 40000, b"\xff\xfe", {"k": -3}, 0.1],
    }
    nested = table["F-table"]
    assert isinstance(nested, dict)
    assert list(nested) == ["zz", "aa", "mm"]
    assert table.encoded == TYPED_TABLE


def test_a_table_read_is_written_again_byte_for_byte() -> None:
    table = decode_fields(TYPED_TABLE)
    assert encode_fields(table) == TYPED_TABLE
    end, read = decode_table(encode_table(table))
    assert end == 4 + len(TYPED_TABLE)
    assert read.encoded == TYPED_TABLE


def test_a_copy_keeps_each_header_it_kept_and_adds_its_own_after() -> None:
    original = decode_fields(TYPED_TABLE + field("x-death", "A", b"\x00\x00\x00\x00"))
    headers = copy_headers(original, {"rr-origin-queue": "q", "t-bool": True})
    copied = copy_properties(Properties(headers=original, message_id=None), headers)
    assert copied.headers is not None
    written = parse(encode_fields(copied.headers))
    assert [f.name for f in written] == [*TYPED_NAMES, "rr-origin-queue"]
    assert written[: len(TYPED_FIELDS)] == parse(TYPED_TABLE)  # tags and bytes
    assert (written[-1].tag, written[-1].data) == ("S", b"\x00\x00\x00\x01q")


def test_a_changed_value_is_written_by_its_type_and_moves_nothing() -> None:
    original = decode_fields(TYPED_TABLE)
    changed = dict(original)
    changed["I-int32"] = 8  # an int: the smallest type that holds it
    changed["D-decimal"] = 123.45  # equal to what was read: kept
    nested = dict(original["F-table"])  # type: ignore[arg-type]
    nested["aa"] = "now text"
    changed["F-table"] = nested
    array = list(original["A-array"])  # type: ignore[arg-type]
    array[1] = 7
    changed["A-array"] = array
    written = {f.name: f for f in parse(encode_fields(like(original, changed)))}
    assert list(written) == list(TYPED_NAMES)
    assert (written["I-int32"].tag, written["I-int32"].data) == ("b", b"\x08")
    assert written["D-decimal"].tag == "D"
    inner = {f.name: f.tag for f in parse(written["F-table"].data[4:])}
    assert inner == {"zz": "L", "aa": "S", "mm": "f"}  # the others keep their bytes
    read = decode_fields(encode_fields(like(original, changed)))
    assert read["A-array"] == [5, 7, b"\xff\xfe", {"k": -3}, 0.1]
    items = written["A-array"].data[4:]
    assert items.startswith(b"l" + struct.pack(">q", 5) + b"b\x07S")


def test_the_same_value_means_the_same_type() -> None:
    assert same_value(1, 1)
    assert not same_value(1, True)
    assert not same_value(1, 1.0)
    assert not same_value({"a": 1, "b": 2}, {"b": 2, "a": 1})  # another order
    assert same_value([{"a": [1, "x"]}], [{"a": [1, "x"]}])
    table = decode_fields(field("n", "l", struct.pack(">q", 1)))
    assert encode_fields(like(table, {"n": True})) == field("n", "t", b"\x01")


def test_a_plain_table_is_written_in_its_own_order_with_doubles() -> None:
    plain = {"z": 0.1, "a": Decimal("1.50"), "m": [1, 2**40], "k" * 200: None}
    written = parse(encode_fields(plain))
    assert [(f.name, f.tag) for f in written] == [
        ("z", "d"),
        ("a", "D"),
        ("m", "A"),
        ("k" * 200, "V"),
    ]
    with pytest.raises(TypeError, match="string exceeds maximum length of 255 bytes"):
        encode_fields({"k" * 256: 1})
    with pytest.raises(TypeError, match="'bad' error: Unknown type"):
        encode_fields({"bad": {1, 2}})


@pytest.mark.parametrize(
    ("damaged", "why"),
    [
        (b"\x01k" + b"c\x00", "unknown field type 'c'"),  # a type RabbitMQ refuses
        (b"\x01k" + b"I\x00\x00", "type 'I' cut short"),
        (b"\x05k", "a field name past the end"),
        (b"\x01k" + b"S\x00\x00\x00\x09abc", "type 'S' longer than what holds it"),
        (b"\x02\xff\xfe" + b"V", "can't decode"),  # a name that is not UTF-8
        (b"\x01k" + b"T" + struct.pack(">Q", 2**63), "past the year 9999"),
    ],
)
def test_what_cannot_be_read_is_a_value_error(damaged: bytes, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        decode_fields(damaged)


def test_a_timestamp_past_32_bits_is_read_as_milliseconds() -> None:
    milliseconds = 1_700_000_000_123
    table = decode_fields(field("at", "T", struct.pack(">Q", milliseconds)))
    assert table["at"] == datetime(2023, 11, 14, 22, 13, 20, 123000, tzinfo=UTC)
    assert encode_fields(table) == table.encoded  # and written as it came


@given(raw_tables())
def test_any_table_of_these_types_is_written_again_as_it_was_read(table: bytes) -> None:
    read = decode_fields(table)
    assert isinstance(read, EncodedTable)
    assert encode_fields(read) == table
    copied = EncodedTable(dict(read), encoded=read.encoded)
    assert encode_fields(copied) == table
    assert [name for name, _ in raw_fields(table)] == list(read)
