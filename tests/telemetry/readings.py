"""The metrics of docs/reference/metrics.md, "Metrics", read back the same way from both exporters:
the Prometheus page of ``rr run --metrics-port`` (RunMetrics) and an OpenTelemetry SDK's
in-memory reader, as one table of (what, destination, detail) -> number."""

from __future__ import annotations

from collections import Counter
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from rabbitctl_retry.telemetry import names

Reading = dict[tuple[str, str, str], float]
"""(instrument's OpenTelemetry name + a suffix, destination, outcome or error) -> value."""

_BY_PROMETHEUS = {item.prometheus: item for item in names.INSTRUMENTS}
_COUNTERS = {
    names.CONSUMED,
    names.PROCESSED,
    names.DECODE_FAILURES,
    names.PANICS,
    names.SENT,
}


def _detail(labels: dict[str, str]) -> str:
    return labels.get("outcome") or labels.get("error_type") or labels.get("error.type") or ""


def prometheus_reading(page: bytes | str) -> Reading:
    """The shared-name samples of a Prometheus page: counters' totals, histograms' counts,
    the in-flight gauge; every sample of them carries ``messaging_system="rabbitmq"``."""
    text = page.decode() if isinstance(page, bytes) else page
    found: Reading = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            base = sample.name.removesuffix("_total").removesuffix("_count")
            item = _BY_PROMETHEUS.get(base)
            if item is None or sample.name.endswith(("_sum", "_bucket", "_created")):
                continue
            if item in _COUNTERS and not sample.name.endswith("_total"):
                continue
            assert sample.labels["messaging_system"] == "rabbitmq", sample
            suffix = "" if item in _COUNTERS or item is names.IN_FLIGHT else ".count"
            key = (item.otel + suffix, sample.labels["messaging_destination_name"])
            found[(*key, _detail(sample.labels))] = sample.value
    return found


def otel_reading(data: Any) -> Reading:
    """The same from an in-memory reader's ``get_metrics_data()`` (meter ``rabbitctl_retry``)."""
    found: Reading = {}
    units: Counter[str] = Counter()
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            assert scope.scope.name == names.METER_NAME
            for metric in scope.metrics:
                item = next(i for i in names.INSTRUMENTS if i.otel == metric.name)
                assert metric.unit == item.unit, metric.name
                units[metric.name] += 1
                for point in metric.data.data_points:
                    attributes = dict(point.attributes)
                    assert attributes["messaging.system"] == "rabbitmq", metric.name
                    if hasattr(point, "bucket_counts"):
                        key = (item.otel + ".count", attributes["messaging.destination.name"])
                        found[(*key, _detail(attributes))] = float(point.count)
                    else:
                        key = (item.otel, attributes["messaging.destination.name"])
                        found[(*key, _detail(attributes))] = float(point.value)
    return found


def without_zeros(reading: Reading) -> Reading:
    """``reading`` less its zero values (a gauge back at 0, a counter never raised)."""
    return {key: value for key, value in reading.items() if value}
