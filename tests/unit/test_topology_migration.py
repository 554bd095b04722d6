"""``topology/migration.py``: which queues ``rr migrate`` rebuilds, with what holding queues,
and where a stopped run goes on from (docs/how-to/migrate-to-quorum.md, "Migrating a queue")."""

from __future__ import annotations

import pytest

from rabbitctl_retry.fields import FieldValue
from rabbitctl_retry.topology.expand import Desired, QueueEntity, expand
from rabbitctl_retry.topology.load import load_text
from rabbitctl_retry.topology.migration import (
    HOLDING_MARK,
    HOLDING_MAX_LENGTH,
    Found,
    Phase,
    Rebuild,
    Refusal,
    apart_from,
    capacity_problem,
    foreign_holdings,
    holding_name,
    is_rr_holding,
    not_rr_holding,
    phase,
    rebuilds,
    refill_problem,
    refills,
    shortfalls,
    weighs_bytes,
)
from rabbitctl_retry.topology.plan import (
    Difference,
    Differs,
    Matches,
    Observation,
    OpKind,
    Plan,
    Refused,
    Status,
    plan,
)

FILE = """
[exchanges.events]

[queues.jobs]
type = "quorum"
max_attempts = 5
dead_letter = "jobs.dead"
delay_tiers = ["10s", "1m"]
bindings = [{ exchange = "events", routing_key = "job" }]

[queues.mail]
max_attempts = 3
delay = "dlx-ttl"
"""

OLD_TYPE = Differs((Difference("x-queue-type", "quorum", "classic"),))


def desired() -> Desired:
    return expand(load_text(FILE))


def planned(observed: dict[str, Observation]) -> tuple[Desired, Plan]:
    wanted = desired()
    everything: dict[tuple[str, str], Observation] = {
        queue.key: Matches() for queue in wanted.queues
    }
    everything[("exchange", "events")] = Matches()
    everything |= {("queue", name): found for name, found in observed.items()}
    return wanted, plan(wanted, everything, server_version=(3, 10, 8))


def only(units: tuple[Rebuild, ...] | Refusal) -> Rebuild:
    assert isinstance(units, tuple), units
    (unit,) = units
    return unit


def test_a_queue_and_its_wait_queues_are_one_rebuild_with_a_holding_queue_each() -> None:
    wanted, result = planned(
        {"jobs": OLD_TYPE, "jobs.retry.10s": OLD_TYPE, "jobs.retry.1m": OLD_TYPE}
    )
    unit = only(rebuilds(result, wanted))
    assert unit.name == "jobs"
    assert unit.rebuilt
    assert unit.subjects == ("jobs", "jobs.retry.10s", "jobs.retry.1m")
    assert [b.exchange for b in unit.bindings] == ["events"]
    assert unit.reasons == {
        "jobs": ("x-queue-type",),
        "jobs.retry.10s": ("x-queue-type",),
        "jobs.retry.1m": ("x-queue-type",),
    }
    holding = {entity.name: dict(entity.arguments) for entity in unit.holding_queues}
    marks = {"x-max-length": 32_213_686_696_242_276, "x-overflow": "reject-publish"}
    assert holding == {
        "jobs.rr-migrating": {"x-rr-holding-for": "jobs", **marks, "x-queue-type": "classic"},
        "jobs.retry.10s.rr-migrating": {
            "x-rr-holding-for": "jobs.retry.10s",
            **marks,
            "x-dead-letter-exchange": "",
            "x-dead-letter-routing-key": "jobs.rr-migrating",
            "x-message-ttl": 10_000,
            "x-queue-type": "classic",
        },
        "jobs.retry.1m.rr-migrating": {
            "x-rr-holding-for": "jobs.retry.1m",
            **marks,
            "x-dead-letter-exchange": "",
            "x-dead-letter-routing-key": "jobs.rr-migrating",
            "x-message-ttl": 60_000,
            "x-queue-type": "classic",
        },
    }
    assert int.from_bytes(b"rr-hold", "big") == HOLDING_MAX_LENGTH
    assert all(entity.durable for entity in unit.holding_queues)


