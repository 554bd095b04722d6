"""Pure. What the server's state now means for a topology: the node's resource alarms,
the queues' consumers and their quorum members online (``rr doctor``'s health checks)."""

from __future__ import annotations

from rabbitctl_retry.doctor.deprecated import shown_name
from rabbitctl_retry.doctor.facts import Finding, Level, ServerFacts, TableUnread, Unread
from rabbitctl_retry.doctor.versions import is_quorum
from rabbitctl_retry.server import (
    NODES_PATH,
)
from rabbitctl_retry.topology.expand import Desired

_GIVE_URL = "give --management-url (or $RR_MANAGEMENT_URL, or [broker] management_url)"


def health_not_checked(code: str, what: str, unread: TableUnread) -> Finding:
    """A check of the management API's that was not made: info without a management URL or
    with one of another server, a warning when the API failed (as
    ``classic-mirroring-not-checked``)."""
    if unread.why is Unread.NOT_GIVEN:
        return Finding(code, Level.INFO, f"not checked: {what}: {_GIVE_URL}")
    if unread.why is Unread.MISMATCH:
        return Finding(
            code, Level.INFO, f"not checked: {what}: the management API answers for another server"
        )
    return Finding(code, Level.WARNING, f"not checked: {what}: {unread.detail}")


_UNITS = ((10**12, "TB"), (10**9, "GB"), (10**6, "MB"), (10**3, "kB"))


def shown_bytes(count_bytes: int | None) -> str:
    """``1.1 GB`` (decimal units, as RabbitMQ's own pages); ``unknown`` when not stated."""
    if count_bytes is None:
        return "unknown"
    for size, unit in _UNITS:
        if count_bytes >= size:
            return f"{count_bytes / size:.1f} {unit}"
    return f"{count_bytes} bytes"


_BLOCKED = (
    "every connection that publishes, on every node of the cluster, is blocked until it "
    "clears (consumers go on)"
)


def alarm_findings(facts: ServerFacts) -> list[Finding]:
    """Each node's resource alarms (``node-alarm``, an error: publishers are blocked while it
    lasts), each node that does not run (``node-not-running``, a warning), or why the nodes
    were not read (``alarms-not-checked``)."""
    read = facts.cluster
    if isinstance(read, TableUnread):
        what = f"the nodes' memory and disk alarms (GET {NODES_PATH})"
        return [health_not_checked("alarms-not-checked", what, read)]
    findings = []
    for node in read.nodes:
        name = shown_name(node.name)
        if not node.running:
            findings.append(
                Finding(
                    "node-not-running",
                    Level.WARNING,
                    f"node {name} does not run (the management API lists it as not running): "
                    "its alarms are not known, and the queues it holds are without it",
                )
            )
            continue
        if node.mem_alarm:
            findings.append(
                Finding(
                    "node-alarm",
                    Level.ERROR,
                    f"node {name} has a memory alarm: {shown_bytes(node.mem_used_bytes)} used, "
                    f"its limit {shown_bytes(node.mem_limit_bytes)}: {_BLOCKED}",
                )
            )
        if node.disk_free_alarm:
            findings.append(
                Finding(
                    "node-alarm",
                    Level.ERROR,
                    f"node {name} has a disk alarm: {shown_bytes(node.disk_free_bytes)} free, "
                    f"its limit {shown_bytes(node.disk_free_limit_bytes)}: {_BLOCKED}",
                )
            )
    return findings


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def consumer_findings(
    desired: Desired, facts: ServerFacts, dead_letter_queues: frozenset[str]
) -> list[Finding]:
    """What each queue of the topology holds and who consumes it, by what a passive declare
    said (``queue_counts``): a work queue without a consumer (``no-consumer``, a warning), a
    wait queue with one (``wait-queue-consumer``, an error: it takes copies before their
    delay), a dead-letter queue that holds messages (``dead-letter-queue-messages``, info)
    and one whose depth grows (``dead-letter-queue-growing``, a warning: its
    ``messages_details.rate`` above 0, read from the management API); a queue the server
    does not hold is ``queue-not-declared`` (info).

    ``dead_letter_queues``: the queues the file names as a ``dead_letter`` (no consumer is
    expected there); a wait queue is one of :attr:`QueueEntity.wait_of`; every other queue of
    the file is a work queue, which ``rr run`` (or another service) consumes."""
    if facts.queue_counts is None:
        return []
    counts = {count.name: count for count in facts.queue_counts}
    rates = (
        {}
        if isinstance(facts.cluster, TableUnread)
        else {queue.name: queue.messages_per_s for queue in facts.cluster.queues}
    )
    findings = []
    for queue in desired.queues:
        name = queue.name
        count = counts.get(name)
        if count is None:
            findings.append(
                Finding(
                    "queue-not-declared",
                    Level.INFO,
                    f"{name!r} is not on the server (a passive declare found no such queue): "
                    "its consumers and depth are not checked; rr declare makes it",
                    name,
                )
            )
            continue
        if queue.wait_of is not None:
            if count.consumers:
                findings.append(
                    Finding(
                        "wait-queue-consumer",
                        Level.ERROR,
                        f"{name!r} is a wait queue of {queue.wait_of!r} and has "
                        f"{_plural(count.consumers, 'consumer')}: it takes the copies waiting "
                        f"there before their delay ends, instead of their going back to "
                        f"{queue.wait_of!r} when it does (a wait queue must have none; "
                        "stop whatever consumes it)",
                        name,
                    )
                )
        elif name in dead_letter_queues:
            if count.messages:
                findings.append(
                    Finding(
                        "dead-letter-queue-messages",
                        Level.INFO,
                        f"{name!r} (a dead-letter queue) holds "
                        f"{_plural(count.messages, 'message')}: rr dlq inspect shows them",
                        name,
                    )
                )
            rate = rates.get(name)
            if rate is not None and rate > 0:
                findings.append(
                    Finding(
                        "dead-letter-queue-growing",
                        Level.WARNING,
                        f"{name!r} (a dead-letter queue) grows at {rate:g} messages/s (its "
                        "messages_details.rate, from the management API's last samples): "
                        "messages are failing now",
                        name,
                    )
                )
        elif count.consumers == 0:
            findings.append(
                Finding(
                    "no-consumer",
                    Level.WARNING,
                    f"{name!r} has no consumer: messages wait "
                    f"({_plural(count.messages, 'message')} ready)",
                    name,
                )
            )
    return findings


