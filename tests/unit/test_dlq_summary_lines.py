"""The pure parts of ``rr dlq inspect --summary`` and ``--format lines``: age buckets, the
counters' order, the oldest and newest, one line per letter."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rabbitctl_retry.dlq.letter import Letter, letter_of
from rabbitctl_retry.dlq.oneline import SNIPPET_CHARS, age_text, body_snippet, letter_line
from rabbitctl_retry.dlq.origin import WaitQueues
from rabbitctl_retry.dlq.summary import AGE_BUCKETS, AGE_UNKNOWN, Summary, age_bucket
from rabbitctl_retry.transport.base import Delivery, Properties

NOW = datetime(2026, 12, 1, 12, 0, 0, tzinfo=UTC)
H = "x-ruststream-retry-count"


def letter(
    position: int,
    *,
    origin: str = "refunds",
    reason: str = "rejected",
    ago_s: float | None = 10.0,
    retry: str | None = "2",
    message_id: str | None = None,
    body: bytes = b"{}",
) -> Letter:
    headers: dict[str, object] = {}
    if ago_s is not None:
        headers["x-death"] = [
            {
                "count": 1,
                "exchange": "",
                "queue": origin,
                "reason": reason,
                "routing-keys": [origin],
                "time": NOW - timedelta(seconds=ago_s),
            }
        ]
    if retry is not None:
        headers[H] = retry
    delivery = Delivery(
        body=body,
        properties=Properties(message_id=message_id or f"m{position}", headers=headers),  # type: ignore[arg-type]
    )
    return letter_of(position, delivery, retry_header=H, wait_queues=WaitQueues())


@pytest.mark.parametrize(
    ("ago_s", "bucket"),
    [
        (0, "< 1 min"),
        (59.999, "< 1 min"),
        (60, "< 1 h"),
        (3_599, "< 1 h"),
        (3_600, "< 1 day"),
        (86_400, "< 1 week"),
        (604_800, "older"),
        (-30, "< 1 min"),  # dead-lettered "in the future": clocks apart
    ],
)
def test_age_buckets_have_exclusive_upper_bounds(ago_s: float, bucket: str) -> None:
    assert age_bucket(NOW - timedelta(seconds=ago_s), NOW) == bucket


def test_no_time_is_the_unknown_bucket() -> None:
    assert age_bucket(None, NOW) == AGE_UNKNOWN


def test_summary_counts_orders_and_finds_the_extremes() -> None:
    summary = Summary(now=NOW)
    letters = [
        letter(1, origin="refunds", ago_s=30, retry="3"),
        letter(2, origin="payouts", reason="delivery_limit", ago_s=7_200, retry=None),
        letter(3, origin="payouts", reason="delivery_limit", ago_s=7_200, retry="1"),
        letter(4, origin="payouts", ago_s=None, retry="x"),  # no time, no usable count
        letter(5, origin="refunds", ago_s=5, retry="1"),
    ]
    for each in letters:
        summary.add(each)
    assert summary.count == 5
    # letter 4 has no x-death, so nothing names an origin or a reason
    assert summary.origins.most_common() == [("refunds", 2), ("payouts", 2), (None, 1)]
    assert summary.reasons == {"rejected": 2, "delivery_limit": 2, None: 1}
    assert summary.retry_rows() == [(1, 2), (3, 1), (None, 2)]
    assert summary.age_rows() == [("< 1 min", 2), ("< 1 day", 2), (AGE_UNKNOWN, 1)]
    assert summary.oldest is not None
    assert (summary.oldest.position, summary.oldest.message_id) == (2, "m2")  # first of two
    assert summary.newest is not None
    assert (summary.newest.position, summary.newest.message_id) == (5, "m5")
    assert summary.body_bytes == 10


def test_of_letters_dead_lettered_in_the_same_second_the_newest_is_the_last() -> None:
    summary = Summary(now=NOW)
    for position in (1, 2, 3):
        summary.add(letter(position, ago_s=60))
    assert summary.oldest is not None
    assert summary.newest is not None
    assert (summary.oldest.position, summary.newest.position) == (1, 3)


@given(st.lists(st.integers(min_value=-10, max_value=10**7), max_size=60))
def test_every_letter_lands_in_exactly_one_age_bucket(ages_s: list[int]) -> None:
    summary = Summary(now=NOW)
    for position, ago_s in enumerate(ages_s, start=1):
        summary.add(letter(position, ago_s=ago_s))
    assert sum(n for _, n in summary.age_rows()) == len(ages_s)
    order = [name for name, _ in AGE_BUCKETS]
    names = [name for name, _ in summary.age_rows()]
    assert names == sorted(names, key=order.index)


@pytest.mark.parametrize(
    ("ago_s", "text"),
    [(0, "0s"), (59, "59s"), (60, "1m"), (3_599, "59m"), (3_600, "1h"), (90_000, "1d")],
)
def test_age_text(ago_s: int, text: str) -> None:
    assert age_text(NOW - timedelta(seconds=ago_s), NOW) == text
    assert age_text(None, NOW) == "-"


def test_body_snippets_stay_on_one_line_and_say_when_they_are_cut() -> None:
    assert body_snippet(b"") == "(empty body)"
    assert body_snippet(b'{"a":\n  1}') == '{"a": 1}'
    long = b"x" * (SNIPPET_CHARS + 1)
    assert body_snippet(long) == "x" * SNIPPET_CHARS + "…"
    assert body_snippet(b"x" * SNIPPET_CHARS) == "x" * SNIPPET_CHARS
    assert body_snippet(b"\x00\x01") == "base64:AAE="
    assert body_snippet(bytes(200)).endswith("…")
    assert "\n" not in body_snippet(b"a\r\nb\n\n\tc")


def test_a_letter_line() -> None:
    line = letter_line(letter(7, ago_s=125, retry="4", message_id="pay-1"), NOW)
    assert line == "7  pay-1  refunds  rejected  retries=4  age=2m  {}"
    bare = letter_line(letter(8, ago_s=None, retry=None), NOW, with_body=False)
    assert bare == "8  m8  (unknown)  (unknown)  retries=-  age=-"
