"""decide(): the decision table of docs/reference/runtime.md, row by row, with exact headers and
counts."""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from rabbitctl_retry.retry.headers import attempt_of, deaths
from rabbitctl_retry.retry.outcome import MAX_DELAY_MS, Failure, Outcome, Retry, RetryAfter
from rabbitctl_retry.retry.policy import (
    AckAction,
    CopyPurpose,
    Decision,
    Event,
    RejectAction,
    RepublishAction,
    RetryPolicy,
    ScheduleAction,
    decide,
)
from rabbitctl_retry.topology.load import load_text
from rabbitctl_retry.topology.model import DelayMode

H = "x-ruststream-retry-count"
NOW = datetime(2026, 11, 30, 12, 0, 0, 123000, tzinfo=UTC)

REFUNDS = RetryPolicy(
    queue="refunds",
    max_attempts=5,
    dead_letter="refunds.dead",
    delay=DelayMode.DLX_TTL,
    wait_queue="refunds.retry",
)
PAYOUTS = RetryPolicy(queue="payouts", quorum=True, max_attempts=5, dead_letter="payouts.dead")


def copy_of(decision: Decision) -> RepublishAction:
    assert isinstance(decision.action, RepublishAction)
    return decision.action


def test_ack_and_drop() -> None:
    assert decide(REFUNDS, None, Outcome.ack(), now=NOW).action == AckAction()
    drop = decide(REFUNDS, None, Outcome.drop(), now=NOW)
    assert drop.action == RejectAction(requeue=False)
    assert drop.event is Event.DROPPED
    assert drop.destination is None
    quorum_drop = decide(PAYOUTS, None, Outcome.drop(), now=NOW)
    assert quorum_drop.action == RejectAction(requeue=False)
    assert quorum_drop.destination == "payouts.dead"


def test_classic_retry_forever_is_five_deliveries_then_one_dead_letter() -> None:
    headers: dict[str, object] | None = {"x-tenant": "acme"}
    seen = []
    for _ in range(10):
        seen.append(None if headers is None else headers.get(H))
        decision = decide(REFUNDS, headers, Outcome.retry(), now=NOW)  # type: ignore[arg-type]
        copy = copy_of(decision).copy
        if copy.purpose is CopyPurpose.DEAD_LETTER:
            break
        assert (copy.exchange, copy.routing_key) == ("", "refunds")
        headers = dict(copy.headers)
    assert seen == [None, "1", "2", "3", "4"]
    assert decision.event is Event.DEAD_LETTERED
    assert decision.attempt == 5
    assert (copy.exchange, copy.routing_key) == ("", "refunds.dead")
    assert dict(copy.headers) == {
        "x-tenant": "acme",
        H: "5",
        "rr-origin-queue": "refunds",
        "rr-failed-at": "2026-11-30T12:00:00.123Z",
    }


@pytest.mark.parametrize(("max_attempts", "calls"), [(1, 1), (3, 3), (5, 5)])
def test_cap_counts_every_delivery(max_attempts: int, calls: int) -> None:
    policy = RetryPolicy(queue="q", max_attempts=max_attempts, dead_letter="q.dead")
    headers: dict[str, object] = {}
    for call in range(1, 100):
        copy = copy_of(decide(policy, headers, Outcome.retry(), now=NOW)).copy  # type: ignore[arg-type]
        if copy.routing_key == "q.dead":
            assert call == calls
            assert copy.headers[H] == str(max_attempts)
            return
        headers = dict(copy.headers)
    pytest.fail("never dead-lettered")


def test_exception_travels_in_the_dead_letter_copy_only() -> None:
    failure = Failure(type="processor.Unavailable", message="no answer in 5s")
    below = decide(REFUNDS, {H: "1"}, Retry(failure=failure), now=NOW)
    assert "rr-error-type" not in copy_of(below).copy.headers
    at_cap = decide(
        REFUNDS,
        {H: "4", "rr-error-type": "old"},
        Retry(failure=failure),
        now=NOW,
    )
    headers = copy_of(at_cap).copy.headers
    assert headers["rr-error-type"] == "processor.Unavailable"
    assert headers["rr-error-message"] == "no answer in 5s"
    assert at_cap.failure == failure


def test_the_handler_is_named_in_the_dead_letter_copy_only() -> None:
    policy = replace(REFUNDS, handler="billing.handlers:refund")
    below = decide(policy, {H: "1"}, Outcome.retry(), now=NOW)
    assert "rr-handler" not in copy_of(below).copy.headers
    at_cap = decide(policy, {H: "4", "rr-handler": "old:one"}, Outcome.retry(), now=NOW)
    assert copy_of(at_cap).copy.headers["rr-handler"] == "billing.handlers:refund"
    # a policy that knows no handler (rr dlq tools, tests) writes none and keeps no stale one
    unnamed = decide(REFUNDS, {H: "4", "rr-handler": "old:one"}, Outcome.retry(), now=NOW)
    assert "rr-handler" not in copy_of(unnamed).copy.headers


