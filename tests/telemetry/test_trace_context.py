"""``telemetry/trace_context.py``: the W3C ``traceparent`` read without OpenTelemetry."""

from __future__ import annotations

import pytest

from rabbitctl_retry.telemetry.trace_context import TraceParent, parse_traceparent, trace_id_of

VALID = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def test_a_valid_traceparent() -> None:
    parsed = parse_traceparent(VALID)
    assert parsed == TraceParent("00", "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331", 1)
    assert parsed.sampled
    assert parsed.header() == VALID
    assert parse_traceparent(VALID.encode()) == parsed
    assert trace_id_of({"traceparent": VALID}) == "0af7651916cd43dd8448eb211c80319c"


def test_a_later_version_may_carry_more_fields() -> None:
    parsed = parse_traceparent("01" + VALID[2:] + "-what-comes-next")
    assert parsed is not None
    assert parsed.version == "01"


@pytest.mark.parametrize(
    "value",
    [
        None,
        b"garbage",
        "00-" + "a" * 5_000,
        b"\xff" * 55,
        {"a": 1},
        ["00"],
        42,
        True,
        "ff" + VALID[2:],
        VALID + "-more",  # version 00 has exactly four fields
        VALID.upper(),
        "00-" + "0" * 32 + VALID[35:],
        VALID[:36] + "0" * 16 + "-01",
        VALID[:-1],
    ],
)
def test_malformed_is_none(value: object) -> None:
    assert parse_traceparent(value) is None
    assert trace_id_of({"traceparent": value}) is None  # type: ignore[dict-item]


def test_no_headers_no_trace_id() -> None:
    assert trace_id_of(None) is None
    assert trace_id_of({}) is None
