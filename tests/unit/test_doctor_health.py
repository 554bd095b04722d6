"""``rr doctor``'s checks of the server now, pure (docs/reference/cli.md, "rr doctor"): the nodes'
resource alarms, the consumers the topology expects (none on a wait queue), a quorum queue's
members online against its replicas, and its dead-letter queues; each from plain values of
what was read (``QueueCounts``, ``ClusterRead``), with the exact findings."""

from __future__ import annotations

import pytest

from rabbitctl_retry.doctor import (
    ClusterRead,
    Finding,
    Level,
    QueueCounts,
    ServerFacts,
    TableUnread,
    Unread,
    alarm_findings,
    consumer_findings,
    examine,
    healthy,
    quorum_member_findings,
    safe,
    shown_bytes,
)
from rabbitctl_retry.server import NodeResources, QueueHealth, ServerVersion
from rabbitctl_retry.topology.expand import Desired, expand
from rabbitctl_retry.topology.load import load_text

V = ServerVersion(4, 3, 6)

TOPOLOGY = """
[queues.orders]
max_attempts = 3
delay_tiers = ["1s", "10s"]
dead_letter = "orders.dead"

[queues.payments]
type = "quorum"
max_attempts = 3
dead_letter = "payments.dead"

[queues.ledger]
type = "quorum"
replicas = 3
"""

BLOCKED = (
    "every connection that publishes, on every node of the cluster, is blocked until it "
    "clears (consumers go on)"
)


def desired() -> Desired:
    return expand(load_text(TOPOLOGY))


def node(name: str = "rabbit@a", **changes: object) -> NodeResources:
    values: dict[str, object] = {
        "running": True,
        "mem_alarm": False,
        "disk_free_alarm": False,
        "mem_used_bytes": 150_000_000,
        "mem_limit_bytes": 1_600_000_000,
        "disk_free_bytes": 80_000_000_000,
        "disk_free_limit_bytes": 50_000_000,
    }
    values.update(changes)
    return NodeResources(name, **values)  # type: ignore[arg-type]


def facts(
    counts: tuple[QueueCounts, ...] | None = None,
    cluster: ClusterRead | TableUnread | None = None,
) -> ServerFacts:
    return ServerFacts(
        version=V,
        queue_counts=counts,
        cluster=TableUnread(Unread.NOT_GIVEN) if cluster is None else cluster,
    )


# --- alarms -----------------------------------------------------------------------------------


def test_no_alarm_no_finding() -> None:
    assert alarm_findings(facts(cluster=ClusterRead((node("rabbit@a"), node("rabbit@b"))))) == []


def test_a_memory_and_a_disk_alarm_are_errors_naming_the_node_and_the_numbers() -> None:
    read = ClusterRead(
        (
            node("rabbit@a"),
            node("rabbit@b", mem_alarm=True, mem_used_bytes=1_700_000_000),
            node("rabbit@c", disk_free_alarm=True, disk_free_bytes=42_000_000),
        )
    )

    assert alarm_findings(facts(cluster=read)) == [
        Finding(
            "node-alarm",
            Level.ERROR,
            f"node 'rabbit@b' has a memory alarm: 1.7 GB used, its limit 1.6 GB: {BLOCKED}",
        ),
        Finding(
            "node-alarm",
            Level.ERROR,
            f"node 'rabbit@c' has a disk alarm: 42.0 MB free, its limit 50.0 MB: {BLOCKED}",
        ),
    ]


def test_a_node_that_does_not_run_is_a_warning_without_alarms() -> None:
    read = ClusterRead((node("rabbit@a"), NodeResources("rabbit@b", running=False)))

    assert alarm_findings(facts(cluster=read)) == [
        Finding(
            "node-not-running",
            Level.WARNING,
            "node 'rabbit@b' does not run (the management API lists it as not running): its "
            "alarms are not known, and the queues it holds are without it",
        )
    ]


@pytest.mark.parametrize(
    ("unread", "level", "said"),
    [
        (
            TableUnread(Unread.NOT_GIVEN),
            Level.INFO,
            "give --management-url (or $RR_MANAGEMENT_URL, or [broker] management_url)",
        ),
        (
            TableUnread(Unread.MISMATCH, "the management API at ... does not answer"),
            Level.INFO,
            "the management API answers for another server",
        ),
        (
            TableUnread(Unread.FAILED, "cannot reach the management API at http://x/: refused"),
            Level.WARNING,
            "cannot reach the management API at http://x/: refused",
        ),
    ],
)
def test_alarms_not_checked_says_why(unread: TableUnread, level: Level, said: str) -> None:
    assert alarm_findings(facts(cluster=unread)) == [
        Finding(
            "alarms-not-checked",
            level,
            f"not checked: the nodes' memory and disk alarms (GET /api/nodes): {said}",
        )
    ]


