"""The settings of a queue, classified (topology/settings.py; docs/how-to/migrate-to-quorum.md,
"Changing a topology"): where each lives, and what a difference means (unchanged, planned, live,
migration), as a pure table."""

from __future__ import annotations

import re

import pytest

from rabbitctl_retry.errors import ConfigError
from rabbitctl_retry.server import Policy, PolicyValue, ServerVersion
from rabbitctl_retry.topology.effective import effective_rows
from rabbitctl_retry.topology.expand import expand
from rabbitctl_retry.topology.load import load_text
from rabbitctl_retry.topology.plan import (
    MANAGEMENT_NEEDED,
    Absent,
    Difference,
    Differs,
    Matches,
    Observation,
    ObservationKey,
    Operation,
    Plan,
    Status,
    plan,
)
from rabbitctl_retry.topology.settings import (
    RR_POLICY_PRIORITY,
    Change,
    Holder,
    Setting,
    policy_name,
    policy_pattern,
    rr_policy,
    split_arguments,
)

POLICY_FILE = """
[broker]
settings = "policy"

[queues.payouts]
type = "quorum"
max_attempts = 5
dead_letter = "payouts.dead"
delay = "dlx-ttl"
replicas = 1
"""

PAYOUTS: dict[str, PolicyValue] = {
    "dead-letter-exchange": "",
    "dead-letter-routing-key": "payouts.dead",
    "dead-letter-strategy": "at-least-once",
    "delivery-limit": 4,
    "overflow": "reject-publish",
}


def rows(operation_settings: tuple[Setting, ...]) -> list[tuple[str, str, str, str, str]]:
    return [
        (row.key, row.held_by.value, row.desired, row.current, row.change.value)
        for row in operation_settings
    ]


def queue_op(result: Plan, name: str) -> Operation:
    return next(op for op in result.operations if op.name == name)


def test_names_and_patterns_find_one_queue() -> None:
    assert policy_name("a.b") == "rr.a.b"
    pattern = policy_pattern("re.a b+c")
    assert pattern == "^re\\.a\\ b\\+c$"
    assert re.search(pattern, "re.a b+c")
    assert not re.search(pattern, "reXa b+c")
    assert not re.search(pattern, "x.re.a b+c")


def test_split_keeps_what_no_policy_holds_in_the_declare() -> None:
    declared, definition = split_arguments(
        {
            "x-queue-type": "quorum",
            "x-delivery-limit": 4,
            "x-single-active-consumer": True,
            "x-quorum-initial-group-size": 1,
            "x-max-length": 10,
        }
    )
    assert declared == {
        "x-queue-type": "quorum",
        "x-single-active-consumer": True,
        "x-quorum-initial-group-size": 1,
    }
    assert definition == {"delivery-limit": 4, "max-length": 10}


def test_the_default_is_arguments() -> None:
    desired = expand(load_text('[queues.q]\ntype = "quorum"\nmax_attempts = 2\ndead_letter = "d"'))
    queue = next(q for q in desired.queues if q.name == "q")
    assert (queue.policy_mode, queue.policy) == (False, None)
    assert queue.arguments["x-delivery-limit"] == 1


def test_policy_mode_moves_the_settings_into_one_policy_per_queue() -> None:
    desired = expand(load_text(POLICY_FILE))
    by_name = {queue.name: queue for queue in desired.queues}
    payouts = by_name["payouts"]
    assert dict(payouts.arguments) == {"x-queue-type": "quorum", "x-quorum-initial-group-size": 1}
    assert payouts.policy == Policy.of(
        "rr.payouts", "^payouts$", PAYOUTS, priority=RR_POLICY_PRIORITY, apply_to="queues"
    )
    wait = by_name["payouts.retry"]
    assert wait.policy is not None
    assert wait.policy.name == "rr.payouts.retry"
    assert wait.policy.pattern == "^payouts\\.retry$"
    assert wait.policy.keys["dead-letter-routing-key"] == "payouts"
    assert by_name["payouts.dead"].policy is None  # an unlisted dead-letter queue sets nothing
    # the dead-letter queue still comes first, read from the policy
    assert [q.name for q in desired.queues] == ["payouts.dead", "payouts", "payouts.retry"]


