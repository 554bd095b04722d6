"""``rr publish`` and ``rr dlq move`` with tracing on: each message a PRODUCER span whose
trace context it carries, with a publish stamp; a moved letter's span is a child of the
letter's own ``traceparent`` (docs/reference/runtime.md, "Tracing and metrics")."""

from __future__ import annotations

import pytest

from rabbitctl_retry.dlq.move import MovePlan
from rabbitctl_retry.ops.publish import checked_messages, command_line_record, publish_messages
from rabbitctl_retry.ops.transfer import TransferOptions, move_queue
from rabbitctl_retry.publisher import SyncPublisher
from rabbitctl_retry.retry.headers import published_at_ms
from rabbitctl_retry.telemetry.switch import tracing_for
from rabbitctl_retry.telemetry.trace_context import parse_traceparent
from rabbitctl_retry.transport.base import Properties
from tests.backends import Backend, RabbitBackend
from tests.dlq.support import declare, publish_all
from tests.observe import peek
from tests.telemetry.conftest import Spans

TRACE_ID = "0af7651916cd43dd8448eb211c80319c"
VALID = f"00-{TRACE_ID}-b7ad6b7169203331-01"


async def test_rr_publish_then_move(backend: Backend, spans: Spans) -> None:
    await declare(backend, "inbox", "elsewhere", "dead")
    tracing = tracing_for(spans.provider)
    messages = checked_messages(
        [("cli", command_line_record(b"hello", ["x-tenant=acme"], ["message_id=p-1"]))],
        count=1,
        user=None,
    )
    connection = await backend.connect()
    try:
        report = await publish_messages(
            connection, messages, exchange="", routing_key="inbox", tracing=tracing
        )
        assert report.confirmed == 1
        await publish_all(
            backend,
            "dead",
            [
                (b"a", Properties(message_id="traced", headers={"traceparent": VALID})),
                (b"b", Properties(message_id="untraced", headers={"x-tenant": "acme"})),
            ],
        )
        moved = await move_queue(
            connection, MovePlan(source="dead", to="elsewhere"), TransferOptions(tracing=tracing)
        )
    finally:
        await connection.close()
    (span,) = spans.named("inbox publish")
    (published,) = await peek(backend, "inbox")
    headers = published.properties.headers or {}
    assert headers["x-tenant"] == "acme"
    carried = parse_traceparent(headers["traceparent"])
    assert carried is not None
    assert carried.trace_id == format(span.context.trace_id, "032x")
    assert carried.parent_id == format(span.context.span_id, "016x")
    assert published_at_ms(headers) is not None

    assert moved.sent == 2
    traced, untraced = spans.named("elsewhere move")
    assert format(traced.context.trace_id, "032x") == TRACE_ID
    assert traced.parent is not None
    assert format(traced.parent.span_id, "016x") == VALID[36:52]
    assert untraced.parent is None  # a letter without a trace: a new root
    copies = await peek(backend, "elsewhere")
    assert [c.properties.message_id for c in copies] == ["traced", "untraced"]
    parents = [parse_traceparent((c.properties.headers or {})["traceparent"]) for c in copies]
    assert [p.parent_id if p else None for p in parents] == [
        format(traced.context.span_id, "016x"),
        format(untraced.context.span_id, "016x"),
    ]


async def test_the_sync_twin_publishes_in_the_callers_span(backend: Backend, spans: Spans) -> None:
    """``SyncPublisher`` publishes on a loop in a thread of its own: its PRODUCER span is
    still a child of the span current in the caller's thread."""
    if not isinstance(backend, RabbitBackend):
        pytest.skip("the sync twin runs its own event loop: the emulator lives on the test's")
    await declare(backend, "sync")
    tracer = spans.provider.get_tracer("web")
    with (
        SyncPublisher(backend.url, tracer_provider=spans.provider) as publisher,
        tracer.start_as_current_span("POST /refunds") as request,
    ):
        publisher.publish(b"x", to="sync", message_id="s-1")
    (span,) = spans.named("sync publish")
    assert span.parent is not None
    assert span.parent.span_id == request.get_span_context().span_id
    (held,) = await peek(backend, "sync")
    carried = parse_traceparent((held.properties.headers or {})["traceparent"])
    assert carried is not None
    assert carried.parent_id == format(span.context.span_id, "016x")
