"""Pure: dlq/groups.py, the causes of dead letters and their group ids (docs/reference/dlq.md,
"Groups"), and ``--where group=ID`` (dlq/filters.py)."""

from __future__ import annotations

import re
import tracemalloc
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rabbitctl_retry.dlq.filters import GroupCondition, matches, parse_where
from rabbitctl_retry.dlq.groups import (
    ALL_DIMENSIONS,
    MAX_NAMES,
    MAX_NORMALISED_CHARACTERS,
    Dimension,
    Grouping,
    Seen,
    key_of,
    normalise_message,
    parse_dimensions,
    parse_group_id,
)
from rabbitctl_retry.dlq.origin import WaitQueues, facts
from rabbitctl_retry.errors import UsageError
from rabbitctl_retry.fields import FieldValue

NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)


def rr_letter(
    message: str, *, error_type: str = "PaymentDeclined", origin: str = "refunds"
) -> dict[str, FieldValue]:
    return {
        "rr-origin-queue": origin,
        "rr-error-type": error_type,
        "rr-error-message": message,
        "rr-handler": "billing.handlers:refund",
        "rr-failed-at": "2026-12-03T11:00:00.000Z",
    }


def seen(headers: dict[str, FieldValue] | None, n: int = 1, **extra: object) -> Seen:
    found = facts(headers, WaitQueues())
    return Seen(
        queue=str(extra.get("queue", "dead")),
        position=n,
        message_id=f"m-{n}",
        headers=headers,
        origin=found.origin,
        reason=found.reason,
        failed_at=found.failed_at,
    )


@pytest.mark.parametrize(
    ("raw", "normalised"),
    [
        ("card 4242 declined", "card <n> declined"),
        ("card 1111 declined", "card <n> declined"),
        ("order 5f1c2a9e-0b7d-4c3e-9a11-2b3c4d5e6f70 not found", "order <uuid> not found"),
        ("tx 3fa9b2c1d4e5 timed out after 2.5 s", "tx <hex> timed out after <n> s"),
        ("hash 0xDEADBEEF01", "hash <hex>"),
        ("deadbeefcafe is a word here", "deadbeefcafe is a word here"),
        ("  many\n\tspaces   here ", "many spaces here"),
        ("order_123 and v2", "order_<n> and v<n>"),
    ],
)
def test_messages_lose_their_variable_parts(raw: str, normalised: str) -> None:
    assert normalise_message(raw) == normalised


def test_a_long_message_is_cut() -> None:
    cut = normalise_message("x" * 100_000)
    assert len(cut) == MAX_NORMALISED_CHARACTERS
    assert cut.endswith("…")


@given(st.text(max_size=300))
def test_normalising_twice_changes_nothing(text: str) -> None:
    once = normalise_message(text)
    assert normalise_message(once) == once
    assert len(once) <= MAX_NORMALISED_CHARACTERS


@given(st.text(alphabet=st.sampled_from("ab xyz-_.:0123456789"), max_size=80), st.randoms())
def test_other_digits_are_the_same_group(text: str, rng: object) -> None:
    import random

    assert isinstance(rng, random.Random)
    other = re.sub(r"\d", lambda _: str(rng.randrange(10)), text)
    assert normalise_message(other) == normalise_message(text)


def test_hostile_messages_are_read_in_linear_time() -> None:
    # a long run of hex digits followed by a letter that ends every match attempt
    for text in ("a1" * 50_000 + "g", "1." * 50_000, "0" * 100_000 + "x"):
        assert len(normalise_message(text)) <= MAX_NORMALISED_CHARACTERS


def test_the_id_says_its_dimensions_and_never_changes() -> None:
    key = key_of(
        ALL_DIMENSIONS,
        headers=rr_letter("card 4242 declined"),
        origin="refunds",
        reason="max_attempts",
    )
    # pinned: an id printed yesterday must still pick the same letters today (a change of
    # the hashing or of the normalisation breaks this on purpose: say so in the CHANGELOG)
    assert key.id == "tmoh-4da56d1a43e5"
    assert (
        key.id
        == key_of(
            ALL_DIMENSIONS,
            headers=rr_letter("card 1111 declined"),
            origin="refunds",
            reason="max_attempts",
        ).id
    )
    assert parse_group_id(key.id) == (ALL_DIMENSIONS, key.id.split("-")[1])


def test_ids_differ_by_every_dimension() -> None:
    base = rr_letter("card 4242 declined")
    ids = {
        key_of(ALL_DIMENSIONS, headers=headers, origin=origin, reason="max_attempts").id
        for headers, origin in (
            (base, "refunds"),
            (base, "payouts"),
            (rr_letter("card 4242 declined", error_type="Timeout"), "refunds"),
            (rr_letter("card expired"), "refunds"),
            ({**base, "rr-handler": "billing.other:refund"}, "refunds"),
        )
    }
    assert len(ids) == 5


def test_a_letter_without_rr_headers_groups_by_its_reason() -> None:
    server = {"x-death": [{"queue": "payouts", "reason": "delivery_limit", "count": 1}]}
    found = facts(server, WaitQueues())
    key = key_of(ALL_DIMENSIONS, headers=server, origin=found.origin, reason=found.reason)
    assert (key.error_type, key.message, key.origin, key.handler) == (
        "(delivery_limit)",
        None,
        "payouts",
        None,
    )
    bare = key_of(ALL_DIMENSIONS, headers=None, origin=None, reason=None)
    assert bare.error_type == "(unknown)"


