"""``rr run --metrics-port PORT``: the Prometheus metrics and the readiness of one ``rr run``
(docs/reference/metrics.md, "Metrics and health"); runtime/metrics_server.py serves them.

``GET /metrics`` is the Prometheus text format of the standard ``prometheus_client`` library:
deliveries and decisions by queue and outcome, handler latency, copies published, confirmed
and refused, dead letters, connections and consumer restarts, in-flight deliveries; and the
same measurements under the names RustStream's OpenTelemetry layer gives them in Prometheus
(``messaging_client_consumed_messages_total``, ``ruststream_messages_processed_total{outcome}``,
...: telemetry/names.py, runtime/delivery_metrics.py), beside rr's own ``rr_*`` names.
``GET /healthz`` answers 200 ``consuming`` while every consumer consumes, 503 otherwise:
``starting`` while rr loads the handlers and the topology (the server is the first thing
``rr run`` starts, so a probe gets an answer from the start, however slow the imports),
``not consuming`` while it connects, reconnects or stops. Label values (queue names) have
every character a terminal could act on escaped, as rr's logs do (``\u202e``, ``\x9b``).
"""

from __future__ import annotations

import functools
import inspect
import time
from collections.abc import Iterable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from rabbitctl_retry.errors import escape_unprintable
from rabbitctl_retry.telemetry import names

if TYPE_CHECKING:  # not imported at run time: the server starts before rr loads the runtime
    from rabbitctl_retry.retry.policy import Decision
    from rabbitctl_retry.runtime.handlers import Subscriber
    from rabbitctl_retry.runtime.loader import HandlerSet
    from rabbitctl_retry.runtime.service import Service
    from rabbitctl_retry.transport.base import Delivery


class RunMetrics:
    """The metrics of one ``rr run``, in a registry of their own."""

    def __init__(self) -> None:
        # no `_created` sample beside every series (issue #29)
        disable_created_metrics()  # type: ignore[no-untyped-call]
        self.registry = CollectorRegistry(auto_describe=True)
        self.decisions = Counter(
            "rr_decisions",
            "Deliveries handled, by queue and what rr did with them (acked, retried, delayed, "
            "dead-lettered, dropped, requeued, spent).",
            ["queue", "outcome"],
            registry=self.registry,
        )
        self.handler_seconds = Histogram(
            "rr_handler_seconds",
            "Time in the handler, by queue (an exception counts too).",
            ["queue"],
            registry=self.registry,
        )
        self._service: Service | None = None
        self.registry.register(_StatsCollector(self))
        self.messaging = _MessagingMetrics(self.registry)
        """The names shared with RustStream (docs/reference/metrics.md, "Metrics")."""

    def watch(self, service: Service) -> None:
        """Report ``service``'s counters and in-flight deliveries too."""
        self._service = service

    def on_decision(self, queue: str, delivery: Delivery, decision: Decision) -> None:
        """The runtime's decision listener."""
        self.decisions.labels(escape_unprintable(queue), decision.event.value).inc()

    # -- a MessagingRecorder (runtime/delivery_metrics.py) --------------------------------

    def consumed(self, queue: str, queue_time_s: float | None) -> None:
        self.messaging.consumed(queue, queue_time_s)

    def processed(self, queue: str, duration_s: float, outcome: str | None) -> None:
        self.messaging.processed(queue, duration_s, outcome)

    def decode_failed(self, queue: str) -> None:
        self.messaging.decode_failures.labels(*_of(queue)).inc()

    def panicked(self, queue: str) -> None:
        self.messaging.panics.labels(*_of(queue)).inc()

    def sent(self, destination: str, duration_s: float, size_bytes: int, failed: bool) -> None:
        self.messaging.sent(destination, duration_s, size_bytes, failed)

    def timed(self, handlers: HandlerSet) -> HandlerSet:
        """``handlers`` with each handler's time observed (sync and async alike)."""
        return replace(
            handlers, subscribers=tuple(self._timed(item) for item in handlers.subscribers)
        )

    def _timed(self, item: Subscriber) -> Subscriber:
        histogram = self.handler_seconds.labels(escape_unprintable(item.queue))
        handler: Any = item.handler
        if inspect.iscoroutinefunction(handler):

            @functools.wraps(handler)
            async def timed_async(*arguments: Any) -> Any:
                started = time.perf_counter()
                try:
                    return await handler(*arguments)
                finally:
                    histogram.observe(time.perf_counter() - started)

            return replace(item, handler=timed_async)

        @functools.wraps(handler)
        def timed_sync(*arguments: Any) -> Any:
            started = time.perf_counter()
            try:
                return handler(*arguments)
            finally:
                histogram.observe(time.perf_counter() - started)

        return replace(item, handler=timed_sync)

    def page(self) -> bytes:
        return generate_latest(self.registry)

    @property
    def service(self) -> Service | None:
        """The service watched (:meth:`watch`), if any."""
        return self._service

    @property
    def ready(self) -> bool:
        return self._service is not None and self._service.consuming

    def health(self) -> tuple[int, str]:
        """``/healthz``: (HTTP status, body)."""
        if self.ready:
            return 200, "consuming\n"
        return 503, "not consuming\n" if self._service is not None else "starting\n"


