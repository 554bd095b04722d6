"""Pure. The deprecated-features table and which server the management API answers for.

Which deprecated features the server permits or denies is read from the server when it can be
(the management API's ``/api/deprecated-features``, ``transport/management.py``): AMQP does
not tell, and an operator may deny a feature its version permits by default. Without the
table (no management URL, an API without it, an API that failed) the findings on deprecated
features are assumed from the version and say so, with a ``deprecated-features-not-checked``
finding that says why; so they are when the API answers for another server than the one AMQP
reached (:func:`identity_mismatch`: a ``management-api-mismatch`` warning).
"""

from __future__ import annotations

from collections.abc import Sequence

from rabbitctl_retry.doctor.facts import Finding, Level, ServerFacts, TableUnread, Unread
from rabbitctl_retry.errors import escape_unprintable
from rabbitctl_retry.server import (
    DEPRECATED_FEATURES_PATH,
    OVERVIEW_PATH,
    TRANSIENT_QUEUES_FEATURE,
    DeprecatedFeature,
    ServerIdentity,
    ServerVersion,
)


def not_checked_note(facts: ServerFacts) -> str:
    """How a finding assumed from the version says why it was not checked."""
    unread = facts.deprecated_features
    assert isinstance(unread, TableUnread)
    if unread.why is Unread.NOT_GIVEN:
        return "not checked: give --management-url"
    if unread.why is Unread.MISSING:
        return "not checked: the management API has no deprecated-features table"
    if unread.why is Unread.UNSTATED:
        return "not checked: the management API does not say which features are permitted"
    if unread.why is Unread.MISMATCH:
        return "not checked: the management API answers for another server"
    return "not checked: the management API did not answer (deprecated-features-not-checked)"


def feature_state(feature: DeprecatedFeature, version: ServerVersion) -> str:
    """``RabbitMQ 4.3.6 permits transient_nonexcl_queues (permitted_by_default)``."""
    verb = "permits" if feature.permitted else "denies"
    phase = f" ({feature.phase})" if feature.phase else ""
    return f"RabbitMQ {version} {verb} {feature.name}{phase}"


def deprecated_features_findings(facts: ServerFacts) -> list[Finding]:
    """The server's deprecated-features table, or why it could not be read."""
    table = facts.table
    unread = facts.deprecated_features
    if table is None:
        assert isinstance(unread, TableUnread)
        if unread.why is Unread.MISMATCH:
            return [Finding("management-api-mismatch", Level.WARNING, unread.detail)]
        return [_not_checked(unread)]
    denied = sorted(name for name, feature in table.items() if not feature.permitted)
    permitted = sorted(name for name, feature in table.items() if feature.permitted)
    if not table:
        listed = "lists no deprecated feature"
    else:
        parts = []
        if denied:
            parts.append("denies " + ", ".join(denied))
        if permitted:
            parts.append("permits " + ", ".join(permitted))
        listed = "; ".join(parts)
    findings = [
        Finding(
            "deprecated-features",
            Level.INFO,
            f"RabbitMQ {facts.version} (read from its management API) {listed}",
        )
    ]
    transient = table.get(TRANSIENT_QUEUES_FEATURE)
    if transient is not None:
        consequence = (
            "the server accepts such queues, but the feature is deprecated"
            if transient.permitted
            else "a declare of such a queue is refused"
        )
        findings.append(
            Finding(
                "transient-queues-deprecated",
                Level.INFO,
                f"transient (non-durable) non-exclusive queues: "
                f"{feature_state(transient, facts.version)}, read from its management API: "
                f"{consequence}",
            )
        )
    return findings


def names_to_compare(amqp: ServerIdentity, api: ServerIdentity) -> bool:
    """Whether both sides tell a cluster name, and they differ: then the API's nodes decide
    (:func:`identity_differences`)."""
    return (
        amqp.cluster_name is not None
        and api.cluster_name is not None
        and amqp.cluster_name != api.cluster_name
    )


