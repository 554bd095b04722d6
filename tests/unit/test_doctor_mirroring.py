"""``rr doctor``'s findings on classic queue mirroring, pure: on RabbitMQ 3.x, the classic
queues an ``ha-mode`` policy mirrors, which keep one copy after an upgrade to 4.0 (it
removed mirroring and refuses ``ha-*`` policy keys: measured on 4.0.5); docs/reference/cli.md,
"rr doctor"."""

from __future__ import annotations

from rabbitctl_retry.doctor import (
    Finding,
    Level,
    PoliciesRead,
    ServerFacts,
    TableUnread,
    Unread,
    examine,
    mirroring_findings,
    safe,
)
from rabbitctl_retry.server import Policy, QueueState, ServerVersion
from rabbitctl_retry.topology.expand import expand
from rabbitctl_retry.topology.load import load_text

HA_ALL = Policy.of("ha-all", "^orders", {"ha-mode": "all", "ha-sync-mode": "automatic"})
PLAIN = Policy.of("limits", ".*", {"max-length": 1000}, priority=5)

TOPOLOGY = """
[queues.orders]

[queues.payments]
type = "quorum"
replicas = 3
"""

WAIT = "orders.retry"
"""The wait queue of ``orders`` in :data:`POLICY_MODE`, whose settings rr's policy holds."""

POLICY_MODE = """
[broker]
settings = "policy"

[queues.orders]
max_attempts = 3
dead_letter = "orders.dead"
delay = "dlx-ttl"
"""


def findings(
    read: PoliciesRead | TableUnread, version: str = "3.10.8", topology: str = TOPOLOGY
) -> list[Finding]:
    desired = expand(load_text(topology))
    return mirroring_findings(desired, ServerFacts(ServerVersion.parse(version), policies=read))


def test_a_mirrored_classic_queue_is_a_warning_naming_the_policy_and_the_way_out() -> None:
    read = PoliciesRead(
        (HA_ALL, Policy.of("payments", "^payments$", {"max-length": 10}, priority=5)),
        (
            ("orders", QueueState("classic", {}, policy="ha-all")),
            ("payments", QueueState("quorum", {"x-queue-type": "quorum"})),
        ),
    )

    found = findings(read)

    assert [(f.code, f.level, f.queue) for f in found] == [
        ("classic-mirroring-policy", Level.INFO, None),
        ("classic-mirroring", Level.WARNING, "orders"),
    ]
    message = found[1].message
    assert "'orders' is a classic queue mirrored by the policy 'ha-all'" in message
    assert "ha-mode = 'all', ha-sync-mode = 'automatic'" in message
    assert "RabbitMQ 4.0 removed classic queue mirroring" in message
    assert "one copy, on one node: losing that node loses its messages" in message
    assert 'type = "quorum" (with replicas)' in message
    assert "rr migrate TOPOLOGY rebuilds it with its messages" in message
    assert 'rr docs migrate-to-quorum "Migrating a queue"' in message
    assert "they keep one copy, on one node" in found[0].message


def test_every_classic_queue_of_the_vhost_is_checked_not_only_the_topologys() -> None:
    listed = (("orders", "classic"), ("orders.audit", "classic"), ("orders.q", "quorum"))
    read = PoliciesRead((HA_ALL,), (("orders", QueueState("classic", {})),), listed)

    found = findings(read)

    assert [(f.code, f.queue) for f in found] == [
        ("classic-mirroring-policy", None),
        ("classic-mirroring", "orders.audit"),  # outside the file: a quorum one is no finding
        ("classic-mirroring", "orders"),
    ]
    assert "'orders.audit' (a classic queue of the vhost, not in the topology)" in found[1].message
    assert "rr migrate TOPOLOGY" in found[1].message
    without_file = mirroring_findings(
        None, ServerFacts(ServerVersion.parse("3.10.8"), policies=read)
    )
    assert [(f.code, f.queue) for f in without_file] == [
        ("classic-mirroring-policy", None),
        ("classic-mirroring", "orders"),
        ("classic-mirroring", "orders.audit"),
    ]
    assert "'orders' (a classic queue of the vhost) is mirrored" in without_file[1].message


