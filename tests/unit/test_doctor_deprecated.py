"""``rr doctor``'s findings from the server's deprecated-features table and RabbitMQ 4.3's
counting rules, pure (docs/reference/cli.md, "rr doctor"): the table (or why it was not read) and a
topology in, findings out."""

from __future__ import annotations

import pytest

from rabbitctl_retry.doctor import (
    Finding,
    Level,
    QueueCounts,
    ServerFacts,
    TableUnread,
    Unread,
    examine,
    identity_mismatch,
    safe,
)
from rabbitctl_retry.server import DeprecatedFeature, ServerIdentity, ServerVersion
from rabbitctl_retry.topology.expand import expand
from rabbitctl_retry.topology.load import load_text

V4_3 = ServerVersion(4, 3, 6)
V4_0 = ServerVersion(4, 0, 5)
V3_10 = ServerVersion(3, 10, 8)
NOT_GIVEN = TableUnread(Unread.NOT_GIVEN)


def feature(name: str, state: str, phase: str | None) -> DeprecatedFeature:
    return DeprecatedFeature(name=name, permitted=state == "permitted", phase=phase)


TABLE_4_3_6 = (
    feature("amqp_address_v1", "denied", "denied_by_default"),
    feature("amqp_filter_set_bug", "denied", "denied_by_default"),
    feature("classic_queue_mirroring", "denied", "removed"),
    feature("global_qos", "denied", "denied_by_default"),
    feature("management_metrics_collection", "permitted", "permitted_by_default"),
    feature("queue_master_locator", "denied", "denied_by_default"),
    feature("ram_node_type", "denied", "removed"),
    feature("transient_nonexcl_queues", "permitted", "permitted_by_default"),
)
"""What RabbitMQ 4.3.6's GET /api/deprecated-features answers with its defaults (measured)."""

DENIED_TRANSIENT = tuple(
    feature(f.name, "denied", "denied_by_default") if f.name == "transient_nonexcl_queues" else f
    for f in TABLE_4_3_6
)

TRANSIENT = "[queues.scratch]\ndurable = false\n"

RETRIED_QUORUM = """
[queues.payouts]
type = "quorum"
max_attempts = 5
dead_letter = "payouts.dead"
dead_letter_exchange = "parked"

[exchanges.parked]
"""

SERVER_LIMIT_ONLY = """
[queues.orders]
type = "quorum"
delivery_limit = 2
dead_letter = "orders.dead"

[queues."orders.dead"]
type = "quorum"
"""
"""A quorum queue that relies on the server's limit without rr's max_attempts, dead-lettering
into a quorum queue with the default limit: what
tests/broker/test_doctor_deprecated_on_servers.py measures on 4.3.6."""


HELD_WITHOUT_LIMIT = (QueueCounts("orders.dead", 3, 0, limit_read=True, limit_argument=None),)
"""The server holds orders.dead as an earlier rr declared it: without x-delivery-limit, so with
the server's own limit (20 on 4.x); rr declares it with -1 now."""


def findings(
    version: ServerVersion,
    table: tuple[DeprecatedFeature, ...] | TableUnread = NOT_GIVEN,
    topology: str | None = None,
    held: tuple[QueueCounts, ...] | None = None,
) -> list[Finding]:
    loaded = load_text(topology) if topology is not None else None
    desired = expand(loaded) if loaded is not None else None
    retried = frozenset(q.name for q in loaded.queues if q.max_attempts) if loaded else frozenset()
    facts = ServerFacts(version=version, deprecated_features=table, queue_counts=held)
    return examine(desired, facts, retried)


def by_code(found: list[Finding]) -> dict[str, Finding]:
    return {f.code: f for f in found}


# --- the table, read ---------------------------------------------------------------------


