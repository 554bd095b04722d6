"""rr simulate's rendering of a delivery's counts and of where each message ended (pure:
rabbitctl_retry/timeline.py, cli/simulate.py's footer; docs/reference/runtime.md, "rr simulate")."""

from __future__ import annotations

import pytest

from rabbitctl_retry.cli.simulate import footer
from rabbitctl_retry.fields import FieldTable
from rabbitctl_retry.simulation import Simulation
from rabbitctl_retry.timeline import (
    Counts,
    Hop,
    Step,
    carried_text,
    counts_of,
    ending_text,
    endings,
)

H = "x-ruststream-retry-count"


@pytest.mark.parametrize(
    ("queue", "headers", "counts"),
    [
        ("refunds", None, Counts(None, None)),
        ("refunds", {H: "3"}, Counts(3, None)),
        # a dead letter: its header counted refunds' attempts, not refunds.dead's
        (
            "refunds.dead",
            {H: "5", "rr-origin-queue": "refunds"},
            Counts(None, None, carried_retry_count=5, origin_queue="refunds"),
        ),
        (
            "refunds.dead",
            {H: "5", "rr-origin-queue": b"refunds"},
            Counts(None, None, carried_retry_count=5, origin_queue="refunds"),
        ),
        # back in the queue it came from (a replay): its own attempts again
        ("refunds", {H: "5", "rr-origin-queue": "refunds"}, Counts(5, None)),
        ("payouts", {"x-delivery-count": 2}, Counts(None, 2)),
        ("refunds.dead", {"rr-origin-queue": "refunds"}, Counts(None, None)),
    ],
)
def test_counts_of(queue: str, headers: FieldTable | None, counts: Counts) -> None:
    assert counts_of(headers, H, queue) == counts


def test_a_dead_letters_attempt_adds_up_without_what_it_carries() -> None:
    """The legend's sum, attempt = 1 + retry + x-dc, holds on every row: the dead letter of
    the fifth attempt is the first attempt of the dead-letter queue (not attempt 6)."""
    counts = counts_of({H: "5", "rr-origin-queue": "refunds"}, H, "refunds.dead")
    assert 1 + (counts.retry_count or 0) + (counts.delivery_count or 0) == 1
    assert carried_text(counts) == "carried retry 5 from refunds"
    assert carried_text(counts_of({H: "5"}, H, "refunds")) == ""


def test_endings_take_the_last_decision_in_each_queue() -> None:
    steps = [
        Step("refunds-2", "refunds", "retried", 1),
        Step("refunds-1", "refunds", "acked", 1),
        Step("refunds-2", "refunds", "retried", 2),
        Step("refunds-2", "refunds", "dead-lettered", 3),
        Step("payouts-5", "payouts", "rejected-to-dead-letter-route", 5),
        Step("refunds-2", "refunds.dead", "acked", 1),
        Step("payouts-5", "payouts.dead", "acked", 1),
    ]
    assert endings(steps) == {
        "refunds-2": (Hop("refunds", "dead-lettered", 3), Hop("refunds.dead", "acked", 1)),
        "refunds-1": (Hop("refunds", "acked", 1),),
        "payouts-5": (Hop("payouts", "dead-lettered", 5), Hop("payouts.dead", "acked", 1)),
    }
    assert ending_text(endings(steps)["refunds-2"]) == (
        "refunds: dead-lettered on attempt 3 -> refunds.dead: acked on attempt 1"
    )
    assert ending_text(()) == "not handled"


def test_the_footer_says_why_the_run_ended() -> None:
    finished = Simulation(elapsed_s=8.0, last_event_s=8.0, finished=True, queues={"a": 0})
    assert footer(finished) == (
        "simulated 8s of virtual time: nothing was left to happen after it; messages left: none"
    )
    cut = Simulation(elapsed_s=5.0, last_event_s=4.0, finished=False, queues={"a": 1, "b": 0})
    assert footer(cut) == (
        "simulated 5s of virtual time and stopped with timers still due (last event at 4s); "
        "messages left: a=1"
    )