def test_stale_error_headers_are_removed_when_the_last_failure_raised_nothing() -> None:
    decision = decide(
        REFUNDS,
        {H: "4", "rr-error-type": "old", "rr-error-message": "old"},
        Outcome.retry(),
        now=NOW,
    )
    headers = copy_of(decision).copy.headers
    assert "rr-error-type" not in headers
    assert "rr-error-message" not in headers


def test_failure_message_is_bounded() -> None:
    failure = Failure.from_exception(ValueError("x" * 5000))
    assert failure.type == "ValueError"
    assert len(failure.message) == 1000
    assert failure.message.endswith("…")


def test_header_hygiene_keeps_application_headers_and_drops_the_brokers() -> None:
    headers = {
        H: "2",
        "x-tenant": "acme",
        "trace-id": b"\x01\x02",
        "x-death": [{"count": 1, "reason": "expired", "queue": "refunds.retry"}],
        "x-first-death-queue": "refunds.retry",
        "x-first-death-reason": "expired",
        "x-first-death-exchange": "",
        "x-last-death-queue": "refunds.retry",
        "x-delivery-count": 0,
        "x-delay": 5000,
        "x-acquired-count": 1,
    }
    copy = copy_of(decide(REFUNDS, headers, Outcome.retry(), now=NOW)).copy
    assert dict(copy.headers) == {H: "3", "x-tenant": "acme", "trace-id": b"\x01\x02"}


@pytest.mark.parametrize(("header", "attempt"), [("abc", 1), ("-1", 1), ("", 1), (3, 4), (b"2", 3)])
def test_malformed_or_typed_header(header: object, attempt: int) -> None:
    assert attempt_of({H: header}, H, "q") == attempt  # type: ignore[dict-item]


def test_published_with_header_4_goes_straight_to_the_dead_letter_queue() -> None:
    decision = decide(REFUNDS, {H: "4"}, Outcome.retry(), now=NOW)
    assert copy_of(decision).copy.routing_key == "refunds.dead"
    assert copy_of(decision).copy.headers[H] == "5"


def test_no_max_attempts_is_rabbitmqs_own_requeue() -> None:
    for policy in (RetryPolicy(queue="q"), RetryPolicy(queue="q", quorum=True)):
        decision = decide(policy, {H: "7"}, Outcome.retry(), now=NOW)
        assert decision.action == RejectAction(requeue=True)
        assert decision.event is Event.REQUEUED


def test_classic_cap_without_dead_letter_rejects() -> None:
    policy = RetryPolicy(queue="q", max_attempts=2)
    assert decide(policy, {H: "1"}, Outcome.retry(), now=NOW) == Decision(
        action=RejectAction(requeue=False), event=Event.SPENT, attempt=2
    )


def test_quorum_retry_lets_the_server_count() -> None:
    events = []
    for count in (None, 1, 2, 3, 4):
        headers = {} if count is None else {"x-delivery-count": count}
        decision = decide(PAYOUTS, headers, Outcome.retry(), now=NOW)
        assert decision.action == RejectAction(requeue=True)
        events.append((decision.attempt, decision.event))
    assert events == [
        (1, Event.RETRIED),
        (2, Event.RETRIED),
        (3, Event.RETRIED),
        (4, Event.RETRIED),
        (5, Event.DEAD_LETTERED),
    ]


def test_quorum_loop_with_delayed_copies_is_ended_by_rr_at_attempt_n() -> None:
    policy = RetryPolicy(
        queue="payouts",
        quorum=True,
        max_attempts=5,
        dead_letter="payouts.dead",
        delay=DelayMode.DLX_TTL,
        wait_queue="payouts.retry",
    )
    # 1st delivery: delayed copy (header 1). 2nd (a new message): requeued twice by the
    # server (x-delivery-count 1, 2) -> attempts 2, 3, 4; the 5th delivery must end it.
    first = decide(policy, {}, Outcome.retry_after(1), now=NOW)
    assert copy_of(first).copy.headers[H] == "1"
    assert copy_of(first).copy.routing_key == "payouts.retry"
    attempts = []
    for count in (None, 1, 2, 3):
        headers: dict[str, object] = {H: "1"}
        if count is not None:
            headers["x-delivery-count"] = count
        decision = decide(policy, headers, Outcome.retry(), now=NOW)  # type: ignore[arg-type]
        attempts.append((decision.attempt, decision.action))
    assert attempts == [
        (2, RejectAction(requeue=True)),
        (3, RejectAction(requeue=True)),
        (4, RejectAction(requeue=True)),
        (5, RejectAction(requeue=False)),
    ]


def test_retry_after_dlx_ttl_goes_to_the_wait_queue_with_expiration() -> None:
    decision = decide(REFUNDS, {H: "1", "x-death": []}, Outcome.retry_after(30), now=NOW)
    copy = copy_of(decision).copy
    assert (copy.exchange, copy.routing_key) == ("", "refunds.retry")
    assert copy.expiration_ms == 30_000
    assert dict(copy.headers) == {H: "2"}
    assert decision.event is Event.DELAYED
    assert decision.delay_ms == 30_000


