"""dashboards/rr.json (docs/reference/metrics.md, "Metrics"): it loads into Grafana's dashboard
model (the grafana-foundation-sdk, whose Python models are generated from Grafana's schema: every
field of the file is one the schema knows, with the value it was given), and every metric a
panel queries is one ``rr run --metrics-port``'s page serves after handling messages, with
the labels the panel selects on; a decode failure and a panic counted on both exporters."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.cog.plugins import register_default_plugins
from grafana_foundation_sdk.models.dashboard import Dashboard
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from prometheus_client.parser import text_string_to_metric_families

from rabbitctl_retry.retry.headers import PUBLISHED_AT_HEADER
from rabbitctl_retry.runtime.handlers import Subscriber
from rabbitctl_retry.runtime.loader import HandlerSet
from rabbitctl_retry.runtime.metrics import RunMetrics
from rabbitctl_retry.runtime.service import RunOptions, Service
from rabbitctl_retry.telemetry import names
from rabbitctl_retry.topology.load import load_text
from rabbitctl_retry.transport.base import Properties
from tests.backends import Backend, publish
from tests.observe import depth
from tests.telemetry.readings import otel_reading, prometheus_reading

DASHBOARD = Path(__file__).parents[2] / "dashboards" / "rr.json"
METRIC = re.compile(r"\b((?:rr|messaging|ruststream)_[a-z0-9_]+)\{")
"""A metric a query reads: every one is written with a selector (at least its job)."""
SELECTOR = re.compile(r"\b((?:rr|messaging|ruststream)_[a-z0-9_]+)\{([^}]*)\}")
LABEL = re.compile(r"([a-z_]+)\s*(?:=~|!=|!~|=)")


def _dashboard() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    return loaded


def _changes(written: Any, read: Any, path: str = "") -> list[str]:
    """What of ``written`` did not come back as it was (a field the model does not know is
    dropped, a value of the wrong kind changed); defaults the model adds are not changes."""
    if isinstance(written, dict) and isinstance(read, dict):
        return [
            change
            for key, value in written.items()
            for change in (
                _changes(value, read[key], f"{path}/{key}")
                if key in read
                else [f"{path}/{key}: unknown to the schema"]
            )
        ]
    if isinstance(written, list) and isinstance(read, list) and len(written) == len(read):
        return [
            change
            for index, (one, other) in enumerate(zip(written, read, strict=True))
            for change in _changes(one, other, f"{path}[{index}]")
        ]
    return [] if written == read else [f"{path}: {written!r} read as {read!r}"]


def _exprs(dashboard: dict[str, Any]) -> list[str]:
    return [target["expr"] for panel in dashboard["panels"] for target in panel.get("targets", ())]


def test_the_dashboard_is_a_grafana_dashboard() -> None:
    register_default_plugins()  # the panels' options and the Prometheus queries' models
    written = _dashboard()
    model = Dashboard.from_json(written)
    read = json.loads(json.dumps(model, cls=JSONEncoder))
    assert _changes(written, read) == []
    panels = written["panels"]
    assert len({panel["id"] for panel in panels}) == len(panels)
    assert {panel["type"] for panel in panels} == {"row", "stat", "timeseries"}
    for panel in panels:
        place = panel["gridPos"]
        assert place["x"] + place["w"] <= 24, panel["title"]
        for target in panel.get("targets", ()):
            assert target["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
    variables = {item["name"] for item in written["templating"]["list"]}
    assert variables == {"datasource", "job", "queue", "destination"}


def test_the_dashboard_shows_every_shared_metric_and_some_of_rrs_own() -> None:
    used = {found for expr in _exprs(_dashboard()) for found in METRIC.findall(expr)}
    shared = {name for name in used if not name.startswith("rr_")}
    bases = {re.sub(r"_(total|bucket|sum|count)$", "", name) for name in shared}
    assert bases == {item.prometheus for item in names.INSTRUMENTS}
    assert {"rr_decisions_total", "rr_consuming"} <= used


TOPOLOGY = """
[queues.typed]
max_attempts = 2
dead_letter = "typed.dead"

[queues."typed.dead"]
"""


@dataclass
class Order:
    id: int


async def test_every_metric_a_panel_queries_is_on_the_page(backend: Backend) -> None:
    """The page after a decode failure (dead-lettered), an order whose handler raises twice
    (a panic each time: retried, then dead-lettered at the cap) and an ack with a queue time;
    the same numbers through the OpenTelemetry meter."""
    handled: list[int] = []

    async def typed(order: Order) -> None:
        handled.append(order.id)
        if order.id == 2:
            raise ValueError("no such order")

    reader = InMemoryMetricReader()
    metrics = RunMetrics()
    service = Service(
        HandlerSet(module="t", subscribers=(Subscriber("typed", typed, "t:typed"),)),
        topology=load_text(TOPOLOGY),
        connect=backend.connect,
        options=RunOptions(prefetch=10, shutdown_timeout_s=5),
        clock=backend.clock,
        listener=metrics.on_decision,
        meter_provider=MeterProvider(metric_readers=[reader]),
        recorders=(metrics,),
    )
    metrics.watch(service)
    now_ms = int(backend.clock.now().timestamp() * 1000)
    stamp = {PUBLISHED_AT_HEADER: str(now_ms)}  # a queue time for the good order
    async with service.running():
        for body, headers in ((b'{"id": "x"}', None), (b'{"id": 1}', stamp), (b'{"id": 2}', None)):
            properties = Properties(content_type="application/json", headers=headers)
            await publish(backend, "typed", body, properties)

        async def settled() -> bool:
            return await depth(backend, "typed.dead") == 2 and service.in_flight == 0

        await backend.until(settled, "the bad body and the failing order dead-lettered")
    assert handled == [1, 2, 2]
    reading = prometheus_reading(metrics.page())
    assert reading == otel_reading(reader.get_metrics_data())
    assert reading[("ruststream.messages.decode_failures", "typed", "")] == 1.0
    assert reading[("ruststream.messages.panics", "typed", "")] == 2.0
    assert reading[("ruststream.messages.processed", "typed", "ack")] == 1.0
    assert reading[("ruststream.messages.processed", "typed", "nack_requeue")] == 1.0
    assert reading[("ruststream.messages.processed", "typed", "nack_drop")] == 2.0
    assert reading[("messaging.client.sent.messages", "typed.dead", "")] == 2.0
    assert reading[("ruststream.message.queue_time.count", "typed", "")] == 1.0

    served: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(metrics.page().decode()):
        for sample in family.samples:
            served.setdefault(sample.name, set()).update(sample.labels)
    for expr in _exprs(_dashboard()):
        for name in METRIC.findall(expr):
            assert name in served, f"{name} (in {expr}) is not on the page"
        for name, selector in SELECTOR.findall(expr):
            wanted = set(LABEL.findall(selector)) - {"job"}  # job: Prometheus's, at scrape
            assert wanted <= served[name], f"{name}: {wanted - served[name]} not on the page"
