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
)
from rabbitctl_retry.errors import DataError, ExitCode
from rabbitctl_retry.transport.base import Properties

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