def test_retry_after_at_the_cap_dead_letters_at_once() -> None:
    decision = decide(REFUNDS, {H: "4"}, Outcome.retry_after(30), now=NOW)
    copy = copy_of(decision).copy
    assert copy.routing_key == "refunds.dead"
    assert copy.expiration_ms is None
    assert copy.headers[H] == "5"


def test_mixed_retry_and_retry_after_share_the_count() -> None:
    headers: dict[str, object] = {}
    seen = []
    outcomes = [Outcome.retry(), Outcome.retry_after(30)] * 5
    for outcome in outcomes:
        seen.append(headers.get(H))
        copy = copy_of(decide(REFUNDS, headers, outcome, now=NOW)).copy  # type: ignore[arg-type]
        if copy.routing_key == "refunds.dead":
            break
        headers = dict(copy.headers)
    assert seen == [None, "1", "2", "3", "4"]
    assert copy.headers[H] == "5"


def test_retry_after_memory_schedules_a_copy_and_acks_now() -> None:
    policy = RetryPolicy(queue="q", max_attempts=3, dead_letter="q.dead")
    decision = decide(policy, {}, Outcome.retry_after(2.5), now=NOW)
    assert isinstance(decision.action, ScheduleAction)
    assert decision.action.delay_ms == 2500
    assert decision.action.copy.routing_key == "q"
    assert decision.action.copy.headers[H] == "1"


def test_retry_after_zero_copies_at_once() -> None:
    decision = decide(REFUNDS, {}, Outcome.retry_after(0), now=NOW)
    copy = copy_of(decision).copy
    assert copy.routing_key == "refunds"
    assert copy.expiration_ms is None


def test_plugin_dme_copy_carries_x_delay() -> None:
    policy = RetryPolicy(
        queue="q",
        max_attempts=5,
        dead_letter="q.dead",
        delay=DelayMode.PLUGIN_DME,
        delay_exchange="q.delay",
    )
    copy = copy_of(decide(policy, {"x-delay": 1}, Outcome.retry_after(5), now=NOW)).copy
    assert (copy.exchange, copy.routing_key) == ("q.delay", "q")
    assert dict(copy.headers) == {H: "1", "x-delay": 5000}
    assert copy.mandatory is False  # the plugin returns mandatory messages it delays


@pytest.mark.parametrize(
    ("delay_s", "wait_queue"),
    [
        (0.5, "q.retry.1s"),
        (1, "q.retry.1s"),
        (1.001, "q.retry.30s"),
        (30, "q.retry.30s"),
        (299, "q.retry.5m"),
        (3600, "q.retry.5m"),
    ],
)
def test_delay_tiers_pick_the_smallest_tier_at_least_as_long(
    delay_s: float, wait_queue: str
) -> None:
    topology = load_text(
        '[queues.q]\nmax_attempts = 5\ndead_letter = "q.dead"\ndelay_tiers = ["1s", "30s", "5m"]\n'
    )
    policy = RetryPolicy.of(topology.queues[0])
    copy = copy_of(decide(policy, {}, Outcome.retry_after(delay_s), now=NOW)).copy
    assert copy.routing_key == wait_queue
    assert copy.expiration_ms == round(delay_s * 1000)


def test_policy_of_the_guide_queues() -> None:
    topology = load_text((Path(__file__).parents[2] / "examples/refunds/topology.toml").read_text())
    refunds = RetryPolicy.of(topology.queues[0])
    assert refunds == REFUNDS
    assert RetryPolicy.of(topology.queues[2]) == PAYOUTS


def test_retry_after_rejects_negative_delays() -> None:
    with pytest.raises(ValueError, match=">= 0"):
        Outcome.retry_after(-1)


@pytest.mark.parametrize("delay", [1e30, math.inf, 4_294_968, timedelta(days=50)])
def test_retry_after_refuses_delays_rabbitmq_would_refuse(delay: float | timedelta) -> None:
    with pytest.raises(ValueError, match=r"at most 4,294,967 seconds \(about 49.7 days"):
        Outcome.retry_after(delay)


def test_the_longest_delay_rabbitmq_accepts_is_fine() -> None:
    assert Outcome.retry_after(4_294_967.295).delay_ms == MAX_DELAY_MS
    with pytest.raises(ValueError, match="delay_ms"):
        RetryAfter(delay_ms=MAX_DELAY_MS + 1)


def test_deaths_are_parsed_newest_first() -> None:
    time = datetime(2026, 1, 1, tzinfo=UTC)
    parsed = deaths(
        {
            "x-death": [
                {
                    "count": 2,
                    "reason": "rejected",
                    "queue": "a",
                    "time": time,
                    "exchange": "",
                    "routing-keys": ["a"],
                },
                {
                    "count": 1,
                    "reason": "expired",
                    "queue": "a.retry",
                    "exchange": "",
                    "routing-keys": ["a.retry"],
                    "original-expiration": "1000",
                },
                "junk",
            ]
        }
    )
    assert [(d.queue, d.reason, d.count) for d in parsed] == [
        ("a", "rejected", 2),
        ("a.retry", "expired", 1),
    ]
    assert parsed[0].time == time
    assert parsed[1].original_expiration == "1000"
    assert parsed[1].routing_keys == ("a.retry",)