@pytest.mark.parametrize(
    ("count_bytes", "shown"),
    [(None, "unknown"), (999, "999 bytes"), (50_000_000, "50.0 MB"), (2**40, "1.1 TB")],
)
def test_bytes_are_shown_in_decimal_units(count_bytes: int | None, shown: str) -> None:
    assert shown_bytes(count_bytes) == shown


# --- consumers and dead letters -----------------------------------------------------------------

DEAD = frozenset({"orders.dead", "payments.dead"})


def every_queue(**changes: tuple[int, int]) -> tuple[QueueCounts, ...]:
    """Every queue of TOPOLOGY, each with (messages, consumers): 0 messages and a consumer on
    each work queue, none elsewhere, unless changed."""
    names = [queue.name for queue in desired().queues]
    work = {"orders", "payments", "ledger"}
    found = []
    for name in names:
        messages, consumers = changes.get(name, (0, 1 if name in work else 0))
        found.append(QueueCounts(name, messages, consumers))
    return tuple(found)


def test_the_topologys_queues_and_their_kinds() -> None:
    """The expansion TOPOLOGY's tests rely on: two wait queues of orders, one DLQ each."""
    assert [(queue.name, queue.wait_of) for queue in desired().queues] == [
        ("orders.dead", None),
        ("orders", None),
        ("orders.retry.1s", "orders"),
        ("orders.retry.10s", "orders"),
        ("payments.dead", None),
        ("payments", None),
        ("ledger", None),
    ]


def test_every_queue_as_expected_no_finding() -> None:
    assert consumer_findings(desired(), facts(every_queue()), DEAD) == []


def test_a_work_queue_without_consumer_is_a_warning() -> None:
    counts = every_queue(orders=(12, 0), payments=(1, 0))

    assert consumer_findings(desired(), facts(counts), DEAD) == [
        Finding(
            "no-consumer",
            Level.WARNING,
            "'orders' has no consumer: messages wait (12 messages ready)",
            "orders",
        ),
        Finding(
            "no-consumer",
            Level.WARNING,
            "'payments' has no consumer: messages wait (1 message ready)",
            "payments",
        ),
    ]


def test_a_consumer_on_a_wait_queue_is_an_error() -> None:
    counts = every_queue(**{"orders.retry.10s": (5, 2)})

    findings = consumer_findings(desired(), facts(counts), DEAD)

    assert findings == [
        Finding(
            "wait-queue-consumer",
            Level.ERROR,
            "'orders.retry.10s' is a wait queue of 'orders' and has 2 consumers: it takes the "
            "copies waiting there before their delay ends, instead of their going back to "
            "'orders' when it does (a wait queue must have none; stop whatever consumes it)",
            "orders.retry.10s",
        )
    ]
    assert not healthy(findings)
    assert safe(findings)


def test_a_dead_letter_queue_needs_no_consumer_and_its_messages_are_info() -> None:
    counts = every_queue(**{"orders.dead": (7, 0), "payments.dead": (0, 1)})

    assert consumer_findings(desired(), facts(counts), DEAD) == [
        Finding(
            "dead-letter-queue-messages",
            Level.INFO,
            "'orders.dead' (a dead-letter queue) holds 7 messages: rr dlq inspect shows them",
            "orders.dead",
        )
    ]


def test_a_growing_dead_letter_queue_is_a_warning_read_from_the_api() -> None:
    counts = every_queue(**{"orders.dead": (7, 0)})
    read = ClusterRead(
        (node(),),
        (
            QueueHealth("orders.dead", "classic", messages_per_s=0.4),
            QueueHealth("payments.dead", "classic", messages_per_s=-2.0),  # shrinking
            QueueHealth("orders", "classic", messages_per_s=3.0),  # not a dead-letter queue
        ),
    )

    assert consumer_findings(desired(), facts(counts, read), DEAD)[1:] == [
        Finding(
            "dead-letter-queue-growing",
            Level.WARNING,
            "'orders.dead' (a dead-letter queue) grows at 0.4 messages/s (its "
            "messages_details.rate, from the management API's last samples): messages are "
            "failing now",
            "orders.dead",
        )
    ]


def test_a_queue_the_server_does_not_hold_is_not_checked() -> None:
    counts = tuple(count for count in every_queue() if count.name != "ledger")

    assert consumer_findings(desired(), facts(counts), DEAD) == [
        Finding(
            "queue-not-declared",
            Level.INFO,
            "'ledger' is not on the server (a passive declare found no such queue): its "
            "consumers and depth are not checked; rr declare makes it",
            "ledger",
        )
    ]


def test_nothing_without_counts() -> None:
    assert consumer_findings(desired(), facts(None), DEAD) == []