def test_a_wait_queue_alone_is_rebuilt_while_its_queue_stays() -> None:
    wanted, result = planned({"mail.retry": Differs((Difference("durable", "true", "false"),))})
    unit = only(rebuilds(result, wanted))
    assert (unit.name, unit.rebuilt, unit.rebuilt_waits) == ("mail", False, ("mail.retry",))
    assert unit.holding is None
    # its holding wait queue gives expired copies straight back to the queue that stays
    (holding,) = unit.holding_queues
    assert holding.name == "mail.retry.rr-migrating"
    assert holding.arguments["x-dead-letter-routing-key"] == "mail"
    assert "x-message-ttl" not in holding.arguments  # per-message expiration: kept as it is


def test_a_queue_rebuilt_drains_every_wait_queue_even_those_that_stay() -> None:
    wanted, result = planned({"jobs": OLD_TYPE})
    unit = only(rebuilds(result, wanted))
    assert unit.rebuilt_waits == ()
    assert [wait.name for wait in unit.drained] == ["jobs.retry.10s", "jobs.retry.1m"]


def test_a_holding_queue_on_the_broker_makes_a_rebuild_whatever_the_plan_says() -> None:
    # a run stopped after the delete: the queue is absent, the plan calls it new
    wanted, result = planned({})
    assert rebuilds(result, wanted) == ()
    unit = only(rebuilds(result, wanted, held=["jobs", "jobs.retry.10s"]))
    assert unit.rebuilt
    assert unit.rebuilt_waits == ()  # its holding wait queue belongs to the queue's run
    alone = only(rebuilds(result, wanted, held=["mail.retry"]))
    assert (alone.name, alone.rebuilt, alone.rebuilt_waits) == ("mail", False, ("mail.retry",))


@pytest.mark.parametrize(
    ("found", "holding_present", "expected"),
    [
        ({"jobs": Found.OLD}, False, Phase.BEFORE),
        ({"jobs": Found.OLD}, True, Phase.BEFORE),
        ({"jobs": Found.ABSENT}, True, Phase.AFTER),
        ({"jobs": Found.AS_FILE}, True, Phase.AFTER),
        ({"jobs": Found.AS_FILE}, False, Phase.DONE),
        ({"jobs": Found.ABSENT}, False, Phase.DONE),
    ],
)
def test_where_a_run_stands_is_read_from_the_broker(
    found: dict[str, Found], holding_present: bool, expected: Phase
) -> None:
    wanted, result = planned({"jobs": OLD_TYPE})
    unit = only(rebuilds(result, wanted))
    assert phase(unit, found, holding_present) is expected


def test_one_wait_queue_left_as_it_was_puts_the_run_before_the_rebuild() -> None:
    wanted, result = planned({"mail.retry": OLD_TYPE})
    unit = only(rebuilds(result, wanted))
    assert phase(unit, {"mail.retry": Found.OLD}, True) is Phase.BEFORE
    assert phase(unit, {"mail.retry": Found.ABSENT}, True) is Phase.AFTER


def test_conflicts_no_rebuild_resolves_refuse_the_whole_file() -> None:
    wanted, result = planned({"jobs": OLD_TYPE, "mail": Refused("locked")})
    refusal = rebuilds(result, wanted)
    assert isinstance(refusal, Refusal)
    assert "mail: locked" in refusal.reason
    assert "nothing was changed" in refusal.reason


def test_queue_option_picks_rebuilds_and_names_an_unknown_one() -> None:
    wanted, result = planned({"jobs": OLD_TYPE, "mail.retry": OLD_TYPE})
    assert [u.name for u in rebuilds(result, wanted)] == ["jobs", "mail"]  # type: ignore[union-attr]
    assert only(rebuilds(result, wanted, only=["mail"])).name == "mail"
    refusal = rebuilds(result, wanted, only=["nope"])
    assert isinstance(refusal, Refusal)
    assert refusal.reason == (
        "--queue nope: no rebuild of that queue in the file (queues to rebuild: jobs, mail)"
    )


