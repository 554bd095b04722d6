"""The export format: every value round-trips exactly; a damaged line is a DataError (65)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rabbitctl_retry.dlq.jsonl import (
    PROPERTY_NAMES,
    Record,
    decode_value,
    encode_value,
    parse_record,
    record_line,
    record_problem,
)
from rabbitctl_retry.errors import DataError, ExitCode
from rabbitctl_retry.field_codec import decode_fields, encode_fields, raw_fields
from rabbitctl_retry.fields import EncodedTable
from rabbitctl_retry.transport.base import Properties
from tests.field_tables import raw_tables
from tests.wire_headers import TYPED_NAMES, TYPED_TABLE

T0 = datetime(2024, 5, 1, 10, 0, tzinfo=UTC)

X_DEATH = [
    {
        "count": 2,
        "exchange": "",
        "queue": "payouts",
        "reason": "delivery_limit",
        "routing-keys": ["payouts"],
        "time": T0,
    }
]


def test_property_names_are_the_ports() -> None:
    # undecodable / raw are what the transport knows of a message, not AMQP properties
    assert set(PROPERTY_NAMES) == set(Properties.__dataclass_fields__) - {
        "headers",
        "undecodable",
        "raw",
    }


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        ("text", "text"),
        (3, 3),
        (-(2**40), -(2**40)),
        (1.5, 1.5),
        (True, True),
        (None, None),
        (b"\x00\xff", {"$bytes": "AP8="}),
        (T0, {"$timestamp": "2024-05-01T10:00:00+00:00"}),
        ([b"a", 1], [{"$bytes": "YQ=="}, 1]),
        ({"$bytes": "x"}, {"$table": {"$bytes": "x"}}),
        ({"$other": 1}, {"$table": {"$other": 1}}),
        ({"a": 1, "$b": 2}, {"a": 1, "$b": 2}),
        (X_DEATH, [{**X_DEATH[0], "time": {"$timestamp": "2024-05-01T10:00:00+00:00"}}]),
    ],
)
def test_tagged_encoding(value: Any, encoded: Any) -> None:
    assert encode_value(value) == encoded
    assert decode_value(json.loads(json.dumps(encoded)), "h") == value


leaves = (
    st.text()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False)
    | st.booleans()
    | st.none()
    | st.binary()
    | st.datetimes(timezones=st.just(UTC)).map(lambda d: d.replace(microsecond=0))
)
values = st.recursive(
    leaves,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=12,
)


@given(values)
def test_every_value_round_trips(value: Any) -> None:
    assert decode_value(json.loads(json.dumps(encode_value(value))), "h") == value


def test_a_record_round_trips_byte_for_byte() -> None:
    record = Record(
        body=bytes(range(256)),
        exchange="",
        routing_key="payouts.dead",
        redelivered=True,
        properties={
            "content_type": "application/octet-stream",
            "delivery_mode": 2,
            "priority": 3,
            "message_id": "m-1",
            "timestamp": T0,
            "expiration": "60000",
            "type": "refund",
        },
        headers={"x-death": X_DEATH, "x-ruststream-retry-count": "5", "blob": b"\x01"},
    )
    line = record_line(record)
    assert "\n" not in line
    document = json.loads(line)
    assert document["body_size"] == 256
    assert document["properties"]["timestamp"] == "2024-05-01T10:00:00+00:00"
    assert parse_record(line, "f:1") == record


def test_no_headers_round_trip_as_none() -> None:
    record = Record(body=b"x")
    assert parse_record(record_line(record), "f:1") == record


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("not json", "not JSON"),
        ("[1]", "a JSON object per line"),
        ("{}", "no 'body'"),
        ('{"body": "%%%"}', "not valid base64"),
        ('{"body": "YQ==", "body_size": 2}', "the file is damaged"),
        ('{"body": "YQ==", "properties": {"colour": "red"}}', "unknown property 'colour'"),
        ('{"body": "YQ==", "properties": {"timestamp": "yesterday"}}', "ISO 8601"),
        ('{"body": "YQ==", "properties": {"priority": 300}}', "0-255"),
        ('{"body": "YQ==", "properties": {"message_id": 5}}', "must be a string"),
        ('{"body": "YQ==", "headers": {"h": {"$bytes": 5}}}', "base64 text expected"),
        ('{"body": "YQ==", "headers": {"h": {"$nope": 5}}}', "unknown tag"),
        ('{"body": "YQ==", "headers": []}', "'headers' must be an object"),
        ('{"body": "YQ==", "redelivered": "yes"}', "'redelivered'"),
    ],
)
def test_damaged_lines_are_data_errors(line: str, message: str) -> None:
    with pytest.raises(DataError) as raised:
        parse_record(line, "export.jsonl:7")
    assert raised.value.exit_code is ExitCode.DATA
    assert "export.jsonl:7" in str(raised.value)
    assert message in str(raised.value)


# --------------------------------------------------------------------------- typed headers


def test_every_header_type_is_exported_typed_and_imported_byte_for_byte() -> None:
    record = Record(body=b"x", headers=decode_fields(TYPED_TABLE))
    document = json.loads(record_line(record))
    assert list(document["headers"]) == list(TYPED_NAMES)  # the table's order
    assert document["headers"] == {
        "t-bool": True,
        "b-int8": {"$int8": -5},
        "B-uint8": {"$uint8": 200},
        "s-int16": {"$int16": -300},
        "u-uint16": {"$uint16": 60000},
        "I-int32": {"$int32": 7},
        "i-uint32": {"$uint32": 3_000_000_000},
        "l-int64": {"$int64": 5},
        "L-uint64": {"$uint64": 2**63 + 5},
        "f-float": {"$float": 1.5},
        "d-double": 0.1,
        "D-decimal": {"$decimal": "123.45"},
        "S-text": "héllo",
        "S-not-utf8": {"$longstr": "//4A"},
        "x-bytes": {"$bytes": "AAEC"},
        "T-time": {"$timestamp": "2023-11-14T22:13:20+00:00"},
        "F-table": {
            "zz": {"$uint64": 2**63 + 7},
            "aa": {"$decimal": "1.250"},
            "mm": {"$float": 0.5},
        },
        "V-void": None,
        "A-array": [
            {"$int64": 5},
            {"$uint16": 40000},
            {"$longstr": "//4="},
            {"k": {"$int8": -3}},
            0.1,
        ],
    }
    back = parse_record(record_line(record), "f:1")
    assert record_problem(back) is None  # an unsigned 64-bit value read with its bytes is fine
    imported = back.headers
    assert isinstance(imported, EncodedTable)
    assert imported.encoded == TYPED_TABLE
    assert encode_fields(imported) == TYPED_TABLE  # what an import publishes


@given(raw_tables())
def test_any_typed_table_round_trips_through_a_file(table: bytes) -> None:
    record = Record(body=b"", headers=decode_fields(table) or None)
    imported = parse_record(record_line(record), "f:1").headers
    assert encode_fields(imported or {}) == table


def test_files_without_types_are_read_as_before() -> None:
    line = json.dumps(
        {
            "body": "eA==",
            "headers": {
                "small": 5,
                "wide": 200,
                "huge": 2**40,
                "ratio": 0.25,
                "blob": {"$bytes": "AP8="},
                "at": {"$timestamp": "2024-05-01T10:00:00+00:00"},
                "nested": {"$table": {"$odd": [1, "a"]}},
            },
        }
    )
    headers = parse_record(line, "f:1").headers
    assert headers == {
        "small": 5,
        "wide": 200,
        "huge": 2**40,
        "ratio": 0.25,
        "blob": b"\x00\xff",
        "at": T0,
        "nested": {"$odd": [1, "a"]},
    }
    assert isinstance(headers, EncodedTable)
    tags = [(name, field.tag) for name, field in raw_fields(headers.encoded)]
    assert tags == [  # as rr types a plain value
        ("small", "b"),
        ("wide", "s"),
        ("huge", "l"),
        ("ratio", "d"),
        ("blob", "x"),
        ("at", "T"),
        ("nested", "F"),
    ]


def test_a_value_amqp_cannot_carry_is_left_to_the_import_check() -> None:
    line = json.dumps({"body": "eA==", "headers": {"big": 2**70, "typed": {"$int32": 7}}})
    record = parse_record(line, "f:1")
    assert record.headers == {"big": 2**70, "typed": 7}
    assert record_problem(record) == (
        "headers.big: 1180591620717411303424 is outside a signed 64-bit integer, which AMQP carries"
    )


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"$int8": 300}, "300 does not fit $int8"),
        ({"$uint32": -1}, "-1 does not fit $uint32"),
        ({"$int64": "5"}, "$int64 must hold an integer"),
        ({"$float": "fast"}, "$float must hold a number"),
        ({"$float": 1e39}, "does not fit $float"),
        ({"$decimal": "-1.5"}, "$decimal must hold a decimal number as text"),
        ({"$decimal": "1E-300"}, "does not fit an AMQP decimal"),
        ({"$timestamp": "yesterday"}, "ISO 8601"),
        ({"$timestamp": -1}, "do not fit an AMQP timestamp"),
        ({"$longstr": 5}, "base64 text expected"),
        ({"$nope": 5}, "unknown tag '$nope'"),
    ],
)
def test_damaged_typed_values_are_data_errors(value: Any, message: str) -> None:
    line = json.dumps({"body": "eA==", "headers": {"h": [value]}})
    with pytest.raises(DataError) as raised:
        parse_record(line, "export.jsonl:3")
    assert "export.jsonl:3: headers.h[0]" in str(raised.value)
    assert message in str(raised.value)