def test_the_table_of_4_3_6_is_reported_by_state() -> None:
    found = by_code(findings(V4_3, TABLE_4_3_6))

    assert "deprecated-features-not-checked" not in found
    assert found["deprecated-features"] == Finding(
        "deprecated-features",
        Level.INFO,
        "RabbitMQ 4.3.6 (read from its management API) denies amqp_address_v1, "
        "amqp_filter_set_bug, classic_queue_mirroring, global_qos, queue_master_locator, "
        "ram_node_type; permits management_metrics_collection, transient_nonexcl_queues",
    )
    assert found["transient-queues-deprecated"].message == (
        "transient (non-durable) non-exclusive queues: RabbitMQ 4.3.6 permits "
        "transient_nonexcl_queues (permitted_by_default), read from its management API: the "
        "server accepts such queues, but the feature is deprecated"
    )


def test_a_transient_queue_where_the_server_permits_it_is_info() -> None:
    found = findings(V4_3, TABLE_4_3_6, TRANSIENT)

    [transient] = [f for f in found if f.queue == "scratch"]
    assert transient == Finding(
        "transient-queue",
        Level.INFO,
        "'scratch' is transient (durable = false): RabbitMQ 4.3.6 permits "
        "transient_nonexcl_queues (permitted_by_default), read from its management API: the "
        "server accepts it, but the feature is deprecated; make it durable",
        "scratch",
    )
    assert safe(found)


def test_a_transient_queue_where_the_server_denies_it_is_unsafe() -> None:
    found = findings(V4_3, DENIED_TRANSIENT, TRANSIENT)

    [transient] = [f for f in found if f.queue == "scratch"]
    assert transient == Finding(
        "transient-queue-denied",
        Level.UNSAFE,
        "'scratch' is transient (durable = false): RabbitMQ 4.3.6 denies "
        "transient_nonexcl_queues (denied_by_default), read from its management API: its "
        "declare is refused; make it durable",
        "scratch",
    )
    assert not safe(found)
    assert by_code(found)["transient-queues-deprecated"].message.endswith(
        "a declare of such a queue is refused"
    )


def test_the_table_not_listing_the_feature_means_no_finding_even_on_4() -> None:
    """The table is the truth: a feature it does not list is not deprecated there."""
    without = tuple(f for f in TABLE_4_3_6 if f.name != "transient_nonexcl_queues")
    codes = [f.code for f in findings(V4_3, without, TRANSIENT)]

    assert "transient-queues-deprecated" not in codes
    assert "transient-queue" not in codes


def test_the_table_wins_over_the_version_on_3_x() -> None:
    """A 3.x server whose table denies the feature: the finding follows the table."""
    denied = (feature("transient_nonexcl_queues", "denied", None),)
    found = findings(ServerVersion(3, 13, 7), denied, TRANSIENT)

    [transient] = [f for f in found if f.queue == "scratch"]
    assert transient.code == "transient-queue-denied"
    assert "RabbitMQ 3.13.7 denies transient_nonexcl_queues, read" in transient.message


def test_an_empty_table() -> None:
    found = by_code(findings(V4_3, ()))

    assert found["deprecated-features"].message == (
        "RabbitMQ 4.3.6 (read from its management API) lists no deprecated feature"
    )
    assert "transient-queues-deprecated" not in found


# --- the table, not read: assumed from the version, and why --------------------------------