# --- quorum members ---------------------------------------------------------------------------

NODES = (node("rabbit@a"), node("rabbit@b"), node("rabbit@c"))


def quorum(name: str, members: str, online: str) -> QueueHealth:
    return QueueHealth(
        name, "quorum", tuple(f"rabbit@{m}" for m in members), tuple(f"rabbit@{m}" for m in online)
    )


def test_every_member_online_no_finding() -> None:
    read = ClusterRead(NODES, (quorum("payments", "abc", "abc"), quorum("ledger", "abc", "abc")))

    assert quorum_member_findings(desired(), facts(cluster=read)) == []


def test_fewer_members_online_than_expected_is_a_warning() -> None:
    read = ClusterRead(NODES, (quorum("payments", "abc", "ab"), quorum("ledger", "abc", "ac")))

    assert quorum_member_findings(desired(), facts(cluster=read)) == [
        Finding(
            "quorum-members-offline",
            Level.WARNING,
            "'payments' has 2 of the 3 members expected online (every node of the cluster; "
            "members: 3, offline: 'rabbit@c'): it works, with fewer copies; losing 1 more "
            "makes it unavailable",
            "payments",
        ),
        Finding(
            "quorum-members-offline",
            Level.WARNING,
            "'ledger' has 2 of the 3 members expected online (replicas = 3, on a cluster of 3 "
            "nodes; members: 3, offline: 'rabbit@b'): it works, with fewer copies; losing 1 "
            "more makes it unavailable",
            "ledger",
        ),
    ]


def test_fewer_online_than_a_majority_is_an_error() -> None:
    read = ClusterRead(NODES, (quorum("ledger", "abc", "a"),))

    findings = quorum_member_findings(desired(), facts(cluster=read))

    assert findings == [
        Finding(
            "quorum-queue-unavailable",
            Level.ERROR,
            "'ledger' has 1 of its 3 members online (offline: 'rabbit@b', 'rabbit@c'): fewer "
            "than a majority (2), so it takes and delivers nothing until enough of them are "
            "back",
            "ledger",
        )
    ]


def test_replicas_above_the_cluster_size_expect_every_node() -> None:
    """On a cluster smaller than ``replicas`` the queue has a member on every node
    (docs/reference/topology.md): a one-node server holds ``ledger`` (replicas = 3) whole."""
    read = ClusterRead((node("rabbit@a"),), (quorum("ledger", "a", "a"),))

    assert quorum_member_findings(desired(), facts(cluster=read)) == []


def test_a_member_missing_altogether_is_a_warning() -> None:
    """A member removed (``rabbitmq-queues delete_member``): 2 members, both online, on a
    cluster of 3 where every node is expected."""
    read = ClusterRead(NODES, (quorum("payments", "ab", "ab"),))

    [found] = quorum_member_findings(desired(), facts(cluster=read))

    assert (found.code, found.level) == ("quorum-members-offline", Level.WARNING)
    assert "2 of the 3 members expected online" in found.message
    assert "offline: none" in found.message


def test_quorum_members_not_checked_without_the_api() -> None:
    assert quorum_member_findings(desired(), facts()) == [
        Finding(
            "quorum-members-not-checked",
            Level.INFO,
            "not checked: the quorum queues' members online (GET /api/queues/VHOST): give "
            "--management-url (or $RR_MANAGEMENT_URL, or [broker] management_url)",
        )
    ]
    classic_only = expand(load_text("[queues.orders]\n"))
    assert quorum_member_findings(classic_only, facts()) == []


# --- examine ----------------------------------------------------------------------------------


def test_examine_adds_the_checks_of_now() -> None:
    read = ClusterRead(
        (*NODES[:1], node("rabbit@b", mem_alarm=True), *NODES[2:]),
        (quorum("payments", "abc", "abc"), quorum("ledger", "abc", "a")),
    )
    counts = every_queue(ledger=(0, 0))
    now = {
        "node-alarm",
        "no-consumer",
        "quorum-queue-unavailable",
        "alarms-not-checked",
        "quorum-members-not-checked",
    }

    findings = examine(desired(), facts(counts, read), dead_letter_queues=DEAD)

    assert [(f.code, f.level, f.queue) for f in findings if f.code in now] == [
        ("node-alarm", Level.ERROR, None),
        ("no-consumer", Level.WARNING, "ledger"),
        ("quorum-queue-unavailable", Level.ERROR, "ledger"),
    ]
    assert not healthy(findings)


def test_without_a_topology_only_the_alarms() -> None:
    read = ClusterRead((node(disk_free_alarm=True),))

    found = [f.code for f in examine(None, facts(cluster=read))]

    assert found.count("node-alarm") == 1
    assert "no-consumer" not in found
    assert "quorum-members-not-checked" not in found
