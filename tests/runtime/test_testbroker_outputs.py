"""``TestBroker.published``: the outputs handlers published and the broker confirmed, by queue
or exchange, counted exactly (docs/how-to/test-a-service.md, "Outputs")."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import pytest

from rabbitctl_retry import Message, Outcome, Outputs, subscriber
from rabbitctl_retry.runtime.outputs import output_id
from rabbitctl_retry.testing import TestBroker

TOPOLOGY = """
[exchanges.events]
type = "topic"

[queues.work]
type = "classic"
max_attempts = 3
dead_letter = "work.dead"

[queues."work.dead"]

[queues.receipts]

[queues.audit]
bindings = [{ exchange = "events", routing_key = "refund.*" }]
"""


@dataclass
class Receipt:
    order: str
    amount: float


async def test_outputs_are_recorded_by_queue_and_by_exchange() -> None:
    @subscriber("work")
    def handle(msg: Message, out: Outputs) -> None:
        order = msg.json()["order"]
        out.publish(Receipt(order, 9.5), to="receipts", headers={"kind": "receipt"})
        out.publish({"order": order}, exchange="events", routing_key="refund.done")

    async with TestBroker(TOPOLOGY) as broker:
        await broker.run(handle)
        await broker.publish("work", {"order": "o-1"}, message_id="o-1")
        await broker.publish("work", {"order": "o-2"}, message_id="o-2")

        receipts = broker.published("receipts")
        assert [r.message_id for r in receipts] == [
            output_id("work", "o-1", 0),
            output_id("work", "o-2", 0),
        ]
        first = receipts[0]
        assert first.json() == {"order": "o-1", "amount": 9.5}
        assert (first.exchange, first.routing_key) == ("", "receipts")
        assert (first.from_queue, first.from_message_id) == ("work", "o-1")
        assert first.properties.headers == {"kind": "receipt"}
        assert first.properties.content_type == "application/json"
        assert broker.published("receipts", Receipt) == [
            Receipt("o-1", 9.5),
            Receipt("o-2", 9.5),
        ]

        events = broker.published("events")
        assert [(e.routing_key, e.json()) for e in events] == [
            ("refund.done", {"order": "o-1"}),
            ("refund.done", {"order": "o-2"}),
        ]
        assert broker.published("audit") == []  # bound to events: matched by the exchange
        assert broker.published("refund.done") == []  # a routing key is not a queue
        assert len(broker.outputs) == 4
        assert len(broker.messages("receipts")) == 2

        broker.clear_outputs()
        assert broker.outputs == []
        assert broker.published("receipts") == []
        assert len(broker.messages("receipts")) == 2  # the broker's queues are untouched


async def test_a_retried_then_acked_delivery_records_its_outputs_once() -> None:
    calls: Counter[str | None] = Counter()

    @subscriber("work")
    async def handle(msg: Message, out: Outputs) -> Outcome:
        calls[msg.message_id] += 1
        out.publish(Receipt(str(msg.message_id), 1.0), to="receipts")
        return Outcome.ack() if msg.attempt == 3 else Outcome.retry("not yet")

    async with TestBroker(TOPOLOGY) as broker:
        await broker.run(handle)
        await broker.publish("work", b"{}", message_id="late")

        assert calls == {"late": 3}
        (receipt,) = broker.published("receipts")
        assert receipt.message_id == output_id("work", "late", 0)
        assert receipt.from_message_id == "late"
        assert len(broker.messages("receipts")) == 1


async def test_a_failed_output_is_not_recorded() -> None:
    @subscriber("work")
    async def handle(msg: Message, out: Outputs) -> None:
        out.publish(b"kept", to="receipts")
        if msg.attempt == 1:
            out.publish(b"lost", to="no-such-queue")

    async with TestBroker(TOPOLOGY) as broker:
        await broker.run(handle)
        await broker.publish("work", b"{}", message_id="o-9")

        # attempt 1: the receipt was confirmed, the other output returned, so the delivery
        # was retried and none of attempt 1's outputs is recorded; attempt 2 acked
        (receipt,) = broker.published("receipts")
        assert receipt.from_message_id == "o-9"
        assert broker.published("no-such-queue") == []
        assert len(broker.outputs) == 1
        assert len(broker.messages("receipts")) == 2  # on the broker: once per attempt


async def test_a_dead_lettered_delivery_records_no_output() -> None:
    @subscriber("work")
    async def handle(msg: Message, out: Outputs) -> Outcome:
        out.publish(b"never", to="receipts")
        return Outcome.retry("always")

    async with TestBroker(TOPOLOGY) as broker:
        await broker.run(handle)
        await broker.publish("work", b"{}", message_id="spent")

        assert [m.properties.message_id for m in broker.messages("work.dead")] == ["spent"]
        assert broker.outputs == []
        assert broker.messages("receipts") == []


async def test_an_output_that_does_not_fit_the_type_names_itself() -> None:
    @subscriber("work")
    def handle(msg: Message, out: Outputs) -> None:
        out.publish({"order": 1}, to="receipts", message_id="r-1")

    async with TestBroker(TOPOLOGY) as broker:
        await broker.run(handle)
        await broker.publish("work", b"{}", message_id="o-1")

        with pytest.raises(AssertionError, match="output 'r-1' to 'receipts' is not a Receipt"):
            broker.published("receipts", Receipt)
