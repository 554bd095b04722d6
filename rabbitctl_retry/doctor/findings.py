"""Pure. Every finding of ``rr doctor`` (:func:`examine`), and what they add up to."""

from __future__ import annotations

from rabbitctl_retry.doctor.declared import (
    declare_findings,
    default_type_findings,
    foreign_consumer_findings,
)
from rabbitctl_retry.doctor.facts import Finding, Level, ServerFacts
from rabbitctl_retry.doctor.mirroring import mirroring_findings
from rabbitctl_retry.doctor.state import alarm_findings, consumer_findings, quorum_member_findings
from rabbitctl_retry.doctor.versions import server_findings, topology_findings
from rabbitctl_retry.topology.expand import Desired


def examine(
    desired: Desired | None,
    facts: ServerFacts,
    retried_queues: frozenset[str] = frozenset(),
    dead_letter_queues: frozenset[str] = frozenset(),
) -> list[Finding]:
    """Every finding; ``desired`` is the topology's expansion, when one was given
    (``retried_queues``: see :func:`topology_findings`; ``dead_letter_queues``: see
    :func:`consumer_findings`)."""
    findings = server_findings(facts)
    findings.extend(default_type_findings(facts))
    findings.extend(mirroring_findings(desired, facts))
    findings.extend(alarm_findings(facts))
    if desired is not None:
        findings.extend(declare_findings(facts))
        findings.extend(topology_findings(desired, facts, retried_queues))
        findings.extend(consumer_findings(desired, facts, dead_letter_queues))
        findings.extend(foreign_consumer_findings(desired, facts, retried_queues))
        findings.extend(quorum_member_findings(desired, facts))
    return findings


def safe(findings: list[Finding]) -> bool:
    """Nothing in the topology is unsafe on this server."""
    return all(finding.level is not Level.UNSAFE for finding in findings)


def healthy(findings: list[Finding]) -> bool:
    """Nothing is wrong with the server now (no ``error`` finding)."""
    return all(finding.level is not Level.ERROR for finding in findings)
