"""The guide's tests for the refunds service, on rr's in-memory broker.

The clock is stopped: ``broker.advance(BACKOFF_S)`` moves 2 seconds at once. The emulated
RabbitMQ releases the copy from the wait queue, counts the quorum queue's deliveries, and
moves a spent message along its route, as the server does.

Each test runs twice: on service.py (function handlers) and on service_classes.py (handler
classes). Each hands the service a state of its own (``broker.run(..., state=clients)``): a
fake processor it scripts and asserts on, and the service's ``@on_startup`` hook does not run
(docs/how-to/test-a-service.md, "Testing handlers"). A refund paid publishes a receipt: the tests
read it with ``broker.published(...)`` (docs/how-to/test-a-service.md, "Outputs").
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import service
import service_classes

from rabbitctl_retry.runtime.loader import handlers_of_module
from rabbitctl_retry.simulation import parse_publish_file, simulate
from rabbitctl_retry.testing import TestBroker, as_topology

TOPOLOGY = Path(__file__).with_name("topology.toml")
MESSAGES = Path(__file__).with_name("messages.jsonl")
RETRY = service.RETRY_HEADER


@pytest.fixture
def clients() -> service.Clients:
    return service.Clients()


@pytest.fixture(params=[service, service_classes], ids=["functions", "classes"])
async def broker(
    request: pytest.FixtureRequest, clients: service.Clients
) -> AsyncIterator[TestBroker]:
    async with TestBroker(TOPOLOGY) as test_broker:
        await test_broker.run(request.param, state=clients)
        yield test_broker


async def test_a_refund_the_processor_accepts_is_acked(
    broker: TestBroker, clients: service.Clients
) -> None:
    await broker.publish("refunds", {"id": 1, "card": "4111", "amount_cents": 500})

    assert clients.processor.calls == ["4111"]
    assert broker.messages("refunds") == []
    assert broker.messages("refunds.dead") == []
    assert broker.published(service.RECEIPTS, service.Receipt) == [service.Receipt(1, 500)]
    (receipt,) = broker.published(service.RECEIPTS)
    assert receipt.message_id == "receipt-1"
    assert receipt.from_queue == "refunds"
    assert len(broker.messages(service.RECEIPTS)) == 1


async def test_a_busy_processor_is_asked_again_after_the_backoff(
    broker: TestBroker, clients: service.Clients
) -> None:
    clients.processor.script["4111"] = [service.Refusal.BUSY, None]
    await broker.publish("refunds", {"id": 2, "card": "4111", "amount_cents": 500})

    assert clients.processor.calls == ["4111"]
    waiting = broker.messages("refunds.retry")
    assert len(waiting) == 1
    assert waiting[0].headers[RETRY] == "1"
    assert waiting[0].properties.expiration == str(service.BACKOFF_S * 1000)

    await broker.advance(service.BACKOFF_S - 1)
    assert clients.processor.calls == ["4111"]
    assert broker.published(service.RECEIPTS) == []

    await broker.advance(1)
    assert clients.processor.calls == ["4111", "4111"]
    assert broker.messages("refunds.retry") == []
    assert broker.messages("refunds.dead") == []
    # the attempt that acked published the receipt, once
    assert broker.published(service.RECEIPTS, service.Receipt) == [service.Receipt(2, 500)]


async def test_an_unavailable_processor_sends_the_refund_to_review_after_five_tries(
    broker: TestBroker, clients: service.Clients
) -> None:
    clients.processor.script["4111"] = [service.Refusal.UNAVAILABLE]
    await broker.publish("refunds", {"id": 3, "card": "4111", "amount_cents": 500})

    assert clients.processor.calls == ["4111"] * 5
    assert clients.desk.reviewed == [{"queue": "refunds.dead", "id": 3, "deliveries": "5"}]
    assert broker.messages("refunds") == []
    assert broker.outputs == []  # never paid: no receipt


async def test_busy_then_unavailable_share_one_count(
    broker: TestBroker, clients: service.Clients
) -> None:
    clients.processor.script["4111"] = [
        service.Refusal.BUSY,
        service.Refusal.UNAVAILABLE,
        service.Refusal.BUSY,
        service.Refusal.UNAVAILABLE,
        service.Refusal.BUSY,
    ]
    await broker.publish("refunds", {"id": 4, "card": "4111", "amount_cents": 500})
    for _ in range(3):
        await broker.advance(service.BACKOFF_S)

    assert len(clients.processor.calls) == 5
    assert clients.desk.reviewed == [{"queue": "refunds.dead", "id": 4, "deliveries": "5"}]


async def test_a_declined_refund_is_dropped_not_reviewed(
    broker: TestBroker, clients: service.Clients
) -> None:
    clients.processor.script["4111"] = [service.Refusal.DECLINED]
    await broker.publish("refunds", {"id": 5, "card": "4111", "amount_cents": 500})

    assert clients.processor.calls == ["4111"]
    assert clients.desk.reviewed == []
    assert broker.messages("refunds.dead") == []
    assert broker.published(service.RECEIPTS) == []


async def test_a_payout_the_processor_keeps_refusing_is_moved_by_the_quorum_queue(
    broker: TestBroker, clients: service.Clients
) -> None:
    clients.processor.script["5500"] = [service.Refusal.UNAVAILABLE]
    await broker.publish("payouts", {"id": 6, "card": "5500", "amount_cents": 900})

    assert clients.processor.calls == ["5500"] * 5
    assert clients.desk.reviewed == [{"queue": "payouts.dead", "id": 6, "reason": "delivery_limit"}]


async def test_a_declined_payout_goes_to_review_as_rejected(
    broker: TestBroker, clients: service.Clients
) -> None:
    clients.processor.script["5500"] = [service.Refusal.DECLINED]
    await broker.publish("payouts", {"id": 7, "card": "5500", "amount_cents": 900})

    assert clients.processor.calls == ["5500"]
    assert clients.desk.reviewed == [{"queue": "payouts.dead", "id": 7, "reason": "rejected"}]


async def test_both_ways_of_writing_the_service_give_the_same_timeline() -> None:
    topology = as_topology(TOPOLOGY)
    publishes = parse_publish_file(MESSAGES.read_text(encoding="utf-8"), str(MESSAGES))
    timelines = []
    for module in (service, service_classes):
        result = await simulate(topology, handlers_of_module(module), publishes, horizon_s=60)
        timelines.append(result)
    functions, classes = timelines
    assert functions.finished
    assert classes.finished
    assert functions.rows == classes.rows
    assert functions.queues == classes.queues
    ids = [json.loads(line)["message_id"] for line in MESSAGES.read_text().splitlines()]
    handled = {row.message_id for row in functions.rows if row.event != "output"}
    assert handled == set(ids)
    # the one refund paid published its receipt, shown under its ack
    outputs = [(row.queue, row.message_id, row.output) for row in functions.rows if row.output]
    assert [(queue, message_id) for queue, message_id, _ in outputs] == [
        (service.RECEIPTS, "receipt-1")
    ]
    assert outputs[0][2] is not None
    assert outputs[0][2].from_message_id == "refunds-1"
    assert functions.queues[service.RECEIPTS] == 1
    assert [row.event for row in functions.rows].count("dead-lettered") == 3


def test_the_messages_are_refunds() -> None:
    for line in MESSAGES.read_text(encoding="utf-8").splitlines():
        service.Refund(**json.loads(line)["body"])
