"""Tracing off by default (the API installed, nothing configured): rr imports no
OpenTelemetry and its copies are byte for byte what they were; ``RR_OTEL=off`` wins over a
provider; a malformed ``traceparent`` is a new root, never an error; handler outputs and
in-memory delayed copies carry the span of the attempt that made them (docs/reference/runtime.md,
"Tracing and metrics")."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from rabbitctl_retry import Message, Outcome, Outputs, subscriber
from rabbitctl_retry.field_codec import encode_fields
from rabbitctl_retry.fields import EncodedTable, FieldValue
from rabbitctl_retry.retry.headers import published_at_ms
from rabbitctl_retry.telemetry.switch import tracing_for
from rabbitctl_retry.telemetry.trace_context import parse_traceparent
from rabbitctl_retry.testing import TestBroker
from tests.telemetry.conftest import Spans

H = "x-ruststream-retry-count"
TOPOLOGY = """
[queues.work]
max_attempts = 3
dead_letter = "work.dead"

[queues.later]
max_attempts = 3
delay = "memory"

[queues.receipts]
"""
VALID = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def test_importing_rr_imports_no_opentelemetry() -> None:
    code = (
        "import sys, rabbitctl_retry, rabbitctl_retry.runtime.service, rabbitctl_retry.publisher,"
        " rabbitctl_retry.testing, rabbitctl_retry.ops.transfer, rabbitctl_retry.cli.dlq.render\n"
        "from rabbitctl_retry.telemetry.switch import tracing_for\n"
        "assert tracing_for() is None\n"
        "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.strip() == "[]"


def test_the_api_installed_but_not_configured_is_off() -> None:
    import opentelemetry.trace  # the API's default provider: a proxy, no spans

    assert opentelemetry.trace.get_tracer_provider() is not None
    assert tracing_for() is None


def test_rr_otel_off_wins_over_a_provider(spans: Spans, monkeypatch: pytest.MonkeyPatch) -> None:
    assert tracing_for(spans.provider) is not None
    monkeypatch.setenv("RR_OTEL", "off")
    assert tracing_for(spans.provider) is None


async def test_off_a_retry_copy_is_byte_for_byte_todays() -> None:
    seen: list[dict[str, FieldValue]] = []

    @subscriber("work")
    def handle(msg: Message, out: Outputs) -> Outcome | None:
        seen.append(dict(msg.headers))
        if msg.attempt == 1:
            return Outcome.retry()
        out.publish({"ok": True}, to="receipts", message_id="r-1")
        return None

    async with TestBroker(TOPOLOGY) as broker:
        await broker.run(handle)
        await broker.publish("work", {"n": 1}, message_id="m-1", headers={"x-tenant": "acme"})
    assert seen == [{"x-tenant": "acme"}, {"x-tenant": "acme", H: "1"}]
    (receipt,) = broker.messages("receipts")
    assert receipt.properties.headers is None


async def test_off_the_copy_table_is_encoded_as_before() -> None:
    copies: list[Any] = []

    @subscriber("work")
    def handle(msg: Message) -> Outcome | None:
        copies.append(msg.delivery.properties.headers)
        return Outcome.retry() if msg.attempt == 1 else None

    async with TestBroker(TOPOLOGY) as broker:
        await broker.run(handle)
        await broker.publish("work", b"x", message_id="m-1", headers={"x-tenant": "acme"})
    copy = copies[1]
    assert isinstance(copy, EncodedTable)
    # the emulated 4.x server writes the table again with its names sorted
    assert copy.encoded == encode_fields({H: "1", "x-tenant": "acme"})


@pytest.mark.parametrize(
    "traceparent",
    [b"garbage", "00-" + "a" * 5_000, {"a": 1}, 42, "ff-" + VALID[3:], VALID.replace("b7", "B7")],
    ids=["garbage", "5000-bytes", "table", "number", "version-ff", "uppercase"],
)
async def test_a_malformed_traceparent_is_a_new_root(spans: Spans, traceparent: FieldValue) -> None:
    handled: list[str | None] = []

    @subscriber("work")
    def handle(msg: Message) -> None:
        handled.append(msg.message_id)

    async with TestBroker(TOPOLOGY, tracer_provider=spans.provider) as broker:
        await broker.run(handle)
        await broker.publish(
            "work",
            b"x",
            message_id="m-1",
            headers={"traceparent": traceparent, "tracestate": "a=1"},
        )
    assert handled == ["m-1"]
    (span,) = spans.named("work process")
    assert span.parent is None
    assert span.attributes is not None
    assert span.attributes["rr.outcome"] == "acked"
    assert span.attributes["rr.settle"] == "basic.ack"
    assert span.status.is_ok


async def test_a_valid_traceparent_is_the_parent(spans: Spans) -> None:
    @subscriber("work")
    def handle(msg: Message) -> None:
        return None

    async with TestBroker(TOPOLOGY, tracer_provider=spans.provider) as broker:
        await broker.run(handle)
        await broker.publish("work", b"x", headers={"traceparent": VALID.encode()})
    (span,) = spans.named("work process")
    assert span.parent is not None
    assert format(span.context.trace_id, "032x") == VALID[3:35]
    assert format(span.parent.span_id, "016x") == VALID[36:52]


async def test_outputs_and_delayed_copies_carry_the_attempts_span(spans: Spans) -> None:
    """A handler's output is published while its span is current; an in-memory delayed copy,
    published later by another task, carries the span captured at decision time."""

    @subscriber("later")
    def handle(msg: Message, out: Outputs) -> Outcome | None:
        if msg.attempt == 1:
            return Outcome.retry_after(30)
        out.publish({"ok": True}, to="receipts", message_id="r-1")
        return None

    async with TestBroker(TOPOLOGY, tracer_provider=spans.provider) as broker:
        await broker.run(handle)
        await broker.publish("later", b"x", message_id="m-1", headers={"traceparent": VALID})
        assert len(spans.named("later process")) == 1
        await broker.advance(30)
        (receipt,) = broker.messages("receipts")
    first, second = spans.named("later process")
    assert first.attributes is not None
    assert second.attributes is not None
    assert (first.attributes["rr.outcome"], first.attributes["rr.settle"]) == (
        "delayed",
        "copy+ack",
    )
    assert second.attributes["rr.attempt"] == 2
    assert second.parent is not None
    assert second.parent.span_id == first.context.span_id
    assert second.context.trace_id == first.context.trace_id
    carried = parse_traceparent((receipt.properties.headers or {})["traceparent"])
    assert carried is not None
    assert carried.parent_id == format(second.context.span_id, "016x")
    assert published_at_ms(receipt.properties.headers) is not None
