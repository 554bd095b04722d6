"""The log lines of ``rr run``'s decisions: one line per delivery settled otherwise than by an
ack, its fields, and the warning of a malformed count header (docs/reference/runtime.md, "Logs")."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from rabbitctl_retry.fields import FieldValue
from rabbitctl_retry.retry.headers import malformed_counts
from rabbitctl_retry.retry.policy import Decision, Event, RejectAction, RetryPolicy
from rabbitctl_retry.transport.base import Delivery

log = logging.getLogger("rr.runtime")

LEVELS = {
    Event.RETRIED: logging.INFO,
    Event.REQUEUED: logging.INFO,
    Event.DELAYED: logging.INFO,
    Event.DROPPED: logging.INFO,
    Event.DEAD_LETTERED: logging.WARNING,
    Event.SPENT: logging.WARNING,
}
"""The level of each decision's line; one with a failure is a warning at least."""

GIVE_UP_TEXT = {
    Event.REQUEUED: "it goes back to its queue once",
    Event.DEAD_LETTERED: "it is dead-lettered",
    Event.SPENT: "it is rejected without requeue (its queue's dead-letter route, if any)",
}
"""What becomes of a delivery rr gives up on (its own failure, undecodable properties)."""


def ids(queue: str, delivery: Delivery) -> dict[str, object]:
    """The fields that name a delivery in a line: its queue and message id."""
    return {"queue": queue, "message_id": delivery.properties.message_id}


def decision_fields(queue: str, delivery: Delivery, decision: Decision) -> dict[str, object]:
    """The fields of a decision's line."""
    fields = ids(queue, delivery)
    fields["attempt"] = decision.attempt
    fields["outcome"] = decision.event.value
    if decision.destination is not None:
        fields["to"] = decision.destination
    if decision.delay_ms is not None:
        fields["delay_ms"] = decision.delay_ms
    if decision.failure is not None:
        fields["error_type"] = decision.failure.type
        fields["error"] = decision.failure.message
    return fields


def log_decision(queue: str, delivery: Delivery, decision: Decision) -> None:
    """One line for ``decision`` on ``delivery``, at its level (:data:`LEVELS`)."""
    level = LEVELS.get(decision.event, logging.INFO)
    if decision.failure is not None and level < logging.WARNING:
        level = logging.WARNING
    if not log.isEnabledFor(level):
        return
    message = decision.event.value
    fields = decision_fields(queue, delivery, decision)
    if decision.event is Event.DEAD_LETTERED and isinstance(decision.action, RejectAction):
        # The server moves it, not rr: rr cannot know that it arrived.
        message = "rejected to the queue's dead-letter route"
        fields["outcome"] = "rejected-to-dead-letter-route"
    log.log(level, message, extra={"rr": fields})


def warn_malformed(
    policy: RetryPolicy, delivery: Delivery, headers: Mapping[str, FieldValue]
) -> None:
    """A count rr reads that is not a well-formed number counts 0 (docs/reference/runtime.md)."""
    malformed = malformed_counts(headers, policy.retry_header)
    if malformed:
        log.warning(
            "malformed count header; it counts as 0",
            extra={"rr": ids(policy.queue, delivery) | {"headers": malformed}},
        )
