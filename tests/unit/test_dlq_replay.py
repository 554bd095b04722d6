"""The replay choice for one dead letter, the copy's headers, and --rate pacing."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from rabbitctl_retry.dlq.choice import Fail, Send, Skip, Stop
from rabbitctl_retry.dlq.filters import parse_all
from rabbitctl_retry.dlq.origin import WaitQueues
from rabbitctl_retry.dlq.rate import Pacer
from rabbitctl_retry.dlq.replay import RUN_HEADER, ReplayPlan, choose, replay_headers
from rabbitctl_retry.retry.headers import is_broker_header
from rabbitctl_retry.retry.properties import COPIED_PROPERTIES, PROPERTY_NAMES

NOW = datetime(2024, 5, 1, 12, 0, 0, 123000, tzinfo=UTC)
H = "x-ruststream-retry-count"

SERVER_DEAD_LETTER = {
    "x-death": [
        {
            "queue": "payouts",
            "reason": "delivery_limit",
            "count": 1,
            "exchange": "",
            "routing-keys": ["payouts"],
            "time": NOW,
        },
        {
            "queue": "payouts.retry",
            "reason": "expired",
            "count": 1,
            "exchange": "",
            "routing-keys": ["payouts.retry"],
            "time": NOW,
        },
    ],
    "x-first-death-queue": "payouts.retry",
    "x-first-death-reason": "expired",
    "x-first-death-exchange": "",
    "x-last-death-queue": "payouts",
    "x-delivery-count": 4,
    "x-acquired-count": 5,
    "x-tenant": "acme",
    H: "1",
}
RR_DEAD_LETTER = {
    "rr-origin-queue": "refunds",
    "rr-failed-at": "2024-05-01T11:00:00.000Z",
    "rr-error-type": "builtins.ValueError",
    "rr-error-message": "card declined",
    "x-delay": 1000,
    H: "5",
    "x-tenant": "acme",
}


def plan(**changes: object) -> ReplayPlan:
    values: dict[str, object] = {"source": "dead", "run_id": "run-1", "retry_header": H}
    values.update(changes)
    return ReplayPlan(**values)


@pytest.mark.parametrize(
    ("headers", "to"),
    [(SERVER_DEAD_LETTER, "payouts"), (RR_DEAD_LETTER, "refunds")],
    ids=["server", "rr"],
)
def test_a_copy_starts_afresh(headers: dict[str, object], to: str) -> None:
    choice = choose(plan(), headers, NOW)
    assert isinstance(choice, Send)
    assert choice.to == to
    assert choice.headers == {
        "x-tenant": "acme",
        "rr-replayed-count": 1,
        "rr-replayed-at": "2024-05-01T12:00:00.123Z",
        RUN_HEADER: "run-1",
    }
    assert not any(is_broker_header(name) for name in choice.headers)


def test_replayed_count_grows_and_the_run_id_is_replaced() -> None:
    headers = {"rr-origin-queue": "a", "rr-replayed-count": 2, RUN_HEADER: "old-run"}
    copy = replay_headers(headers, retry_header=H, run_id="new", now=NOW)
    assert copy["rr-replayed-count"] == 3
    assert copy[RUN_HEADER] == "new"
    assert (
        replay_headers({"rr-replayed-count": "7"}, retry_header=H, run_id="r", now=NOW)[
            "rr-replayed-count"
        ]
        == 8
    )
    assert (
        replay_headers({"rr-replayed-count": "x"}, retry_header=H, run_id="r", now=NOW)[
            "rr-replayed-count"
        ]
        == 1
    )


def test_a_custom_retry_header_is_the_one_removed() -> None:
    headers = {"rr-origin-queue": "a", "my-retries": "3", H: "9"}
    copy = replay_headers(headers, retry_header="my-retries", run_id="r", now=NOW)
    assert "my-retries" not in copy
    assert copy[H] == "9"  # not this topology's retry header: an application header


def test_to_overrides_the_origin() -> None:
    choice = choose(plan(to="manual"), SERVER_DEAD_LETTER, NOW)
    assert isinstance(choice, Send)
    assert choice.to == "manual"


def test_no_origin_fails_and_names_the_way_out() -> None:
    choice = choose(plan(), {"x-tenant": "acme"}, NOW)
    assert isinstance(choice, Fail)
    assert "--to" in choice.reason
    only_wait = {"x-death": [{"queue": "a.retry", "reason": "expired", "count": 1}]}
    assert isinstance(choose(plan(), only_wait, NOW), Fail)


def test_never_back_into_the_dead_letter_queue_itself() -> None:
    choice = choose(plan(source="refunds"), RR_DEAD_LETTER, NOW)
    assert isinstance(choice, Fail)
    assert choice.to == "refunds"
    assert isinstance(choose(plan(to="dead"), RR_DEAD_LETTER, NOW), Fail)


def test_a_copy_of_this_run_stops_the_run() -> None:
    copy = replay_headers(RR_DEAD_LETTER, retry_header=H, run_id="run-1", now=NOW)
    assert isinstance(choose(plan(), copy, NOW), Stop)
    # a copy of an earlier run is an ordinary dead letter
    earlier = replay_headers(RR_DEAD_LETTER, retry_header=H, run_id="run-0", now=NOW)
    assert isinstance(choose(plan(), {**earlier, "rr-origin-queue": "refunds"}, NOW), Send)
    assert isinstance(choose(plan(), {RUN_HEADER: b"run-1"}, NOW), Stop)


def test_where_skips_what_does_not_match() -> None:
    wanted = plan(conditions=parse_all(["origin=payouts"]))
    assert isinstance(choose(wanted, SERVER_DEAD_LETTER, NOW), Send)
    skipped = choose(wanted, RR_DEAD_LETTER, NOW)
    assert isinstance(skipped, Skip)
    assert "--where" in skipped.reason


def test_a_topologys_wait_queues_decide_the_origin() -> None:
    headers = {
        "x-death": [
            {"queue": "payouts.later", "reason": "expired", "count": 1},
            {"queue": "payouts", "reason": "rejected", "count": 1},
        ]
    }
    from rabbitctl_retry.topology.load import load_text

    topology = load_text(
        '[queues.payouts]\ntype = "quorum"\nmax_attempts = 3\ndead_letter = "dead"\n'
        'delay = "dlx-ttl"\nwait_queue = "payouts.later"\n'
    )
    with_topology = plan(wait_queues=WaitQueues.of(topology))
    choice = choose(with_topology, headers, NOW)
    assert isinstance(choice, Send)
    assert choice.to == "payouts"
    # without it, payouts.later looks like an ordinary queue
    without = choose(plan(), headers, NOW)
    assert isinstance(without, Send)
    assert without.to == "payouts.later"


def test_kept_properties() -> None:
    assert set(COPIED_PROPERTIES) == set(PROPERTY_NAMES) - {"expiration", "user_id"}


def test_pacer_spaces_publishes_without_a_burst() -> None:
    pacer = Pacer(10)
    assert pacer.reserve(100.0) == 0
    assert pacer.reserve(100.0) == pytest.approx(0.1)
    assert pacer.reserve(100.0) == pytest.approx(0.2)
    assert pacer.reserve(100.25) == pytest.approx(0.05)
    # after a long pause: one slot now, then the spacing again (no catching up)
    assert pacer.reserve(200.0) == 0
    assert pacer.reserve(200.0) == pytest.approx(0.1)
    with pytest.raises(ValueError, match="positive"):
        Pacer(0)
