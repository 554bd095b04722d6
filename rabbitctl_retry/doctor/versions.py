"""Pure. What a server's version means for the server and for a topology.

What changes between the versions rr supports (each cited from the RabbitMQ release notes,
measured on 3.10.8, 4.0.5 and 4.3.6):

* 3.13: dead letters carry ``x-last-death-queue/-reason/-exchange`` beside
  ``x-first-death-*``.
* 4.0: a quorum queue declared without ``x-delivery-limit`` gets a limit of 20: a message
  returned 20 times (``basic.reject``/``nack`` with requeue, a consumer or channel that went
  away, ``rr dlq inspect`` taking and giving back) is dead-lettered, or dropped when the queue
  has no dead-letter route. Transient (non-durable) non-exclusive queues are a deprecated
  feature (``transient_nonexcl_queues``), permitted by default on 4.0.5 and 4.3.6.
* 4.3: only ``basic.reject`` and a channel that closes with deliveries unacknowledged count
  toward a quorum delivery limit (``x-delivery-count``); ``basic.nack`` never does; every
  return raises ``x-acquired-count``; a dead letter carries its delivery count into the next
  queue, and a quorum target counts on from it toward its own limit. rr gives messages back
  and dead-letters them with ``basic.reject`` only (``retry/policy.py``), so its counts hold
  on every version; a consumer that nacks is never stopped by the limit.
  ``queue_master_locator`` (``x-queue-master-locator``) is denied by default, and classic
  queue version 1 is gone: rr refuses both while loading a file, on every server.

Classic queue mirroring, gone in 4.0: ``doctor/mirroring.py``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from rabbitctl_retry.dlq.read_cost import effective_limit
from rabbitctl_retry.doctor.deprecated import (
    deprecated_features_findings,
    feature_state,
    not_checked_note,
)
from rabbitctl_retry.doctor.facts import Finding, Level, ServerFacts
from rabbitctl_retry.server import (
    QUORUM_DEFAULT_DELIVERY_LIMIT,
    TRANSIENT_QUEUES_FEATURE,
    ServerVersion,
)
from rabbitctl_retry.topology.expand import Desired, QueueEntity
from rabbitctl_retry.topology.inequivalence import display_value
from rabbitctl_retry.topology.plan import (
    server_delay_problem,
)

QUORUM_COUNTING_4_3 = (
    "only basic.reject (with or without requeue) and a channel that closes with deliveries "
    "unacknowledged count toward a quorum queue's x-delivery-limit (x-delivery-count); "
    "basic.nack never counts; every return raises x-acquired-count; a dead letter carries "
    "its delivery count into the next queue (a quorum target starts its count, and its "
    "delivery limit, from it). rr run never sends basic.nack: it gives messages back with "
    "basic.reject(requeue=true), and has the server dead-letter them with "
    "basic.reject(requeue=false); rr dlq and rr console hand back what they only read with "
    "basic.nack, so that a look counts nothing"
)


def server_findings(facts: ServerFacts) -> list[Finding]:
    """How this server behaves where versions differ (no topology needed)."""
    version = facts.version
    findings = [
        Finding(
            "server-version",
            Level.INFO,
            f"{facts.product} {version}",
        )
    ]
    if version.behaviour.writes_last_death_headers:
        findings.append(
            Finding(
                "last-death-headers",
                Level.INFO,
                "dead letters carry x-last-death-queue/-reason/-exchange beside x-first-death-*",
            )
        )
    if version.behaviour.default_quorum_delivery_limit is not None:
        findings.append(
            Finding(
                "quorum-default-delivery-limit",
                Level.INFO,
                f"quorum queues declared without x-delivery-limit get "
                f"{QUORUM_DEFAULT_DELIVERY_LIMIT}: a message returned that often is "
                "dead-lettered, or dropped without a dead-letter route",
            )
        )
    findings.extend(deprecated_features_findings(facts))
    if facts.table is None and version.behaviour.transient_queues_deprecated:
        findings.append(
            Finding(
                "transient-queues-deprecated",
                Level.INFO,
                "transient (non-durable) non-exclusive queues are a deprecated feature "
                "(transient_nonexcl_queues), assumed from the version "
                f"({not_checked_note(facts)}): permitted by default on 4.0.5 and 4.3.6, "
                "refused where the operator denies it",
            )
        )
    counted = (
        QUORUM_COUNTING_4_3
        if not version.behaviour.nack_requeue_counts_delivery
        else "basic.reject and basic.nack(requeue=true) both count toward a quorum delivery "
        "limit; rr uses reject"
    )
    findings.append(Finding("quorum-return-counting", Level.INFO, counted))
    if facts.delayed_message_plugin is not None:
        findings.append(
            Finding(
                "delayed-message-plugin",
                Level.INFO,
                "the delayed-message exchange plugin is "
                + ("enabled" if facts.delayed_message_plugin else "not enabled"),
            )
        )
    return findings


# --- the topology ----------------------------------------------------------------------------


def is_quorum(queue: QueueEntity) -> bool:
    return queue.arguments.get("x-queue-type") == "quorum"


def _has_dead_letter_route(queue: QueueEntity) -> bool:
    return queue.setting("x-dead-letter-exchange") is not None


def _delivery_limit(queue: QueueEntity) -> int | None:
    """A quorum queue's own ``x-delivery-limit`` (or its rr policy's ``delivery-limit``),
    when it has a whole one."""
    limit = queue.setting("x-delivery-limit")
    if isinstance(limit, bool) or not isinstance(limit, int):
        return None
    return limit


def _transient_finding(queue: QueueEntity, facts: ServerFacts) -> Finding | None:
    version = facts.version
    table = facts.table
    if table is None:
        if not version.behaviour.transient_queues_deprecated:
            return None
        return Finding(
            "transient-queue",
            Level.INFO,
            f"{queue.name!r} is transient (durable = false): a deprecated feature on "
            f"RabbitMQ {version}, refused where the operator denies it "
            f"(assumed from the version; {not_checked_note(facts)}); make it durable",
            queue.name,
        )
    feature = table.get(TRANSIENT_QUEUES_FEATURE)
    if feature is None:  # not a deprecated feature on this server
        return None
    state = feature_state(feature, version)
    if feature.permitted:
        return Finding(
            "transient-queue",
            Level.INFO,
            f"{queue.name!r} is transient (durable = false): {state}, read from its "
            "management API: the server accepts it, but the feature is deprecated; make it "
            "durable",
            queue.name,
        )
    return Finding(
        "transient-queue-denied",
        Level.UNSAFE,
        f"{queue.name!r} is transient (durable = false): {state}, read from its management "
        "API: its declare is refused; make it durable",
        queue.name,
    )


def _counting_findings(
    queue: QueueEntity, facts: ServerFacts, retried_queues: frozenset[str]
) -> list[Finding]:
    """RabbitMQ 4.3's counting, for a quorum queue that relies on its delivery limit."""
    limit = _delivery_limit(queue)
    if (
        limit is None
        or not is_quorum(queue)
        or facts.version.behaviour.nack_requeue_counts_delivery
    ):
        return []
    version = facts.version
    nack = (
        "a consumer that gives a message back with basic.nack(requeue=true) is never stopped "
        "by it (x-acquired-count grows, x-delivery-count does not): that message comes back "
        "forever"
    )
    if queue.name in retried_queues:
        return [
            Finding(
                "quorum-delivery-limit-counting",
                Level.INFO,
                f"{queue.name!r} relies on x-delivery-limit = {limit}: on RabbitMQ {version} "
                "it counts what rr run gives back with basic.reject and what a closing channel "
                f"returns; {nack}, so a consumer of it other than rr run must use basic.reject",
                queue.name,
            )
        ]
    return [
        Finding(
            "quorum-nack-not-counted",
            Level.WARNING,
            f"{queue.name!r} relies on x-delivery-limit = {limit} without a max_attempts of "
            f"rr's, so consumers other than rr run may read it: on RabbitMQ {version} only "
            f"basic.reject and a closing channel count toward the limit; {nack}. Its "
            "consumers must give messages back with basic.reject",
            queue.name,
        )
    ]


