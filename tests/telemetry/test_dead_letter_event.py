"""The ``rr.dead_lettered`` event's attributes for every decision that dead-letters
(``telemetry/tracing.py``), and none for those that do not."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from rabbitctl_retry.retry.outcome import AnyOutcome, DeadLetter, Drop, Failure, Retry
from rabbitctl_retry.retry.policy import decide
from rabbitctl_retry.runtime.service import policy_for
from rabbitctl_retry.telemetry.tracing import dead_letter_attributes, settle_frame
from rabbitctl_retry.topology.load import load_text
from tests.telemetry.conftest import REFUNDS_AND_PAYOUTS

TOPOLOGY = load_text(REFUNDS_AND_PAYOUTS + "\n[queues.plain]\nmax_attempts = 3\n")
NOW = datetime(2026, 1, 1, tzinfo=UTC)
BOOM = Failure(type="Boom", message="no")
H = "x-ruststream-retry-count"


@pytest.mark.parametrize(
    ("queue", "headers", "outcome", "expected", "frame"),
    [
        ("refunds", {H: "2"}, Retry(failure=BOOM), ("rr", "Boom", "refunds.dead"), "copy+ack"),
        ("refunds", None, DeadLetter(failure=BOOM), ("rr", "Boom", "refunds.dead"), "copy+ack"),
        ("refunds", None, Retry(failure=BOOM), None, "copy+ack"),
        ("refunds", None, Drop(), None, "basic.reject"),
        ("plain", {H: "2"}, Retry(failure=BOOM), None, "basic.reject"),
        (
            "payouts",
            {"x-delivery-count": 2},
            Retry(failure=BOOM),
            ("server", "delivery_limit", "payouts.dead"),
            "basic.reject",
        ),
        (
            "payouts",
            {H: "1", "x-delivery-count": 1},
            Retry(failure=BOOM),
            ("server", "rejected", "payouts.dead"),
            "basic.reject",
        ),
        ("payouts", None, Drop(), ("server", "rejected", "payouts.dead"), "basic.reject"),
        ("payouts", None, Drop(failure=BOOM), ("rr", "Boom", "payouts.dead"), "copy+ack"),
        ("payouts", None, Retry(failure=BOOM), None, "basic.reject"),
    ],
)
def test_the_event_says_who_dead_letters_and_why(
    queue: str,
    headers: dict[str, object] | None,
    outcome: AnyOutcome,
    expected: tuple[str, str, str] | None,
    frame: str,
) -> None:
    decision = decide(policy_for(queue, TOPOLOGY), headers, outcome, now=NOW)  # type: ignore[arg-type]
    attributes = dead_letter_attributes(decision)
    if expected is None:
        assert attributes is None
    else:
        by, reason, target = expected
        assert attributes == {
            "rr.dead_letter.target": target,
            "rr.dead_letter.by": by,
            "rr.dead_letter.reason": reason,
        }
    assert settle_frame(decision) == frame
