"""Where a dead letter failed: rr-origin-queue, else x-death skipping wait queues."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from rabbitctl_retry.dlq.origin import (
    REASON_MAX_ATTEMPTS,
    WaitQueues,
    death_reason,
    facts,
    failed_at,
    origin_queue,
    wait_queue_named,
)
from rabbitctl_retry.topology.load import load_text
from rabbitctl_retry.topology.naming import is_derived_wait_queue

T0 = datetime(2024, 5, 1, 10, 0, tzinfo=UTC)


def death(queue: str, reason: str, count: int = 1, time: datetime = T0) -> dict[str, object]:
    return {
        "queue": queue,
        "reason": reason,
        "count": count,
        "exchange": "",
        "routing-keys": [queue],
        "time": time,
    }


AFTER_A_DELAYED_RETRY = {
    # a quorum payout: it waited in payouts.retry once (expired back), then the server
    # dead-lettered it from payouts. x-first-death-queue names the wait queue.
    "x-death": [death("payouts", "delivery_limit"), death("payouts.retry", "expired", 2)],
    "x-first-death-queue": "payouts.retry",
    "x-first-death-reason": "expired",
}

TOPOLOGY = load_text(
    """
[queues.refunds]
max_attempts = 5
dead_letter = "refunds.dead"
delay = "dlx-ttl"
wait_queue = "refunds.later"

[queues.payouts]
type = "quorum"
max_attempts = 5
dead_letter = "payouts.dead"
delay = "dlx-ttl"
delay_tiers = ["1s", "30s"]
"""
)


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        pytest.param(None, None, id="no headers"),
        pytest.param({}, None, id="empty"),
        pytest.param({"rr-origin-queue": "refunds"}, "refunds", id="rr's own copy"),
        pytest.param({"rr-origin-queue": b"refunds"}, "refunds", id="bytes header"),
        pytest.param(
            {"rr-origin-queue": "refunds", "x-death": [death("other", "rejected")]},
            "refunds",
            id="rr-origin-queue wins over x-death",
        ),
        pytest.param({"x-death": [death("payouts", "delivery_limit")]}, "payouts", id="server"),
        pytest.param(AFTER_A_DELAYED_RETRY, "payouts", id="not x-first-death-queue"),
        pytest.param(
            {"x-death": [death("payouts.retry", "expired"), death("payouts", "rejected")]},
            "payouts",
            id="a wait queue is never the origin, even when newest",
        ),
        pytest.param(
            {"x-death": [death("orders.retry.30s", "expired"), death("orders", "rejected")]},
            "orders",
            id="tier wait queue",
        ),
        pytest.param({"x-death": [death("refunds.retry", "expired")]}, None, id="only a wait q"),
        pytest.param({"x-death": "garbage"}, None, id="malformed x-death"),
        pytest.param({"x-death": ["garbage", death("a", "rejected")]}, "a", id="bad entry"),
    ],
)
def test_origin_without_a_topology(headers: dict[str, object] | None, expected: str | None) -> None:
    assert origin_queue(headers, WaitQueues()) == expected


def test_a_topology_names_its_own_wait_queues() -> None:
    waits = WaitQueues.of(TOPOLOGY)
    assert "refunds.later" in waits
    assert "payouts.retry.1s" in waits
    assert "payouts.retry.30s" in waits
    # a name of the shape rr derives that the topology does not declare as a queue of its own
    # (orders.retry) is still a wait queue: rr never replays into one
    assert "orders.retry" in waits
    headers = {"x-death": [death("refunds.later", "expired"), death("refunds", "rejected")]}
    assert origin_queue(headers, waits) == "refunds"
    assert origin_queue({"x-death": [death("orders.retry", "rejected")]}, waits) is None
    # a queue the topology declares is never a wait queue, whatever its name looks like
    declared = WaitQueues.of(load_text('[queues."legacy.retry"]\n'))
    assert "legacy.retry" not in declared
    assert "orders.retry" in declared
    assert origin_queue({"rr-origin-queue": "legacy.retry"}, declared) == "legacy.retry"


@pytest.mark.parametrize(
    ("headers", "origin", "wait_queue"),
    [
        ({"rr-origin-queue": "orders.retry"}, None, "orders.retry"),
        ({"rr-origin-queue": b"orders.retry.30s"}, None, "orders.retry.30s"),
        (
            {"rr-origin-queue": "orders.retry", "x-death": [death("orders", "rejected")]},
            "orders",
            "orders.retry",
        ),
        ({"x-death": [death("a.retry", "expired"), death("b.retry.1h", "ttl")]}, None, "a.retry"),
        ({"rr-origin-queue": "orders"}, "orders", None),
    ],
)
def test_rr_origin_queue_naming_a_wait_queue_is_no_origin(
    headers: dict[str, object], origin: str | None, wait_queue: str | None
) -> None:
    assert origin_queue(headers, WaitQueues()) == origin
    assert wait_queue_named(headers, WaitQueues()) == wait_queue


@pytest.mark.parametrize(
    ("name", "derived"),
    [
        ("refunds.retry", True),
        ("refunds.retry.30s", True),
        ("refunds.retry.1500ms", True),
        ("a.b.retry.5m", True),
        ("refunds", False),
        ("refunds.retry.soon", False),
        ("refunds.retryer", False),
        (".retry", False),
        ("retry", False),
    ],
)
def test_derived_wait_queue_names(name: str, derived: bool) -> None:
    assert is_derived_wait_queue(name) is derived
    assert (name in WaitQueues()) is derived


@pytest.mark.parametrize(
    ("headers", "origin", "reason"),
    [
        (AFTER_A_DELAYED_RETRY, "payouts", "delivery_limit"),
        ({"rr-origin-queue": "refunds"}, "refunds", REASON_MAX_ATTEMPTS),
        ({"x-death": [death("a", "maxlen")]}, "a", "maxlen"),
        ({"x-death": [death("a.retry", "expired")]}, None, "expired"),
        ({}, None, None),
    ],
)
def test_reason_is_the_origins_death(
    headers: dict[str, object], origin: str | None, reason: str | None
) -> None:
    found = origin_queue(headers, WaitQueues())
    assert found == origin
    assert death_reason(headers, found) == reason


def test_failed_at_is_the_latest_of_x_death_and_rr_failed_at() -> None:
    later = T0 + timedelta(minutes=5)
    assert failed_at({"x-death": [death("a", "rejected", time=T0)]}) == T0
    assert failed_at({"rr-failed-at": "2024-05-01T10:05:00.000Z"}) == later
    both = {
        "x-death": [death("a", "rejected", time=T0)],
        "rr-failed-at": "2024-05-01T10:05:00.000Z",
    }
    assert failed_at(both) == later
    assert failed_at({"rr-failed-at": "not a time"}) is None
    assert failed_at(None) is None


def test_facts_gather_every_queue_of_the_history() -> None:
    found = facts({**AFTER_A_DELAYED_RETRY, "rr-origin-queue": "x"}, WaitQueues())
    assert found.origin == "x"
    assert found.queues == {"x", "payouts", "payouts.retry"}
    assert found.failed_at == T0