def _carried_count_findings(desired: Desired, facts: ServerFacts) -> Iterator[Finding]:
    """RabbitMQ 4.3: a quorum queue that a quorum queue's limit dead-letters into (by the
    default exchange) counts on from the delivery count the dead letter carries. Measured on
    4.3.6: a source limit of 2 sends it with x-delivery-count 3, and a target of limit 20
    drops it at its 18th counted return (20 - 2), not its 21st."""
    if not facts.version.behaviour.counts_travel_from_any_queue:
        return
    by_name = {queue.name: queue for queue in desired.queues}
    for source in desired.queues:
        source_limit = _delivery_limit(source)
        target = by_name.get(str(source.setting("x-dead-letter-routing-key") or ""))
        if (
            source_limit is None
            or not is_quorum(source)
            or source.setting("x-dead-letter-exchange") != ""
            or target is None
            or not is_quorum(target)
        ):
            continue
        target_limit = _delivery_limit(target)
        if target_limit is None:
            # the file leaves it to the server: rr declares it without a limit (-1), but one
            # declared earlier may hold the server's own
            target_limit = _held_limit(target.name, facts)
        if target_limit is None:
            continue
        returns = max(target_limit - source_limit, 1)
        then = "dead-letters" if _has_dead_letter_route(target) else "drops"
        yield Finding(
            "dead-letter-carried-count",
            Level.INFO,
            f"{target.name!r} gets {source.name!r}'s dead letters: on RabbitMQ {facts.version} "
            f"each carries its x-delivery-count (up to {source_limit + 1}, its count when "
            f"{source.name!r}'s x-delivery-limit = {source_limit} sent it) and "
            f"{target.name!r} counts on from it, so it {then} such a message at its "
            f"{_ordinal(returns)} counted return rather than its {_ordinal(target_limit + 1)}",
            target.name,
        )