@pytest.mark.parametrize(
    "hostile",
    [
        {"rr-error-type": {"nested": [1, 2]}, "rr-error-message": [b"x"], "rr-handler": 7},
        {"rr-error-type": b"\xff\xfe", "rr-error-message": b"card \xff 42"},
        {"rr-error-type": "", "rr-error-message": ""},
        {"rr-error-type": "<script>alert(1)</script>" * 100},
    ],
)
def test_hostile_headers_never_raise(hostile: dict[str, FieldValue]) -> None:
    key = key_of(ALL_DIMENSIONS, headers=hostile, origin="q", reason="rejected")
    assert re.fullmatch(r"tmoh-[0-9a-f]{12}", key.id)
    assert len(key.error_type or "") <= MAX_NORMALISED_CHARACTERS


def test_parse_dimensions() -> None:
    assert parse_dimensions("origin, type") == (Dimension.TYPE, Dimension.ORIGIN)
    assert parse_dimensions("handler,handler") == (Dimension.HANDLER,)
    with pytest.raises(ValueError, match="unknown dimension 'colour'"):
        parse_dimensions("type,colour")
    with pytest.raises(ValueError, match="at least one"):
        parse_dimensions(" , ")


@pytest.mark.parametrize(
    "text", ["", "-abc", "tmoh-", "tmoh-XYZ", "mt-0123456789ab", "tmoh-0123456789abc", "x-0"]
)
def test_what_is_not_a_group_id(text: str) -> None:
    assert parse_group_id(text) is None


def test_grouping_counts_times_origins_and_a_sample() -> None:
    grouping = Grouping()
    for n in range(10):
        headers = rr_letter(f"card {n} declined", origin=("refunds", "orders")[n % 2])
        headers["rr-failed-at"] = f"2026-12-03T11:0{n}:00.000Z"
        grouping.add(seen(headers, n + 1))
    grouping.add(seen(rr_letter("card expired"), 11))
    ranked = grouping.ranked()
    assert [g.count for g in ranked] == [5, 5, 1]
    first = ranked[0]
    assert first.origins.counts == {first.key.origin: 5}
    assert first.sample.message_id in {"m-1", "m-2"}
    assert first.sample.error_message in {"card 0 declined", "card 1 declined"}
    assert first.first_failed_at is not None
    assert first.last_failed_at is not None
    assert first.last_failed_at - first.first_failed_at == timedelta(minutes=8)


def test_groups_are_bounded_and_the_rest_counted() -> None:
    grouping = Grouping(max_groups=50)
    for n in range(200):
        grouping.add(seen(rr_letter("card declined", error_type=f"Error{chr(65 + n % 26)}{n}")))
    # "ErrorA0" and "ErrorA26" are different types; digits in a type are not normalised
    assert len(grouping.groups) == 50
    assert grouping.ungrouped == 150
    assert grouping.count == 200


def test_names_of_a_group_are_bounded() -> None:
    grouping = Grouping(dimensions=(Dimension.TYPE,))
    for n in range(MAX_NAMES + 5):
        grouping.add(seen(rr_letter("x", origin=f"q{n}"), n, queue=f"dead{n}"))
    (group,) = grouping.groups.values()
    assert len(group.origins.counts) == MAX_NAMES
    assert group.origins.others == 5
    assert group.queues.others == 5


def test_thirty_thousand_letters_of_few_causes_hold_little_memory() -> None:
    """25,000 letters after the first 5,000 add nothing that stays: even 3 bytes kept a letter
    would pass the bound. (30,000 rather than 100,000: tracemalloc makes each letter slow, and
    the bound is the same.)"""
    grouping = Grouping()
    tracemalloc.start()
    try:
        for n in range(5_000):  # past the normaliser's cache of 1,024 messages
            grouping.add(seen(rr_letter(f"card {n} declined", origin=f"q{n % 3}"), n))
        small, _ = tracemalloc.get_traced_memory()
        for n in range(5_000, 30_000):
            grouping.add(seen(rr_letter(f"card {n} declined", origin=f"q{n % 3}"), n))
        large, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(grouping.groups) == 3
    assert grouping.count == 30_000
    assert large - small < 64 * 1024  # the same three groups: no growth with the letters


def test_where_group_picks_the_letters_of_one_group() -> None:
    letters = [rr_letter("card 1 declined"), rr_letter("card 2 declined"), rr_letter("expired")]
    wanted = key_of(ALL_DIMENSIONS, headers=letters[0], origin="refunds", reason="max_attempts").id
    condition = parse_where(f"group={wanted}")
    assert isinstance(condition, GroupCondition)
    picked = [matches([condition], facts(h, WaitQueues()), NOW) for h in letters]
    assert picked == [True, True, False]
    other = parse_where(f"group!={wanted}")
    assert [matches([other], facts(h, WaitQueues()), NOW) for h in letters] == [
        False,
        False,
        True,
    ]
    by_origin = key_of((Dimension.ORIGIN,), headers=letters[2], origin="refunds", reason=None)
    assert all(
        matches([parse_where(f"group={by_origin.id}")], facts(h, WaitQueues()), NOW)
        for h in letters
    )


@pytest.mark.parametrize("text", ["group=", "group=tmoh", "group<tmoh-0123456789ab"])
def test_a_malformed_group_condition_is_a_usage_error(text: str) -> None:
    with pytest.raises(UsageError):
        parse_where(text)
