"""One queue's consumer: delivery -> handler -> outcome -> ``decide()`` -> frames.

The shell around the pure decision core. Per delivery it runs the handler (async handlers on
the loop, sync ones in worker threads), asks ``decide()`` what the outcome means for this
queue, and carries that out. Every ack and reject of the consumer's channel goes through one
:class:`~rabbitctl_retry.ops.settler.ChannelSettler`, which writes them in an order the
broker accepts (acks coalesced into ``basic.ack(multiple=true)`` over the settled prefix).

A ``DecisionExecution`` carries out each decision (``runtime/execution.py``): an ack or
reject at once, a copy published and confirmed before the original is acked (held while the
broker refuses it), an in-memory delay acked now and published later by ``InMemoryDelays``.

Anything else that fails in rr's own code for one delivery (an unexpected exception, a
cancellation that is not the task's own) is caught, logged with the message id, and the
delivery is settled by the rule of :mod:`rabbitctl_retry.retry.poison` (back to its queue
once; dead-lettered when it comes back), as is a delivery whose properties cannot be decoded:
it never holds back the settlement of the others (``runtime/give_up.py``).

Its channel and consumer are kept by a ``ConsumerWatch`` (``runtime/consumer_watch.py``): it
consumes again when the broker closes the channel or cancels the consumer, and after a pause.
A delivery for a consumer the broker cancelled is given back unhandled. What each event means
is decided by the consumer's pure lifecycle (``runtime/consumer_state.py``).

A handler that acks with outputs (``runtime/outputs.py``) has them published and confirmed
before its decision is carried out; one not confirmed makes the delivery a retry.

A handler that says a dependency is down (``Outcome.pause``, a ``pause_on`` mapping) pauses
the queue: the watch cancels the consumer before the message goes back (``basic.nack``) and
consumes again once the pause is over (docs/reference/handlers.md, "Pausing a queue").
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import logging
from collections.abc import Callable
from concurrent.futures import Executor
from typing import TYPE_CHECKING, Any

from rabbitctl_retry.ops.clock import Clock
from rabbitctl_retry.ops.copies.publisher import CopyPublisher
from rabbitctl_retry.ops.settler import ChannelSettler
from rabbitctl_retry.retry import poison
from rabbitctl_retry.retry.outcome import (
    OUTCOME_TYPES,
    Ack,
    AnyOutcome,
    DeadLetter,
    Drop,
    Failure,
    Retry,
)
from rabbitctl_retry.retry.policy import Decision, Event, RetryPolicy, decide
from rabbitctl_retry.runtime import handler_context
from rabbitctl_retry.runtime.consumer_state import ConsumerPhase, ConsumerState
from rabbitctl_retry.runtime.consumer_watch import ConsumerWatch, Recover, nothing_to_recover
from rabbitctl_retry.runtime.decision_log import log_decision, warn_malformed
from rabbitctl_retry.runtime.delays import InMemoryDelays
from rabbitctl_retry.runtime.delivery_metrics import DeliveryObserver
from rabbitctl_retry.runtime.execution import HOLD_MAX_S, DecisionExecution
from rabbitctl_retry.runtime.give_up import (
    give_back_stray,
    give_up,
    requeue_interrupted,
    set_aside,
)
from rabbitctl_retry.runtime.handlers import OnDecodeError, Subscriber
from rabbitctl_retry.runtime.invocation import (
    DECODE_ERROR_TYPE,
    DecodeFailure,
    Invocation,
    invocation_for,
)
from rabbitctl_retry.runtime.message import Message, outputs_of
from rabbitctl_retry.runtime.outgoing import Outgoing
from rabbitctl_retry.runtime.stats import RuntimeStats
from rabbitctl_retry.topology.model import PublishMode
from rabbitctl_retry.transport.base import Channel, Connection, Delivery

if TYPE_CHECKING:
    from rabbitctl_retry.telemetry.tracing import DeliverySpan, Tracing

log = logging.getLogger("rr.runtime")

_OUTCOMES = OUTCOME_TYPES
_ACK = Ack()
EventListener = Callable[[str, Delivery, Decision], None]
"""Told each decision just before it is carried out: (queue, delivery, decision)."""
OutputListener = Callable[[str, Delivery, tuple[Outgoing, ...]], None]
"""Told a handler's outputs once the broker confirmed them all: (queue, delivery, outputs)."""

