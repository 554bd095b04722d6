"""``topology/migration.py``: which queues ``rr migrate`` rebuilds, with what holding queues,
and where a stopped run goes on from (docs/topology.md, "Migrating a queue")."""

from __future__ import annotations

import pytest

from rabbitctl_retry.topology.expand import Desired, expand
from rabbitctl_retry.topology.load import load_text
from rabbitctl_retry.topology.migration import (
    Found,
    Phase,
    Rebuild,
    Refusal,
    apart_from,
    holding_name,
    phase,
    rebuilds,
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
    assert holding == {
        "jobs.rr-migrating": {"x-queue-type": "classic"},
        "jobs.retry.10s.rr-migrating": {
            "x-dead-letter-exchange": "",
            "x-dead-letter-routing-key": "jobs.rr-migrating",
            "x-message-ttl": 10_000,
            "x-queue-type": "classic",
        },
        "jobs.retry.1m.rr-migrating": {
            "x-dead-letter-exchange": "",
            "x-dead-letter-routing-key": "jobs.rr-migrating",
            "x-message-ttl": 60_000,
            "x-queue-type": "classic",
        },
    }
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
