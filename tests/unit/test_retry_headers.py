"""One rule for every count rr reads from a header: well-formed or malformed, never raising."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rabbitctl_retry.retry.headers import (
    MAX_COUNT,
    PUBLISHED_AT_HEADER,
    attempt_of,
    count_value,
    malformed_counts,
    published_at_ms,
)

H = "x-ruststream-retry-count"


@pytest.mark.parametrize(
    ("value", "count"),
    [
        ("3", 3),
        (b"3", 3),
        (3, 3),
        (0, 0),
        (" 7 ", 7),
        ("0007", 7),
        (str(MAX_COUNT), MAX_COUNT),
        (MAX_COUNT, MAX_COUNT),
        # malformed: None
        ("²", None),  # str.isdigit() is true, int() raises
        ("٣", None),  # an Arabic-Indic digit: not ASCII
        ("-1", None),
        (-1, None),
        ("1e3", None),
        ("1_000", None),
        ("", None),
        ("   ", None),
        ("9" * 5000, None),
        (2**63 - 1, None),
        (MAX_COUNT + 1, None),
        (str(MAX_COUNT + 1), None),
        (True, None),
        (1.0, None),
        (b"\xff", None),
        (b"9" * 5000, None),
        ({"count": 1}, None),
        ([1], None),
        (None, None),
    ],
)
def test_count_value(value: object, count: int | None) -> None:
    assert count_value(value) == count


@given(
    st.one_of(
        st.text(),
        st.binary(),
        st.integers(),
        st.floats(allow_nan=True),
        st.booleans(),
        st.none(),
        st.lists(st.integers()),
        st.dictionaries(st.text(), st.integers()),
    )
)
def test_count_value_never_raises_and_stays_in_bounds(value: object) -> None:
    count = count_value(value)
    assert count is None or 0 <= count <= MAX_COUNT


@given(st.dictionaries(st.sampled_from([H, "x-delivery-count", "x-death", "a"]), st.text()))
def test_attempt_never_raises(headers: dict[str, Any]) -> None:
    assert attempt_of(headers, H, "q") >= 1


@pytest.mark.parametrize(
    ("headers", "malformed"),
    [
        (None, []),
        ({}, []),
        ({H: "2", "x-delivery-count": 1, "rr-replayed-count": "1"}, []),
        ({H: "²"}, [H]),
        ({H: "9" * 5000, "x-delivery-count": -3}, [H, "x-delivery-count"]),
        ({"rr-replayed-count": 2**63 - 1}, ["rr-replayed-count"]),
        ({"x-death": [{"count": "x"}]}, ["x-death"]),
        ({"x-death": [{"count": 1}]}, []),
        ({"x-death": "not a list"}, []),
        ({"other": "²"}, []),  # only the headers rr reads
    ],
)
def test_malformed_counts(headers: dict[str, Any] | None, malformed: list[str]) -> None:
    assert malformed_counts(headers, H) == malformed


def test_the_acquired_count_is_read_and_never_counts_as_an_attempt() -> None:
    """RabbitMQ 4.3's x-acquired-count counts every hand-out (nacks too); attempts stay
    1 + retry header + x-delivery-count, and a malformed one is named like the others."""
    from rabbitctl_retry.runtime.message import Message
    from rabbitctl_retry.transport.base import Delivery, Properties

    headers: dict[str, Any] = {"x-acquired-count": 7, "x-delivery-count": 1, H: "1"}
    message = Message(Delivery(body=b"", properties=Properties(headers=headers)), "q", H)
    assert (message.acquired_count, message.delivery_count, message.attempt) == (7, 1, 3)
    bare = Message(Delivery(body=b"", properties=Properties()), "q", H)
    assert bare.acquired_count is None
    assert malformed_counts({"x-acquired-count": "lots"}, H) == ["x-acquired-count"]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (b"1765000000123", 1765000000123),  # how RustStream stamps it: a long string
        ("1765000000123", 1765000000123),
        (1765000000123, 1765000000123),
        (b"-5", None),
        (b"17650000001234567", None),  # beyond MAX_UNIX_MS
        (b"soon", None),
        (1.5, None),
        (True, None),
    ],
)
def test_published_at_ms_reads_unix_milliseconds_and_refuses_the_rest(
    value: object, expected: int | None
) -> None:
    assert published_at_ms({PUBLISHED_AT_HEADER: value}) == expected  # type: ignore[dict-item]


def test_published_at_ms_is_none_without_the_header() -> None:
    assert published_at_ms(None) is None
    assert published_at_ms({"other": b"1"}) is None
