"""--where: parsing (malformed = usage error, exit 2) and matching."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from rabbitctl_retry.dlq.filters import (
    AgeCondition,
    HeaderCondition,
    TextCondition,
    matches,
    parse_all,
    parse_where,
)
from rabbitctl_retry.dlq.origin import WaitQueues, facts
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
