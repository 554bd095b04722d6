"""One message's trace across its retries (docs/reference/runtime.md, "Tracing and metrics"), on the
emulator and on each RabbitMQ server, with an SDK tracer provider handed to rr explicitly.

Published by ``rr.Publisher`` (a PRODUCER span), failed three times on a classic queue with
``max_attempts = 3``: three CONSUMER spans in one trace, each attempt the child of the one
before (the retry copy carries its span's ``traceparent``), the third with the
``rr.dead_lettered`` event; then ``rr dlq replay``: the replayed copy's ``traceparent`` is a
child of the replay's span, itself a child of attempt 3. On a quorum queue the retries are the
server's requeues: the message is the same, so each attempt is a child of the producer.
"""

from __future__ import annotations

from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind, StatusCode

from rabbitctl_retry import Message, Publisher
from rabbitctl_retry.dlq.replay import ReplayPlan
from rabbitctl_retry.ops.transfer import TransferOptions, new_run_id, replay_queue
from rabbitctl_retry.retry.headers import PUBLISHED_AT_HEADER, published_at_ms
from rabbitctl_retry.runtime.handlers import Subscriber
from rabbitctl_retry.runtime.loader import HandlerSet
from rabbitctl_retry.runtime.service import RunOptions, Service
from rabbitctl_retry.telemetry.switch import tracing_for
from rabbitctl_retry.telemetry.trace_context import parse_traceparent
from rabbitctl_retry.topology.load import load_text
from tests.backends import Backend
from tests.observe import depth, peek
from tests.telemetry.conftest import REFUNDS_AND_PAYOUTS, Spans


class Declined(Exception):
    pass


DECLINED = f"{__name__}.Declined"
"""``rr-error-type`` of the handler's exception (docs/reference/handlers.md)."""


def failing(seen: list[Message]) -> Any:
    async def handler(msg: Message) -> None:
        seen.append(msg)
        raise Declined(f"card declined ({msg.attempt})")

    return handler


def service(backend: Backend, queue: str, handler: Any, spans: Spans) -> Service:
    return Service(
        HandlerSet(module="test", subscribers=(Subscriber(queue, handler, f"test:{queue}"),)),
        topology=load_text(REFUNDS_AND_PAYOUTS),
        connect=backend.connect,
        options=RunOptions(prefetch=10, shutdown_timeout_s=5),
        clock=backend.clock,
        tracer_provider=spans.provider,
    )


def hex_id(value: int, digits: int) -> str:
    return format(value, f"0{digits}x")


