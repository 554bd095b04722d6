"""``rr doctor``'s findings, pure: what each server version means for a topology (without a
management URL: the deprecated-features table is not read; tests/unit/test_doctor_deprecated.py
has the findings made from it)."""

from __future__ import annotations

import pytest

from rabbitctl_retry.doctor import Finding, Level, QueueCounts, ServerFacts, examine, safe
from rabbitctl_retry.fields import FieldValue
from rabbitctl_retry.server import ServerVersion
from rabbitctl_retry.topology.expand import expand
from rabbitctl_retry.topology.load import load_text

QUORUM_DLQ_WITHOUT_ROUTE = """
[queues.payouts]
type = "quorum"
max_attempts = 5
dead_letter = "payouts.dead"

[queues."payouts.dead"]
type = "quorum"
"""


def codes(version: str, topology: str | None = None, plugin: bool | None = None) -> list[str]:
    desired = expand(load_text(topology)) if topology is not None else None
    facts = ServerFacts(version=ServerVersion.parse(version), delayed_message_plugin=plugin)
    return [finding.code for finding in examine(desired, facts)]


@pytest.mark.parametrize(
    ("version", "expected"),
    [
        (
            "3.10.8",
            [
                "server-version",
                "deprecated-features-not-checked",
                "quorum-return-counting",
                "classic-mirroring-not-checked",
                "alarms-not-checked",
            ],
        ),
        (
            "3.13.7",
            [
                "server-version",
                "last-death-headers",
                "deprecated-features-not-checked",
                "quorum-return-counting",
                "classic-mirroring-not-checked",
                "alarms-not-checked",
            ],
        ),
        (
            "4.0.5",
            [
                "server-version",
                "last-death-headers",
                "quorum-default-delivery-limit",
                "deprecated-features-not-checked",
                "transient-queues-deprecated",
                "quorum-return-counting",
                "alarms-not-checked",
            ],
        ),
    ],
)
def test_server_findings_follow_the_version(version: str, expected: list[str]) -> None:
    assert codes(version) == expected


def test_nack_stops_counting_from_4_3() -> None:
    def counting(version: ServerVersion) -> str:
        facts = ServerFacts(version=version)
        return next(f.message for f in examine(None, facts) if f.code == "quorum-return-counting")

    assert counting(ServerVersion(4, 0, 5)) == (
        "basic.reject and basic.nack(requeue=true) both count toward a quorum delivery limit; "
        "rr uses reject"
    )
    assert counting(ServerVersion(4, 3, 0)) == (
        "only basic.reject (with or without requeue) and a channel that closes with deliveries "
        "unacknowledged count toward a quorum queue's x-delivery-limit (x-delivery-count); "
        "basic.nack never counts; every return raises x-acquired-count; a dead letter carries "
        "its delivery count into the next queue (a quorum target starts its count, and its "
        "delivery limit, from it). rr run never sends basic.nack: it gives messages back with "
        "basic.reject(requeue=true), and has the server dead-letter them with "
        "basic.reject(requeue=false); rr dlq and rr console hand back what they only read with "
        "basic.nack, so that a look counts nothing"
    )


def _holding(limit: FieldValue | None, *, read: bool = True) -> tuple[QueueCounts, ...]:
    """The server holds payouts.dead with 3 letters and this ``x-delivery-limit``."""
    return (QueueCounts("payouts.dead", 3, 0, limit_read=read, limit_argument=limit),)


