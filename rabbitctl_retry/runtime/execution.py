"""A decision of ``rr run`` carried out on the wire, through the channel's settler.

* ack, reject, give back (``basic.nack``, a pause) — recorded at once, written by the
  settler in the same turn of the loop;
* a copy — published (mandatory, confirmed unless the queue is ``publish = "fast"``); the
  original is acked only after the broker confirmed the copy. A copy the broker returns or
  refuses (a full or missing queue) is tried again with backoff while the original is held
  (the handler does not run again); if it is still refused after ``hold_max_s``, or the
  service stops, the original goes back to its queue (``basic.reject(requeue=true)``).
  Refusals are logged as one error per destination per minute, and the recovery once;
* an in-memory delay — acked now, the copy published later by ``InMemoryDelays``.

Before any of these, the outputs of a handler that acked (``runtime/outputs.py``) are
published, all at once and each confirmed (:meth:`DecisionExecution.publish_outputs`): one not
confirmed turns the ack into a retry.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import assert_never

from rabbitctl_retry.ops.clock import Clock, sleep_unless
from rabbitctl_retry.ops.copies.publisher import CopyPublisher
from rabbitctl_retry.ops.copies.sent import Sent
from rabbitctl_retry.ops.settler import ChannelSettler
from rabbitctl_retry.retry.outcome import Failure
from rabbitctl_retry.retry.policy import (
    AckAction,
    Copy,
    Decision,
    GiveBackAction,
    RejectAction,
    RepublishAction,
    ScheduleAction,
)
from rabbitctl_retry.runtime.backoff import Backoff
from rabbitctl_retry.runtime.decision_log import decision_fields
from rabbitctl_retry.runtime.delays import InMemoryDelays
from rabbitctl_retry.runtime.outgoing import Outgoing
from rabbitctl_retry.runtime.outputs import OUTPUT_FAILED_TYPE
from rabbitctl_retry.runtime.stats import RuntimeStats
from rabbitctl_retry.transport.base import Delivery

log = logging.getLogger("rr.runtime")

REFUSAL_BACKOFF = Backoff(initial_s=0.5, max_s=30.0)
REFUSAL_LOG_INTERVAL_S = 60.0
"""At most one error line per refusing destination in this interval."""
HOLD_MAX_S = 60.0
"""How long a delivery whose copy the broker keeps refusing is held before it goes back."""


@dataclass(eq=False, slots=True, kw_only=True)
class DecisionExecution:
    """Carries out the decisions of one queue's consumer (module doc)."""

    queue: str
    publisher: CopyPublisher
    delays: InMemoryDelays
    clock: Clock
    confirm: bool
    """Copies wait for the broker's confirm (the queue is not ``publish = "fast"``)."""
    stats: RuntimeStats
    hold_max_s: float
    stopping: asyncio.Event
    """Set once the consumer stops: a held original goes back at once."""
    _refusing: dict[str, int] = field(default_factory=dict, init=False)
    """Destinations whose copies are being refused -> refusals so far."""
    _refusal_logged: dict[str, float] = field(default_factory=dict, init=False)
    """Destination -> when (loop time) a refusal was last logged as an error."""

    async def execute(
        self, settler: ChannelSettler, delivery: Delivery, decision: Decision
    ) -> None:
        tag = delivery.delivery_tag
        action = decision.action
        match action:
            case AckAction():
                settler.ack(tag)
            case RejectAction():
                settler.reject(tag, requeue=action.requeue)
            case GiveBackAction():
                settler.give_back(tag)
            case RepublishAction():
                if await self._publish_copy(settler, delivery, decision, action.copy):
                    settler.ack(tag)
            case ScheduleAction():
                if settler.ack(tag):
                    self.delays.schedule(action.copy, delivery, self.queue, action.delay_ms)
            case _:
                assert_never(action)

    async def publish_outputs(
        self, delivery: Delivery, outputs: Sequence[Outgoing]
    ) -> Failure | None:
        """Publish a handler's ``outputs`` (pipelined, each ``mandatory`` and confirmed);
        ``None`` once every one is confirmed, else the failure the delivery fails with
        (``rr.OutputFailed``: docs/reference/runtime.md, "Publishing")."""
        self.stats.outputs_published += len(outputs)
        results = await asyncio.gather(
            *(
                self.publisher.publish_message(
                    output.body,
                    exchange=output.exchange,
                    routing_key=output.routing_key,
                    properties=output.properties,
                )
                for output in outputs
            )
        )
        failed = [
            (output, result)
            for output, result in zip(outputs, results, strict=True)
            if result.outcome is not Sent.CONFIRMED
        ]
        self.stats.outputs_confirmed += len(outputs) - len(failed)
        if not failed:
            return None
        self.stats.outputs_failed += len(failed)
        output, result = failed[0]
        more = f" (and {len(failed) - 1} more of {len(outputs)})" if len(failed) > 1 else ""
        failure = Failure(
            type=OUTPUT_FAILED_TYPE,
            message=(
                f"output {output.message_id} to {output.destination!r} {result.outcome.value}: "
                f"{result.error}{more}"
            ),
        )
        log.warning(
            "an output of an acked delivery was not confirmed; the delivery fails as a retry",
            extra={
                "rr": {
                    "queue": self.queue,
                    "message_id": delivery.properties.message_id,
                    "to": output.destination,
                    "output_id": output.message_id,
                    "error": failure.message,
                }
            },
        )
        return failure

    async def _publish_copy(
        self, settler: ChannelSettler, delivery: Delivery, decision: Decision, copy: Copy
    ) -> bool:
        """Publish ``copy``; ``True`` once confirmed (ack the original), else ``False`` with
        the original already sent back to its queue (or gone back with its channel)."""
        tag = delivery.delivery_tag
        destination = copy.exchange or copy.routing_key
        refusals = 0
        held_s = 0.0
        while True:
            self.stats.copies_published += 1
            sent = await self.publisher.publish(copy, delivery, confirm=self.confirm)
            match sent.outcome:
                case Sent.CONFIRMED:
                    break
                case Sent.UNENCODABLE:
                    assert sent.error is not None
                    raise sent.error  # rr's own failure for this delivery (runtime/give_up.py)
                case Sent.CUT:
                    if settler.reject(tag, requeue=True):
                        log.warning(
                            "copy not confirmed (its channel failed); the original goes back "
                            "to its queue and may be handled twice",
                            extra={
                                "rr": decision_fields(self.queue, delivery, decision)
                                | {"error": str(sent.error)}
                            },
                        )
                    return False
            refusals += 1
            self.stats.copies_refused += 1
            self._refused(destination, delivery, decision, sent.error)
            # tried again after 0.5 s, 1 s, 2 s, ... (at most 30 s apart), the last try
            # hold_max_s after the first; then the original goes back
            remaining_s = self.hold_max_s - held_s
            if remaining_s <= 0 or self.stopping.is_set():
                if settler.reject(tag, requeue=True):
                    log.warning(
                        "copy still refused; the original goes back to its queue",
                        extra={
                            "rr": decision_fields(self.queue, delivery, decision)
                            | {"to": destination, "held_s": round(held_s, 1)}
                        },
                    )
                return False
            delay_s = min(REFUSAL_BACKOFF.delay_s(refusals), remaining_s)
            held_s += delay_s
            await sleep_unless(self.clock, delay_s, self.stopping)
            if settler.closed:
                return False
        self.stats.copies_confirmed += 1
        if destination in self._refusing:
            refused = self._refusing.pop(destination)
            log.info(
                "copies accepted again",
                extra={"rr": {"queue": self.queue, "to": destination, "refused": refused}},
            )
        return True

    def _refused(
        self, destination: str, delivery: Delivery, decision: Decision, error: BaseException | None
    ) -> None:
        """Count a refusal; log one error per destination per minute at most (however many
        originals are held, the log must not loop hot)."""
        self._refusing[destination] = self._refusing.get(destination, 0) + 1
        now_s = asyncio.get_running_loop().time()
        last_s = self._refusal_logged.get(destination)
        if last_s is None or now_s - last_s >= REFUSAL_LOG_INTERVAL_S:
            self._refusal_logged[destination] = now_s
            log.error(
                "copy refused; the original is held and the copy tried again with backoff",
                extra={
                    "rr": decision_fields(self.queue, delivery, decision) | {"error": str(error)}
                },
            )