def quorum_member_findings(desired: Desired, facts: ServerFacts) -> list[Finding]:
    """Each quorum queue of the topology whose members online (the management API's
    ``online``) are fewer than expected: its ``replicas`` (``x-quorum-initial-group-size``),
    at most the cluster's nodes, else every node (docs/reference/topology.md) — a warning,
    ``quorum-members-offline``; fewer than a majority of its ``members`` — an error,
    ``quorum-queue-unavailable``. Or why they were not read (``quorum-members-not-checked``,
    when the file has a quorum queue)."""
    quorum = [queue for queue in desired.queues if is_quorum(queue)]
    if not quorum:
        return []
    read = facts.cluster
    if isinstance(read, TableUnread):
        what = "the quorum queues' members online (GET /api/queues/VHOST)"
        return [health_not_checked("quorum-members-not-checked", what, read)]
    cluster_size = len(read.nodes)
    states = {queue.name: queue for queue in read.queues}
    findings = []
    for queue in quorum:
        state = states.get(queue.name)
        if state is None or state.members is None:
            continue
        members = state.members
        online = set(state.online or ())
        offline = [node for node in members if node not in online]
        replicas = queue.setting("x-quorum-initial-group-size")
        wanted = replicas if isinstance(replicas, int) and not isinstance(replicas, bool) else None
        expected = cluster_size if wanted is None else min(wanted, cluster_size)
        majority = len(members) // 2 + 1
        up = len(members) - len(offline)
        names = ", ".join(shown_name(node) for node in offline) or "none"
        if up < majority:
            findings.append(
                Finding(
                    "quorum-queue-unavailable",
                    Level.ERROR,
                    f"{queue.name!r} has {up} of its {len(members)} members online (offline: "
                    f"{names}): fewer than a majority ({majority}), so it takes and delivers "
                    "nothing until enough of them are back",
                    queue.name,
                )
            )
        elif up < expected:
            source = (
                "every node of the cluster"
                if wanted is None
                else f"replicas = {wanted}, on a cluster of {_plural(cluster_size, 'node')}"
            )
            findings.append(
                Finding(
                    "quorum-members-offline",
                    Level.WARNING,
                    f"{queue.name!r} has {up} of the {expected} members expected online "
                    f"({source}; members: {len(members)}, offline: {names}): it works, with "
                    f"fewer copies; losing {up - majority + 1} more makes it unavailable",
                    queue.name,
                )
            )
    return findings