def test_a_holding_name_longer_than_amqp_allows_is_refused() -> None:
    name = "q" * 250
    text = f'[queues."{name}"]\ntype = "quorum"\n'
    wanted = expand(load_text(text))
    result = plan(wanted, {("queue", name): OLD_TYPE}, server_version=(3, 10, 8))
    refusal = rebuilds(result, wanted)
    assert isinstance(refusal, Refusal)
    assert "longer than 255 bytes" in refusal.reason
    assert holding_name("jobs") == "jobs.rr-migrating"


def test_the_rest_of_the_file_leaves_out_the_rebuilt_queues_and_their_bindings() -> None:
    wanted, result = planned({"jobs": OLD_TYPE})
    units = rebuilds(result, wanted)
    assert isinstance(units, tuple)
    rest = apart_from(result, units)
    assert rest.can_apply
    names = [(op.op, op.name) for op in rest.operations]
    assert (OpKind.DECLARE_EXCHANGE, "events") in names
    assert (OpKind.DECLARE_QUEUE, "mail") in names
    assert (OpKind.DECLARE_QUEUE, "jobs.dead") in names
    assert not [n for kind, n in names if n.startswith("jobs") and n != "jobs.dead"]
    assert not [op for op in rest.operations if op.op is OpKind.BIND]
    assert all(op.status is not Status.CONFLICT for op in rest.operations)


def test_rebuilds_left_for_later_stay_out_of_the_rest_too() -> None:
    wanted, result = planned({"jobs": OLD_TYPE, "mail": OLD_TYPE})
    units = rebuilds(result, wanted, only=["jobs"])
    assert isinstance(units, tuple)
    rest = apart_from(result, units)
    assert rest.can_apply
    assert "mail" not in [op.name for op in rest.operations]


# --- holding queues: rr's by what rr declares them with, never by name -----------------------

RR_MARKS = {"x-max-length": HOLDING_MAX_LENGTH, "x-overflow": "reject-publish"}


@pytest.mark.parametrize(
    ("arguments", "marker_visible", "rr_s"),
    [
        # the management API states every argument: the marker and the compared marks
        ({HOLDING_MARK: "jobs", **RR_MARKS}, True, True),
        ({HOLDING_MARK: "mail", **RR_MARKS}, True, False),  # another queue's
        (RR_MARKS, True, False),  # the marker missing
        ({HOLDING_MARK: "jobs"}, True, False),  # the marker alone: anyone can write it
        # AMQP reads only what a re-declare compares: the marker is invisible
        (RR_MARKS, False, True),
        ({**RR_MARKS, "x-message-ttl": 10_000}, False, True),  # a holding wait queue
        ({"x-max-length": HOLDING_MAX_LENGTH}, False, False),  # drop-head: not rr's
        ({"x-max-length": HOLDING_MAX_LENGTH - 1, "x-overflow": "reject-publish"}, False, False),
        ({"x-max-length": str(HOLDING_MAX_LENGTH), "x-overflow": "reject-publish"}, False, False),
        ({}, False, False),  # an earlier rr's holding queue, or another application's
        ({"x-queue-type": "quorum"}, False, False),
        (None, False, False),  # the broker would not say
        (None, True, False),
    ],
)
def test_a_holding_queue_is_rr_s_by_its_marks_never_by_its_name(
    arguments: dict[str, object] | None, marker_visible: bool, rr_s: bool
) -> None:
    assert is_rr_holding("jobs", arguments, marker_visible=marker_visible) is rr_s


def test_the_holding_queues_rr_declares_carry_its_marks() -> None:
    wanted, result = planned({"jobs": OLD_TYPE})
    unit = only(rebuilds(result, wanted))
    for entity in unit.holding_queues:
        queue = entity.name.removesuffix(".rr-migrating")
        assert is_rr_holding(queue, entity.arguments, marker_visible=True)
        compared = {k: v for k, v in entity.arguments.items() if k != HOLDING_MARK}
        assert is_rr_holding(queue, compared, marker_visible=False)


