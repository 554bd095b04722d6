"""Pure. The file against the live queues: what ``rr declare`` would do (its observation
and plan), the vhost's default queue type, and consumers of the file's queues that are not
rr."""

from __future__ import annotations

from rabbitctl_retry.doctor.facts import Finding, Level, ServerFacts, TableUnread, Unread
from rabbitctl_retry.doctor.state import health_not_checked
from rabbitctl_retry.topology.consumers import CONSUMERS_PATH, checked_queues, consumer_notes
from rabbitctl_retry.topology.expand import Desired
from rabbitctl_retry.topology.plan import (
    Absent,
    Differs,
    Matches,
    OpKind,
    Refused,
    Status,
    missing_exchange_detail,
)


def _kind_of(op_kind: OpKind) -> str:
    return "exchange" if op_kind is OpKind.DECLARE_EXCHANGE else "queue"


def declare_findings(facts: ServerFacts) -> list[Finding]:
    """What ``rr declare`` would refuse in the file on this server now (docs/reference/cli.md, "rr
    doctor"): each queue or exchange the server holds otherwise than the file says, in
    ``rr declare``'s words (``declare-conflict``, unsafe: every differing argument, the type,
    a missing delivery limit or dead-letter route), and each exchange the file uses that is
    neither declared in it nor on the server (``exchange-missing``, unsafe); or that the
    server holds what it holds as the file says (``declare-matches``), or why it was not
    checked (``declare-not-checked``). What only a new queue would meet (a server too old
    for ``delay = "server"``, a denied transient queue) has findings of its own."""
    check = facts.declare
    if check is None:
        return []
    if isinstance(check, TableUnread):
        return [
            Finding(
                "declare-not-checked",
                Level.WARNING,
                "not checked: whether the queues and exchanges the server holds are as the "
                f"file says (rr declare's look at each): {check.detail}",
            )
        ]
    findings = []
    for op in check.plan.operations:
        if op.op is OpKind.BIND or op.status is not Status.CONFLICT:
            continue
        observed = check.observed.get((_kind_of(op.op), op.name), Absent())
        if not isinstance(observed, Differs | Refused):
            continue
        findings.append(
            Finding(
                "declare-conflict",
                Level.UNSAFE,
                f"{_kind_of(op.op)} {op.name!r}: {op.detail}. rr declare refuses the file as "
                "it is and changes nothing, and rr run does not start",
                op.name if op.op is OpKind.DECLARE_QUEUE else None,
            )
        )
    for exchange in check.referenced_exchanges:
        observed = check.observed.get(("exchange", exchange), Absent())
        if not isinstance(observed, Matches):
            findings.append(
                Finding(
                    "exchange-missing",
                    Level.UNSAFE,
                    missing_exchange_detail(exchange, observed),
                )
            )
    held = [
        op
        for op in check.plan.operations
        if op.op is not OpKind.BIND
        and isinstance(check.observed.get((_kind_of(op.op), op.name)), Matches)
    ]
    if not findings and held:
        findings.append(
            Finding(
                "declare-matches",
                Level.INFO,
                f"the {len(held)} queues and exchanges of the file the server holds are as the "
                "file says (checked as rr declare checks them: a redeclare of each, which "
                "RabbitMQ compares argument by argument, the type included)",
            )
        )
    return findings


def default_type_findings(facts: ServerFacts) -> list[Finding]:
    """The vhost's default queue type, where the management API states it
    (``vhost-default-queue-type``, info): what a queue declared without ``x-queue-type``
    becomes there."""
    default = facts.default_queue_type
    if isinstance(default, TableUnread):
        if default.why is not Unread.FAILED:
            return []  # none without a management URL: AMQP does not tell
        return [
            Finding(
                "vhost-default-queue-type-not-checked",
                Level.WARNING,
                f"not checked: the vhost's default queue type (GET /api/vhosts/VHOST): "
                f"{default.detail}",
            )
        ]
    if default is None:
        return []
    said = (
        f"the vhost's default queue type is {default} (from the management API): a queue "
        f"declared without x-queue-type is a {default} queue there. rr declares every queue "
        "with its type"
    )
    if default != "classic":
        said += (
            "; a client that declares one of the file's classic queues without "
            "x-queue-type is refused (406 inequivalent arg 'x-queue-type'), and a queue of the "
            f"file it declared first is a {default} queue (declare-conflict)"
        )
    return [Finding("vhost-default-queue-type", Level.INFO, said)]


def foreign_consumer_findings(
    desired: Desired, facts: ServerFacts, retried_queues: frozenset[str]
) -> list[Finding]:
    """The queues whose consumers that are not rr change what the file's settings mean
    (``topology/consumers.py``), or why that was not checked
    (``foreign-consumers-not-checked``, when the file has such a queue)."""
    read = facts.consumers
    if isinstance(read, TableUnread):
        if not checked_queues(desired.queues, retried_queues):
            return []
        what = f"which consumers of the file's queues are not rr run (GET {CONSUMERS_PATH})"
        return [health_not_checked("foreign-consumers-not-checked", what, read)]
    return [
        Finding(note.code, Level(note.level.value), note.message, note.queue)
        for note in consumer_notes(desired.queues, retried_queues, read, facts.version.release)
    ]
