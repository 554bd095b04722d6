"""The ``backend`` fixture of the runtime tests: each telemetry test runs on RabbitMQ (a fresh
vhost) and on the emulator; and ``spans``: an SDK tracer provider with an in-memory exporter,
handed to rr explicitly (never the process-wide provider)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.runtime.conftest import backend
from tests.topologies import REFUNDS_AND_PAYOUTS

__all__ = ["REFUNDS_AND_PAYOUTS", "Spans", "backend", "spans"]


@dataclass
class Spans:
    provider: TracerProvider
    exporter: InMemorySpanExporter

    def named(self, name: str) -> list[ReadableSpan]:
        """The finished spans called ``name``, in the order they ended."""
        return [span for span in self.exporter.get_finished_spans() if span.name == name]


@pytest.fixture
def spans() -> Iterator[Spans]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    try:
        yield Spans(provider, exporter)
    finally:
        provider.shutdown()
