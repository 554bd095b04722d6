"""One queue's consumer: delivery -> handler -> outcome -> ``decide()`` -> frames.

The shell around the pure decision core. Per delivery it runs the handler (async handlers on
the loop, sync ones in worker threads), asks ``decide()`` what the outcome means for this
queue, and carries that out. Every ack and reject of the consumer's channel goes through one
:class:`~rabbitctl_retry.ops.settler.ChannelSettler`, which writes them in an order the
broker accepts (acks coalesced into ``basic.ack(multiple=true)`` over the settled prefix).

which carries out each decision (``runtime/execution.py``): an ack or reject at once, a
copy published and confirmed before the original is acked (held while the broker refuses
it), an in-memory delay acked now and published later by ``InMemoryDelays``.

Anything else that fails in rr's own code for one delivery (an unexpected exception, a
cancellation that is not the task's own) is caught, logged with the message id, and the
delivery is settled by the rule of :mod:`rabbitctl_retry.retry.poison` (back to its queue
once; dead-lettered when it comes back), as is a delivery whose properties cannot be decoded:
it never holds back the settlement of the others (``runtime/give_up.py``).

The consumer watches its channel and its consumer: if the broker closes the channel (a
channel error) or cancels the consumer (its queue was deleted, or RabbitMQ 4.3's consumer
timeout), it logs why, re-declares what it needs (``recover``), opens a new channel (or, after
a cancel, cancels the old consumer itself and acks one by one from then on) and consumes
again, with backoff; a delivery for a consumer the broker cancelled is given back unhandled.
If the connection closes, the service reconnects; deliveries in flight went back to their
queues. What each of these events means (and the stop's) is decided by the consumer's pure
lifecycle (``runtime/consumer_state.py``); this class carries it out.

A handler that acks with outputs (``runtime/outputs.py``) has them published and confirmed
before its decision is carried out; one not confirmed makes the delivery a retry.

A handler that says a dependency is down (``Outcome.pause``, a ``pause_on`` mapping) pauses
the queue: rr cancels the consumer before the message goes back (``basic.nack``), and the
watcher consumes again once the pause is over, on the consumer's clock (docs/handlers.md,
"Pausing a queue").
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import logging
from collections.abc import Awaitable, Callable
from concurrent.futures import Executor
from typing import Any

from rabbitctl_retry.errors import RrError, TransportError
from rabbitctl_retry.ops.clock import Clock, first_of, sleep_unless
from rabbitctl_retry.ops.copies.publisher import CopyPublisher
from rabbitctl_retry.ops.settler import ChannelSettler
from rabbitctl_retry.retry import poison
from rabbitctl_retry.retry.outcome import (
    Ack,
    AnyOutcome,
    DeadLetter,
    Drop,
    Failure,
    Pause,
    Retry,
    RetryAfter,
)
from rabbitctl_retry.retry.policy import Decision, Event, RetryPolicy, decide
from rabbitctl_retry.runtime import handler_context
from rabbitctl_retry.runtime.consumer_state import ConsumerPhase, ConsumerState, Watch
from rabbitctl_retry.runtime.decision_log import log_decision, warn_malformed
from rabbitctl_retry.runtime.delays import InMemoryDelays
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

log = logging.getLogger("rr.runtime")

_OUTCOMES = (Ack, Retry, Drop, RetryAfter, DeadLetter, Pause)
_ACK = Ack()
EventListener = Callable[[str, Delivery, Decision], None]
"""Told each decision just before it is carried out: (queue, delivery, decision)."""
OutputListener = Callable[[str, Delivery, tuple[Outgoing, ...]], None]
"""Told a handler's outputs once the broker confirmed them all: (queue, delivery, outputs)."""

Recover = Callable[[], Awaitable[None]]
"""Re-declares (or checks) what a consumer needs before it consumes again."""