@pytest.mark.parametrize(
    ("unread", "level", "message", "note"),
    [
        (
            TableUnread(Unread.NOT_GIVEN),
            Level.INFO,
            "not checked: which deprecated features this server permits or denies (AMQP does "
            "not tell): give --management-url (or $RR_MANAGEMENT_URL, or [broker] "
            "management_url); findings on deprecated features are assumed from the version",
            "not checked: give --management-url",
        ),
        (
            TableUnread(Unread.MISSING),
            Level.INFO,
            "not checked: which deprecated features this server permits or denies: its "
            "management API has no such table (GET /api/deprecated-features answered 404 or "
            "406, as RabbitMQ 3.10.8's does); findings on deprecated features are assumed "
            "from the version",
            "not checked: the management API has no deprecated-features table",
        ),
        (
            TableUnread(Unread.UNSTATED),
            Level.INFO,
            "not checked: which deprecated features this server permits or denies: its "
            "management API lists them without their state (GET /api/deprecated-features "
            "gives no 'state', as RabbitMQ 4.0.5's does, whose configuration may deny one all "
            "the same); findings on deprecated features are assumed from the version",
            "not checked: the management API does not say which features are permitted",
        ),
        (
            TableUnread(Unread.FAILED, "cannot reach the management API at http://m/: refused"),
            Level.WARNING,
            "not checked: which deprecated features this server permits or denies: cannot "
            "reach the management API at http://m/: refused; findings on deprecated features "
            "are assumed from the version",
            "not checked: the management API did not answer (deprecated-features-not-checked)",
        ),
    ],
    ids=["not-given", "missing", "unstated", "failed"],
)
def test_without_the_table_the_findings_say_what_was_not_checked(
    unread: TableUnread, level: Level, message: str, note: str
) -> None:
    found = findings(V4_0, unread, TRANSIENT)
    codes = by_code(found)

    assert codes["deprecated-features-not-checked"] == Finding(
        "deprecated-features-not-checked", level, message
    )
    assert "deprecated-features" not in codes
    assert f"assumed from the version ({note})" in codes["transient-queues-deprecated"].message
    [transient] = [f for f in found if f.queue == "scratch"]
    assert (transient.code, transient.level) == ("transient-queue", Level.INFO)
    assert f"(assumed from the version; {note})" in transient.message
    assert safe(found)  # a check not made is never unsafe


def test_without_the_table_a_3_x_server_has_no_transient_finding() -> None:
    codes = [f.code for f in findings(ServerVersion(3, 10, 8), NOT_GIVEN, TRANSIENT)]

    assert "transient-queue" not in codes
    assert "transient-queues-deprecated" not in codes
    assert "deprecated-features-not-checked" in codes


# --- RabbitMQ 4.3's counting ---------------------------------------------------------------


def test_a_quorum_queue_rr_run_retries_gets_the_4_3_rules_as_info() -> None:
    found = findings(V4_3, TABLE_4_3_6, RETRIED_QUORUM)

    [counting] = [f for f in found if f.code == "quorum-delivery-limit-counting"]
    assert counting == Finding(
        "quorum-delivery-limit-counting",
        Level.INFO,
        "'payouts' relies on x-delivery-limit = 4: on RabbitMQ 4.3.6 it counts what rr run "
        "gives back with basic.reject and what a closing channel returns; a consumer that "
        "gives a message back with basic.nack(requeue=true) is never stopped by it "
        "(x-acquired-count grows, x-delivery-count does not): that message comes back "
        "forever, so a consumer of it other than rr run must use basic.reject",
        "payouts",
    )
    assert "quorum-nack-not-counted" not in [f.code for f in found]


def test_a_quorum_queue_with_only_a_server_limit_warns_about_nacking_consumers() -> None:
    found = findings(V4_3, TABLE_4_3_6, SERVER_LIMIT_ONLY, HELD_WITHOUT_LIMIT)

    [warning] = [f for f in found if f.level is Level.WARNING and f.queue == "orders"]
    assert warning == Finding(
        "quorum-nack-not-counted",
        Level.WARNING,
        "'orders' relies on x-delivery-limit = 2 without a max_attempts of rr's, so consumers "
        "other than rr run may read it: on RabbitMQ 4.3.6 only basic.reject and a closing "
        "channel count toward the limit; a consumer that gives a message back with "
        "basic.nack(requeue=true) is never stopped by it (x-acquired-count grows, "
        "x-delivery-count does not): that message comes back forever. Its consumers must "
        "give messages back with basic.reject",
        "orders",
    )
    # a warning is not unsafe: only the default limit orders.dead is held with (no route) is
    assert [(f.code, f.queue) for f in found if f.level is Level.UNSAFE] == [
        ("quorum-default-limit-drops", "orders.dead")
    ]
    routed = SERVER_LIMIT_ONLY + 'dead_letter_exchange = "parked"\n[exchanges.parked]\n'
    assert safe(findings(V4_3, TABLE_4_3_6, routed, HELD_WITHOUT_LIMIT))
    # declared by this rr (x-delivery-limit = -1), or not there yet: nothing unsafe
    assert safe(findings(V4_3, TABLE_4_3_6, SERVER_LIMIT_ONLY))


