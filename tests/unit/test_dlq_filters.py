"""--where: parsing (malformed = usage error, exit 2) and matching."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from rabbitctl_retry.dlq.filters import (
    AgeCondition,
    HeaderCondition,
    IdCondition,
    SearchCondition,
    TextCondition,
    matches,
    parse_all,
    parse_where,
)
from rabbitctl_retry.dlq.origin import BODY_SEARCHED_BYTES, WaitQueues, contents_of, facts
from rabbitctl_retry.errors import ExitCode, UsageError

NOW = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)


def letter(
    origin: str = "refunds",
    reason: str = "rejected",
    age: timedelta = timedelta(hours=2),
    **extra: object,
) -> dict[str, object]:
    return {
        "x-death": [
            {
                "queue": origin,
                "reason": reason,
                "count": 1,
                "exchange": "",
                "routing-keys": [origin],
                "time": NOW - age,
            },
            {
                "queue": f"{origin}.retry",
                "reason": "expired",
                "count": 1,
                "exchange": "",
                "routing-keys": [origin],
                "time": NOW - age - timedelta(minutes=1),
            },
        ],
        **extra,
    }


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("origin=refunds", TextCondition("origin", "refunds", text="origin=refunds")),
        ("origin != refunds", TextCondition("origin", "refunds", True, text="origin != refunds")),
        (
            "reason=delivery_limit",
            TextCondition("reason", "delivery_limit", text="reason=delivery_limit"),
        ),
        ("queue=a.retry", TextCondition("queue", "a.retry", text="queue=a.retry")),
        ("header.x-tenant=acme", HeaderCondition("x-tenant", "acme", text="header.x-tenant=acme")),
        ("header.x-tenant=", HeaderCondition("x-tenant", "", text="header.x-tenant=")),
        ("header.n!=3", HeaderCondition("n", "3", True, text="header.n!=3")),
        ("age>1h", AgeCondition(">", 3_600_000, text="age>1h")),
        ("age<10m", AgeCondition("<", 600_000, text="age<10m")),
        ("age >= 30s", AgeCondition(">=", 30_000, text="age >= 30s")),
        ("age<=1d", AgeCondition("<=", 86_400_000, text="age<=1d")),
    ],
)
def test_parse(text: str, expected: object) -> None:
    assert parse_where(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "",
        "origin",
        "refunds",
        "origin=",
        "colour=red",
        "origin>refunds",
        "age=1h",
        "age>soon",
        "age>1 hour",
        "header.=x",
        "=x",
    ],
)
def test_malformed_expressions_are_usage_errors(text: str) -> None:
    with pytest.raises(UsageError) as raised:
        parse_where(text)
    assert raised.value.exit_code is ExitCode.USAGE
    assert repr(text) in str(raised.value)


@pytest.mark.parametrize(
    ("wheres", "headers", "expected"),
    [
        ([], letter(), True),
        (["origin=refunds"], letter(), True),
        (["origin=payouts"], letter(), False),
        (["origin!=payouts"], letter(), True),
        (["reason=rejected"], letter(), True),
        (["reason=expired"], letter(), False),  # the wait queue's reason is not the reason
        (["queue=refunds.retry"], letter(), True),
        (["queue=payouts"], letter(), False),
        (["header.x-tenant=acme"], letter(**{"x-tenant": "acme"}), True),
        (["header.x-tenant=acme"], letter(**{"x-tenant": b"acme"}), True),
        (["header.x-tenant=acme"], letter(**{"x-tenant": "other"}), False),
        (["header.x-tenant=acme"], letter(), False),
        (["header.x-tenant!=acme"], letter(), True),
        (["header.n=3"], letter(n=3), True),
        (["header.flag=true"], letter(flag=True), True),
        (["age>1h"], letter(age=timedelta(hours=2)), True),
        (["age>1h"], letter(age=timedelta(minutes=30)), False),
        (["age<1h"], letter(age=timedelta(minutes=30)), True),
        (["age>=2h"], letter(age=timedelta(hours=2)), True),
        (["age<=2h"], letter(age=timedelta(hours=2)), True),
        (["age<1h"], {"rr-origin-queue": "refunds"}, False),  # unknown age never matches
        (["age>1h"], {"rr-origin-queue": "refunds"}, False),
        (["age<1h"], {"rr-failed-at": "2024-05-01T11:59:00.000Z"}, True),
        (["origin=refunds", "reason=rejected", "age>1h"], letter(), True),
        (["origin=refunds", "reason=delivery_limit"], letter(), False),
    ],
)
def test_matching(wheres: list[str], headers: dict[str, object], expected: bool) -> None:
    conditions = parse_all(wheres)
    assert matches(conditions, facts(headers, WaitQueues()), NOW) is expected


# ------------------------------------------------------------------ id= and text= (#47)


def searched(
    wheres: list[str],
    *,
    message_id: str | None = "m-1",
    body: bytes = b"",
    headers: dict[str, object] | None = None,
    undecodable: tuple[str, ...] = (),
) -> bool:
    table = letter(**(headers or {}))
    contents = contents_of(message_id, body, undecodable)
    return matches(parse_all(wheres), facts(table, WaitQueues(), contents), NOW)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("id=m-1", IdCondition("m-1", text="id=m-1")),
        ("id != m-1", IdCondition("m-1", True, text="id != m-1")),
        ("text=TimeOut", SearchCondition("timeout", text="text=TimeOut")),
        ("text!= gone ", SearchCondition("gone", True, text="text!= gone ")),
    ],
)
def test_parse_id_and_text(text: str, expected: object) -> None:
    assert parse_where(text) == expected


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("id=", "give a message id after ="),
        ("id!=  ", "give a message id after !="),
        ("text=", "give a word to search for after ="),
        ("text=" + "x" * 257, "the word is 257 characters; text= searches for at most 256"),
        ("text<x", "only age compares with < or >"),
        ("id>=4", "only age compares with < or >"),
        ("text==x", "unknown operator '=='"),
    ],
)
def test_id_and_text_errors_are_usage_errors(text: str, said: str) -> None:
    with pytest.raises(UsageError) as raised:
        parse_where(text)
    assert raised.value.exit_code == ExitCode.USAGE
    assert said in str(raised.value)


def test_a_word_of_256_characters_is_searched_for() -> None:
    word = "y" * 256
    assert searched([f"text={word}"], body=word.encode())
    assert not searched([f"text={word}"], body=word[:-1].encode())


def test_id_equals_the_message_id_only() -> None:
    assert searched(["id=m-1"])
    assert not searched(["id=m-2"])
    assert not searched(["id=M-1"])  # ids are compared exactly
    assert searched(["id!=m-2"])
    assert not searched(["id!=m-1"])


def test_a_letter_without_an_id_never_equals() -> None:
    assert not searched(["id=m-1"], message_id=None)
    assert searched(["id!=m-1"], message_id=None)


@pytest.mark.parametrize(
    ("where", "headers", "body"),
    [
        ("text=timeout", {"rr-error-type": "TimeoutError"}, b""),
        ("text=GATEWAY", {"rr-error-message": b"bad gateway from upstream"}, b""),
        ("text=acme", {"tenant": "ACME corp"}, b""),
        ("text=4711", {"order-number": 4711}, b""),
        ("text=true", {"urgent": True}, b""),
        ("text=card declined", {}, b'{"why": "Card Declined"}'),
        ("text=\u00fcber", {}, "\u00dcBER".encode()),
    ],
)
def test_text_is_found_case_insensitively_in_headers_and_body(
    where: str, headers: dict[str, object], body: bytes
) -> None:
    assert searched([where], headers=headers, body=body)
    negated = where.replace("text=", "text!=")
    assert not searched([negated], headers=headers, body=body)


def test_text_is_not_found_where_it_is_not() -> None:
    assert not searched(["text=timeout"], headers={"rr-error-type": "ValueError"}, body=b"ok")
    assert searched(["text!=timeout"], headers={"rr-error-type": "ValueError"}, body=b"ok")


def test_the_body_is_searched_in_its_first_kib_only() -> None:
    inside = b"." * (BODY_SEARCHED_BYTES - len(b"needle")) + b"needle"
    beyond = b"." * BODY_SEARCHED_BYTES + b"needle"
    straddling = b"." * (BODY_SEARCHED_BYTES - 3) + b"needle"
    assert searched(["text=needle"], body=inside)
    assert not searched(["text=needle"], body=beyond)
    assert not searched(["text=needle"], body=straddling)


def test_a_body_that_is_no_utf8_is_searched_with_replacement() -> None:
    assert searched(["text=after"], body=b"\xff\xfe before after")


def test_tables_are_not_searched_as_text() -> None:
    # the x-death table names the origin queue "refunds": no header value as text does
    assert not searched(["text=refunds"])


def test_undecodable_properties_match_no_id_or_text_condition() -> None:
    for where in ("id=m-1", "id!=m-1", "text=anything", "text!=anything"):
        assert not searched([where], body=b"anything", undecodable=("headers",))


def test_facts_without_contents_match_no_id_or_text_condition() -> None:
    found = facts(letter(), WaitQueues())
    assert not matches(parse_all(["id!=x"]), found, NOW)
    assert not matches(parse_all(["text!=x"]), found, NOW)
    assert matches(parse_all(["origin=refunds"]), found, NOW)


def test_id_and_text_combine_with_the_other_keys() -> None:
    headers = {"rr-error-type": "TimeoutError"}
    assert searched(["text=timeout", "id=m-1", "origin=refunds", "age>1h"], headers=headers)
    assert not searched(["text=timeout", "id=m-1", "age<1h"], headers=headers)
