"""Pure tables for plan.py: desired entities + what the broker holds -> one operation each."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rabbitctl_retry.cli.render import plan_document
from rabbitctl_retry.topology.expand import Desired, expand
from rabbitctl_retry.topology.load import load_file, load_text
from rabbitctl_retry.topology.plan import (
    Absent,
    Difference,
    Differs,
    Matches,
    Observation,
    ObservationKey,
    OpKind,
    Plan,
    Refused,
    Status,
    describe_differences,
    plan,
)
from tests.unit.test_doctor import QUORUM_DLQ_WITHOUT_ROUTE

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "refunds" / "topology.toml"


def desired_of(text: str) -> Desired:
    return expand(load_text(text))


def rows(result: Plan) -> list[tuple[str, str, str, str | None]]:
    return [(op.op.value, op.name, op.status.value, op.detail) for op in result.operations]


REBUILD = (
    "; the queue must be rebuilt: RabbitMQ changes no type, durability or x- argument of an "
    "existing queue, and rr declare deletes nothing; rr migrate TOPOLOGY rebuilds it with "
    'its messages (rr docs migrate-to-quorum "Migrating a queue")'
)


def test_json_spellings_of_ops_and_statuses() -> None:
    assert [kind.value for kind in OpKind] == ["declare_queue", "declare_exchange", "bind"]
    assert [status.value for status in Status] == [
        "created",
        "unchanged",
        "planned",
        "live",
        "changed",
        "conflict",
    ]


# --------------------------------------------------------------------------- one queue

_DIFFERS = Differs(
    (
        Difference("x-delivery-limit", "4", "5"),
        Difference("durable", "true", "false"),
        Difference("x-dead-letter-routing-key", "'q.dead'", "(none)"),
    )
)


@pytest.mark.parametrize(
    ("observation", "status", "detail"),
    [
        (None, "planned", None),
        (Absent(), "planned", None),
        (Matches(), "unchanged", None),
        (
            _DIFFERS,
            "conflict",
            "exists with other arguments: x-delivery-limit: file 4, broker 5; durable: file "
            "true, broker false; x-dead-letter-routing-key: file 'q.dead', broker (none)" + REBUILD,
        ),
        (
            Differs((), detail="inequivalent arg 'x-weird' for queue 'q'"),
            "conflict",
            "exists with other arguments: inequivalent arg 'x-weird' for queue 'q'",
        ),
        (
            Refused("locked: in use by another connection"),
            "conflict",
            "locked: in use by another connection",
        ),
    ],
)
def test_queue_observation(
    observation: Observation | None, status: str, detail: str | None
) -> None:
    desired = desired_of('[queues.q]\ntype = "quorum"\nmax_attempts = 5\ndead_letter = "q.dead"\n')
    observed: dict[ObservationKey, Observation] = {("queue", "q.dead"): Matches()}
    if observation is not None:
        observed[("queue", "q")] = observation
    result = plan(desired, observed, server_version=(3, 10, 8))
    # q.dead, which q dead-letters to, is declared first
    dead, queue = result.operations
    assert (dead.op, dead.name, dead.status.value, dead.detail) == (
        OpKind.DECLARE_QUEUE,
        "q.dead",
        "unchanged",
        None,
    )
    assert (queue.op, queue.name, queue.status.value, queue.detail) == (
        OpKind.DECLARE_QUEUE,
        "q",
        status,
        detail,
    )
    assert queue.arguments == {
        "x-queue-type": "quorum",
        "x-delivery-limit": 4,
        "x-dead-letter-exchange": "",
        "x-dead-letter-routing-key": "q.dead",
        "x-dead-letter-strategy": "at-least-once",
        "x-overflow": "reject-publish",
    }
    assert type(queue.arguments["x-delivery-limit"]) is int
    assert queue.entity is desired.queues[1]
    assert result.can_apply is (status != "conflict")
    assert result.conflicts == ((queue,) if status == "conflict" else ())


def test_differs_detail_names_every_key_and_both_values() -> None:
    detail = describe_differences(_DIFFERS)
    for difference in _DIFFERS.differences:
        assert f"{difference.key}: file {difference.desired}, broker {difference.current}" in detail
    assert detail.count(";") == 2


@pytest.mark.parametrize(
    ("observation", "status", "detail"),
    [
        (Absent(), "planned", None),
        (Matches(), "unchanged", None),
        (
            Differs((Difference("type", "'topic'", "'direct'"),)),
            "conflict",
            "exists with other arguments: type: file 'topic', broker 'direct'",
        ),
        (
            Refused("unknown exchange type 'x-delayed-message'"),
            "conflict",
            "unknown exchange type 'x-delayed-message'",
        ),
    ],
)
def test_exchange_observation(observation: Observation, status: str, detail: str | None) -> None:
    desired = desired_of('[exchanges.events]\ntype = "topic"\n')
    result = plan(desired, {("exchange", "events"): observation}, server_version=(3, 10, 8))
    assert rows(result) == [("declare_exchange", "events", status, detail)]


# --------------------------------------------------------------------------- the guide's file


def test_the_guides_file_on_an_empty_broker_is_all_planned() -> None:
    result = plan(expand(load_file(EXAMPLE)), {}, server_version=(3, 10, 8))
    assert rows(result) == [
        ("declare_queue", "refunds.dead", "planned", None),
        ("declare_queue", "refunds", "planned", None),
        ("declare_queue", "refunds.retry", "planned", None),
        ("declare_queue", "payouts.dead", "planned", None),
        ("declare_queue", "payouts", "planned", None),
        ("declare_queue", "refunds.receipts", "planned", None),
    ]
    assert result.can_apply is True
    assert result.conflicts == ()
    applied = result.applied()
    assert [op.status for op in applied.operations] == [Status.CREATED] * 6
    # the plan itself is a value: applying makes a new one
    assert [op.status for op in result.operations] == [Status.PLANNED] * 6


def test_the_guides_file_on_a_drifted_broker() -> None:
    observed: dict[ObservationKey, Observation] = {
        ("queue", "refunds"): Matches(),
        ("queue", "refunds.retry"): Matches(),
        ("queue", "refunds.dead"): Matches(),
        ("queue", "payouts"): Differs((Difference("x-delivery-limit", "4", "5"),)),
    }
    result = plan(expand(load_file(EXAMPLE)), observed, server_version=(4, 0, 5))
    assert rows(result) == [
        ("declare_queue", "refunds.dead", "unchanged", None),
        ("declare_queue", "refunds", "unchanged", None),
        ("declare_queue", "refunds.retry", "unchanged", None),
        ("declare_queue", "payouts.dead", "planned", None),
        (
            "declare_queue",
            "payouts",
            "conflict",
            "exists with other arguments: x-delivery-limit: file 4, broker 5" + REBUILD,
        ),
        ("declare_queue", "refunds.receipts", "planned", None),
    ]
    assert result.can_apply is False
    assert [op.name for op in result.conflicts] == ["payouts"]


def test_plan_document_is_the_declare_json_of_spec_6() -> None:
    result = plan(
        expand(load_file(EXAMPLE)), {("queue", "refunds"): Matches()}, server_version=(3, 10, 8)
    )
    document = json.loads(json.dumps(plan_document(result, dry_run=True)))
    assert document["dry_run"] is True
    existing = [
        {
            key: value
            for key, value in op.items()
            if key not in ("policy", "settings", "broker_type")
        }
        for op in document["operations"]
    ]
    # issue #41: each queue's type on the broker, as the observation shows it
    assert [op.get("broker_type") for op in document["operations"]] == [
        None,
        "classic",
        None,
        None,
        None,
        None,
    ]
    # issue #27: each queue also names rr's policy for it and classifies its settings
    assert document["operations"][1]["policy"] is None
    assert document["operations"][1]["settings"] == [
        {
            "key": "durable",
            "held_by": "property",
            "desired": "true",
            "current": "true",
            "change": "unchanged",
            "reason": "",
        },
        {
            "key": "x-queue-type",
            "held_by": "argument",
            "desired": "'classic'",
            "current": "'classic'",
            "change": "unchanged",
            "reason": "",
        },
    ]
    assert {row["change"] for row in document["operations"][4]["settings"]} == {"planned"}
    assert existing[1] == {
        "op": "declare_queue",
        "name": "refunds",
        "arguments": {"x-queue-type": "classic"},
        "status": "unchanged",
        "detail": None,
        "placement": None,
    }
    assert existing[4] == {
        "op": "declare_queue",
        "name": "payouts",
        "arguments": {
            "x-queue-type": "quorum",
            "x-delivery-limit": 4,
            "x-dead-letter-exchange": "",
            "x-dead-letter-routing-key": "payouts.dead",
            "x-dead-letter-strategy": "at-least-once",
            "x-overflow": "reject-publish",
        },
        "status": "planned",
        "detail": None,
        "placement": None,
    }
    assert type(document["operations"][4]["arguments"]["x-delivery-limit"]) is int
    assert [op["status"] for op in document["operations"]] == [
        "planned",
        "unchanged",
        "planned",
        "planned",
        "planned",
        "planned",
    ]


# --------------------------------------------------------------------------- referenced exchanges

_USES_EXTERNAL = (
    '[queues.a]\nbindings = [{ exchange = "events", routing_key = "a.#" }]\n'
    '[queues.b]\ndead_letter_exchange = "dlx"\n'
)


@pytest.mark.parametrize(
    ("events", "dlx", "expected"),
    [
        (
            Matches(),
            Matches(),
            [
                ("declare_queue", "a", "planned", None),
                ("declare_queue", "b", "planned", None),
                ("bind", "events -> a (a.#)", "planned", None),
            ],
        ),
        (
            None,
            None,
            [
                ("declare_queue", "a", "planned", None),
                (
                    "declare_queue",
                    "b",
                    "conflict",
                    "exchange 'dlx' is used by the file but neither declared in it nor present "
                    "on the broker",
                ),
                (
                    "bind",
                    "events -> a (a.#)",
                    "conflict",
                    "exchange 'events' is used by the file but neither declared in it nor "
                    "present on the broker",
                ),
            ],
        ),
        (
            Absent(),
            Refused("access refused"),
            [
                ("declare_queue", "a", "planned", None),
                ("declare_queue", "b", "conflict", "exchange 'dlx': access refused"),
                (
                    "bind",
                    "events -> a (a.#)",
                    "conflict",
                    "exchange 'events' is used by the file but neither declared in it nor "
                    "present on the broker",
                ),
            ],
        ),
    ],
)
def test_referenced_exchanges(
    events: Observation | None,
    dlx: Observation | None,
    expected: list[tuple[str, str, str, str | None]],
) -> None:
    desired = desired_of(_USES_EXTERNAL)
    assert desired.referenced_exchanges == ("events", "dlx")
    observed: dict[ObservationKey, Observation] = {}
    if events is not None:
        observed[("exchange", "events")] = events
    if dlx is not None:
        observed[("exchange", "dlx")] = dlx
    result = plan(desired, observed, server_version=(3, 10, 8))
    assert rows(result) == expected
    assert result.can_apply is all(row[2] != "conflict" for row in expected)


def test_missing_dead_letter_exchange_makes_even_an_existing_queue_a_conflict() -> None:
    desired = desired_of('[queues.b]\ndead_letter_exchange = "dlx"\n')
    result = plan(desired, {("queue", "b"): Matches()}, server_version=(3, 10, 8))
    assert rows(result) == [
        (
            "declare_queue",
            "b",
            "conflict",
            "exchange 'dlx' is used by the file but neither declared in it nor present on the "
            "broker",
        )
    ]


def test_dead_letter_exchange_declared_in_the_file_is_not_missing() -> None:
    desired = desired_of(
        '[exchanges.dlx]\ntype = "fanout"\n[queues.b]\ndead_letter_exchange = "dlx"\n'
    )
    result = plan(desired, {}, server_version=(3, 10, 8))
    assert rows(result) == [
        ("declare_exchange", "dlx", "planned", None),
        ("declare_queue", "b", "planned", None),
    ]


# --------------------------------------------------------------------------- bindings


@pytest.mark.parametrize(
    ("queue", "exchange", "status"),
    [
        (Matches(), Matches(), "unchanged"),
        (Absent(), Matches(), "planned"),
        (Matches(), Absent(), "planned"),
        (Absent(), Absent(), "planned"),
    ],
)
def test_binding_between_declared_entities(
    queue: Observation, exchange: Observation, status: str
) -> None:
    desired = desired_of(
        '[exchanges.events]\ntype = "topic"\n'
        '[queues.a]\nbindings = [{ exchange = "events", routing_key = "k", '
        'arguments = { x-note = "n" } }]\n'
    )
    result = plan(
        desired,
        {("queue", "a"): queue, ("exchange", "events"): exchange},
        server_version=(3, 10, 8),
    )
    bind = result.operations[2]
    assert (bind.op, bind.name, bind.status.value, bind.detail) == (
        OpKind.BIND,
        "events -> a (k)",
        status,
        None,
    )
    assert bind.arguments == {"x-note": "n"}
    assert bind.entity is desired.bindings[0]


def test_plugin_dme_plan() -> None:
    desired = desired_of('[queues.q]\ndelay = "plugin-dme"\n')
    fresh = plan(desired, {}, server_version=(3, 10, 8))
    assert rows(fresh) == [
        ("declare_exchange", "q.delay", "planned", None),
        ("declare_queue", "q", "planned", None),
        ("bind", "q.delay -> q (q)", "planned", None),
    ]
    assert fresh.operations[0].arguments == {"x-delayed-type": "direct"}
    existing = plan(
        desired,
        {("exchange", "q.delay"): Matches(), ("queue", "q"): Matches()},
        server_version=(3, 10, 8),
    )
    assert [op.status for op in existing.operations] == [Status.UNCHANGED] * 3
    refused = plan(
        desired,
        {("exchange", "q.delay"): Refused("the delayed-message plugin is not enabled")},
        server_version=(3, 10, 8),
    )
    assert rows(refused)[0] == (
        "declare_exchange",
        "q.delay",
        "conflict",
        "the delayed-message plugin is not enabled",
    )
    assert refused.can_apply is False


# --------------------------------------------------------------------------- server versions

_NON_DURABLE = "[queues.t]\ndurable = false\n"
_PERMITTED = {"transient_nonexcl_queues": True, "global_qos": False}
_DENIED = {"transient_nonexcl_queues": False, "global_qos": True}
_DENIED_DETAIL = (
    "the server denies the deprecated feature transient_nonexcl_queues (read from its "
    "management API): RabbitMQ closes the connection on the declare of a transient "
    "(non-durable) non-exclusive queue (541 INTERNAL_ERROR); make it durable"
)
_ASSUMED = (
    "'t' is transient (durable = false): transient non-exclusive queues are a deprecated "
    "feature on RabbitMQ 4 (transient_nonexcl_queues), permitted by default on 4.0.5 and "
    "4.3.6, but a server configured to deny it closes the connection on their declare (541; "
    "rr checks the server's setting when given its management URL, rr docs run-on-a-cluster); "
    "make it durable"
)
_READ = (
    "'t' is transient (durable = false): transient non-exclusive queues are a deprecated "
    "feature on RabbitMQ 4 (transient_nonexcl_queues), this server permits it (read from its "
    "management API); make it durable"
)


@pytest.mark.parametrize(
    ("text", "server_version", "features", "observation", "status", "detail", "warnings"),
    [
        # without the table (no management URL): declared; a warning from RabbitMQ 4
        (_NON_DURABLE, (3, 10, 8), None, Absent(), "planned", None, ()),
        (_NON_DURABLE, (4, 0, 5), None, Absent(), "planned", None, (_ASSUMED,)),
        (_NON_DURABLE, (4, 3, 6), None, Absent(), "planned", None, (_ASSUMED,)),
        (_NON_DURABLE, (5, 0, 0), None, Absent(), "planned", None, (_ASSUMED,)),
        (_NON_DURABLE, (4, 3, 6), None, Matches(), "unchanged", None, (_ASSUMED,)),
        # the table permits it: declared, with the warning that says so
        (_NON_DURABLE, (4, 3, 6), _PERMITTED, Absent(), "planned", None, (_READ,)),
        (_NON_DURABLE, (4, 3, 6), _PERMITTED, Matches(), "unchanged", None, (_READ,)),
        # the table denies it: refused before any change, whatever the version
        (_NON_DURABLE, (4, 3, 6), _DENIED, Absent(), "conflict", _DENIED_DETAIL, ()),
        (_NON_DURABLE, (4, 3, 6), _DENIED, Matches(), "conflict", _DENIED_DETAIL, ()),
        (_NON_DURABLE, (3, 13, 7), _DENIED, Absent(), "conflict", _DENIED_DETAIL, ()),
        # a table that does not list it: no deprecated feature there
        (_NON_DURABLE, (4, 3, 6), {"global_qos": False}, Absent(), "planned", None, ()),
        # durable queues: nothing to say
        ("[queues.t]\n", (4, 0, 5), None, Absent(), "planned", None, ()),
        ("[queues.t]\n", (4, 3, 6), _DENIED, Absent(), "planned", None, ()),
    ],
)
def test_transient_queues_by_server_version_and_deprecated_features(
    text: str,
    server_version: tuple[int, int, int],
    features: dict[str, bool] | None,
    observation: Observation,
    status: str,
    detail: str | None,
    warnings: tuple[str, ...],
) -> None:
    result = plan(
        desired_of(text),
        {("queue", "t"): observation},
        server_version=server_version,
        deprecated_features=features,
    )
    assert rows(result) == [("declare_queue", "t", status, detail)]
    assert result.warnings == warnings
    assert result.applied().warnings == warnings
    assert result.placed({}).warnings == warnings


def test_one_warning_names_every_transient_queue() -> None:
    desired = desired_of("[queues.a]\ndurable = false\n[queues.b]\n[queues.c]\ndurable = false\n")
    result = plan(desired, {}, server_version=(4, 3, 6))
    [warning] = result.warnings
    assert warning.startswith("'a', 'c' are transient (durable = false): ")
    assert warning.endswith("; make them durable")
    denied = plan(desired, {}, server_version=(4, 3, 6), deprecated_features=_DENIED)
    assert [op.name for op in denied.conflicts] == ["a", "c"]
    assert denied.warnings == ()


def test_non_durable_exchange_is_fine_on_rabbitmq_4() -> None:
    result = plan(desired_of("[exchanges.e]\ndurable = false\n"), {}, server_version=(4, 0, 5))
    assert rows(result) == [("declare_exchange", "e", "planned", None)]


# --------------------------------------------------------------------------- applied


def test_applied_turns_only_planned_into_created() -> None:
    desired = desired_of(
        '[exchanges.events]\ntype = "topic"\n'
        '[queues.a]\nbindings = [{ exchange = "events", routing_key = "k" }]\n'
        "[queues.b]\n"
        '[queues.c]\ndead_letter_exchange = "gone"\n'
    )
    observed: dict[ObservationKey, Observation] = {
        ("exchange", "events"): Matches(),
        ("queue", "b"): Matches(),
    }
    result = plan(desired, observed, server_version=(3, 10, 8))
    assert [op.status.value for op in result.operations] == [
        "unchanged",
        "planned",
        "unchanged",
        "conflict",
        "planned",
    ]
    applied = result.applied()
    assert [op.status.value for op in applied.operations] == [
        "unchanged",
        "created",
        "unchanged",
        "conflict",
        "created",
    ]
    for before, after in zip(result.operations, applied.operations, strict=True):
        assert (before.op, before.name, before.arguments, before.detail, before.entity) == (
            after.op,
            after.name,
            after.arguments,
            after.detail,
            after.entity,
        )


def test_empty_plan() -> None:
    result = plan(Desired(), {}, server_version=(3, 10, 8))
    assert result == Plan(operations=())
    assert result.can_apply is True
    assert result.applied() == result


def test_a_conflict_keeps_every_reason() -> None:
    # The queue differs AND its dead-letter exchange is missing: the detail must still name
    # the differing argument with both values, not only the missing exchange.
    desired = desired_of('[queues.b]\ndead_letter_exchange = "dlx"\n')
    observed: dict[ObservationKey, Observation] = {
        ("queue", "b"): Differs((Difference("x-dead-letter-exchange", "'dlx'", "'old'"),)),
    }
    (operation,) = plan(desired, observed, server_version=(3, 10, 8)).operations
    assert operation.status is Status.CONFLICT
    assert operation.detail is not None
    assert "x-dead-letter-exchange: file 'dlx', broker 'old'" in operation.detail
    assert "exchange 'dlx' is used by the file" in operation.detail


REPLICATED = """
[queues.payouts]
type = "quorum"
max_attempts = 3
dead_letter = "payouts.dead"
delay = "dlx-ttl"
replicas = 3