def identity_differences(
    amqp: ServerIdentity, api: ServerIdentity, api_nodes: Sequence[str] = ()
) -> str | None:
    """How the server a management API answers for (its ``/api/overview``: ``api``; its
    cluster's nodes: ``api_nodes``) is not the server rr reached over AMQP (``amqp``), or
    None when it is.

    When both tell a cluster name, the names decide: the same name, or a default name of one
    of the API's nodes, is the same cluster, whatever versions its nodes run (a rolling
    upgrade mixes them). A cluster without a name set gives each node's own name with its
    host's full name as its cluster name: ``rrc1@vm`` from the node ``rrc1@localhost``,
    ``rrc2@vm`` from ``rrc2@localhost`` of the same cluster (measured on a 3.10.8 cluster;
    4.0.5 and 4.3.6 name a lone node so). Otherwise the versions must be the same. Names
    from the API are escaped and clipped."""
    if amqp.cluster_name is not None and api.cluster_name is not None:
        if not names_to_compare(amqp, api) or _default_names_of_one_cluster(
            amqp.cluster_name, api.cluster_name, api_nodes
        ):
            return None
        return (
            f"its cluster is {shown_name(api.cluster_name)}, the AMQP server's "
            f"{shown_name(amqp.cluster_name)}"
        )
    if api.version != amqp.version:
        return f"it runs RabbitMQ {api.version}, the AMQP server {amqp.version}"
    return None


def _default_names_of_one_cluster(amqp_name: str, api_name: str, api_nodes: Sequence[str]) -> bool:
    """Whether ``amqp_name`` is the name a node of ``api_nodes`` gives its cluster when none is
    set (its name before the ``@``, with its host's full name after it): the node's own name
    with its domain (``rabbit@mq1.corp`` for the node ``rabbit@mq1``), or, where the API
    answers with such a name too, a name on the same host for another node of the list
    (``rrc1@vm`` and ``rrc2@vm`` for ``rrc1@localhost`` and ``rrc2@localhost``)."""
    if any(amqp_name == node or amqp_name.startswith(node + ".") for node in api_nodes):
        return True
    node_id, at, host = amqp_name.partition("@")
    api_host = api_name.partition("@")[2]
    return (
        bool(at and host)
        and host == api_host
        and any(node.partition("@")[0] == node_id for node in api_nodes)
    )


def identity_mismatch(
    amqp: ServerIdentity,
    api: ServerIdentity,
    *,
    amqp_url: str,
    api_url: str,
    api_nodes: Sequence[str] = (),
) -> str | None:
    """What says that the management API at ``api_url`` does not answer for the server rr
    reached at ``amqp_url`` (:func:`identity_differences`), for ``rr doctor``, or None when
    they agree. Both URLs come censored."""
    differences = identity_differences(amqp, api, api_nodes)
    if differences is None:
        return None
    return (
        f"the management API at {api_url} does not answer for the server rr reached at "
        f"{amqp_url} ({OVERVIEW_PATH}: {differences}): rr uses none of its answers, "
        "and the findings it would have checked are assumed from the version. Give the "
        "management URL of the server --url reaches"
    )


_MAX_NAME_CHARS = 100


def shown_name(name: str) -> str:
    """A name an API or a server gave, as a message shows it: quoted, escaped, clipped."""
    clipped = name if len(name) <= _MAX_NAME_CHARS else name[:_MAX_NAME_CHARS] + "..."
    return "'" + escape_unprintable(clipped) + "'"


def _not_checked(unread: TableUnread) -> Finding:
    what = "which deprecated features this server permits or denies"
    assumed = "findings on deprecated features are assumed from the version"
    if unread.why is Unread.NOT_GIVEN:
        return Finding(
            "deprecated-features-not-checked",
            Level.INFO,
            f"not checked: {what} (AMQP does not tell): give --management-url (or "
            f"$RR_MANAGEMENT_URL, or [broker] management_url); {assumed}",
        )
    if unread.why is Unread.MISSING:
        return Finding(
            "deprecated-features-not-checked",
            Level.INFO,
            f"not checked: {what}: its management API has no such table (GET "
            f"{DEPRECATED_FEATURES_PATH} answered 404 or 406, as RabbitMQ 3.10.8's does); "
            f"{assumed}",
        )
    if unread.why is Unread.UNSTATED:
        return Finding(
            "deprecated-features-not-checked",
            Level.INFO,
            f"not checked: {what}: its management API lists them without their state (GET "
            f"{DEPRECATED_FEATURES_PATH} gives no 'state', as RabbitMQ 4.0.5's does, whose "
            f"configuration may deny one all the same); {assumed}",
        )
    return Finding(
        "deprecated-features-not-checked",
        Level.WARNING,
        f"not checked: {what}: {unread.detail}; {assumed}",
    )
