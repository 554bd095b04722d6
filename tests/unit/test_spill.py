"""dlq/spill.py: rows kept in order, equal to what was appended, in bounded memory, whatever the
chunk."""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from rabbitctl_retry.dlq.spill import SpilledRows

json_like = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.floats(allow_nan=False),
        st.text(max_size=10),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=5), inner, max_size=4)
    ),
    max_leaves=12,
)


@given(st.lists(json_like, max_size=40), st.integers(min_value=1, max_value=6))
def test_every_row_comes_back_equal_and_in_order(appended: list[Any], chunk: int) -> None:
    rows: SpilledRows[Any] = SpilledRows(chunk=chunk)
    for row in appended:
        rows.append(row)
    assert list(rows) == appended
    assert list(rows) == appended  # read again: the same
    assert len(rows) == len(appended)
    # the same types, too: True stays True (not 1), a tuple stays a tuple
    assert [type(row) for row in rows] == [type(row) for row in appended]


def test_tuples_stay_tuples() -> None:
    rows: SpilledRows[tuple[str | None, int]] = SpilledRows(chunk=2)
    for number in range(5):
        rows.append((None if number % 2 else f"m{number}", number))
    assert list(rows) == [("m0", 0), (None, 1), ("m2", 2), (None, 3), ("m4", 4)]


@given(st.lists(json_like, min_size=1, max_size=20), st.integers(min_value=1, max_value=4))
def test_rows_appended_while_reading_are_kept_and_the_reading_is_a_snapshot(
    appended: list[Any], chunk: int
) -> None:
    rows: SpilledRows[Any] = SpilledRows(chunk=chunk)
    for row in appended:
        rows.append(row)
    seen = []
    for row in rows:
        seen.append(row)
        rows.append(row)
    assert seen == appended
    assert list(rows) == appended + appended


def assert_flat(fill: Callable[[int], int]) -> None:
    """``fill(count)`` stores ``count`` rows and says how many it holds: the peak traced
    memory of 100,000 must stay near that of 10,000 (a list of either kind of row takes over
    10 MB at 100,000)."""

    def peak_bytes(count: int) -> int:
        tracemalloc.start()
        try:
            assert fill(count) == count
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    small, big = peak_bytes(10_000), peak_bytes(100_000)
    assert big < small * 1.5, (small, big)
    assert big < 4_000_000, big


def test_memory_stays_flat_in_the_number_of_rows() -> None:
    """100,000 message documents hold about what 10,000 hold: the rest wait in the file."""

    def fill(count: int) -> int:
        rows: SpilledRows[dict[str, Any]] = SpilledRows(chunk=256)
        for number in range(count):
            rows.append({"position": number, "message_id": f"m-{number:08}", "body": "x" * 200})
        return len(rows)

    assert_flat(fill)
