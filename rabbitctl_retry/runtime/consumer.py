"""One queue's consumer: delivery -> handler -> outcome -> ``decide()`` -> frames.

The shell around the pure decision core. Per delivery it runs the handler (async handlers on
the loop, sync ones in worker threads), asks ``decide()`` what the outcome means for this
queue, and carries that out. Every ack and reject of the consumer's channel goes through one
:class:`~rabbitctl_retry.ops.settler.ChannelSettler`, which writes them in an order the
broker accepts (acks coalesced into ``basic.ack(multiple=true)`` over the settled prefix).

* ack, reject — recorded at once, written by the settler in the same turn of the loop;
* a copy — published (mandatory, confirmed unless the queue is ``publish = "fast"``); the
  original is acked only after the broker confirmed the copy. A copy the broker returns or
  refuses (a full or missing queue) is tried again with backoff while the original is held
  (the handler does not run again); if it is still refused after ``hold_max_s``, or the
  service stops, the original goes back to its queue (``basic.reject(requeue=true)``).
  Refusals are logged as one error per destination per minute, and the recovery once;
* an in-memory delay — acked now, the copy published later by ``InMemoryDelays``.

Anything else that fails in rr's own code for one delivery (an unexpected exception, a
cancellation that is not the task's own) is caught, logged with the message id, and the
delivery is settled by the rule of :mod:`rabbitctl_retry.retry.poison` (back to its queue
once; dead-lettered when it comes back), as is a delivery whose properties cannot be decoded:
it never holds back the settlement of the others.

The consumer watches its channel and its consumer: if the broker closes the channel (a
channel error) or cancels the consumer (its queue was deleted, or RabbitMQ 4.3's consumer
timeout), it logs why, re-declares what it needs (``recover``), opens a new channel (or, after
a cancel, cancels the old consumer itself and acks one by one from then on) and consumes
again, with backoff; a delivery for a consumer the broker cancelled is given back unhandled.
If the connection closes, the service reconnects; deliveries in flight went back to their
queues. What each of these events means (and the stop's) is decided by the consumer's pure
lifecycle (``runtime/consumer_state.py``); this class carries it out.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Awaitable, Callable, Mapping
from concurrent.futures import Executor
from typing import Any, assert_never

from rabbitctl_retry.errors import RrError, TransportError
from rabbitctl_retry.fields import FieldValue
from rabbitctl_retry.ops.clock import Clock, first_of, sleep_unless
from rabbitctl_retry.ops.copies.publisher import CopyPublisher
from rabbitctl_retry.ops.copies.sent import Sent
from rabbitctl_retry.ops.settler import ChannelSettler
from rabbitctl_retry.retry import poison
from rabbitctl_retry.retry.headers import malformed_counts
from rabbitctl_retry.retry.outcome import Ack, AnyOutcome, Drop, Failure, Retry, RetryAfter
from rabbitctl_retry.retry.policy import (
    AckAction,
    Copy,
    Decision,
    Event,
    RejectAction,
    RepublishAction,
    RetryPolicy,
    ScheduleAction,
    decide,
)
from rabbitctl_retry.runtime.backoff import Backoff
from rabbitctl_retry.runtime.consumer_state import ConsumerPhase, ConsumerState, Watch
from rabbitctl_retry.runtime.delays import InMemoryDelays
from rabbitctl_retry.runtime.handlers import Subscriber
from rabbitctl_retry.runtime.message import Message
from rabbitctl_retry.runtime.stats import RuntimeStats
from rabbitctl_retry.topology.model import PublishMode
from rabbitctl_retry.transport.base import Channel, Connection, Delivery

log = logging.getLogger("rr.runtime")

_OUTCOMES = (Ack, Retry, Drop, RetryAfter)
_ACK = Ack()
_LOGGED = {
    Event.RETRIED: logging.INFO,
    Event.REQUEUED: logging.INFO,
    Event.DELAYED: logging.INFO,
    Event.DROPPED: logging.INFO,
    Event.DEAD_LETTERED: logging.WARNING,
    Event.SPENT: logging.WARNING,
}

_GIVE_UP_TEXT = {
    Event.REQUEUED: "it goes back to its queue once",
    Event.DEAD_LETTERED: "it is dead-lettered",
    Event.SPENT: "it is rejected without requeue (its queue's dead-letter route, if any)",
}

EventListener = Callable[[str, Delivery, Decision], None]
"""Told each decision just before it is carried out: (queue, delivery, decision)."""

Recover = Callable[[], Awaitable[None]]
"""Re-declares (or checks) what a consumer needs before it consumes again."""

HANDLER_TIMEOUT_TYPE = "rr.HandlerTimeout"
"""``rr-error-type`` of a call that did not return within its timeout."""
REFUSAL_BACKOFF = Backoff(initial_s=0.5, max_s=30.0)
REFUSAL_LOG_INTERVAL_S = 60.0
"""At most one error line per refusing destination in this interval."""
HOLD_MAX_S = 60.0
"""How long a delivery whose copy the broker keeps refusing is held before it goes back."""


async def _nothing_to_recover() -> None:
    return None


def _cancelling() -> bool:
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


class QueueConsumer:
    """Consumes one queue on its own channel with one subscriber."""

    def __init__(
        self,
        *,
        subscriber: Subscriber,
        policy: RetryPolicy,
        connection: Connection,
        publisher: CopyPublisher,
        delays: InMemoryDelays,
        clock: Clock,
        prefetch: int,
        concurrency: int,
        executor: Executor | None,
        publish_mode: PublishMode = PublishMode.CONFIRM,
        listener: EventListener | None = None,
        recover: Recover = _nothing_to_recover,
        stats: RuntimeStats | None = None,
        hold_max_s: float = HOLD_MAX_S,
        handler_timeout_s: float | None = None,
    ) -> None:
        self.subscriber = subscriber
        self.policy = policy
        self._connection = connection
        self._publisher = publisher
        self._delays = delays
        self._clock = clock
        self._prefetch = prefetch
        self._semaphore = asyncio.Semaphore(concurrency) if concurrency < prefetch else None
        self._executor = executor
        self._confirm = publish_mode is PublishMode.CONFIRM
        self._listener = listener
        self._recover = recover
        self.stats = stats if stats is not None else RuntimeStats()
        self._hold_max_s = hold_max_s
        self._state = ConsumerState()
        """Its lifecycle (``runtime/consumer_state.py``): what the events below mean."""
        self._channel: Channel | None = None
        self._settler: ChannelSettler | None = None
        self._cancelled = asyncio.Event()
        """Set while the state wants the watcher (the broker cancelled the consumer)."""
        self._stopping = asyncio.Event()
        """Set once the state is stopping."""
        self._watcher: asyncio.Future[None] | None = None
        self._idle = asyncio.Event()
        self._idle.set()
        self._refusing: dict[str, int] = {}
        """Destinations whose copies are being refused -> refusals so far."""
        self._refusal_logged: dict[str, float] = {}
        """Destination -> when (loop time) a refusal was last logged as an error."""
        self._handler_is_async = subscriber.is_async
        self._handler_timeout_s = (
            subscriber.timeout_s if subscriber.timeout_s is not None else handler_timeout_s
        )
        """How long one handler call may take (the subscriber's own, else rr run's)."""

    @property
    def in_flight(self) -> int:
        return self._state.in_flight

    @property
    def unsettled(self) -> int:
        """Deliveries of the current channel not settled on the wire yet."""
        return 0 if self._settler is None else self._settler.unsettled

    @property
    def given_back(self) -> int:
        """Deliveries the current channel had not settled when it went (0 while it is open):
        the broker gives them back to their queues."""
        return 0 if self._settler is None else self._settler.given_back

    @property
    def channel(self) -> Channel | None:
        """The channel the consumer consumes on now."""
        return self._channel

    @property
    def phase(self) -> ConsumerPhase:
        """Where its lifecycle is (``runtime/consumer_state.py``)."""
        return self._state.phase

    @property
    def watching(self) -> bool:
        """Its watcher runs: it starts the consumer again when the broker takes it away."""
        return self._watcher is not None and not self._watcher.done()

    async def start(self) -> None:
        """Open a channel and consume; then watch the channel and the consumer."""
        await self._open()
        self._watcher = asyncio.ensure_future(self._watch())

    async def _open(self) -> None:
        channel = await self._connection.channel()
        settler = ChannelSettler(channel, singles_threshold=self._prefetch // 2)
        self._channel, self._settler = channel, settler
        await channel.qos(self._prefetch)
        await self._consume(channel, settler)

    async def _consume(self, channel: Channel, settler: ChannelSettler) -> None:
        tag = await channel.consume(
            self.policy.queue,
            functools.partial(self._on_delivery, settler),
            on_cancel=self._on_server_cancel,
        )
        if not self._state.consuming(tag) and not channel.is_closed:
            # a stop came while the broker set it up: it takes no deliveries
            with contextlib.suppress(TransportError):
                await channel.cancel(tag)
        self._observe()

    def _observe(self) -> None:
        """Wake whoever waits for what the state now says."""
        state = self._state
        if state.watcher_wanted:
            self._cancelled.set()
        else:
            self._cancelled.clear()
        if state.stopping:
            self._stopping.set()

    def _on_server_cancel(self, consumer_tag: str) -> None:
        self._state.server_cancelled(consumer_tag)
        self._observe()

    async def _after_server_cancel(self, channel: Channel) -> None:
        """RabbitMQ 4.3 keeps a quorum queue consumer it cancelled for its consumer timeout,
        and hands it messages again once the timed-out delivery is acked; rr's client drops
        those (and a later ``basic.ack(multiple=true)`` would ack them unhandled). So cancel
        it ourselves, and ack what waits behind the timed-out delivery one by one from now
        on, before the server times it out too (docs/runtime.md, "Handlers": "On RabbitMQ 4.3")."""
        tag = self._state.own_cancel()
        if tag is not None and not channel.is_closed:
            with contextlib.suppress(RrError):
                await channel.cancel(tag)
        if self._settler is not None and self._settler.channel is channel:
            self._settler.force_singles = True
            await self._settler.flush()

    async def _watch(self) -> None:
        """Start the consumer again whenever the broker closes its channel or cancels it."""
        while not self._state.stopping:
            channel = self._channel
            assert channel is not None
            await first_of(channel.wait_closed(), self._cancelled.wait(), self._stopping.wait())
            watch = self._state.woke(
                channel_closed=channel.is_closed, connection_closed=self._connection.is_closed
            )
            self._observe()
            if watch is Watch.STOP:
                return
            fields: dict[str, object] = {"queue": self.policy.queue}
            if watch is Watch.REOPEN:
                fields["reason"] = f"the channel closed: {channel.close_reason}"
                if self._settler is not None:
                    self._settler.forget()
                    fields["in_flight"] = self._settler.given_back  # back in the queue
            else:
                self.stats.consumer_cancels += 1
                fields["reason"] = (
                    "the broker cancelled the consumer (its queue deleted, its node down, or "
                    "a delivery held past the consumer timeout)"
                )
            self.stats.consumer_restarts += 1
            log.warning("consumer stopped; starting it again", extra={"rr": fields})
            if watch is Watch.RECONSUME:
                await self._after_server_cancel(channel)
            await self._restart()

    async def _restart(self) -> None:
        state = self._state
        while not state.stopping and not self._connection.is_closed:
            try:
                await self._recover()
                if state.stopping:
                    return  # a stop came while recovering: consume no more
                channel, settler = self._channel, self._settler
                if channel is None or settler is None or channel.is_closed:
                    await self._open()
                else:
                    await self._consume(channel, settler)
            except RrError as error:
                delay_s = state.restart_failed()
                log.warning(
                    "could not consume again; trying again",
                    extra={
                        "rr": {
                            "queue": self.policy.queue,
                            "error": str(error),
                            "retry_in_s": delay_s,
                        }
                    },
                )
                await sleep_unless(self._clock, delay_s, self._stopping)
                continue
            if not state.stopping:
                log.info("consuming again", extra={"rr": {"queue": self.policy.queue}})
            return

    async def stop_consuming(self) -> None:
        """basic.cancel: no new deliveries; in-flight ones go on."""
        tag = self._state.stop()
        self._observe()
        channel = self._channel
        if tag is not None and channel is not None and not channel.is_closed:
            with contextlib.suppress(TransportError):
                await channel.cancel(tag)

    def abandon(self) -> None:
        """The connection is gone: stop watching (deliveries in flight went back)."""
        self._state.closed()
        self._observe()
        if self._settler is not None:
            self._settler.forget()

    async def wait_idle(self, timeout_s: float) -> bool:
        """Wait until no handler runs; ``False`` if ``timeout_s`` passed first."""
        try:
            await asyncio.wait_for(self._idle.wait(), timeout_s)
        except TimeoutError:
            return False
        if self._settler is not None:
            await self._settler.flush()
        return True

    async def close(self) -> None:
        self._state.stop()
        self._observe()
        if self._settler is not None:
            await self._settler.drain()
            self._settler.forget()
        if self._channel is not None:
            await self._channel.close()
        self._state.closed()
        if self._watcher is not None:
            await asyncio.gather(self._watcher, return_exceptions=True)

    # -- deliveries --------------------------------------------------------------------------

    async def _on_delivery(self, settler: ChannelSettler, delivery: Delivery) -> None:
        # First statement, before any await: tags enter the window in delivery order.
        settler.delivered(delivery.delivery_tag)
        state = self._state
        if not state.delivered(delivery.consumer_tag):
            self._give_back_stray(settler, delivery)
            return
        self._idle.clear()
        try:
            if self._semaphore is None:
                await self._handle(settler, delivery)
            else:
                async with self._semaphore:
                    await self._handle(settler, delivery)
        except asyncio.CancelledError as error:
            if _cancelling():  # a real shutdown: back to the queue, as the service stops
                self._requeue_interrupted(settler, delivery)
                raise
            await self._give_up(settler, delivery, error)
        except Exception as error:
            await self._give_up(settler, delivery, error)
        finally:
            if state.handled():
                self._idle.set()

    def _give_back_stray(self, settler: ChannelSettler, delivery: Delivery) -> None:
        """A delivery for a consumer the broker cancelled: RabbitMQ 4.3 revives a consumer it
        cancelled for its consumer timeout when the timed-out delivery is settled before the
        cancel reached rr, and hands it messages. Nobody handles them: they go back to the
        queue at once, uncounted (``basic.nack``; a multiple ack would otherwise take them
        along unhandled). docs/runtime.md, "Handlers"."""
        if settler.give_back(delivery.delivery_tag):
            self.stats.stray_deliveries += 1
            log.warning(
                "a delivery for a consumer the broker cancelled goes back to its queue, "
                "unhandled and uncounted",
                extra={"rr": self._ids(delivery) | {"consumer_tag": delivery.consumer_tag}},
            )

    def _requeue_interrupted(self, settler: ChannelSettler, delivery: Delivery) -> None:
        if settler.reject(delivery.delivery_tag, requeue=True):
            self.stats.interrupted_deliveries += 1
            log.warning(
                "delivery interrupted (its channel closed, or the service stops); it goes back "
                "to its queue",
                extra={"rr": self._ids(delivery)},
            )

    async def _give_up(
        self, settler: ChannelSettler, delivery: Delivery, error: BaseException
    ) -> None:
        """rr's own code failed for this delivery: settle it by the documented rule (requeue
        once, dead-letter a redelivery; docs/runtime.md), unless it was already settled or its
        channel is gone (then it is back in its queue already). Never raises."""
        if not settler.is_open(delivery.delivery_tag):
            return
        self.stats.interrupted_deliveries += 1
        failure = poison.internal_failure(error)
        try:
            decision = poison.decide_interrupted(
                self.policy,
                delivery.properties.headers,
                failure,
                redelivered=delivery.redelivered,
                now=self._clock.now(),
            )
        except Exception:  # rr cannot even build the dead letter: never lose it
            decision = Decision(
                action=RejectAction(requeue=True), event=Event.REQUEUED, attempt=0, failure=failure
            )
        log.error(
            "rr failed on this delivery; " + _GIVE_UP_TEXT[decision.event],
            extra={"rr": self._ids(delivery) | {"error": failure.message}},
        )
        try:
            await self._execute(settler, delivery, decision)
        except Exception as second:  # dead-lettering failed too: back to its queue, not lost
            if settler.reject(delivery.delivery_tag, requeue=True):
                log.error(
                    "rr failed again on this delivery; it goes back to its queue",
                    extra={
                        "rr": self._ids(delivery)
                        | {"error": f"{type(second).__name__}: {second}"[:1000]}
                    },
                )

    def _ids(self, delivery: Delivery) -> dict[str, object]:
        return {"queue": self.policy.queue, "message_id": delivery.properties.message_id}

    async def _handle(self, settler: ChannelSettler, delivery: Delivery) -> None:
        # The policy of the moment the handler starts: a reload of the topology file
        # (runtime/service.py) replaces self.policy for the next deliveries, and this one
        # finishes with the policy it started with.
        policy = self.policy
        if delivery.properties.undecodable:
            await self._set_aside(settler, delivery)
            return
        outcome = await self._run_handler(delivery)
        if type(outcome) is Ack and self._listener is None:
            # The hot path: decide() would answer AckAction whatever the policy says.
            settler.ack(delivery.delivery_tag)
            return
        headers = delivery.properties.headers
        if headers:
            self._warn_malformed(delivery, headers)
        decision = decide(policy, headers, outcome, now=self._clock.now())
        if headers and "x-death" in headers:
            decision = poison.shield_broker(policy, headers, decision, now=self._clock.now())
        if self._listener is not None:
            self._listener(policy.queue, delivery, decision)
        if decision.event is not Event.ACKED:
            # Logged before its frames go out: the copy or the reject it logs may be handled
            # by the next queue's consumer (a dead-letter queue's handler) before the confirm
            # comes back, and its line must not come first (docs/runtime.md, "Logs").
            self._log(delivery, decision)
        await self._execute(settler, delivery, decision)

    async def _set_aside(self, settler: ChannelSettler, delivery: Delivery) -> None:
        """Properties (or a routing key, exchange, consumer tag) the codec could not decode:
        never handled, dead-lettered at once (docs/runtime.md, "Malformed messages")."""
        self.stats.undecodable_deliveries += 1
        decision = poison.decide_undecodable(self.policy)
        log.error(
            "message properties cannot be decoded; " + _GIVE_UP_TEXT[decision.event],
            extra={
                "rr": self._ids(delivery) | {"undecodable": list(delivery.properties.undecodable)}
            },
        )
        await self._execute(settler, delivery, decision)

    def _warn_malformed(self, delivery: Delivery, headers: Mapping[str, FieldValue]) -> None:
        """A count rr reads that is not a well-formed number counts 0 (docs/runtime.md)."""
        malformed = malformed_counts(headers, self.policy.retry_header)
        if malformed:
            log.warning(
                "malformed count header; it counts as 0",
                extra={
                    "rr": {
                        "queue": self.policy.queue,
                        "message_id": delivery.properties.message_id,
                        "headers": malformed,
                    }
                },
            )

    async def _run_handler(self, delivery: Delivery) -> AnyOutcome:
        message = Message(delivery, self.policy.queue, self.policy.retry_header)
        timeout_s = self._handler_timeout_s
        if timeout_s is None:
            return await self._outcome_of(message)
        deadline = asyncio.timeout(timeout_s)
        try:
            async with deadline:
                return await self._outcome_of(message)
        except TimeoutError:
            if not deadline.expired():  # pragma: no cover - _outcome_of catches the handler's
                raise
            # Cancelled (an async handler), or left to run on in its thread (a sync one): the
            # call failed, and the failure counts, so max_attempts ends a hanging message.
            self.stats.handler_timeouts += 1
            return Retry(
                failure=Failure(
                    type=HANDLER_TIMEOUT_TYPE,
                    message=f"{self.subscriber.name} did not return within {timeout_s:g} s",
                )
            )

    async def _outcome_of(self, message: Message) -> AnyOutcome:
        handler = self.subscriber.handler
        try:
            if self._handler_is_async:
                result: Any = await handler(message)  # type: ignore[misc]
            else:
                loop = asyncio.get_running_loop()
                result = await loop.run_in_executor(self._executor, handler, message)
        except asyncio.CancelledError as error:
            if _cancelling():
                raise  # a real shutdown of this delivery's task
            return Retry(failure=Failure.from_exception(error))
        except BaseException as error:
            # GeneratorExit, SystemExit, KeyboardInterrupt or any BaseException raised by a
            # handler is that handler's failure, not a reason to stop the service.
            return Retry(failure=Failure.from_exception(error))
        if result is None:
            return _ACK
        if isinstance(result, _OUTCOMES):
            return result
        return Retry(
            failure=Failure(
                type="rr.InvalidOutcome",
                message=f"{self.subscriber.name} returned {type(result).__name__}, not an Outcome",
            )
        )

    async def _execute(
        self, settler: ChannelSettler, delivery: Delivery, decision: Decision
    ) -> None:
        tag = delivery.delivery_tag
        action = decision.action
        match action:
            case AckAction():
                settler.ack(tag)
            case RejectAction():
                settler.reject(tag, requeue=action.requeue)
            case RepublishAction():
                if await self._publish_copy(settler, delivery, decision, action.copy):
                    settler.ack(tag)
            case ScheduleAction():
                if settler.ack(tag):
                    self._delays.schedule(action.copy, delivery, self.policy.queue, action.delay_ms)
            case _:
                assert_never(action)

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
            sent = await self._publisher.publish(copy, delivery, confirm=self._confirm)
            match sent.outcome:
                case Sent.CONFIRMED:
                    break
                case Sent.UNENCODABLE:
                    assert sent.error is not None
                    raise sent.error  # rr's own failure for this delivery (_give_up)
                case Sent.CUT:
                    if settler.reject(tag, requeue=True):
                        log.warning(
                            "copy not confirmed (its channel failed); the original goes back "
                            "to its queue and may be handled twice",
                            extra={
                                "rr": self._fields(delivery, decision) | {"error": str(sent.error)}
                            },
                        )
                    return False
            refusals += 1
            self.stats.copies_refused += 1
            self._refused(destination, delivery, decision, sent.error)
            # tried again after 0.5 s, 1 s, 2 s, ... (at most 30 s apart), the last try
            # hold_max_s after the first; then the original goes back
            remaining_s = self._hold_max_s - held_s
            if remaining_s <= 0 or self._stopping.is_set():
                if settler.reject(tag, requeue=True):
                    log.warning(
                        "copy still refused; the original goes back to its queue",
                        extra={
                            "rr": self._fields(delivery, decision)
                            | {"to": destination, "held_s": round(held_s, 1)}
                        },
                    )
                return False
            delay_s = min(REFUSAL_BACKOFF.delay_s(refusals), remaining_s)
            held_s += delay_s
            await sleep_unless(self._clock, delay_s, self._stopping)
            if settler.closed:
                return False
        self.stats.copies_confirmed += 1
        if destination in self._refusing:
            refused = self._refusing.pop(destination)
            log.info(
                "copies accepted again",
                extra={"rr": {"queue": self.policy.queue, "to": destination, "refused": refused}},
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
                extra={"rr": self._fields(delivery, decision) | {"error": str(error)}},
            )

    def _fields(self, delivery: Delivery, decision: Decision) -> dict[str, object]:
        fields: dict[str, object] = {
            "queue": self.policy.queue,
            "message_id": delivery.properties.message_id,
            "attempt": decision.attempt,
            "outcome": decision.event.value,
        }
        if decision.destination is not None:
            fields["to"] = decision.destination
        if decision.delay_ms is not None:
            fields["delay_ms"] = decision.delay_ms
        if decision.failure is not None:
            fields["error_type"] = decision.failure.type
            fields["error"] = decision.failure.message
        return fields

    def _log(self, delivery: Delivery, decision: Decision) -> None:
        level = _LOGGED.get(decision.event, logging.INFO)
        if decision.failure is not None and level < logging.WARNING:
            level = logging.WARNING
        if not log.isEnabledFor(level):
            return
        message = decision.event.value
        fields = self._fields(delivery, decision)
        if decision.event is Event.DEAD_LETTERED and isinstance(decision.action, RejectAction):
            # The server moves it, not rr: rr cannot know that it arrived.
            message = "rejected to the queue's dead-letter route"
            fields["outcome"] = "rejected-to-dead-letter-route"
        log.log(level, message, extra={"rr": fields})
