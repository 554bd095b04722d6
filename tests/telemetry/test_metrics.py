"""The metrics shared with RustStream (docs/reference/metrics.md, "Metrics") counted through the
real consumer runtime, on the emulator and on each RabbitMQ server: the same exact numbers on the
Prometheus page (RunMetrics) and through an OpenTelemetry meter (the SDK's in-memory reader,
with a provider given to the service, never the process's global one)."""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from rabbitctl_retry import Message, Outcome
from rabbitctl_retry.errors import PublishReturned
from rabbitctl_retry.retry.headers import PUBLISHED_AT_HEADER, published_at_ms
from rabbitctl_retry.retry.outcome import AnyOutcome
from rabbitctl_retry.runtime.handlers import Subscriber
from rabbitctl_retry.runtime.loader import HandlerSet
from rabbitctl_retry.runtime.metrics import RunMetrics
from rabbitctl_retry.runtime.service import RunOptions, Service
from rabbitctl_retry.topology.load import load_text
from rabbitctl_retry.transport.base import Properties
from tests.backends import Backend, publish
from tests.dlq.support import declare
from tests.observe import depth
from tests.publish.test_publisher import publisher_of
from tests.telemetry.readings import otel_reading, prometheus_reading

TOPOLOGY = """
[queues.orders]
max_attempts = 3
dead_letter = "orders.dead"
delay = "memory"

[queues."orders.dead"]
"""

Q = "orders"
DEAD = "orders.dead"
HOUR_MS = 3_600_000


class Handler:
    """ok-*: acked; retry: raises on its first attempt (a panic, retried), then acked; delay:
    retry_after on its first, then acked; dead: dead-lettered. Records each delivery's
    publish stamp and when it started."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self.seen: list[tuple[bytes, int]] = []
        self.waits_ms: list[int] = []
        """now - stamp of each delivery with a well-formed stamp not in the future."""

    async def handle(self, msg: Message) -> AnyOutcome | None:
        self.seen.append((msg.body, msg.attempt))
        stamp_ms = published_at_ms(msg.headers)
        now_ms = int(self.backend.clock.now().timestamp() * 1000)
        if stamp_ms is not None and now_ms >= stamp_ms:
            self.waits_ms.append(now_ms - stamp_ms)
        if msg.body == b"retry" and msg.attempt == 1:
            raise RuntimeError("the payment service said no")
        if msg.body == b"delay" and msg.attempt == 1:
            return Outcome.retry_after(0.05)
        if msg.body == b"dead":
            return Outcome.dead_letter("not ours")
        return None


def stamped(stamp: str | int) -> Properties:
    return Properties(headers={PUBLISHED_AT_HEADER: stamp})


async def test_five_messages_counted_alike_on_both_exporters(backend: Backend) -> None:
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    metrics = RunMetrics()
    handler = Handler(backend)
    service = Service(
        HandlerSet(module="test", subscribers=(Subscriber(Q, handler.handle, "test:orders"),)),
        topology=load_text(TOPOLOGY),
        connect=backend.connect,
        options=RunOptions(prefetch=10, shutdown_timeout_s=5),
        clock=backend.clock,
        listener=metrics.on_decision,
        meter_provider=provider,
        recorders=(metrics,),
    )
    metrics.watch(service)
    now_ms = int(backend.clock.now().timestamp() * 1000)
    async with service.running():
        await publish(backend, Q, b"ok-1", stamped(str(now_ms)))
        await publish(backend, Q, b"ok-2", stamped("not a time"))
        await publish(backend, Q, b"retry", stamped(now_ms))
        await publish(backend, Q, b"delay")
        await publish(backend, Q, b"dead", stamped(str(now_ms + HOUR_MS)))
        await backend.until(lambda: len(handler.seen) >= 6, "six deliveries")
        await backend.elapse(0.2)  # the delayed copy's time (virtual on the emulator)
        await backend.until(lambda: len(handler.seen) >= 7, "the delayed copy's delivery")
        await backend.until(lambda: service.in_flight == 0, "every delivery settled")
        await backend.until(lambda: _settled(metrics) == 7, "seven outcomes counted")
        assert await depth(backend, DEAD) == 1
        assert await depth(backend, Q) == 0
    assert sorted(handler.seen) == [
        (b"dead", 1),
        (b"delay", 1),
        (b"delay", 2),
        (b"ok-1", 1),
        (b"ok-2", 1),
        (b"retry", 1),
        (b"retry", 2),
    ]
    # ok-1 and retry's two deliveries carry a good stamp (the retry copy keeps the header, or
    # gets a new one when rr stamps what it publishes, and so may the delayed copy); ok-2's is
    # malformed, dead's in the future: each delivery with a good stamp counts its wait, once
    waited = len(handler.waits_ms)
    assert waited in (3, 4)
    expected = {
        ("messaging.client.consumed.messages", Q, ""): 7.0,
        ("ruststream.messages.in_flight", Q, ""): 0.0,
        ("messaging.process.duration.count", Q, ""): 7.0,
        ("ruststream.messages.processed", Q, "ack"): 4.0,
        ("ruststream.messages.processed", Q, "nack_requeue"): 1.0,
        ("ruststream.messages.processed", Q, "retry_after"): 1.0,
        ("ruststream.messages.processed", Q, "nack_drop"): 1.0,
        ("ruststream.message.queue_time.count", Q, ""): float(waited),
        ("ruststream.messages.panics", Q, ""): 1.0,
        ("messaging.client.sent.messages", Q, ""): 2.0,
        ("messaging.client.sent.messages", DEAD, ""): 1.0,
        ("messaging.client.operation.duration.count", Q, ""): 2.0,
        ("messaging.client.operation.duration.count", DEAD, ""): 1.0,
        ("ruststream.message.payload.size.count", Q, ""): 2.0,
        ("ruststream.message.payload.size.count", DEAD, ""): 1.0,
    }
    assert prometheus_reading(metrics.page()) == expected
    assert otel_reading(reader.get_metrics_data()) == expected
    assert _rr_decisions(metrics) == {
        "acked": 4.0,
        "retried": 1.0,
        "delayed": 1.0,
        "dead-lettered": 1.0,
    }


def _settled(metrics: RunMetrics) -> float:
    return sum(
        value
        for (name, _, _), value in prometheus_reading(metrics.page()).items()
        if name == "ruststream.messages.processed"
    )


def _rr_decisions(metrics: RunMetrics) -> dict[str, float]:
    """rr's own ``rr_decisions_total``, kept as it is."""
    from prometheus_client.parser import text_string_to_metric_families

    found: dict[str, Any] = {}
    for family in text_string_to_metric_families(metrics.page().decode()):
        for sample in family.samples:
            if sample.name == "rr_decisions_total":
                found[sample.labels["outcome"]] = sample.value
    return found


