"""The measurements ``rr run`` shares with RustStream (docs/reference/metrics.md, "Metrics"), taken
once per delivery and per publish and handed to each recorder: the Prometheus page of
``--metrics-port`` (runtime/metrics.py) and an OpenTelemetry meter (telemetry/metrics.py).

Per delivery, when its handler is about to run: consumed +1, in flight +1, and its queue time
(now minus ``x-ruststream-published-at``) when it carries a well-formed stamp that is not in
the future. When its decision is carried out: in flight -1, its process duration, and its
decision as RustStream's ``outcome`` (telemetry/names.py). A delivery rr itself could not
handle (its properties undecodable, an error in rr's own code, a shutdown) has no decision:
its in-flight count and duration are recorded, no outcome. A handler that raises counts as a
panic; a body that does not decode into the handler's type as a decode failure. Per publish
(copies, delayed copies, outputs: ops/copies/publisher.py's ``on_sent``): sent, its duration
and its body size.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

from rabbitctl_retry.ops.clock import Clock
from rabbitctl_retry.retry.headers import published_at_ms
from rabbitctl_retry.retry.policy import Decision
from rabbitctl_retry.runtime.handlers import Subscriber
from rabbitctl_retry.runtime.invocation import DECODE_ERROR_TYPE
from rabbitctl_retry.telemetry.metrics import OtelMetrics, meter_provider_in_use
from rabbitctl_retry.telemetry.names import outcome_of
from rabbitctl_retry.transport.base import Delivery

EventListener = Callable[[str, Delivery, Decision], None]
"""runtime/consumer.py's decision listener."""


class MessagingRecorder(Protocol):
    """Where the measurements go (runtime/metrics.py's RunMetrics, telemetry/metrics.py's
    OtelMetrics). ``queue``/``destination``: ``messaging.destination.name``."""

    def consumed(self, queue: str, queue_time_s: float | None) -> None:
        """A delivery's handler starts (in flight +1); ``queue_time_s``: how long it waited,
        when its publish time is known."""

    def processed(self, queue: str, duration_s: float, outcome: str | None) -> None:
        """A delivery is done (in flight -1); ``outcome``: RustStream's word for its
        decision, ``None`` when rr could not handle it."""

    def decode_failed(self, queue: str) -> None: ...

    def panicked(self, queue: str) -> None: ...

    def sent(self, destination: str, duration_s: float, size_bytes: int, failed: bool) -> None:
        """One publish of rr's: a copy, a delayed copy or a handler's output."""


@dataclass(slots=True)
class _Open:
    queue: str
    started_s: float
    outcome: str | None = None


class DeliveryObserver:
    """Takes the measurements of one ``rr run`` and hands them to ``recorders``."""

    def __init__(
        self, recorders: Sequence[MessagingRecorder], *, now_ms: Callable[[], int]
    ) -> None:
        """``now_ms``: the Unix time in milliseconds (the service's clock), for queue times."""
        self._recorders = tuple(recorders)
        self._now_ms = now_ms
        self._open: dict[int, _Open] = {}
        """id(delivery) -> the delivery being handled (the object lives until it ends)."""

    def started(self, queue: str, delivery: Delivery) -> None:
        """``delivery``'s handling starts (the consumer, before its handler runs)."""
        self._open[id(delivery)] = _Open(queue, time.perf_counter())
        stamped_ms = published_at_ms(delivery.properties.headers)
        waited_s: float | None = None
        if stamped_ms is not None:
            waited_ms = self._now_ms() - stamped_ms
            waited_s = waited_ms / 1000 if waited_ms >= 0 else None
        for recorder in self._recorders:
            recorder.consumed(queue, waited_s)

    def decided(self, queue: str, delivery: Delivery, decision: Decision) -> None:
        """The decision listener: what is done with ``delivery``."""
        record = self._open.get(id(delivery))
        if record is not None:
            record.outcome = outcome_of(decision.event)
        failure = decision.failure
        if failure is not None and failure.type == DECODE_ERROR_TYPE:
            for recorder in self._recorders:
                recorder.decode_failed(queue)

    def ended(self, delivery: Delivery) -> None:
        """``delivery``'s decision is carried out, or its handling ended without one."""
        record = self._open.pop(id(delivery), None)
        if record is None:
            return
        duration_s = time.perf_counter() - record.started_s
        for recorder in self._recorders:
            recorder.processed(record.queue, duration_s, record.outcome)

    def sent(self, destination: str, duration_s: float, size_bytes: int, failed: bool) -> None:
        """ops/copies/publisher.py's ``on_sent``."""
        for recorder in self._recorders:
            recorder.sent(destination, duration_s, size_bytes, failed)

    def panicking(self, item: Subscriber) -> Subscriber:
        """``item`` with each exception its handler raises counted as a panic (a timeout's
        cancellation is not the handler's)."""
        handler: Any = item.handler
        recorders = self._recorders
        queue = item.queue

        def count(error: BaseException) -> None:
            if not isinstance(error, asyncio.CancelledError):
                for recorder in recorders:
                    recorder.panicked(queue)

        if item.is_async:

            @functools.wraps(handler)
            async def watched_async(*arguments: Any) -> Any:
                try:
                    return await handler(*arguments)
                except BaseException as error:
                    count(error)
                    raise

            return replace(item, handler=watched_async)

        @functools.wraps(handler)
        def watched_sync(*arguments: Any) -> Any:
            try:
                return handler(*arguments)
            except BaseException as error:
                count(error)
                raise

        return replace(item, handler=watched_sync)


def observer_of(
    recorders: Sequence[MessagingRecorder], meter_provider: object | None, clock: Clock
) -> DeliveryObserver | None:
    """The observer of a service: ``recorders``, and an OpenTelemetry meter when one is in
    use (telemetry/metrics.py); ``None`` when there is nowhere to record."""
    every = list(recorders)
    provider = meter_provider_in_use(meter_provider)
    if provider is not None:
        every.append(OtelMetrics(provider))
    if not every:
        return None
    return DeliveryObserver(every, now_ms=lambda: int(clock.now().timestamp() * 1000))


def listener_with(
    observer: DeliveryObserver | None, listener: EventListener | None
) -> EventListener | None:
    """The decision listener of a consumer: the observer's, then ``listener``."""
    if observer is None:
        return listener
    if listener is None:
        return observer.decided

    def both(queue: str, delivery: Delivery, decision: Decision) -> None:
        observer.decided(queue, delivery, decision)
        listener(queue, delivery, decision)

    return both