def test_a_quorum_dead_letter_target_counts_on_from_the_carried_count_on_4_3() -> None:
    """Measured on 4.3.6 (tests/broker/test_doctor_deprecated_on_servers.py): orders' limit
    of 2 sends a dead letter with x-delivery-count 3; orders.dead (20) drops it at its 18th
    reject."""
    found = findings(V4_3, TABLE_4_3_6, SERVER_LIMIT_ONLY, HELD_WITHOUT_LIMIT)

    [carried] = [f for f in found if f.code == "dead-letter-carried-count"]
    assert carried == Finding(
        "dead-letter-carried-count",
        Level.INFO,
        "'orders.dead' gets 'orders''s dead letters: on RabbitMQ 4.3.6 each carries its "
        "x-delivery-count (up to 3, its count when 'orders''s x-delivery-limit = 2 sent it) "
        "and 'orders.dead' counts on from it, so it drops such a message at its 18th counted "
        "return rather than its 21st",
        "orders.dead",
    )
    # the default limit's own finding stays: the target still drops (4.0 and later)
    assert [(f.code, f.queue) for f in found if f.level is Level.UNSAFE] == [
        ("quorum-default-limit-drops", "orders.dead")
    ]
    # a target rr declared (x-delivery-limit = -1) has no limit to count toward
    assert "dead-letter-carried-count" not in {
        f.code for f in findings(V4_3, TABLE_4_3_6, SERVER_LIMIT_ONLY)
    }


def test_a_dead_letter_target_with_a_route_dead_letters_on_instead() -> None:
    routed = SERVER_LIMIT_ONLY + 'dead_letter_exchange = "parked"\n[exchanges.parked]\n'
    [carried] = [
        f
        for f in findings(V4_3, TABLE_4_3_6, routed, HELD_WITHOUT_LIMIT)
        if f.code == "dead-letter-carried-count"
    ]
    assert "so it dead-letters such a message at its 18th counted return" in carried.message


def test_a_target_whose_limit_the_carried_count_already_passes_goes_at_the_first_return() -> None:
    tight = """
[queues.orders]
type = "quorum"
delivery_limit = 6
dead_letter = "orders.dead"

[queues."orders.dead"]
type = "quorum"
delivery_limit = 3
dead_letter_exchange = "parked"

[exchanges.parked]
"""
    [carried] = [
        f for f in findings(V4_3, TABLE_4_3_6, tight) if f.code == "dead-letter-carried-count"
    ]
    assert "at its 1st counted return rather than its 4th" in carried.message


@pytest.mark.parametrize("version", [ServerVersion(3, 10, 8), V4_0])
def test_before_4_3_there_are_no_4_3_counting_findings(version: ServerVersion) -> None:
    codes = {f.code for f in findings(version, NOT_GIVEN, SERVER_LIMIT_ONLY)}
    codes |= {f.code for f in findings(version, NOT_GIVEN, RETRIED_QUORUM)}

    assert codes.isdisjoint(
        {"quorum-delivery-limit-counting", "quorum-nack-not-counted", "dead-letter-carried-count"}
    )


# --- the management API answers for the server AMQP reached ------------------------------------


