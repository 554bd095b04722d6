"""``rr run --metrics-port PORT``: Prometheus metrics and a readiness probe over HTTP
(docs/runtime.md, "Metrics and health").

``GET /metrics`` is the Prometheus text format of the standard ``prometheus_client`` library:
deliveries and decisions by queue and outcome, handler latency, copies published, confirmed
and refused, dead letters, connections and consumer restarts, in-flight deliveries.
``GET /healthz`` answers 200 ``consuming`` while every consumer consumes, 503 otherwise:
``starting`` while rr loads the handlers and the topology (the server is the first thing
``rr run`` starts, so a probe gets an answer from the start, however slow the imports),
``not consuming`` while it connects, reconnects or stops. The server runs in daemon threads,
one per client connection, each of which gives up on a client that sends nothing for
:data:`CLIENT_TIMEOUT_S`: it never waits on the event loop, the event loop never waits on it,
and a client that connects and says nothing cannot make ``/healthz`` time out for the others.
Label values (queue names) have every character a terminal could act on escaped, as rr's
logs do (``\u202e``, ``\x9b``).
"""

from __future__ import annotations

import functools
import inspect
import socket
import socketserver
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Protocol
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Histogram,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from rabbitctl_retry.errors import escape_unprintable

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

    def watch(self, service: Service) -> None:
        """Report ``service``'s counters and in-flight deliveries too."""
        self._service = service

    def on_decision(self, queue: str, delivery: Delivery, decision: Decision) -> None:
        """The runtime's decision listener."""
        self.decisions.labels(escape_unprintable(queue), decision.event.value).inc()

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
            async def timed_async(msg: Any) -> Any:
                started = time.perf_counter()
                try:
                    return await handler(msg)
                finally:
                    histogram.observe(time.perf_counter() - started)

            return replace(item, handler=timed_async)

        @functools.wraps(handler)
        def timed_sync(msg: Any) -> Any:
            started = time.perf_counter()
            try:
                return handler(msg)
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
        in_flight = GaugeMetricFamily("rr_in_flight", "Deliveries being handled or settled.")
        in_flight.add_metric([], float(service.in_flight) if service is not None else 0.0)
        yield in_flight
        ready = GaugeMetricFamily("rr_consuming", "1 while every consumer consumes, else 0.")
        ready.add_metric([], 1.0 if self._metrics.ready else 0.0)
        yield ready


CLIENT_TIMEOUT_S = 5.0
"""A client connection that sends nothing for this long is closed."""


class _QuietHandler(WSGIRequestHandler):
    timeout = CLIENT_TIMEOUT_S

    def log_message(self, format: str, *args: Any) -> None:
        """Scrapes are not logged."""


class _ThreadingServer(socketserver.ThreadingMixIn, WSGIServer):
    daemon_threads = True
    block_on_close = False


class _ThreadingServer6(_ThreadingServer):
    address_family = socket.AF_INET6


class Probe(Protocol):
    """What :class:`MetricsServer` serves: one ``rr run``'s metrics (:class:`RunMetrics`), or
    those of a supervisor's workers added up (cli/workers.py)."""

    def page(self) -> bytes:
        """``/metrics``: the Prometheus text format."""
        ...

    def health(self) -> tuple[int, str]:
        """``/healthz``: (HTTP status, body)."""
        ...


class MetricsServer:
    """``/metrics`` and ``/healthz`` on ``host:port``, a daemon thread per client."""

    def __init__(self, metrics: Probe, port: int, host: str) -> None:
        self._metrics = metrics
        self._server: WSGIServer = make_server(
            host,
            port,
            self._app,
            server_class=_ThreadingServer6 if ":" in host else _ThreadingServer,
            handler_class=_QuietHandler,
        )
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="rr-metrics", daemon=True
        )

    @property
    def port(self) -> int:
        return int(self._server.server_port)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _app(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterator[bytes]:
        path = environ.get("PATH_INFO", "")
        if path == "/metrics":
            body = self._metrics.page()
            start_response("200 OK", [("Content-Type", CONTENT_TYPE_LATEST)])
        elif path == "/healthz":
            code, text = self._metrics.health()
            body = text.encode()
            status = "200 OK" if code == 200 else "503 Service Unavailable"
            start_response(status, [("Content-Type", "text/plain; charset=utf-8")])
        else:
            body = b"rr run: /metrics and /healthz\n"
            start_response("404 Not Found", [("Content-Type", "text/plain; charset=utf-8")])
        yield body


__all__ = ["MetricsServer", "Probe", "RunMetrics"]
