"""Pure. What ``rr run`` does with a delivery it cannot handle (docs/reference/runtime.md,
"Malformed messages").

Two kinds, both settled by a fixed rule so that one bad message never holds back another:

* **undecodable**: the codec could not decode some of its properties (a ``timestamp`` in
  nanoseconds, a header field type it does not know) or of its ``basic.deliver`` fields (a
  routing key that is not UTF-8). The handler never sees it. A classic queue with a
  dead-letter queue ``D``: rr copies it to ``D`` byte for byte (confirmed), then acks;
  otherwise ``basic.reject(requeue=false)``, so the queue's own dead-letter route (a
  quorum queue's ``D``) takes it, or, with none, it is dropped.
* **interrupted**: rr's own code failed for it (an exception rr did not expect). The first
  time, it goes back to its queue (``basic.reject(requeue=true)``); a delivery the broker
  marks *redelivered* is dead-lettered instead, as after a failed last attempt, with
  ``rr-error-type = rr.InternalError``: to ``D`` by copy when the queue has one, else
  rejected without requeue.
* **a malformed ``x-death``** (not the shape RabbitMQ writes) on a quorum queue with ``D``:
  RabbitMQ 3.x crashes its dead-letter worker on it, so rr never lets the broker requeue
  or dead-letter such a message: a retry becomes a copy to the queue, a dead-lettering a
  copy to ``D`` (copies never carry the broker's headers).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from rabbitctl_retry.fields import FieldValue
from rabbitctl_retry.retry.headers import attempt_of, x_death_well_formed
from rabbitctl_retry.retry.outcome import Failure
from rabbitctl_retry.retry.policy import (
    Copy,
    CopyPurpose,
    Decision,
    Event,
    RejectAction,
    RepublishAction,
    RetryPolicy,
    copy_back,
    reject_to_dead_letter,
    spend,
)

INTERNAL_ERROR_TYPE = "rr.InternalError"
"""``rr-error-type`` of a message rr dead-lettered because its own code failed for it."""
UNDECODABLE_ERROR_TYPE = "rr.UndecodableProperties"
"""The failure type logged for a message whose properties could not be decoded."""
MAX_ERROR_MESSAGE_CHARS = 1_000


def internal_failure(error: BaseException) -> Failure:
    """The failure rr records when its own code raised ``error`` for a delivery."""
    text = f"{type(error).__name__}: {error}"
    return Failure(type=INTERNAL_ERROR_TYPE, message=text[:MAX_ERROR_MESSAGE_CHARS])


def decide_interrupted(
    policy: RetryPolicy,
    headers: Mapping[str, FieldValue] | None,
    failure: Failure,
    *,
    redelivered: bool,
    now: datetime,
) -> Decision:
    """Requeue once; dead-letter a redelivery (see the module docstring)."""
    if not redelivered:
        return Decision(
            action=RejectAction(requeue=True), event=Event.REQUEUED, attempt=0, failure=failure
        )
    attempt = attempt_of(headers, policy.retry_header, policy.queue)
    return spend(policy, headers, attempt, failure, now)


def decide_undecodable(policy: RetryPolicy) -> Decision:
    """Set aside a delivery whose properties could not be decoded (module docstring)."""
    failure = Failure(type=UNDECODABLE_ERROR_TYPE, message="its properties cannot be decoded")
    if policy.dead_letter is not None and not policy.quorum:
        copy = Copy(
            exchange="",
            routing_key=policy.dead_letter,
            headers={},
            purpose=CopyPurpose.DEAD_LETTER,
            verbatim=True,
        )
        return Decision(
            action=RepublishAction(copy),
            event=Event.DEAD_LETTERED,
            attempt=0,
            destination=policy.dead_letter,
            failure=failure,
        )
    return reject_to_dead_letter(policy, 0, failure)


def shield_broker(
    policy: RetryPolicy,
    headers: Mapping[str, FieldValue] | None,
    decision: Decision,
    *,
    now: datetime,
) -> Decision:
    """``decision``, unless it would hand the broker a message with a malformed ``x-death``
    to requeue or dead-letter on a quorum queue with ``D``; then the same move by copy."""
    action = decision.action
    if not isinstance(action, RejectAction) or not policy.quorum or policy.dead_letter is None:
        return decision
    if x_death_well_formed(headers):
        return decision
    if action.requeue and decision.event is not Event.DEAD_LETTERED:
        return copy_back(policy, headers, decision.attempt, decision.failure, event=decision.event)
    return spend(policy, headers, decision.attempt, decision.failure, now)
