"""Pure tables for doctor/declared.py's checks of the live queues against the file
(docs/reference/cli.md, "rr doctor"): what ``rr declare`` would refuse, in its words, from the same
plan; and the vhost's default queue type."""

from __future__ import annotations

from rabbitctl_retry.doctor import (
    DeclareCheck,
    Level,
    ServerFacts,
    TableUnread,
    Unread,
    declare_findings,
    default_type_findings,
    examine,
    safe,
)
from rabbitctl_retry.server import ServerVersion
from rabbitctl_retry.topology.expand import expand
from rabbitctl_retry.topology.load import load_text
from rabbitctl_retry.topology.plan import (
    Absent,
    Difference,
    Differs,
    Matches,
    Observation,
    ObservationKey,
    Refused,
    plan,
)

TOPOLOGY = """
[queues.work]
max_attempts = 3
dead_letter = "work.dead"
bindings = [{ exchange = "events", routing_key = "work" }]

[queues.jobs]
type = "quorum"
max_attempts = 3
dead_letter = "jobs.dead"
delay = "server"
delay_min = "1s"
"""


def check(
    observed: dict[ObservationKey, Observation], server: tuple[int, int, int] = (4, 3, 6)
) -> DeclareCheck:
    desired = expand(load_text(TOPOLOGY), server)
    return DeclareCheck(
        plan(desired, observed, server_version=server), observed, desired.referenced_exchanges
    )


def facts(declare: DeclareCheck | TableUnread | None) -> ServerFacts:
    return ServerFacts(version=ServerVersion(4, 3, 6), declare=declare)


TYPE = Difference("x-queue-type", "'classic'", "'quorum'", "quorum")
LIMIT = Difference("x-delivery-limit", "2", "(none)", None)


def test_each_live_conflict_is_unsafe_in_rr_declares_words() -> None:
    observed: dict[ObservationKey, Observation] = {
        ("exchange", "events"): Absent(),
        ("queue", "work.dead"): Matches(),
        ("queue", "work"): Differs((TYPE,)),
        ("queue", "jobs.dead"): Refused("locked: exclusive to another connection"),
        ("queue", "jobs"): Differs((LIMIT,)),
    }
    checked = check(observed)
    details = {op.name: op.detail for op in checked.plan.conflicts}

    found = declare_findings(facts(checked))

    assert [(f.code, f.level, f.queue) for f in found] == [
        ("declare-conflict", Level.UNSAFE, "work"),
        ("declare-conflict", Level.UNSAFE, "jobs.dead"),
        ("declare-conflict", Level.UNSAFE, "jobs"),
        ("exchange-missing", Level.UNSAFE, None),
    ]
    for finding in found[:3]:
        assert finding.message.startswith(f"queue {finding.queue!r}: {details[finding.queue]}.")
        assert finding.message.endswith(
            "rr declare refuses the file as it is and changes nothing, and rr run does not start"
        )
    assert "x-queue-type: file 'classic', broker 'quorum'" in found[0].message
    assert "x-delivery-limit: file 2, broker (none)" in found[2].message
    assert found[3].message == (
        "exchange 'events' is used by the file but neither declared in it nor present on the broker"
    )


def test_what_only_a_new_queue_would_meet_is_left_to_its_own_finding() -> None:
    """On 4.0, jobs (delay = "server") is a conflict of the plan even while absent: rr doctor
    says so as server-delay-unsupported, not twice."""
    observed: dict[ObservationKey, Observation] = {("exchange", "events"): Matches()}
    checked = check(observed, (4, 0, 5))
    assert [op.name for op in checked.plan.conflicts] == ["jobs"]
    assert declare_findings(facts(checked)) == []  # and the server holds none of it


def test_a_file_the_server_holds_as_it_says_matches() -> None:
    observed: dict[ObservationKey, Observation] = {
        ("exchange", "events"): Matches(),
        ("queue", "work.dead"): Matches(),
        ("queue", "work"): Matches(),
        ("queue", "jobs.dead"): Matches(),
        ("queue", "jobs"): Matches(),
    }
    [matches] = declare_findings(facts(check(observed)))
    assert (matches.code, matches.level) == ("declare-matches", Level.INFO)
    assert matches.message.startswith("the 4 queues and exchanges of the file the server holds")


def test_a_check_the_server_refused_is_a_warning() -> None:
    refused = TableUnread(Unread.FAILED, "ACCESS_REFUSED - access to queue 'work' refused")
    [finding] = declare_findings(facts(refused))
    assert (finding.code, finding.level) == ("declare-not-checked", Level.WARNING)
    assert finding.message.endswith("ACCESS_REFUSED - access to queue 'work' refused")
    assert declare_findings(facts(None)) == []


def test_a_conflict_makes_the_file_unsafe() -> None:
    observed: dict[ObservationKey, Observation] = {
        ("exchange", "events"): Matches(),
        ("queue", "work"): Differs((TYPE,)),
    }
    desired = expand(load_text(TOPOLOGY))
    findings = examine(desired, facts(check(observed)))
    assert not safe(findings)


def test_the_vhosts_default_queue_type() -> None:
    def said(default: str | TableUnread | None) -> list[tuple[str, Level, str]]:
        found = default_type_findings(
            ServerFacts(version=ServerVersion(4, 3, 6), default_queue_type=default)
        )
        return [(f.code, f.level, f.message) for f in found]

    [(code, level, quorum)] = said("quorum")
    assert (code, level) == ("vhost-default-queue-type", Level.INFO)
    assert quorum.startswith("the vhost's default queue type is quorum (from the management API)")
    assert "is refused (406 inequivalent arg 'x-queue-type')" in quorum
    [(_, _, classic)] = said("classic")
    assert classic.endswith("rr declares every queue with its type")
    assert said(None) == []
    assert said(TableUnread(Unread.NOT_GIVEN)) == []