@pytest.mark.parametrize(
    ("owned", "only_", "expected"),
    [
        ({}, (), ()),
        ({"jobs": True, "jobs.retry.10s": None}, (), ()),
        ({"jobs": False}, (), ("jobs",)),
        ({"jobs.retry.10s": False, "mail": False}, (), ("jobs.retry.10s", "mail")),
        ({"jobs.retry.10s": False, "mail": False}, ("jobs",), ("jobs.retry.10s",)),
        ({"jobs": False}, ("mail",), ()),
    ],
)
def test_a_holding_queue_that_is_not_rr_s_is_a_conflict(
    owned: dict[str, bool | None], only_: tuple[str, ...], expected: tuple[str, ...]
) -> None:
    assert foreign_holdings(desired(), owned, only=only_) == expected


def test_the_conflict_says_what_is_missing_and_how_to_go_on() -> None:
    text = not_rr_holding(["jobs"])
    assert text.startswith("'jobs.rr-migrating': named as rr names its holding queues, but not ")
    assert "x-rr-holding-for" in text
    assert "32213686696242276" in text
    assert "nothing was changed" in text
    assert "Finish such a run with the rr that started it" in text
    assert 'rr docs migrate-to-quorum "Holding queues"' in text


# --- what a rebuild puts back, against what the rebuilt queue can hold -----------------------


def limited(arguments: dict[str, FieldValue]) -> QueueEntity:
    """``jobs`` as a file declares it with these arguments."""
    return QueueEntity(name="jobs", arguments=arguments)


@pytest.mark.parametrize(
    ("entity", "messages", "message_bytes", "expected"),
    [
        (limited({}), 50, None, None),
        (limited({"x-max-length": 10}), 0, None, None),  # nothing to put back
        # the file: x-max-length = 10 on a classic queue holding 50
        (
            limited({"x-max-length": 10}),
            50,
            None,
            "jobs would hold at most 10 messages (x-max-length = 10), and the rebuild puts 50 "
            "back into it",
        ),
        (
            limited({"x-max-length": 10, "x-overflow": "reject-publish"}),
            11,
            None,
            "jobs would hold at most 10 messages (x-max-length = 10), and the rebuild puts 11 "
            "back into it",
        ),
        (limited({"x-max-length": 10, "x-overflow": "reject-publish"}), 10, None, None),
        (
            limited({"x-max-length": 10, "x-overflow": "reject-publish-dlx"}),
            11,
            None,
            "jobs would hold at most 10 messages (x-max-length = 10), and the rebuild puts 11 "
            "back into it",
        ),
        # room enough, but drop-head: the refill would not move into it
        (limited({"x-max-length": 1000}), 50, None, "the rebuilt jobs has x-max-length = 1000"),
        (limited({"x-max-length": 1000, "x-overflow": "drop-head"}), 50, None, "the rebuilt jobs"),
        # bytes: weighed by the management API; unknown without it
        (
            limited({"x-max-length-bytes": 5000, "x-overflow": "reject-publish"}),
            50,
            None,
            "jobs would hold at most 5,000 bytes (x-max-length-bytes = 5000), and the 50 "
            "messages the rebuild puts back into it cannot be weighed without the management "
            "API (--management-url)",
        ),
        (limited({"x-max-length-bytes": 5000, "x-overflow": "reject-publish"}), 50, 5000, None),
        (
            limited({"x-max-length-bytes": 5000, "x-overflow": "reject-publish"}),
            50,
            5001,
            "jobs would hold at most 5,000 bytes (x-max-length-bytes = 5000), and the rebuild "
            "puts 50 messages of 5,001 bytes back into it",
        ),
        (limited({"x-max-length-bytes": 5000}), 50, 10, "the rebuilt jobs has x-max-length-bytes"),
        (limited({"x-max-length-bytes": 5000, "x-overflow": "reject-publish"}), 0, None, None),
    ],
)
def test_what_a_rebuilt_queue_can_hold_is_weighed_before_any_step(
    entity: QueueEntity, messages: int, message_bytes: int | None, expected: str | None
) -> None:
    problem = capacity_problem(entity, messages, message_bytes)
    if expected is None:
        assert problem is None
    else:
        assert problem is not None
        assert problem.startswith(expected), problem
    if problem is not None and problem.startswith("the rebuilt"):
        assert "RabbitMQ confirms a copy, then drops the oldest" in problem
        assert 'give it x-overflow = "reject-publish" in the file' in problem


