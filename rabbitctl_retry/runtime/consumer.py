"""One queue's consumer: delivery -> handler -> outcome -> ``decide()`` -> frames.

The shell around the pure decision core. Per delivery it runs the handler (async handlers on
the loop, sync ones in worker threads), asks ``decide()`` what the outcome means for this
queue, and carries that out:

* ack — coalesced: acks are collected and sent as one ``basic.ack(multiple=true)`` for the
  settled prefix of the channel (see ``ackwindow.py``), once per turn of the event loop;
* reject — sent at once, on its own;
* a copy — published (mandatory, confirmed unless the queue is ``publish = "fast"``); the
  original is acked only after the broker confirmed the copy; a returned or refused copy
  leaves the original in its queue (``basic.reject(requeue=true)``) and logs an error;
* an in-memory delay — acked now, the copy published later by ``InMemoryDelays``.

If the channel or connection closes meanwhile, settling fails quietly: RabbitMQ has already
returned every unsettled delivery to its queue.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from concurrent.futures import Executor
from typing import Any, assert_never

from rabbitctl_retry.errors import PublishFailed, RrError, TransportError
from rabbitctl_retry.retry.outcome import Ack, AnyOutcome, Drop, Failure, Retry, RetryAfter
from rabbitctl_retry.retry.policy import (
    AckAction,
    Decision,
    Event,
    RejectAction,
    RepublishAction,
    RetryPolicy,
    ScheduleAction,
    decide,
)
from rabbitctl_retry.runtime.ackwindow import AckWindow
from rabbitctl_retry.runtime.clock import Clock
from rabbitctl_retry.runtime.copies import CopyPublisher, InMemoryDelays
from rabbitctl_retry.runtime.handlers import Subscriber
from rabbitctl_retry.runtime.message import Message
from rabbitctl_retry.topology.model import PublishMode
from rabbitctl_retry.transport.base import Channel, Delivery

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

EventListener = Callable[[str, Delivery, Decision], None]
"""Told each decision just before it is carried out: (queue, delivery, decision)."""


class QueueConsumer:
    """Consumes one queue on its own channel with one subscriber."""

    def __init__(
        self,
        *,
        subscriber: Subscriber,
        policy: RetryPolicy,
        channel: Channel,
        publisher: CopyPublisher,
        delays: InMemoryDelays,
        clock: Clock,
        prefetch: int,
        concurrency: int,
        executor: Executor | None,
        publish_mode: PublishMode = PublishMode.CONFIRM,
        listener: EventListener | None = None,
    ) -> None:
        self.subscriber = subscriber
        self.policy = policy
        self._channel = channel
        self._publisher = publisher
        self._delays = delays
        self._clock = clock
        self._prefetch = prefetch
        self._semaphore = asyncio.Semaphore(concurrency) if concurrency < prefetch else None
        self._executor = executor
        self._confirm = publish_mode is PublishMode.CONFIRM
        self._listener = listener
        self._window = AckWindow()
        self._flush_scheduled = False
        self._flush_task: asyncio.Future[None] | None = None
        self._in_flight = 0
        self._idle = asyncio.Event()
        self._idle.set()
        self._consumer_tag: str | None = None
        self._single_ack_threshold = max(1, prefetch // 2)
        self._handler_is_async = subscriber.is_async

    @property
    def in_flight(self) -> int:
        return self._in_flight

    async def start(self) -> None:
        await self._channel.qos(self._prefetch)
        self._consumer_tag = await self._channel.consume(self.policy.queue, self._on_delivery)

    async def stop_consuming(self) -> None:
        """basic.cancel: no new deliveries; in-flight ones go on."""
        if self._consumer_tag is not None and not self._channel.is_closed:
            with contextlib.suppress(TransportError):
                await self._channel.cancel(self._consumer_tag)
        self._consumer_tag = None

    async def wait_idle(self, timeout_s: float) -> bool:
        """Wait until no handler runs; ``False`` if ``timeout_s`` passed first."""
        try:
            await asyncio.wait_for(self._idle.wait(), timeout_s)
        except TimeoutError:
            return False
        await self._flush()
        return True

    async def close(self) -> None:
        await self._flush()
        await self._channel.close()
        self._window.forget()

    async def _on_delivery(self, delivery: Delivery) -> None:
        # First statement, before any await: tags enter the window in delivery order.
        self._window.delivered(delivery.delivery_tag)
        self._in_flight += 1
        self._idle.clear()
        try:
            if self._semaphore is None:
                await self._handle(delivery)
            else:
                async with self._semaphore:
                    await self._handle(delivery)
        finally:
            self._in_flight -= 1
            if self._in_flight == 0:
                self._idle.set()

    async def _handle(self, delivery: Delivery) -> None:
        outcome = await self._run_handler(delivery)
        if type(outcome) is Ack and self._listener is None:
            # The hot path: decide() would answer AckAction whatever the policy says.
            self._ack(delivery.delivery_tag)
            return
        decision = decide(self.policy, delivery.properties.headers, outcome, now=self._clock.now())
        if self._listener is not None:
            self._listener(self.policy.queue, delivery, decision)
        await self._execute(delivery, decision)
        if decision.event is not Event.ACKED:
            self._log(delivery, decision)

    async def _run_handler(self, delivery: Delivery) -> AnyOutcome:
        message = Message(delivery, self.policy.queue, self.policy.retry_header)
        handler = self.subscriber.handler
        try:
            if self._handler_is_async:
                result: Any = await handler(message)  # type: ignore[misc]
            else:
                loop = asyncio.get_running_loop()
                result = await loop.run_in_executor(self._executor, handler, message)
        except Exception as error:
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

    async def _execute(self, delivery: Delivery, decision: Decision) -> None:
        tag = delivery.delivery_tag
        action = decision.action
        match action:
            case AckAction():
                self._ack(tag)
            case RejectAction():
                await self._reject(tag, requeue=action.requeue)
            case RepublishAction():
                try:
                    await self._publisher.publish(action.copy, delivery, confirm=self._confirm)
                except PublishFailed as error:
                    log.error(
                        "copy not accepted; the original stays in its queue",
                        extra={"rr": self._fields(delivery, decision) | {"error": str(error)}},
                    )
                    await self._reject(tag, requeue=True)
                    return
                except TransportError:
                    return  # the connection is gone; the broker requeued the original
                self._ack(tag)
            case ScheduleAction():
                self._ack(tag)
                self._delays.schedule(action.copy, delivery, self.policy.queue, action.delay_ms)
            case _:
                assert_never(action)

    def _ack(self, tag: int) -> None:
        self._window.acked(tag)
        if not self._flush_scheduled:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self._schedule_flush)

    def _schedule_flush(self) -> None:
        self._flush_task = asyncio.ensure_future(self._flush())

    async def _flush(self) -> None:
        self._flush_scheduled = False
        channel = self._channel
        try:
            upto = self._window.take()
            if upto is not None:
                await channel.ack(upto, multiple=True)
            if self._window.pending_acks >= self._single_ack_threshold:
                for tag in self._window.take_singles():
                    await channel.ack(tag)
        except (TransportError, RrError):
            self._window.forget()

    async def _reject(self, tag: int, *, requeue: bool) -> None:
        self._window.rejected(tag)
        try:
            await self._channel.reject(tag, requeue=requeue)
        except TransportError:
            self._window.forget()

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
        if log.isEnabledFor(level):
            log.log(level, decision.event.value, extra={"rr": self._fields(delivery, decision)})
