"""Pure. What a RabbitMQ server means for a topology (``rr doctor``, docs/reference/cli.md).

:func:`examine` takes what ``rr doctor`` read from the server (:class:`ServerFacts`) and,
optionally, the expansion of a topology file, and returns findings: ``info`` (how this server
behaves, worth knowing), ``warning`` (a check that could not be made although asked for, or
something that holds only if the queue's other consumers behave) or ``unsafe`` (the topology
would lose or refuse something on this server). ``rr doctor`` exits 1 when any finding is
unsafe.

Its sections, one module each:

* ``facts.py``: what was read (:class:`ServerFacts`) and what is found (:class:`Finding`);
* ``deprecated.py``: the deprecated-features table, and which server the management API
  answers for (:func:`identity_mismatch`);
* ``versions.py``: what the server's version means for the server and for a topology;
* ``mirroring.py``: classic queue mirroring on 3.x, gone in 4.0;
* ``state.py``: what the server's state now means: alarms, consumers, quorum members;
* ``declared.py``: the file against the live queues (``rr declare``'s observation and plan);
* ``findings.py``: every finding (:func:`examine`), and what they add up to.
"""

from __future__ import annotations

from rabbitctl_retry.doctor.declared import (
    declare_findings,
    default_type_findings,
    foreign_consumer_findings,
)
from rabbitctl_retry.doctor.deprecated import (
    deprecated_features_findings,
    identity_differences,
    identity_mismatch,
    names_to_compare,
)
from rabbitctl_retry.doctor.facts import (
    ClusterRead,
    DeclareCheck,
    Finding,
    Level,
    PoliciesRead,
    QueueCounts,
    ServerFacts,
    TableUnread,
    Unread,
)
from rabbitctl_retry.doctor.findings import examine, healthy, safe
from rabbitctl_retry.doctor.mirroring import mirroring_findings
from rabbitctl_retry.doctor.state import (
    alarm_findings,
    consumer_findings,
    quorum_member_findings,
    shown_bytes,
)
from rabbitctl_retry.doctor.versions import server_findings, topology_findings

__all__ = [
    "ClusterRead",
    "DeclareCheck",
    "Finding",
    "Level",
    "PoliciesRead",
    "QueueCounts",
    "ServerFacts",
    "TableUnread",
    "Unread",
    "alarm_findings",
    "consumer_findings",
    "declare_findings",
    "default_type_findings",
    "deprecated_features_findings",
    "examine",
    "foreign_consumer_findings",
    "healthy",
    "identity_differences",
    "identity_mismatch",
    "mirroring_findings",
    "names_to_compare",
    "quorum_member_findings",
    "safe",
    "server_findings",
    "shown_bytes",
    "topology_findings",
]