HANDLER_TIMEOUT_TYPE = "rr.HandlerTimeout"
"""``rr-error-type`` of a call that did not return within its timeout."""
__all__ = ["HOLD_MAX_S", "EventListener", "OutputListener", "QueueConsumer", "Recover"]


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
        invocation: Invocation | None = None,
        on_outputs: OutputListener | None = None,
    ) -> None:
        self.subscriber = subscriber
        self._invocation = invocation or invocation_for(subscriber.written, name=subscriber.name)
        """The arguments of each handler call (``runtime/invocation.py``)."""
        self.policy = policy
        self._connection = connection
        self._clock = clock
        self._prefetch = prefetch
        self._semaphore = asyncio.Semaphore(concurrency) if concurrency < prefetch else None
        self._executor = executor
        self._listener = listener
        self._on_outputs = on_outputs
        self._recover = recover
        self.stats = stats if stats is not None else RuntimeStats()
        self._state = ConsumerState()
        """Its lifecycle (``runtime/consumer_state.py``): what the events below mean."""
        self._channel: Channel | None = None
        self._settler: ChannelSettler | None = None
        self._cancelled = asyncio.Event()
        """Set while the state wants the watcher (the broker cancelled the consumer)."""
        self._stopping = asyncio.Event()
        """Set once the state is stopping."""
        self._paused = asyncio.Event()
        """Set while the state is paused (the watcher waits for the pause to end)."""
        self._watcher: asyncio.Future[None] | None = None
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
            stopping=self._stopping,
        )
        """Carries out its decisions (``runtime/execution.py``)."""
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
    def resume_at_s(self) -> float | None:
        """While paused: the Unix time (of its clock) it consumes again; else ``None``."""
        return self._state.resume_at_s if self._state.paused else None

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
        if state.paused:
            self._paused.set()
        else:
            self._paused.clear()
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
            await first_of(
                channel.wait_closed(),
                self._cancelled.wait(),
                self._stopping.wait(),
                self._paused.wait(),
            )
            watch = self._state.woke(
                channel_closed=channel.is_closed, connection_closed=self._connection.is_closed
            )
            self._observe()
            if watch is Watch.STOP:
                return
            if watch is Watch.PAUSE:
                await self._sit_out_the_pause()
                continue
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

    async def _sit_out_the_pause(self) -> None:
        """Wait until the pause is over (it may be extended meanwhile), then consume again."""
        state = self._state
        while state.paused and state.resume_at_s is not None:
            left_s = state.resume_at_s - self._clock.now().timestamp()
            if left_s <= 0:
                break
            await sleep_unless(self._clock, left_s, self._stopping)
        if self._connection.is_closed:
            return  # the service reconnects; the next loop of _watch stops
        channel = self._channel
        closed = channel is None or channel.is_closed
        watch = state.resumed(channel_closed=closed)
        self._observe()
        if watch is Watch.STOP:
            return
        if closed and self._settler is not None:
            self._settler.forget()  # what it held went back to the queue with it
        await self._restart(resuming=True)

    async def _pause(self, decision: Decision) -> None:
        """A handler paused the queue: cancel the consumer (before the message goes back, so
        it is not handed to this consumer again at once), or move the resume time."""
        delay_ms = decision.delay_ms or 0
        state = self._state
        if not state.pause(self._clock.now().timestamp() + delay_ms / 1000):
            self._observe()
            return
        self.stats.pauses += 1
        failure = decision.failure
        log.warning(
            "pausing the queue",
            extra={
                "rr": {
                    "queue": self.policy.queue,
                    "resume_in_s": delay_ms / 1000,
                    **(
                        {"error_type": failure.type, "error": failure.message}
                        if failure is not None
                        else {}
                    ),
                }
            },
        )
        tag = state.own_cancel()
        self._observe()
        current = self._channel
        if tag is not None and current is not None and not current.is_closed:
            with contextlib.suppress(TransportError):
                await current.cancel(tag)

    async def _restart(self, *, resuming: bool = False) -> None:
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
                said = "resuming the queue after its pause" if resuming else "consuming again"
                log.info(said, extra={"rr": {"queue": self.policy.queue}})
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
            give_back_stray(settler, delivery, self.policy.queue, self.stats)
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
                requeue_interrupted(settler, delivery, self.policy.queue, self.stats)
                raise
            await self._give_up(settler, delivery, error)
        except Exception as error:
            await self._give_up(settler, delivery, error)
        finally:
            if state.handled():
                self._idle.set()

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

    async def _handle(self, settler: ChannelSettler, delivery: Delivery) -> None:
        # The policy of the moment the handler starts: a reload of the topology file
        # (runtime/service.py) replaces self.policy for the next deliveries, and this one
        # finishes with the policy it started with.
        policy = self.policy
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
            return
        headers = delivery.properties.headers
        if headers:
            warn_malformed(self.policy, delivery, headers)
        decision = decide(policy, headers, outcome, now=self._clock.now())
        if headers and "x-death" in headers:
            decision = poison.shield_broker(policy, headers, decision, now=self._clock.now())
        if self._listener is not None:
            self._listener(policy.queue, delivery, decision)
        if decision.event is not Event.ACKED:
            # Logged before its frames go out: the copy or the reject it logs may be handled
            # by the next queue's consumer (a dead-letter queue's handler) before the confirm
            # comes back, and its line must not come first (docs/runtime.md, "Logs").
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
        would fail the same way); dead-lettered at once, or dropped (docs/runtime.md,
        "Typed messages")."""
        self.stats.decode_failures += 1
        reason = Failure(type=DECODE_ERROR_TYPE, message=str(failure))
        if self.subscriber.settings.on_decode_error is OnDecodeError.DROP:
            return Drop(failure=reason)
        return DeadLetter(failure=reason)