@pytest.mark.parametrize(
    ("amqp", "api", "differences"),
    [
        (
            ServerIdentity(V4_3, "RabbitMQ", "rabbit@a"),
            ServerIdentity(V4_3, None, "rabbit@a"),
            None,
        ),
        # a name not told on one side: only the versions are compared
        (ServerIdentity(V4_3), ServerIdentity(V4_3, None, "rabbit@b"), None),
        (ServerIdentity(V4_3, None, "rabbit@a"), ServerIdentity(V4_3), None),
        (
            ServerIdentity(V4_3, None, "rabbit@a"),
            ServerIdentity(V4_3, None, "rabbit@b"),
            "its cluster is 'rabbit@b', the AMQP server's 'rabbit@a'",
        ),
        (
            ServerIdentity(V4_3),
            ServerIdentity(V4_0),
            "it runs RabbitMQ 4.0.5, the AMQP server 4.3.6",
        ),
        (
            ServerIdentity(V4_3, None, "rabbit@a"),
            ServerIdentity(V4_0, None, "evil\x1b[31m" + "x" * 200),
            "its cluster is 'evil\\x1b[31m" + "x" * 91 + "...', the AMQP server's 'rabbit@a'",
        ),
        # one cluster, its names not set: each node gives its own (measured on a 3.10.8
        # cluster: rrc1@vm over AMQP, rrc2@vm from rrc2's API, nodes rrc1..3@localhost)
        (
            ServerIdentity(V3_10, None, "rrc1@vm"),
            ServerIdentity(V3_10, None, "rrc2@vm"),
            None,
        ),
        # the same cluster in a rolling upgrade: its nodes run two versions
        (
            ServerIdentity(V4_3, None, "shop"),
            ServerIdentity(V4_0, None, "shop"),
            None,
        ),
        (
            ServerIdentity(V3_10, None, "other@vm"),
            ServerIdentity(V3_10, None, "rrc2@vm"),
            "its cluster is 'rrc2@vm', the AMQP server's 'other@vm'",
        ),
        # a node of the list on another host: rrc3@localhost's name with its domain
        (
            ServerIdentity(V3_10, None, "rrc3@localhost.corp"),
            ServerIdentity(V3_10, None, "rrc2@vm"),
            None,
        ),
        # the same node id in another cluster, on another host: not one cluster
        (
            ServerIdentity(V3_10, None, "rrc1@vm"),
            ServerIdentity(V3_10, None, "rrc1@elsewhere"),
            "its cluster is 'rrc1@elsewhere', the AMQP server's 'rrc1@vm'",
        ),
    ],
    ids=[
        "same",
        "amqp-no-name",
        "api-no-name",
        "cluster",
        "version",
        "escaped",
        "default-names-of-one-cluster",
        "mixed-versions",
        "another-node-id",
        "a-node-with-its-domain",
        "same-id-another-host",
    ],
)
def test_identity_mismatch(
    amqp: ServerIdentity, api: ServerIdentity, differences: str | None
) -> None:
    nodes = ("rrc1@localhost", "rrc2@localhost", "rrc3@localhost")
    found = identity_mismatch(
        amqp, api, amqp_url="amqp://u:******@q/", api_url="http://m/", api_nodes=nodes
    )

    if differences is None:
        assert found is None
        return
    assert found == (
        "the management API at http://m/ does not answer for the server rr reached at "
        f"amqp://u:******@q/ (/api/overview: {differences}): rr uses none of its answers, and "
        "the findings it would have checked are assumed from the version. Give the management "
        "URL of the server --url reaches"
    )


def test_a_mismatch_is_one_warning_and_the_table_is_assumed() -> None:
    unread = TableUnread(Unread.MISMATCH, "the management API at http://m/ does not answer")
    found = findings(V4_3, unread, TRANSIENT)
    codes = by_code(found)

    assert codes["management-api-mismatch"] == Finding(
        "management-api-mismatch", Level.WARNING, unread.detail
    )
    assert "deprecated-features-not-checked" not in codes
    assert "deprecated-features" not in codes
    [transient] = [f for f in found if f.queue == "scratch"]
    assert (transient.code, transient.level) == ("transient-queue", Level.INFO)
    assert "(assumed from the version; not checked: the management API answers for another " in (
        transient.message
    )
    assert safe(found)