def test_a_quorum_dlq_held_with_the_servers_limit_is_unsafe_on_4_only() -> None:
    """rr declares a quorum queue without a limit of its own with x-delivery-limit = -1 on
    4.x; one the server holds without it (an earlier rr, or by hand) has the server's 20."""
    desired = expand(load_text(QUORUM_DLQ_WITHOUT_ROUTE))

    def unsafe(version: ServerVersion, held: tuple[QueueCounts, ...] | None) -> list[Finding]:
        found = examine(desired, ServerFacts(version=version, queue_counts=held))
        return [f for f in found if f.level is Level.UNSAFE]

    assert unsafe(ServerVersion(3, 10, 8), _holding(None)) == []  # 3.10: no default limit
    on_4 = unsafe(ServerVersion(4, 0, 5), _holding(None))
    assert [(f.code, f.queue) for f in on_4] == [("quorum-default-limit-drops", "payouts.dead")]
    assert "gives it a limit of 20" in on_4[0].message
    assert "every rr dlq inspect, export or groups read of it counts one" in on_4[0].message
    assert "rabbitmqctl set_policy rr-no-limit '^payouts\\.dead$'" in on_4[0].message
    on_43 = unsafe(ServerVersion(4, 3, 6), _holding(None))
    assert "rr's reads no longer count on this server" in on_43[0].message
    # held with -1 (declared by this rr), not held (rr declare will declare it with -1), or
    # its limit not read: nothing to say
    assert unsafe(ServerVersion(4, 0, 5), _holding(-1)) == []
    assert unsafe(ServerVersion(4, 0, 5), ()) == []
    assert unsafe(ServerVersion(4, 0, 5), _holding(None, read=False)) == []
    # a limit of its own that someone set by hand is named as such
    (held,) = unsafe(ServerVersion(4, 0, 5), _holding(7))
    assert "holds x-delivery-limit = 7" in held.message


def test_a_quorum_dlq_with_a_route_is_a_warning_on_4() -> None:
    routed = QUORUM_DLQ_WITHOUT_ROUTE + 'dead_letter_exchange = "parked"\n[exchanges.parked]\n'
    found = examine(
        expand(load_text(routed)),
        ServerFacts(version=ServerVersion(4, 0, 5), queue_counts=_holding(None)),
    )
    assert ("quorum-default-limit", Level.WARNING, "payouts.dead") in [
        (f.code, f.level, f.queue) for f in found
    ]
    assert "quorum-default-limit-drops" not in {f.code for f in found}


def test_a_transient_queue_is_named_on_4() -> None:
    """Deprecated, not refused: 4.0.5 and 4.3.6 permit it by default (measured)."""
    transient = "[queues.scratch]\ndurable = false\n"
    assert "transient-queue" not in codes("3.10.8", transient)
    assert "transient-queue" in codes("4.0.5", transient)


def test_a_missing_delayed_plugin_is_unsafe_when_the_topology_needs_it() -> None:
    delayed = '[queues.work]\nmax_attempts = 3\ndelay = "plugin-dme"\n'
    assert "delayed-message-plugin-missing" in codes("3.10.8", delayed, plugin=False)
    assert "delayed-message-plugin-missing" not in codes("3.10.8", delayed, plugin=True)


SERVER_DELAY = """
[queues.jobs]
type = "quorum"
max_attempts = 4
dead_letter = "jobs.dead"
delay = "server"
delay_min = "1s"
delay_max = "1m"
"""


@pytest.mark.parametrize(("version", "level"), [("3.10.8", "unsafe"), ("4.0.5", "unsafe")])
def test_delay_server_is_unsafe_below_4_3(version: str, level: str) -> None:
    findings = examine(
        expand(load_text(SERVER_DELAY)), ServerFacts(version=ServerVersion.parse(version))
    )
    (finding,) = [f for f in findings if f.code.startswith("server-delay")]
    assert (finding.code, finding.level.value, finding.queue) == (
        "server-delay-unsupported",
        level,
        "jobs",
    )
    assert f"this server is {version}, which would ignore x-delayed-retry-*" in finding.message
    assert not safe(findings)


def test_delay_server_on_4_3_says_how_it_waits() -> None:
    findings = examine(expand(load_text(SERVER_DELAY)), ServerFacts(version=ServerVersion(4, 3, 6)))
    (finding,) = [f for f in findings if f.code.startswith("server-delay")]
    assert (finding.code, finding.level) == ("server-delay", Level.INFO)
    assert finding.message == (
        "'jobs' waits on the server: a retry is a counted basic.reject, held back "
        "min(1000 ms x x-delivery-count, 60000 ms) before it is delivered again "
        "(retry_after's delay is not used); a waiting message is not counted as ready"
    )