def test_a_policy_s_limit_counts_as_the_argument_s() -> None:
    text = FILE.replace(
        "[queues.mail]", '[queues.mail]\nsettings = "policy"\narguments = { "x-max-length" = 10 }'
    )
    mail = next(q for q in expand(load_text(text)).queues if q.name == "mail")
    assert "x-max-length" not in mail.arguments  # in rr's policy
    assert capacity_problem(mail, 11, None) == (
        "mail would hold at most 10 messages (x-max-length = 10), and the rebuild puts 11 back "
        "into it"
    )


def test_the_whole_rebuild_ends_in_the_queue() -> None:
    text = FILE.replace(
        'type = "quorum"\nmax_attempts = 5',
        'type = "quorum"\nmax_attempts = 5\narguments = { "x-max-length" = 100 }',
    )
    wanted = expand(load_text(text))
    result = plan(
        wanted,
        {q.key: Matches() for q in wanted.queues}
        | {("exchange", "events"): Matches(), ("queue", "jobs"): OLD_TYPE},
        server_version=(3, 10, 8),
    )
    unit = only(rebuilds(result, wanted))
    (refill,) = refills(unit)
    assert refill.target.name == "jobs"
    assert refill.sources == (
        "jobs",
        "jobs.retry.10s",
        "jobs.retry.1m",
        "jobs.rr-migrating",
        "jobs.retry.10s.rr-migrating",
        "jobs.retry.1m.rr-migrating",
    )
    fits = {"jobs": 60, "jobs.retry.10s": 20, "jobs.retry.1m.rr-migrating": 20}
    assert shortfalls(unit, fits, None) == ()
    over = fits | {"jobs.rr-migrating": 1}
    assert shortfalls(unit, over, None) == (
        "jobs would hold at most 100 messages (x-max-length = 100), and the rebuild puts 101 "
        "back into it (jobs 60, jobs.retry.10s 20, jobs.rr-migrating 1, "
        "jobs.retry.1m.rr-migrating 20)",
    )


def test_a_rebuilt_wait_queue_takes_back_its_own() -> None:
    wanted, result = planned({"mail.retry": OLD_TYPE})
    unit = only(rebuilds(result, wanted))
    (refill,) = refills(unit)
    assert (refill.target.name, refill.sources) == (
        "mail.retry",
        ("mail.retry", "mail.retry.rr-migrating"),
    )


@pytest.mark.parametrize(
    ("entity", "in_queue", "to_move", "expected"),
    [
        (limited({}), 10**6, 10**6, None),
        (limited({"x-max-length": 10}), 0, 0, None),  # nothing to move
        (limited({"x-max-length": 10}), 0, 1, "the rebuilt jobs has x-max-length = 10"),
        (limited({"x-max-length": 10, "x-overflow": "reject-publish"}), 4, 6, None),
        (
            limited({"x-max-length": 10, "x-overflow": "reject-publish"}),
            5,
            6,
            "jobs holds 5 of at most 10 messages (x-max-length), and 6 are to come back: run "
            "rr migrate again once it has room",
        ),
    ],
)
def test_the_refill_checks_again_before_it_moves(
    entity: QueueEntity, in_queue: int, to_move: int, expected: str | None
) -> None:
    problem = refill_problem(entity, in_queue=in_queue, to_move=to_move)
    if expected is None:
        assert problem is None
    else:
        assert problem is not None
        assert problem.startswith(expected), problem


@pytest.mark.parametrize(
    ("arguments", "weighed"),
    [
        ("", False),
        ('arguments = { "x-max-length" = 5 }', False),
        ('arguments = { "x-max-length-bytes" = 0, "x-overflow" = "reject-publish" }', True),
        ('arguments = { "x-max-length-bytes" = 900, "x-overflow" = "reject-publish" }', True),
    ],
)
def test_messages_are_weighed_only_for_a_limit_in_bytes(arguments: str, weighed: bool) -> None:
    text = f'[queues.jobs]\ntype = "quorum"\n{arguments}\n'
    wanted = expand(load_text(text))
    result = plan(wanted, {("queue", "jobs"): OLD_TYPE}, server_version=(3, 10, 8))
    assert weighs_bytes(only(rebuilds(result, wanted))) is weighed