async def test_rr_publisher_counts_what_it_publishes(backend: Backend) -> None:
    """rr.Publisher with a meter provider: each publish sent, its duration and size; one no
    queue took counts as failed (``error.type=_OTHER``)."""
    await declare(backend, "refunds")
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    async with publisher_of(backend, meter_provider=provider) as pub:
        await pub.publish(b"12345", to="refunds")
        await pub.publish(b"678", to="refunds")
        with pytest.raises(PublishReturned):
            await pub.publish(b"lost", to="nowhere")
    assert otel_reading(reader.get_metrics_data()) == {
        ("messaging.client.sent.messages", "refunds", ""): 2.0,
        ("messaging.client.sent.messages", "nowhere", "_OTHER"): 1.0,
        ("messaging.client.operation.duration.count", "refunds", ""): 2.0,
        ("messaging.client.operation.duration.count", "nowhere", ""): 1.0,
        ("ruststream.message.payload.size.count", "refunds", ""): 2.0,
        ("ruststream.message.payload.size.count", "nowhere", ""): 1.0,
    }


async def test_a_refused_copy_counts_as_a_failed_publish(backend: Backend) -> None:
    """A dead-letter copy to a queue deleted under rr run: the broker returns it,
    ``error.type=_OTHER`` on both exporters; the original goes back and is acked when it
    comes again."""
    reader = InMemoryMetricReader()
    metrics = RunMetrics()
    redelivered: list[bool] = []

    async def handle(msg: Message) -> AnyOutcome | None:
        redelivered.append(msg.redelivered)
        return None if msg.redelivered else Outcome.dead_letter("to a missing queue")

    service = Service(
        HandlerSet(module="test", subscribers=(Subscriber(Q, handle, "test:orders"),)),
        topology=load_text(TOPOLOGY),
        connect=backend.connect,
        options=RunOptions(prefetch=10, shutdown_timeout_s=5, copy_hold_max_s=0),
        clock=backend.clock,
        meter_provider=MeterProvider(metric_readers=[reader]),
        recorders=(metrics,),
    )
    async with service.running():
        channel = await backend.channel()
        await channel.queue_delete(DEAD)
        await publish(backend, Q, b"letter")

        async def acked() -> bool:
            return len(redelivered) == 2 and service.in_flight == 0 and await depth(backend, Q) == 0

        await backend.until(acked, "the original back and acked")
    assert redelivered == [False, True]
    expected = {
        ("messaging.client.consumed.messages", Q, ""): 2.0,
        ("ruststream.messages.in_flight", Q, ""): 0.0,
        ("messaging.process.duration.count", Q, ""): 2.0,
        ("ruststream.messages.processed", Q, "nack_drop"): 1.0,
        ("ruststream.messages.processed", Q, "ack"): 1.0,
        ("messaging.client.sent.messages", DEAD, "_OTHER"): 1.0,
        ("messaging.client.operation.duration.count", DEAD, ""): 1.0,
        ("ruststream.message.payload.size.count", DEAD, ""): 1.0,
    }
    assert prometheus_reading(metrics.page()) == expected
    assert otel_reading(reader.get_metrics_data()) == expected