_LABELS = ("messaging_destination_name", "messaging_system")
"""``messaging.destination.name`` and ``messaging.system`` as Prometheus labels."""


def _of(destination: str) -> tuple[str, str]:
    return escape_unprintable(destination), names.SYSTEM_RABBITMQ


class _MessagingMetrics:
    """The instruments of telemetry/names.py as prometheus_client metrics (OpenTelemetry's
    Prometheus names; prometheus_client adds ``_total`` to the counters)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        def counter(item: names.Instrument, *extra: str) -> Counter:
            return Counter(item.prometheus, item.description, [*_LABELS, *extra], registry=registry)

        def histogram(item: names.Instrument, bounds: tuple[float, ...], *extra: str) -> Histogram:
            labels = [*_LABELS, *extra]
            return Histogram(
                item.prometheus, item.description, labels, registry=registry, buckets=bounds
            )

        self.consumed_total = counter(names.CONSUMED)
        self.duration = histogram(names.PROCESS_DURATION, names.DURATION_BUCKETS_S)
        self.processed_total = counter(names.PROCESSED, "outcome")
        self.in_flight = Gauge(
            names.IN_FLIGHT.prometheus, names.IN_FLIGHT.description, _LABELS, registry=registry
        )
        self.queue_time = histogram(names.QUEUE_TIME, names.DURATION_BUCKETS_S)
        self.decode_failures = counter(names.DECODE_FAILURES)
        self.panics = counter(names.PANICS)
        self.sent_total = counter(names.SENT, "error_type")
        self.operation = histogram(names.OPERATION_DURATION, names.DURATION_BUCKETS_S)
        self.size = histogram(names.PAYLOAD_SIZE, names.SIZE_BUCKETS_BYTES, "direction")

    def consumed(self, queue: str, queue_time_s: float | None) -> None:
        labels = _of(queue)
        self.consumed_total.labels(*labels).inc()
        self.in_flight.labels(*labels).inc()
        if queue_time_s is not None:
            self.queue_time.labels(*labels).observe(queue_time_s)

    def processed(self, queue: str, duration_s: float, outcome: str | None) -> None:
        labels = _of(queue)
        self.in_flight.labels(*labels).dec()
        self.duration.labels(*labels).observe(duration_s)
        if outcome is not None:
            self.processed_total.labels(*labels, outcome).inc()

    def sent(self, destination: str, duration_s: float, size_bytes: int, failed: bool) -> None:
        labels = _of(destination)
        # error_type "" (no label, to PromQL) on success, as OpenTelemetry leaves it out
        self.sent_total.labels(*labels, names.ERROR_OTHER if failed else "").inc()
        self.operation.labels(*labels).observe(duration_s)
        self.size.labels(*labels, names.DIRECTION_PUBLISH).observe(size_bytes)


OUTPUT_RESULTS = (
    ("confirmed", "outputs_confirmed"),
    ("failed", "outputs_failed"),
    ("discarded", "outputs_discarded"),
)
"""``rr_outputs_total``'s ``result`` label -> the counter of ``RuntimeStats`` it reads."""


