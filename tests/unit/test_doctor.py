"""``rr doctor``'s findings, pure: what each server version means for a topology."""

from __future__ import annotations

import pytest

from rabbitctl_retry.doctor import Level, ServerFacts, examine, safe
from rabbitctl_retry.topology.expand import expand
from rabbitctl_retry.topology.load import load_text
from rabbitctl_retry.transport.base import ServerVersion

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
        ("3.10.8", ["server-version", "quorum-return-counting"]),
        ("3.13.7", ["server-version", "last-death-headers", "quorum-return-counting"]),
        (
            "4.0.5",
            [
                "server-version",
                "last-death-headers",
                "quorum-default-delivery-limit",
                "transient-queues-deprecated",
                "quorum-return-counting",
            ],
        ),
    ],
)
def test_server_findings_follow_the_version(version: str, expected: list[str]) -> None:
    assert codes(version) == expected


def test_nack_stops_counting_from_4_3() -> None:
    facts = ServerFacts(version=ServerVersion(4, 3, 0))
    counting = next(f for f in examine(None, facts) if f.code == "quorum-return-counting")
    assert counting.message.startswith("basic.reject counts toward a quorum delivery limit, ")


def test_a_quorum_dlq_without_a_route_is_unsafe_on_4_only() -> None:
    on_3 = examine(
        expand(load_text(QUORUM_DLQ_WITHOUT_ROUTE)), ServerFacts(version=ServerVersion(3, 10, 8))
    )
    on_4 = examine(
        expand(load_text(QUORUM_DLQ_WITHOUT_ROUTE)), ServerFacts(version=ServerVersion(4, 0, 5))
    )
    assert safe(on_3)
    assert not safe(on_4)
    unsafe = [f for f in on_4 if f.level is Level.UNSAFE]
    assert [(f.code, f.queue) for f in unsafe] == [("quorum-default-limit-drops", "payouts.dead")]


def test_a_quorum_dlq_with_a_route_is_safe_on_4() -> None:
    routed = QUORUM_DLQ_WITHOUT_ROUTE + 'dead_letter_exchange = "parked"\n[exchanges.parked]\n'

    found = codes("4.0.5", routed)
    assert "quorum-default-limit-drops" not in found
    assert "quorum-default-limit" in found


def test_a_transient_queue_is_named_on_4() -> None:
    """Deprecated, not refused: 4.0.5 and 4.3.6 permit it by default (measured)."""
    transient = "[queues.scratch]\ndurable = false\n"
    assert "transient-queue" not in codes("3.10.8", transient)
    assert "transient-queue" in codes("4.0.5", transient)


def test_a_missing_delayed_plugin_is_unsafe_when_the_topology_needs_it() -> None:
    delayed = '[queues.work]\nmax_attempts = 3\ndelay = "plugin-dme"\n'
    assert "delayed-message-plugin-missing" in codes("3.10.8", delayed, plugin=False)
    assert "delayed-message-plugin-missing" not in codes("3.10.8", delayed, plugin=True)