HANDLER_TIMEOUT_TYPE = "rr.HandlerTimeout"
"""``rr-error-type`` of a call that did not return within its timeout."""
__all__ = ["HOLD_MAX_S", "EventListener", "OutputListener", "QueueConsumer", "Recover"]


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
        recover: Recover = nothing_to_recover,
        stats: RuntimeStats | None = None,
        hold_max_s: float = HOLD_MAX_S,
        handler_timeout_s: float | None = None,
        invocation: Invocation | None = None,
        on_outputs: OutputListener | None = None,
        observer: DeliveryObserver | None = None,
        tracing: Tracing | None = None,
    ) -> None:
        self.subscriber = subscriber
        self._tracing = tracing
        """rr's tracing when on: a CONSUMER span per delivery (docs/reference/runtime.md, "Tracing
        and metrics")."""
        self._invocation = invocation or invocation_for(subscriber.written, name=subscriber.name)
        """The arguments of each handler call (``runtime/invocation.py``)."""
        self.policy = policy
        self._clock = clock
        self._semaphore = asyncio.Semaphore(concurrency) if concurrency < prefetch else None
        self._executor = executor
        self._listener = listener
        self._on_outputs = on_outputs
        self._observer = observer
        """Measures each delivery (runtime/delivery_metrics.py); None: no metrics."""
        self.stats = stats if stats is not None else RuntimeStats()
        self._state = ConsumerState()
        """Its lifecycle (``runtime/consumer_state.py``): what the events below mean."""
        self._watch = ConsumerWatch(
            queue=policy.queue,
            connection=connection,
            clock=clock,
            prefetch=prefetch,
            state=self._state,
            stats=self.stats,
            on_delivery=self._on_delivery,
            recover=recover,
        )
        """Its channel and consumer, started again when taken away
        (``runtime/consumer_watch.py``)."""
        self._idle = asyncio.Event()
        self._idle.set()
        self._execution = DecisionExecution(
            queue=policy.queue,
            publisher=publisher,
            delays=delays,
            clock=clock,
            confirm=publish_mode is PublishMode.CONFIRM,
            stats=self.stats,
            hold_max_s=hold_max_s,
            stopping=self._watch.stopping,
        )
        """Carries out its decisions (``runtime/execution.py``)."""
        self._handler_is_async = subscriber.is_async
        self._handle_one = self._handle if tracing is None else self._handle_traced
        """Chosen once: the delivery's span costs nothing when tracing is off."""
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
        settler = self._watch.settler
        return 0 if settler is None else settler.unsettled

    @property
    def given_back(self) -> int:
        """Deliveries the current channel had not settled when it went (0 while it is open):
        the broker gives them back to their queues."""
        settler = self._watch.settler
        return 0 if settler is None else settler.given_back

    @property
    def channel(self) -> Channel | None:
        """The channel the consumer consumes on now."""
        return self._watch.channel

    @property
    def phase(self) -> ConsumerPhase:
        """Where its lifecycle is (``runtime/consumer_state.py``)."""
        return self._state.phase

    @property
    def resume_at_s(self) -> float | None:
        """While paused: the Unix time (of its clock) it consumes again; else ``None``."""
        return self._state.resume_at_s if self._state.paused else None

    @property
    def watching(self) -> bool:
        """Its watcher runs: it starts the consumer again when the broker takes it away."""
        return self._watch.watching

    async def start(self) -> None:
        """Open a channel and consume; then watch the channel and the consumer."""
        await self._watch.start()

    async def _pause(self, decision: Decision) -> None:
        """A handler paused the queue (``ConsumerWatch.pause``)."""
        await self._watch.pause(decision)

    async def stop_consuming(self) -> None:
        """basic.cancel: no new deliveries; in-flight ones go on."""
        await self._watch.stop_consuming()

    def abandon(self) -> None:
        """The connection is gone: stop watching (deliveries in flight went back)."""
        self._watch.abandon()

    async def wait_idle(self, timeout_s: float) -> bool:
        """Wait until no handler runs; ``False`` if ``timeout_s`` passed first."""
        try:
            await asyncio.wait_for(self._idle.wait(), timeout_s)
        except TimeoutError:
            return False
        settler = self._watch.settler
        if settler is not None:
            await settler.flush()
        return True

    async def close(self) -> None:
        await self._watch.close()

    # -- deliveries --------------------------------------------------------------------------

    async def _on_delivery(self, settler: ChannelSettler, delivery: Delivery) -> None:
        # First statement, before any await: tags enter the window in delivery order.
        settler.delivered(delivery.delivery_tag)
        state = self._state
        if not state.delivered(delivery.consumer_tag):
            give_back_stray(settler, delivery, self.policy.queue, self.stats)
            return
        self._idle.clear()
        try:
            if self._semaphore is None:
                await self._handle_one(settler, delivery)
            else:
                async with self._semaphore:
                    await self._handle_one(settler, delivery)
        except asyncio.CancelledError as error:
            if _cancelling():  # a real shutdown: back to the queue, as the service stops
                requeue_interrupted(settler, delivery, self.policy.queue, self.stats)
                raise
            await self._give_up(settler, delivery, error)
        except Exception as error:
            await self._give_up(settler, delivery, error)
        finally:
            if self._observer is not None:
                self._observer.ended(delivery)
            if state.handled():
                self._idle.set()

    async def _handle_traced(self, settler: ChannelSettler, delivery: Delivery) -> None:
        """:meth:`_handle` in the delivery's span (tracing on): current while the handler runs
        and while its decision is carried out; rr's own failure is recorded on it."""
        assert self._tracing is not None
        with self._tracing.delivery(self.policy, delivery) as span:
            try:
                await self._handle(settler, delivery, span)
            except asyncio.CancelledError as error:
                if not _cancelling():
                    span.crashed(error)
                raise
            except Exception as error:
                span.crashed(error)
                raise

    async def _give_up(
        self, settler: ChannelSettler, delivery: Delivery, error: BaseException
    ) -> None:
        await give_up(
            self._execution,
            settler,
            delivery,
            error,
            policy=self.policy,
            clock=self._clock,
            stats=self.stats,
        )

    async def _handle(
        self, settler: ChannelSettler, delivery: Delivery, span: DeliverySpan | None = None
    ) -> None:
        # The policy of the moment the handler starts: a reload of the topology file
        # (runtime/service.py) replaces self.policy for the next deliveries, and this one
        # finishes with the policy it started with.
        policy = self.policy
        if self._observer is not None:
            self._observer.started(policy.queue, delivery)
        if delivery.properties.undecodable:
            await set_aside(self._execution, settler, delivery, policy=policy, stats=self.stats)
            return
        message = Message(delivery, policy.queue, policy.retry_header)
        outcome = await self._run_handler(message)
        outputs = outputs_of(message)
        if outputs:
            outcome = await self._publish_outputs(delivery, outcome, outputs)
        if type(outcome) is Ack and self._listener is None:
            # The hot path: decide() would answer AckAction whatever the policy says.
            settler.ack(delivery.delivery_tag)
            if span is not None:
                span.acked()
            return
        headers = delivery.properties.headers
        if headers:
            warn_malformed(self.policy, delivery, headers)
        decision = decide(policy, headers, outcome, now=self._clock.now())
        if headers and "x-death" in headers:
            decision = poison.shield_broker(policy, headers, decision, now=self._clock.now())
        if self._listener is not None:
            self._listener(policy.queue, delivery, decision)
        if span is not None:
            span.decided(decision)
        if decision.event is not Event.ACKED:
            # Logged before its frames go out: the copy or the reject it logs may be handled
            # by the next queue's consumer (a dead-letter queue's handler) before the confirm
            # comes back, and its line must not come first (docs/reference/runtime.md, "Logs").
            log_decision(policy.queue, delivery, decision)
        if decision.event is Event.PAUSED:
            await self._pause(decision)
        await self._execution.execute(settler, delivery, decision)

    async def _publish_outputs(
        self, delivery: Delivery, outcome: AnyOutcome, outputs: tuple[Outgoing, ...]
    ) -> AnyOutcome:
        """A handler's outputs: published (each confirmed) when it acked, else dropped
        unsent; an output not confirmed turns the ack into a retry (``runtime/outputs.py``)."""
        if type(outcome) is not Ack:
            self.stats.outputs_discarded += len(outputs)
            return outcome
        failure = await self._execution.publish_outputs(delivery, outputs)
        if failure is not None:
            return Retry(failure=failure)
        if self._on_outputs is not None:
            self._on_outputs(self.policy.queue, delivery, outputs)
        return outcome

    async def _run_handler(self, message: Message) -> AnyOutcome:
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
        try:
            arguments = self._invocation.arguments(message)
        except DecodeFailure as failure:
            return self._undecodable(failure)
        handler = self.subscriber.handler
        token = handler_context.current.set(message)  # its facts read only when logging
        try:
            if self._handler_is_async:
                result: Any = await handler(*arguments)  # type: ignore[misc]
            else:
                loop = asyncio.get_running_loop()
                inside = contextvars.copy_context()  # the call's context, in its thread too
                result = await loop.run_in_executor(
                    self._executor, functools.partial(inside.run, handler, *arguments)
                )
        except asyncio.CancelledError as error:
            if _cancelling():
                raise  # a real shutdown of this delivery's task
            return Retry(failure=Failure.from_exception(error))
        except BaseException as error:
            # GeneratorExit, SystemExit, KeyboardInterrupt or any BaseException raised by a
            # handler is that handler's failure, not a reason to stop the service; the
            # subscriber's failure mapping says what it becomes (retry/failure_map.py).
            return self.subscriber.settings.failures.outcome_for(error)
        finally:
            handler_context.current.reset(token)
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

    def _undecodable(self, failure: DecodeFailure) -> AnyOutcome:
        """A body that does not decode into the handler's type: not retried (the next attempt
        would fail the same way); dead-lettered at once, or dropped (docs/reference/handlers.md,
        "Typed messages")."""
        self.stats.decode_failures += 1
        reason = Failure(type=DECODE_ERROR_TYPE, message=str(failure))
        if self.subscriber.settings.on_decode_error is OnDecodeError.DROP:
            return Drop(failure=reason)
        return DeadLetter(failure=reason)