class _StatsCollector:
    """The service's own counters (``RuntimeStats``), read at scrape time."""

    def __init__(self, metrics: RunMetrics) -> None:
        self._metrics = metrics

    def collect(self) -> Iterable[Any]:
        service = self._metrics.service
        stats = service.stats if service is not None else None
        counters = (
            ("rr_connections", "Connections made (1 + reconnects).", "connections"),
            ("rr_consumer_restarts", "Consumers started again.", "consumer_restarts"),
            ("rr_copies_published", "Copies (retries, dead letters) sent.", "copies_published"),
            ("rr_copies_confirmed", "Copies the broker confirmed.", "copies_confirmed"),
            ("rr_copies_refused", "Copies the broker returned or refused.", "copies_refused"),
            ("rr_blocked", "Times the broker blocked the connection.", "blocked"),
            (
                "rr_consumer_cancels",
                "Consumers the broker cancelled (queue deleted, node down, consumer timeout).",
                "consumer_cancels",
            ),
            (
                "rr_handler_timeouts",
                "Handler calls that did not return within their timeout.",
                "handler_timeouts",
            ),
            (
                "rr_decode_failures",
                "Deliveries whose body did not decode into the handler's type.",
                "decode_failures",
            ),
            (
                "rr_pauses",
                "Times a consumer paused its queue (a dependency down).",
                "pauses",
            ),
            (
                "rr_stray_deliveries",
                "Deliveries for a consumer the broker had cancelled, given back unhandled.",
                "stray_deliveries",
            ),
            (
                "rr_topology_reloads",
                "Reloads of the topology file that changed a retry setting.",
                "reloads",
            ),
            (
                "rr_topology_reload_failures",
                "Reloads of the topology file that did not load (the running settings stayed).",
                "reload_failures",
            ),
        )
        for name, text, field in counters:
            family = CounterMetricFamily(name, text)
            family.add_metric([], float(getattr(stats, field)) if stats is not None else 0.0)
            yield family
        outputs = CounterMetricFamily(
            "rr_outputs",
            "Handler outputs: confirmed, failed (the delivery retried) or discarded (no ack).",
            labels=["result"],
        )
        for result, field in OUTPUT_RESULTS:
            outputs.add_metric([result], float(getattr(stats, field)) if stats is not None else 0.0)
        yield outputs
        in_flight = GaugeMetricFamily("rr_in_flight", "Deliveries being handled or settled.")
        in_flight.add_metric([], float(service.in_flight) if service is not None else 0.0)
        yield in_flight
        paused = GaugeMetricFamily(
            "rr_paused",
            "Consumers of the queue paused now (a handler said a dependency is down).",
            labels=["queue"],
        )
        resumes = GaugeMetricFamily(
            "rr_pause_resumes_at_seconds",
            "While the queue is paused: the Unix time its consumer consumes again (else 0).",
            labels=["queue"],
        )
        for consumer in service.consumers if service is not None else ():
            queue = escape_unprintable(consumer.policy.queue)
            paused.add_metric(
                [queue],
                1.0 if consumer.phase.value == "paused" else 0.0,  # ConsumerPhase.PAUSED
            )
            resumes.add_metric([queue], consumer.resume_at_s or 0.0)
        yield paused
        yield resumes
        ready = GaugeMetricFamily("rr_consuming", "1 while every consumer consumes, else 0.")
        ready.add_metric([], 1.0 if self._metrics.ready else 0.0)
        yield ready


__all__ = ["RunMetrics"]