def _ordinal(number: int) -> str:
    if 10 <= number % 100 <= 20:
        suffix = "th"
    else:
        suffix = {1: "st", 2: "nd", 3: "rd"}.get(number % 10, "th")
    return f"{number}{suffix}"


def _server_delay_finding(queue: QueueEntity, version: ServerVersion) -> Finding | None:
    """A queue with ``delay = "server"``: refused below RabbitMQ 4.3 (it would retry at once),
    else how its waits go (docs/explanation/attempts.md, "The quorum queue waits")."""
    if queue.setting("x-delayed-retry-type") is None:
        return None
    problem = server_delay_problem(queue, version.release)
    if problem is not None:
        return Finding("server-delay-unsupported", Level.UNSAFE, problem, queue.name)
    min_ms, max_ms = (queue.setting(f"x-delayed-retry-{end}") for end in ("min", "max"))
    return Finding(
        "server-delay",
        Level.INFO,
        f"{queue.name!r} waits on the server: a retry is a counted basic.reject, held back "
        f"min({min_ms!r} ms x x-delivery-count, {max_ms!r} ms) before it is delivered again "
        "(retry_after's delay is not used); a waiting message is not counted as ready",
        queue.name,
    )


def _held_limit(queue: str, facts: ServerFacts) -> int | None:
    """The delivery limit the server holds ``queue`` with, when its ``x-delivery-limit`` was
    read (``QueueCounts.limit_read``) and one applies; else None."""
    held = next((c for c in facts.queue_counts or () if c.name == queue), None)
    if held is None or not held.limit_read:
        return None
    return effective_limit(facts.version.release, held.limit_argument)


def _server_limit_finding(queue: QueueEntity, facts: ServerFacts) -> Finding | None:
    """A quorum queue of the file without a limit of its own that the server holds with one
    it gave it (RabbitMQ 4.x: 20, when the queue was declared without ``x-delivery-limit``,
    by an earlier rr or by hand): a message returned that often is dropped, or dead-lettered
    where the queue has a route; rr declares such a queue with ``x-delivery-limit = -1``
    now, but changes no existing one. None when the server holds it without a limit, or
    does not hold it (``rr declare`` will), or its limit was not read."""
    limit = _held_limit(queue.name, facts)
    if limit is None:
        return None
    held = next(c for c in facts.queue_counts or () if c.name == queue.name)
    if held.limit_argument is not None:
        given = f"holds x-delivery-limit = {display_value(held.limit_argument)}"
    else:
        given = (
            f"was declared without x-delivery-limit, so RabbitMQ {facts.version} gives it a "
            f"limit of {limit}"
        )
    if held.policies_read:
        given += " (with the policies that apply to it)"
    else:
        given += " (a policy that applies to it is not seen without --management-url)"
    reads = (
        "every rr dlq inspect, export or groups read of it counts one"
        if not facts.version.nack_returns_uncounted
        else "rr's reads no longer count on this server, but every return does"
    )
    fix = (
        f"Lift it with a policy: rabbitmqctl set_policy rr-no-limit "
        f"'^{re.escape(queue.name)}$' '{{\"delivery-limit\": -1}}' --apply-to queues "
        '(only the highest-priority policy applies to a queue; rr docs topology "Quorum '
        'queues without a limit")'
    )
    if _has_dead_letter_route(queue):
        return Finding(
            "quorum-default-limit",
            Level.WARNING,
            f"{queue.name!r} {given}: a message returned {limit} times is dead-lettered "
            f"({reads}). {fix}",
            queue.name,
        )
    return Finding(
        "quorum-default-limit-drops",
        Level.UNSAFE,
        f"{queue.name!r} {given}, and has no dead-letter route: a message returned {limit} "
        f"times is dropped ({reads}). {fix}",
        queue.name,
    )


def topology_findings(
    desired: Desired, facts: ServerFacts, retried_queues: frozenset[str] = frozenset()
) -> list[Finding]:
    """What this server does to the topology's queues where versions differ.

    ``retried_queues``: the queues the file gives a ``max_attempts`` (consumed by ``rr run``,
    which gives messages back with ``basic.reject``)."""
    version = facts.version
    findings: list[Finding] = []
    for queue in desired.queues:
        if not queue.durable:
            transient = _transient_finding(queue, facts)
            if transient is not None:
                findings.append(transient)
        if is_quorum(queue) and queue.setting("x-delivery-limit") is None:
            held_limit = _server_limit_finding(queue, facts)
            if held_limit is not None:
                findings.append(held_limit)
        findings.extend(_counting_findings(queue, facts, retried_queues))
        server_delay = _server_delay_finding(queue, version)
        if server_delay is not None:
            findings.append(server_delay)
    findings.extend(_carried_count_findings(desired, facts))
    for exchange in desired.exchanges:
        if exchange.type == "x-delayed-message" and facts.delayed_message_plugin is False:
            findings.append(
                Finding(
                    "delayed-message-plugin-missing",
                    Level.UNSAFE,
                    f"{exchange.name!r} needs the delayed-message exchange plugin, which this "
                    "server does not have",
                )
            )
    return findings