[queues."payouts.dead"]
type = "quorum"
replicas = 3
"""

NODES = ("rabbit@mq1", "rabbit@mq2", "rabbit@mq3")


def test_replicas_the_cluster_can_hold_are_planned() -> None:
    result = plan(expand(load_text(REPLICATED)), {}, server_version=(3, 10, 8), cluster_nodes=NODES)
    assert result.can_apply
    assert {op.status for op in result.operations} == {Status.PLANNED}


def test_more_replicas_than_nodes_is_a_conflict_for_every_new_queue_that_asks() -> None:
    result = plan(
        expand(load_text(REPLICATED)), {}, server_version=(3, 10, 8), cluster_nodes=NODES[:2]
    )
    conflicts = {op.name: op.detail for op in result.conflicts}
    assert set(conflicts) == {"payouts", "payouts.retry", "payouts.dead"}
    assert conflicts["payouts"] == (
        "replicas = 3, but the cluster has 2 nodes (rabbit@mq1, rabbit@mq2): RabbitMQ would "
        "give the queue 2 without saying so"
    )


def test_replicas_are_not_checked_without_the_nodes_nor_on_existing_queues() -> None:
    desired = expand(load_text(REPLICATED))
    assert plan(desired, {}, server_version=(3, 10, 8)).can_apply  # no management URL: not known
    existing: dict[ObservationKey, Observation] = {
        ("queue", name): Matches() for name in ("payouts", "payouts.retry", "payouts.dead")
    }
    result = plan(desired, existing, server_version=(3, 10, 8), cluster_nodes=NODES[:1])
    assert result.can_apply  # RabbitMQ never changes the members of a queue that exists


# --------------------------------------------------------------------------- no limit on 4.x

PARKING = QUORUM_DLQ_WITHOUT_ROUTE

V3_10, V4_0, V4_3 = (3, 10, 8), (4, 0, 5), (4, 3, 6)


def _limit_of(name: str, server: tuple[int, int, int] | None) -> object:
    queue = next(q for q in expand(load_text(PARKING), server).queues if q.name == name)
    return queue.arguments.get("x-delivery-limit")


@pytest.mark.parametrize(
    ("server", "dead_limit"),
    [(None, None), (V3_10, None), (V4_0, -1), (V4_3, -1)],
)
def test_a_quorum_queue_without_a_limit_gets_minus_1_on_4_only(
    server: tuple[int, int, int] | None, dead_limit: int | None
) -> None:
    """4.x would give it 20 (and drop what is returned that often); 3.10 has no default and
    drops everything at the first return under -1; unknown server (show, export): nothing."""
    assert _limit_of("payouts.dead", server) == dead_limit
    assert _limit_of("payouts", server) == 4  # its own limit, whatever the server


def test_in_policy_mode_the_minus_1_goes_into_rrs_policy() -> None:
    text = '[broker]\nsettings = "policy"\n' + PARKING
    dead = next(q for q in expand(load_text(text), V4_0).queues if q.name == "payouts.dead")
    assert "x-delivery-limit" not in dead.arguments
    assert dead.policy is not None
    assert dead.policy.keys["delivery-limit"] == -1


def _kept(observation: Observation) -> Plan:
    desired = expand(load_text(PARKING), V4_0)
    observed: dict[ObservationKey, Observation] = {
        ("queue", "payouts"): Matches(),
        ("queue", "payouts.dead"): observation,
    }
    return plan(desired, observed, server_version=V4_0)


def test_an_existing_quorum_queue_without_minus_1_is_kept_with_a_warning() -> None:
    result = _kept(Differs((Difference("x-delivery-limit", "-1", "(none)"),)))
    dead = next(op for op in result.operations if op.name == "payouts.dead")
    assert (dead.status, dead.detail, result.can_apply) == (Status.UNCHANGED, None, True)
    assert "x-delivery-limit" not in dead.entity.arguments  # re-declared as it is
    [warning] = result.warnings
    assert warning.startswith(
        "'payouts.dead' exists without x-delivery-limit, so RabbitMQ 4.0.5 gives it a "
        "delivery limit of 20: a message returned that often is dropped"
    )


def test_other_differences_of_that_queue_stay_conflicts() -> None:
    result = _kept(
        Differs(
            (
                Difference("x-delivery-limit", "-1", "(none)"),
                Difference("x-max-length", "(none)", "5"),
            )
        )
    )
    dead = next(op for op in result.operations if op.name == "payouts.dead")
    assert dead.status is Status.CONFLICT
    assert dead.detail is not None
    assert dead.detail.startswith(
        "exists with other arguments: x-max-length: file (none), broker 5"
    )
    assert "x-delivery-limit" not in dead.detail


def test_a_limit_someone_set_is_a_conflict_as_any_other() -> None:
    result = _kept(Differs((Difference("x-delivery-limit", "-1", "5"),)))
    dead = next(op for op in result.operations if op.name == "payouts.dead")
    assert dead.status is Status.CONFLICT
    assert result.warnings == ()