def parent_id(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


async def publish_traced(backend: Backend, queue: str, spans: Spans) -> ReadableSpan:
    """Publish one message with ``rr.Publisher`` (tracing on); its PRODUCER span."""
    async with Publisher(connect=backend.connect, tracer_provider=spans.provider) as publisher:
        await publisher.publish({"refund": 1}, to=queue, message_id="m-1")
    (producer,) = spans.named(f"{queue} publish")
    return producer


async def test_three_attempts_one_trace_then_the_replay_links_to_the_failure(
    backend: Backend, spans: Spans
) -> None:
    seen: list[Message] = []
    async with service(backend, "refunds", failing(seen), spans).running():
        producer = await publish_traced(backend, "refunds", spans)
        await backend.until(lambda: len(spans.named("refunds process")) == 3, "three spans")
        await backend.until(lambda: len(seen) == 3, "three deliveries")
    assert await depth(backend, "refunds.dead") == 1
    assert producer.kind is SpanKind.PRODUCER
    attempts = sorted(spans.named("refunds process"), key=lambda s: s.attributes["rr.attempt"])
    trace_id = producer.context.trace_id
    assert [span.context.trace_id for span in attempts] == [trace_id] * 3
    assert [parent_id(span) for span in attempts] == [
        producer.context.span_id,
        attempts[0].context.span_id,
        attempts[1].context.span_id,
    ]
    assert [span.attributes["rr.attempt"] for span in attempts] == [1, 2, 3]
    assert [span.attributes["rr.retry_count"] for span in attempts] == [0, 1, 2]
    assert [span.attributes["rr.outcome"] for span in attempts] == [
        "retried",
        "retried",
        "dead-lettered",
    ]
    assert [span.attributes["rr.settle"] for span in attempts] == ["copy+ack"] * 3
    for span in attempts:
        assert span.kind is SpanKind.CONSUMER
        assert span.attributes["messaging.system"] == "rabbitmq"
        assert span.attributes["messaging.destination.name"] == "refunds"
        assert span.attributes["messaging.operation.type"] == "process"
        assert span.attributes["messaging.message.id"] == "m-1"
        assert span.attributes["messaging.message.body.size"] == len(b'{"refund": 1}')
        assert isinstance(span.attributes["messaging.rabbitmq.message.delivery_tag"], int)
        assert span.status.status_code is StatusCode.ERROR
        assert span.attributes["error.type"] == DECLINED
    assert [[event.name for event in span.events] for span in attempts] == [
        [],
        [],
        ["rr.dead_lettered"],
    ]
    event = attempts[2].events[0]
    assert dict(event.attributes or {}) == {
        "rr.dead_letter.target": "refunds.dead",
        "rr.dead_letter.by": "rr",
        "rr.dead_letter.reason": DECLINED,
    }
    # what each delivery carried: the traceparent of the span before it, a publish stamp
    carried = [parse_traceparent(msg.headers.get("traceparent")) for msg in seen]
    assert [tp.parent_id if tp else None for tp in carried] == [
        hex_id(producer.context.span_id, 16),
        hex_id(attempts[0].context.span_id, 16),
        hex_id(attempts[1].context.span_id, 16),
    ]
    assert all(published_at_ms(msg.headers) is not None for msg in seen)

    (letter,) = await peek(backend, "refunds.dead")
    headers = letter.properties.headers or {}
    dead_parent = parse_traceparent(headers["traceparent"])
    assert dead_parent is not None
    assert dead_parent.trace_id == hex_id(trace_id, 32)
    assert dead_parent.parent_id == hex_id(attempts[2].context.span_id, 16)
    assert isinstance(headers[PUBLISHED_AT_HEADER], str | bytes)

    connection = await backend.connect()
    try:
        report = await replay_queue(
            connection,
            ReplayPlan(source="refunds.dead", run_id=new_run_id()),
            TransferOptions(tracing=tracing_for(spans.provider)),
        )
    finally:
        await connection.close()
    assert report.sent == 1
    (replay,) = spans.named("refunds replay")
    assert replay.kind is SpanKind.PRODUCER
    assert replay.context.trace_id == trace_id
    assert parent_id(replay) == attempts[2].context.span_id
    (copy,) = await peek(backend, "refunds")
    replayed = parse_traceparent((copy.properties.headers or {})["traceparent"])
    assert replayed is not None
    assert replayed.trace_id == hex_id(trace_id, 32)
    assert replayed.parent_id == hex_id(replay.context.span_id, 16)
    assert await depth(backend, "refunds.dead") == 0


async def test_quorum_retries_are_requeues_in_one_trace(backend: Backend, spans: Spans) -> None:
    seen: list[Message] = []
    async with service(backend, "payouts", failing(seen), spans).running():
        producer = await publish_traced(backend, "payouts", spans)
        await backend.until(lambda: len(spans.named("payouts process")) == 3, "three spans")
        await backend.until(lambda: len(seen) == 3, "three deliveries")
        await backend.until(
            lambda: _depth_is(backend, "payouts.dead", 1), "the server's dead letter"
        )
    attempts = sorted(spans.named("payouts process"), key=lambda s: s.attributes["rr.attempt"])
    assert [span.attributes["rr.attempt"] for span in attempts] == [1, 2, 3]
    assert [span.context.trace_id for span in attempts] == [producer.context.trace_id] * 3
    # the server requeues the same message: each attempt is a child of the producer
    assert [parent_id(span) for span in attempts] == [producer.context.span_id] * 3
    assert [span.attributes["rr.settle"] for span in attempts] == ["basic.reject"] * 3
    assert [span.attributes["rr.outcome"] for span in attempts] == [
        "retried",
        "retried",
        "dead-lettered",
    ]
    assert [[event.name for event in span.events] for span in attempts] == [
        [],
        [],
        ["rr.dead_lettered"],
    ]
    assert dict(attempts[2].events[0].attributes or {}) == {
        "rr.dead_letter.target": "payouts.dead",
        "rr.dead_letter.by": "server",
        "rr.dead_letter.reason": "delivery_limit",
    }
    assert await depth(backend, "payouts") == 0


async def _depth_is(backend: Backend, queue: str, count: int) -> bool:
    return await depth(backend, queue) == count