def test_a_queue_overrides_the_broker() -> None:
    topology = load_text(
        '[broker]\nsettings = "policy"\n[queues.a]\nsettings = "arguments"\n'
        "arguments = { x-max-length = 5 }\n[queues.b]\narguments = { x-max-length = 5 }\n"
    )
    by_name = {queue.name: queue for queue in expand(topology).queues}
    assert by_name["a"].policy is None
    assert by_name["a"].arguments == {"x-max-length": 5, "x-queue-type": "classic"}
    assert by_name["b"].policy is not None
    assert by_name["b"].arguments == {"x-queue-type": "classic"}  # the type stays declared


@pytest.mark.parametrize(
    ("text", "path"),
    [
        ('[broker]\nsettings = "policies"\n', "broker.settings"),
        ('[queues.q]\nsettings = "x"\n', "queues.q.settings"),
        ("[queues.q]\nsettings = 1\n", "queues.q.settings"),
    ],
)
def test_a_bad_settings_value_names_its_key(text: str, path: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_text(text)
    assert caught.value.path == path
    assert caught.value.exit_code == 78


def _plan(
    observed: dict[ObservationKey, Observation], policies: tuple[Policy, ...] | None = ()
) -> Plan:
    return plan(
        expand(load_text(POLICY_FILE)), observed, server_version=(4, 3, 6), policies=policies
    )


def test_a_new_queue_plans_every_setting() -> None:
    result = _plan({("queue", "payouts"): Absent()})
    op = queue_op(result, "payouts")
    assert op.status is Status.PLANNED
    assert {row[4] for row in rows(op.settings)} == {"planned"}
    assert op.put_policy is not None
    assert op.put_policy.name == "rr.payouts"


def test_without_the_policies_a_new_queue_is_a_conflict() -> None:
    op = queue_op(_plan({}, policies=None), "payouts")
    assert op.status is Status.CONFLICT
    assert op.detail == MANAGEMENT_NEEDED


def test_same_policy_is_unchanged_and_a_changed_one_is_live() -> None:
    observed: dict[ObservationKey, Observation] = {
        ("queue", name): Matches() for name in ("payouts", "payouts.retry", "payouts.dead")
    }
    desired = expand(load_text(POLICY_FILE))
    current = tuple(q.policy for q in desired.queues if q.policy is not None)
    assert current[0].name == "rr.payouts"
    same = _plan(observed, current)
    assert [op.status.value for op in same.operations] == ["unchanged"] * 3
    assert queue_op(same, "payouts").put_policy is None

    older = rr_policy("payouts", {**PAYOUTS, "delivery-limit": 2, "max-length": 9})
    changed = _plan(observed, (older, *current[1:]))
    op = queue_op(changed, "payouts")
    assert op.status is Status.LIVE
    assert [r for r in rows(op.settings) if r[4] != "unchanged"] == [
        ("delivery-limit", "policy", "4", "2", "live"),
        ("max-length", "policy", "(none)", "9", "live"),
    ]
    assert op.put_policy == current[0]
    assert changed.can_apply
    assert [o.status.value for o in changed.applied().operations] == [
        "unchanged",
        "changed",
        "unchanged",
    ]


def test_an_existing_queue_gets_its_new_policy_as_planned() -> None:
    observed: dict[ObservationKey, Observation] = {
        ("queue", name): Matches() for name in ("payouts", "payouts.retry", "payouts.dead")
    }
    op = queue_op(_plan(observed), "payouts")
    assert op.status is Status.UNCHANGED
    policy_rows = [r for r in rows(op.settings) if r[1] == "policy"]
    assert {r[4] for r in policy_rows} == {"planned"}
    assert op.put_policy is not None


def test_an_argument_moving_to_a_policy_is_a_migration() -> None:
    observed: dict[ObservationKey, Observation] = {
        ("queue", "payouts"): Differs((Difference("x-delivery-limit", "(none)", "4"),)),
    }
    op = queue_op(_plan(observed), "payouts")
    assert op.status is Status.CONFLICT
    migration = [r for r in op.settings if r.change is Change.MIGRATION]
    assert [(r.key, r.held_by, r.desired, r.current) for r in migration] == [
        ("x-delivery-limit", Holder.ARGUMENT, "(none)", "4")
    ]
    assert "the policy key delivery-limit in the file" in migration[0].reason
    assert op.detail is not None
    assert "the queue must be rebuilt" in op.detail
    assert "rr migrate TOPOLOGY rebuilds it with its messages" in op.detail


@pytest.mark.parametrize(
    ("difference", "words"),
    [
        (Difference("durable", "true", "false"), "durability"),
        (Difference("x-queue-type", "'quorum'", "'classic'"), "the queue's type"),
        (Difference("x-quorum-initial-group-size", "1", "3"), "an x- argument"),
    ],
)
def test_what_cannot_change_is_a_migration(difference: Difference, words: str) -> None:
    op = queue_op(_plan({("queue", "payouts"): Differs((difference,))}), "payouts")
    row = next(r for r in op.settings if r.key == difference.key)
    assert row.change is Change.MIGRATION
    assert row.reason.startswith(words)
    assert op.status is Status.CONFLICT


def test_arguments_mode_differences_are_migrations_too() -> None:
    desired = expand(load_text('[queues.q]\ntype = "quorum"\nmax_attempts = 5\ndead_letter = "d"'))
    result = plan(
        desired,
        {("queue", "q"): Differs((Difference("x-delivery-limit", "4", "5"),))},
        server_version=(4, 0, 5),
    )
    op = queue_op(result, "q")
    assert [r for r in rows(op.settings) if r[4] == "migration"] == [
        ("x-delivery-limit", "argument", "4", "5", "migration")
    ]


def test_a_policy_mode_queue_with_nothing_to_hold_deletes_rr_policy() -> None:
    desired = expand(load_text('[broker]\nsettings = "policy"\n[queues.q]\n'))
    stale = rr_policy("q", {"max-length": 3})
    result = plan(desired, {("queue", "q"): Matches()}, server_version=(4, 3, 6), policies=(stale,))
    op = queue_op(result, "q")
    assert op.status is Status.LIVE
    assert op.drop_policy == "rr.q"


@pytest.mark.parametrize(
    ("pattern", "priority", "apply_to", "outcome"),
    [
        (".*", RR_POLICY_PRIORITY, "queues", "conflict"),
        ("^pay", RR_POLICY_PRIORITY + 5, "all", "conflict"),
        (".*", RR_POLICY_PRIORITY - 1, "queues", "warning"),
        ("^payouts$", 0, "quorum_queues", "warning"),
        ("^payouts$", 500, "classic_queues", "none"),  # not a classic queue
        ("^payouts$", 500, "exchanges", "none"),
        ("^other$", 500, "queues", "none"),
    ],
)
def test_other_policies_that_match(
    pattern: str, priority: int, apply_to: str, outcome: str
) -> None:
    other = Policy.of("ops", pattern, {"max-length": 7}, priority=priority, apply_to=apply_to)
    result = _plan({}, (other,))
    op = queue_op(result, "payouts")
    warned = [w for w in result.warnings if "'ops'" in w and "'payouts'" in w]
    if outcome == "conflict":
        assert op.status is Status.CONFLICT
        assert op.detail is not None
        assert "rr's settings would not apply" in op.detail
    elif outcome == "warning":
        assert op.status is Status.PLANNED
        assert len(warned) == 1
        assert "max-length" in warned[0]
    else:
        assert op.status is Status.PLANNED
        assert not warned


def test_server_delay_in_a_policy_still_needs_4_3() -> None:
    text = (
        '[broker]\nsettings = "policy"\n[queues.j]\ntype = "quorum"\nmax_attempts = 3\n'
        'dead_letter = "j.dead"\ndelay = "server"\ndelay_min = "1s"\n'
    )
    desired = expand(load_text(text))
    job = next(q for q in desired.queues if q.name == "j")
    assert job.policy is not None
    assert job.policy.keys["delayed-retry-min"] == 1000
    result = plan(desired, {}, server_version=(4, 0, 5), policies=())
    assert queue_op(result, "j").status is Status.CONFLICT


def test_without_the_policies_an_existing_queue_is_left_as_it_is() -> None:
    """rr run declares without the management API: nothing to put, nothing known."""
    observed: dict[ObservationKey, Observation] = {
        ("queue", name): Matches() for name in ("payouts", "payouts.retry", "payouts.dead")
    }
    result = _plan(observed, policies=None)
    op = queue_op(result, "payouts")
    assert op.status is Status.UNCHANGED
    assert op.put_policy is None
    assert {r[3] for r in rows(op.settings) if r[1] == "policy"} == {"(not read)"}


def test_effective_rows_resolve_argument_policy_and_operator_policy() -> None:
    """topology/effective.py: each setting with where it comes from and what applies (the
    rules of docs/reference/topology.md, "Policies and arguments")."""
    version = ServerVersion.parse("4.3.6")
    rows_ = effective_rows(
        {"x-queue-type": "quorum", "x-max-length": 10, "x-dead-letter-exchange": "a"},
        "quorum",
        Policy.of(
            "p", ".*", {"max-length": 5, "dead-letter-exchange": "b", "overflow": "drop-head"}
        ),
        Policy.of("o", ".*", {"max-length": 7, "overflow": "reject-publish"}),
        version,
    )
    assert [(r.key, r.argument, r.policy, r.operator_policy, r.effective) for r in rows_] == [
        ("x-dead-letter-exchange", "a", "b", None, "a"),  # the argument
        ("x-max-length", 10, 5, 7, 5),  # the smallest
        ("x-overflow", None, "drop-head", "reject-publish", "reject-publish"),  # the operator's
        ("x-queue-type", "quorum", None, None, "quorum"),
    ]


@pytest.mark.parametrize(
    ("version", "argument", "policy", "operator", "effective"),
    [
        ("4.0.5", -1, 3, None, 3),  # -1 is no limit: the policy's applies
        ("4.3.6", 5, -1, None, 5),
        ("4.3.6", None, -1, None, -1),  # none anywhere: no limit
        ("4.0.5", -1, -1, None, -1),
        ("4.3.6", None, -1, 4, 4),  # the policies merged first: the operator's 4
        ("3.10.8", -1, 3, None, -1),  # 3.10: the smallest number (it drops at the first return)
    ],
)
def test_a_negative_delivery_limit_is_none_on_4(
    version: str, argument: int | None, policy: int, operator: int | None, effective: int
) -> None:
    """Measured on 4.0.5 and 4.3.6: an argument of -1 under a policy of 3 dead-letters at the
    4th return; an argument of 5 under a policy of -1 at the 6th (tests/contract/
    test_policies.py holds the servers to it)."""
    rows_ = effective_rows(
        {"x-queue-type": "quorum"} | ({} if argument is None else {"x-delivery-limit": argument}),
        "quorum",
        Policy.of("p", ".*", {"delivery-limit": policy}),
        None if operator is None else Policy.of("o", ".*", {"delivery-limit": operator}),
        ServerVersion.parse(version),
    )
    (limit,) = [r.effective for r in rows_ if r.key == "x-delivery-limit"]
    assert limit == effective