def test_a_warning_is_not_unsafe_on_the_3x_server() -> None:
    read = PoliciesRead((HA_ALL,), (("orders", QueueState("classic", {}, policy="ha-all")),))
    server_facts = ServerFacts(ServerVersion.parse("3.10.8"), policies=read)

    assert safe(examine(expand(load_text(TOPOLOGY)), server_facts))


def test_a_higher_policy_without_ha_mode_applies_alone() -> None:
    """The queue does not mirror; the applying policy is the rule's, not the API's ``policy``
    of the queue (it lags a declare by seconds: None here)."""
    read = PoliciesRead((HA_ALL, PLAIN), (("orders", QueueState("classic", {})),))
    assert [f.code for f in findings(read)] == ["classic-mirroring-policy"]

    lagging = PoliciesRead((HA_ALL,), (("orders", QueueState("classic", {})),))
    assert [f.code for f in findings(lagging)] == [
        "classic-mirroring-policy",
        "classic-mirroring",
    ]


def test_a_new_queue_takes_the_highest_matching_policy() -> None:
    low = Policy.of("ha-low", "^ord", {"ha-mode": "exactly", "ha-params": 2}, priority=1)
    high = Policy.of("plain-high", "^orders$", {"max-length": 5}, priority=2)

    assert [f.code for f in findings(PoliciesRead((low,), (("orders", None),)))] == [
        "classic-mirroring-policy",
        "classic-mirroring",
    ]
    assert [f.code for f in findings(PoliciesRead((low, high), (("orders", None),)))] == [
        "classic-mirroring-policy"
    ]


def test_a_quorum_queue_is_never_mirrored() -> None:
    catch_all = Policy.of("ha-everything", ".*", {"ha-mode": "all"})
    read = PoliciesRead(
        (catch_all,),
        (("orders", QueueState("quorum", {}, policy="ha-everything")), ("payments", None)),
    )

    assert [f.code for f in findings(read)] == ["classic-mirroring-policy"]


def test_rrs_policy_shadows_an_ha_policy() -> None:
    """rr's policy (priority 100) outranks ha-all, and policies do not merge: the queue in
    settings = "policy" does not mirror (the same warning rr declare's plan gives)."""
    wait = QueueState("classic", {}, policy="rr.orders.retry")
    [rr_policy] = [q.policy for q in expand(load_text(POLICY_MODE)).queues if q.name == WAIT]
    assert rr_policy is not None
    read = PoliciesRead((HA_ALL, rr_policy), ((WAIT, wait),))

    found = [f for f in findings(read, topology=POLICY_MODE) if f.queue in (None, WAIT)]

    assert [(f.code, f.level) for f in found] == [
        ("classic-mirroring-policy", Level.INFO),
        ("classic-mirroring-shadowed", Level.WARNING),
    ]
    message = found[1].message
    assert "rr's policy 'rr.orders.retry' (priority 100) outranks 'ha-all'" in message
    assert "rr declare's plan warns of it too" in message


def test_a_new_queue_in_policy_mode_is_shadowed_not_mirrored() -> None:
    read = PoliciesRead((HA_ALL,), ((WAIT, None),))

    found = findings(read, topology=POLICY_MODE)

    assert [(f.code, f.queue) for f in found if f.queue in (None, WAIT)] == [
        ("classic-mirroring-policy", None),
        ("classic-mirroring-shadowed", WAIT),
    ]


def test_without_a_topology_the_ha_policies_are_listed() -> None:
    server_facts = ServerFacts(ServerVersion.parse("3.13.7"), policies=PoliciesRead((HA_ALL,)))

    assert [f.code for f in mirroring_findings(None, server_facts)] == ["classic-mirroring-policy"]


def test_not_checked_without_a_management_url_on_3x() -> None:
    [found] = findings(TableUnread(Unread.NOT_GIVEN))

    assert found.code == "classic-mirroring-not-checked"
    assert found.level is Level.INFO
    assert "give --management-url" in found.message


def test_an_api_that_failed_is_a_warning() -> None:
    [found] = findings(TableUnread(Unread.FAILED, "GET /api/policies/%2F answered 500"))

    assert (found.code, found.level) == ("classic-mirroring-not-checked", Level.WARNING)
    assert "answered 500" in found.message


def test_nothing_on_4x() -> None:
    assert findings(TableUnread(Unread.NOT_GIVEN), version="4.0.5") == []
    assert findings(PoliciesRead((HA_ALL,), (("orders", None),)), version="4.3.6") == []
