"""A handler's outputs (docs/reference/runtime.md, "Publishing"): held while it runs, published
mandatory and confirmed when it acks, and only then is the original acked; dropped unsent for
any other outcome; an output that is not confirmed makes the delivery a retry
(``rr.OutputFailed``), so its last attempt dead-letters it. Counted by message id on RabbitMQ
(3.10, 4.0, 4.3) and the emulator.
"""

from __future__ import annotations

import json
import uuid
from collections import Counter
from dataclasses import dataclass
from typing import Any

import pytest

from rabbitctl_retry import Message, Outcome, Outputs
from rabbitctl_retry.runtime.outputs import OUTPUT_FAILED_TYPE, output_id
from rabbitctl_retry.transport.base import Properties
from tests.backends import Backend, publish, running_work
from tests.observe import depth, peek

TOPOLOGY = """
[exchanges.events]
type = "topic"

[queues.work]
type = "{type}"
max_attempts = 3
dead_letter = "work.dead"

[queues.receipts]
type = "classic"

[queues.audit]
type = "classic"
bindings = [{{ exchange = "events", routing_key = "refund.*" }}]
"""
QUEUE_TYPES = pytest.mark.parametrize("queue_type", ["classic", "quorum"])


@dataclass
class Receipt:
    order: str
    amount: float


async def send(backend: Backend, *message_ids: str) -> None:
    for message_id in message_ids:
        body = json.dumps({"order": message_id, "amount": 9.5}).encode()
        await publish(backend, "work", body, Properties(message_id=message_id))


def ids(deliveries: list[Any]) -> Counter[str | None]:
    return Counter(delivery.properties.message_id for delivery in deliveries)


@QUEUE_TYPES
async def test_outputs_of_an_ack_are_published_then_the_original_acked(
    backend: Backend, queue_type: str
) -> None:
    def handle(msg: Message, out: Outputs) -> None:  # sync: in a worker thread
        order = msg.json()["order"]
        out.publish(Receipt(order, 9.5), to="receipts", headers={"kind": "receipt"})
        out.publish({"order": order}, exchange="events", routing_key="refund.done")

    async with running_work(backend, TOPOLOGY.format(type=queue_type), handle) as service:
        await send(backend, "o-1", "o-2")

        async def done() -> bool:
            return await depth(backend, "audit") == 2 and await depth(backend, "work") == 0

        await backend.until(done, "two deliveries handled, four outputs")
        assert service.stats.outputs_published == 4
        assert service.stats.outputs_confirmed == 4
    receipts = await peek(backend, "receipts")
    audit = await peek(backend, "audit")
    assert ids(receipts) == {output_id("work", "o-1", 0): 1, output_id("work", "o-2", 0): 1}
    assert ids(audit) == {output_id("work", "o-1", 1): 1, output_id("work", "o-2", 1): 1}
    first = next(r for r in receipts if r.properties.message_id == output_id("work", "o-1", 0))
    assert json.loads(first.body) == {"order": "o-1", "amount": 9.5}
    assert first.properties.content_type == "application/json"
    assert first.properties.delivery_mode == 2
    assert first.properties.headers == {"kind": "receipt"}
    assert await depth(backend, "work.dead") == 0


@QUEUE_TYPES
async def test_outputs_of_a_retry_are_never_published(backend: Backend, queue_type: str) -> None:
    calls: Counter[str | None] = Counter()

    async def handle(msg: Message, out: Outputs) -> Outcome:
        calls[msg.message_id] += 1
        out.publish(Receipt(str(msg.message_id), 1.0), to="receipts")
        if msg.attempt < 3:
            return Outcome.retry()
        return Outcome.ack()

    async def fails(msg: Message) -> None:
        msg.outputs.publish(b"never", to="receipts")
        raise RuntimeError("boom")

    async with running_work(backend, TOPOLOGY.format(type=queue_type), handle) as service:
        await send(backend, "late")

        async def done() -> bool:
            return calls["late"] == 3 and await depth(backend, "receipts") == 1

        await backend.until(done, "the third attempt acked")
        assert service.stats.outputs_discarded == 2
        assert service.stats.outputs_published == 1
    (receipt,) = await peek(backend, "receipts")
    assert receipt.properties.message_id == output_id("work", "late", 0)

    async with running_work(backend, TOPOLOGY.format(type=queue_type), fails) as service:
        await send(backend, "bad")

        async def dead() -> bool:
            return await depth(backend, "work.dead") == 1

        await backend.until(dead, "the failing handler's message dead-lettered")
        assert service.stats.outputs_published == 0
        assert service.stats.outputs_discarded == 3
    assert ids(await peek(backend, "receipts")) == {output_id("work", "late", 0): 1}


@QUEUE_TYPES
async def test_an_unroutable_output_fails_the_delivery_as_a_retry(
    backend: Backend, queue_type: str
) -> None:
    calls: Counter[str | None] = Counter()

    async def handle(msg: Message, out: Outputs) -> None:
        calls[msg.message_id] += 1
        out.publish(b"kept", to="receipts")
        out.publish(b"lost", to="no-such-queue")

    async with running_work(backend, TOPOLOGY.format(type=queue_type), handle) as service:
        await send(backend, "o-9")

        async def dead() -> bool:
            return await depth(backend, "work.dead") == 1

        await backend.until(dead, "dead-lettered after its last attempt")
        assert service.stats.outputs_failed == 3
    assert calls == {"o-9": 3}
    # the routable output went out on each attempt, under one id: at least once
    assert ids(await peek(backend, "receipts")) == {output_id("work", "o-9", 0): 3}
    (letter,) = await peek(backend, "work.dead")
    assert letter.properties.message_id == "o-9"
    headers = letter.properties.headers or {}
    if queue_type == "quorum":  # the last failure of a quorum queue: the server dead-letters
        assert "x-death" in headers
        assert "rr-error-type" not in headers
        return
    assert headers["rr-error-type"] == OUTPUT_FAILED_TYPE
    assert "no-such-queue" in str(headers["rr-error-message"])


def test_output_ids_are_derived_from_the_original() -> None:
    assert output_id("work", "o-1", 0) == output_id("work", "o-1", 0)
    assert len({output_id("work", "o-1", 0), output_id("work", "o-1", 1)}) == 2
    assert output_id("work", "o-1", 0) != output_id("other", "o-1", 0)
    assert uuid.UUID(output_id("work", "o-1", 0)).version == 5
    # no message_id on the original: a fresh UUID each time
    assert output_id("work", None, 0) != output_id("work", None, 0)


def test_a_bad_output_fails_the_handler_at_once() -> None:
    out = Outputs("work", "o-1")
    with pytest.raises(TypeError, match="not both"):
        out.publish(b"x", to="a", routing_key="b")
    with pytest.raises(TypeError, match="cannot encode"):
        out.publish(object(), to="a")
    assert len(out) == 0
    given = out.publish("text", to="a", message_id="mine", correlation_id="c-1")
    assert given == "mine"
    (held,) = out.pending
    assert held.properties.correlation_id == "c-1"
    assert held.properties.content_type == "text/plain; charset=utf-8"
