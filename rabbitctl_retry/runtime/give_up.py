"""The deliveries ``rr run`` does not hand to a handler, or whose handling failed in rr's own
code: given back, requeued, or settled by the rule of :mod:`rabbitctl_retry.retry.poison`.

* a delivery for a consumer the broker cancelled — back to its queue at once, unhandled and
  uncounted (:func:`give_back_stray`);
* a delivery interrupted by a real shutdown of its task — back to its queue
  (:func:`requeue_interrupted`);
* rr's own failure on a delivery (an unexpected exception, a cancellation that is not the
  task's own) — back to its queue once, dead-lettered when it comes back (:func:`give_up`);
* properties the codec could not decode — never handled, dead-lettered at once
  (:func:`set_aside`).

None of them holds back the settlement of the others (docs/reference/runtime.md, "Malformed
messages").
"""

from __future__ import annotations

import logging

from rabbitctl_retry.ops.clock import Clock
from rabbitctl_retry.ops.settler import ChannelSettler
from rabbitctl_retry.retry import poison
from rabbitctl_retry.retry.policy import Decision, Event, RejectAction, RetryPolicy
from rabbitctl_retry.runtime.decision_log import GIVE_UP_TEXT, ids
from rabbitctl_retry.runtime.execution import DecisionExecution
from rabbitctl_retry.runtime.stats import RuntimeStats
from rabbitctl_retry.transport.base import Delivery

log = logging.getLogger("rr.runtime")


def give_back_stray(
    settler: ChannelSettler, delivery: Delivery, queue: str, stats: RuntimeStats
) -> None:
    """A delivery for a consumer the broker cancelled: RabbitMQ 4.3 revives a consumer it
    cancelled for its consumer timeout when the timed-out delivery is settled before the
    cancel reached rr, and hands it messages. Nobody handles them: they go back to the
    queue at once, uncounted (``basic.nack``; a multiple ack would otherwise take them
    along unhandled). docs/reference/runtime.md, "Handlers"."""
    if settler.give_back(delivery.delivery_tag):
        stats.stray_deliveries += 1
        log.warning(
            "a delivery for a consumer the broker cancelled goes back to its queue, "
            "unhandled and uncounted",
            extra={"rr": ids(queue, delivery) | {"consumer_tag": delivery.consumer_tag}},
        )


def requeue_interrupted(
    settler: ChannelSettler, delivery: Delivery, queue: str, stats: RuntimeStats
) -> None:
    """A delivery whose task was cancelled (its channel closed, or the service stops)."""
    if settler.reject(delivery.delivery_tag, requeue=True):
        stats.interrupted_deliveries += 1
        log.warning(
            "delivery interrupted (its channel closed, or the service stops); it goes back "
            "to its queue",
            extra={"rr": ids(queue, delivery)},
        )


async def give_up(
    execution: DecisionExecution,
    settler: ChannelSettler,
    delivery: Delivery,
    error: BaseException,
    *,
    policy: RetryPolicy,
    clock: Clock,
    stats: RuntimeStats,
) -> None:
    """rr's own code failed for this delivery: settle it by the documented rule (requeue
    once, dead-letter a redelivery; docs/reference/runtime.md), unless it was already settled or its
    channel is gone (then it is back in its queue already). Never raises."""
    if not settler.is_open(delivery.delivery_tag):
        return
    stats.interrupted_deliveries += 1
    failure = poison.internal_failure(error)
    try:
        decision = poison.decide_interrupted(
            policy,
            delivery.properties.headers,
            failure,
            redelivered=delivery.redelivered,
            now=clock.now(),
        )
    except Exception:  # rr cannot even build the dead letter: never lose it
        decision = Decision(
            action=RejectAction(requeue=True), event=Event.REQUEUED, attempt=0, failure=failure
        )
    log.error(
        "rr failed on this delivery; " + GIVE_UP_TEXT[decision.event],
        extra={"rr": ids(policy.queue, delivery) | {"error": failure.message}},
    )
    try:
        await execution.execute(settler, delivery, decision)
    except Exception as second:  # dead-lettering failed too: back to its queue, not lost
        if settler.reject(delivery.delivery_tag, requeue=True):
            log.error(
                "rr failed again on this delivery; it goes back to its queue",
                extra={
                    "rr": ids(policy.queue, delivery)
                    | {"error": f"{type(second).__name__}: {second}"[:1000]}
                },
            )


async def set_aside(
    execution: DecisionExecution,
    settler: ChannelSettler,
    delivery: Delivery,
    *,
    policy: RetryPolicy,
    stats: RuntimeStats,
) -> None:
    """Properties (or a routing key, exchange, consumer tag) the codec could not decode:
    never handled, dead-lettered at once (docs/reference/runtime.md, "Malformed messages")."""
    stats.undecodable_deliveries += 1
    decision = poison.decide_undecodable(policy)
    log.error(
        "message properties cannot be decoded; " + GIVE_UP_TEXT[decision.event],
        extra={
            "rr": ids(policy.queue, delivery)
            | {"undecodable": list(delivery.properties.undecodable)}
        },
    )
    await execution.execute(settler, delivery, decision)
