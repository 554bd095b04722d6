"""rr run's metrics through an OpenTelemetry meter (docs/reference/metrics.md, "Metrics"): the
instruments of telemetry/names.py, recorded by :class:`OtelMetrics` under the meter
``rabbitctl_retry``.

They are on only when the ``otel`` extra (opentelemetry-api) is installed and a meter
provider is given (``Service(..., meter_provider=...)``) or the process set the global one
(``opentelemetry.metrics.set_meter_provider``); ``RR_OTEL=off`` turns them off whatever is set.
A service that does neither never imports opentelemetry (:func:`meter_provider_in_use` looks
for it in ``sys.modules`` only): it costs nothing.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import TYPE_CHECKING

from rabbitctl_retry.telemetry.names import (
    CONSUMED,
    DECODE_FAILURES,
    DESTINATION,
    DIRECTION,
    DIRECTION_PUBLISH,
    DURATION_BUCKETS_S,
    ERROR_OTHER,
    ERROR_TYPE,
    IN_FLIGHT,
    METER_NAME,
    OPERATION_DURATION,
    OUTCOME,
    PANICS,
    PAYLOAD_SIZE,
    PROCESS_DURATION,
    PROCESSED,
    QUEUE_TIME,
    SENT,
    SIZE_BUCKETS_BYTES,
    SYSTEM,
    SYSTEM_RABBITMQ,
    Instrument,
)

if TYPE_CHECKING:
    from opentelemetry.metrics import Counter, Histogram, Meter, MeterProvider, UpDownCounter

RR_OTEL = "RR_OTEL"
"""``RR_OTEL=off``: no OpenTelemetry, whatever provider is given or set."""


def otel_turned_off() -> bool:
    return os.environ.get(RR_OTEL, "").strip().lower() in {"off", "0", "false", "no"}


def meter_provider_in_use(given: object | None) -> MeterProvider | None:
    """The meter provider rr run records its metrics through: ``given``, else the global one
    when the process set it; ``None`` when neither, or ``RR_OTEL=off``."""
    if otel_turned_off():
        return None
    if given is not None:
        return given  # type: ignore[return-value]  # an opentelemetry MeterProvider
    if "opentelemetry.metrics" not in sys.modules:
        return None  # nobody set one (that needs the module): no import, no cost
    internal = importlib.import_module("opentelemetry.metrics._internal")
    found: MeterProvider | None = getattr(internal, "_METER_PROVIDER", None)
    return found


class OtelMetrics:
    """A ``MessagingRecorder`` (runtime/delivery_metrics.py) over an OpenTelemetry meter."""

    def __init__(self, provider: MeterProvider) -> None:
        meter = provider.get_meter(METER_NAME)
        self._consumed = _counter(meter, CONSUMED)
        self._duration = _histogram(meter, PROCESS_DURATION, DURATION_BUCKETS_S)
        self._processed = _counter(meter, PROCESSED)
        self._in_flight: UpDownCounter = meter.create_up_down_counter(
            IN_FLIGHT.otel, unit=IN_FLIGHT.unit, description=IN_FLIGHT.description
        )
        self._queue_time = _histogram(meter, QUEUE_TIME, DURATION_BUCKETS_S)
        self._decode_failures = _counter(meter, DECODE_FAILURES)
        self._panics = _counter(meter, PANICS)
        self._sent = _counter(meter, SENT)
        self._operation = _histogram(meter, OPERATION_DURATION, DURATION_BUCKETS_S)
        self._size = _histogram(meter, PAYLOAD_SIZE, SIZE_BUCKETS_BYTES)

    def consumed(self, queue: str, queue_time_s: float | None) -> None:
        attributes = _of(queue)
        self._consumed.add(1, attributes)
        self._in_flight.add(1, attributes)
        if queue_time_s is not None:
            self._queue_time.record(queue_time_s, attributes)

    def processed(self, queue: str, duration_s: float, outcome: str | None) -> None:
        attributes = _of(queue)
        self._in_flight.add(-1, attributes)
        self._duration.record(duration_s, attributes)
        if outcome is not None:
            self._processed.add(1, {**attributes, OUTCOME: outcome})

    def decode_failed(self, queue: str) -> None:
        self._decode_failures.add(1, _of(queue))

    def panicked(self, queue: str) -> None:
        self._panics.add(1, _of(queue))

    def sent(self, destination: str, duration_s: float, size_bytes: int, failed: bool) -> None:
        attributes = _of(destination)
        self._sent.add(1, {**attributes, ERROR_TYPE: ERROR_OTHER} if failed else attributes)
        self._operation.record(duration_s, attributes)
        self._size.record(size_bytes, {**attributes, DIRECTION: DIRECTION_PUBLISH})


def _of(destination: str) -> dict[str, str]:
    return {DESTINATION: destination, SYSTEM: SYSTEM_RABBITMQ}


def _counter(meter: Meter, instrument: Instrument) -> Counter:
    return meter.create_counter(
        instrument.otel, unit=instrument.unit, description=instrument.description
    )


def _histogram(meter: Meter, instrument: Instrument, bounds: tuple[float, ...]) -> Histogram:
    return meter.create_histogram(
        instrument.otel,
        unit=instrument.unit,
        description=instrument.description,
        explicit_bucket_boundaries_advisory=list(bounds),
    )
