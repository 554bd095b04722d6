"""The guide's tests for the refunds service, on rr's in-memory broker.

The clock is stopped: ``broker.advance(BACKOFF_S)`` moves 2 seconds at once. The emulated
RabbitMQ releases the copy from the wait queue, counts the quorum queue's deliveries, and
moves a spent message along its route, as the server does.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import service

from rabbitctl_retry.testing import TestBroker

TOPOLOGY = Path(__file__).with_name("topology.toml")
RETRY = service.RETRY_HEADER


@pytest.fixture
async def broker() -> AsyncIterator[TestBroker]:
    service.processor.script.clear()
    service.processor.calls.clear()
    service.reviewed.clear()
    async with TestBroker(TOPOLOGY) as test_broker:
        await test_broker.run(service)
        yield test_broker


async def test_a_refund_the_processor_accepts_is_acked(broker: TestBroker) -> None:
    await broker.publish("refunds", {"id": 1, "card": "4111", "amount_cents": 500})

    assert service.processor.calls == ["4111"]
    assert broker.messages("refunds") == []
    assert broker.messages("refunds.dead") == []


async def test_a_busy_processor_is_asked_again_after_the_backoff(broker: TestBroker) -> None:
    service.processor.script["4111"] = [service.Refusal.BUSY, None]
    await broker.publish("refunds", {"id": 2, "card": "4111", "amount_cents": 500})

    assert service.processor.calls == ["4111"]
    waiting = broker.messages("refunds.retry")
    assert len(waiting) == 1
    assert waiting[0].headers[RETRY] == "1"
    assert waiting[0].properties.expiration == str(service.BACKOFF_S * 1000)

    await broker.advance(service.BACKOFF_S - 1)
    assert service.processor.calls == ["4111"]

    await broker.advance(1)
    assert service.processor.calls == ["4111", "4111"]
    assert broker.messages("refunds.retry") == []
    assert broker.messages("refunds.dead") == []


async def test_an_unavailable_processor_sends_the_refund_to_review_after_five_tries(
    broker: TestBroker,
) -> None:
    service.processor.script["4111"] = [service.Refusal.UNAVAILABLE]
    await broker.publish("refunds", {"id": 3, "card": "4111", "amount_cents": 500})

    assert service.processor.calls == ["4111"] * 5
    assert service.reviewed == [{"queue": "refunds.dead", "id": 3, "deliveries": "5"}]
    assert broker.messages("refunds") == []


async def test_busy_then_unavailable_share_one_count(broker: TestBroker) -> None:
    service.processor.script["4111"] = [
        service.Refusal.BUSY,
        service.Refusal.UNAVAILABLE,
        service.Refusal.BUSY,
        service.Refusal.UNAVAILABLE,
        service.Refusal.BUSY,
    ]
    await broker.publish("refunds", {"id": 4, "card": "4111", "amount_cents": 500})
    for _ in range(3):
        await broker.advance(service.BACKOFF_S)

    assert len(service.processor.calls) == 5
    assert service.reviewed == [{"queue": "refunds.dead", "id": 4, "deliveries": "5"}]


async def test_a_declined_refund_is_dropped_not_reviewed(broker: TestBroker) -> None:
    service.processor.script["4111"] = [service.Refusal.DECLINED]
    await broker.publish("refunds", {"id": 5, "card": "4111", "amount_cents": 500})

    assert service.processor.calls == ["4111"]
    assert service.reviewed == []
    assert broker.messages("refunds.dead") == []


async def test_a_payout_the_processor_keeps_refusing_is_moved_by_the_quorum_queue(
    broker: TestBroker,
) -> None:
    service.processor.script["5500"] = [service.Refusal.UNAVAILABLE]
    await broker.publish("payouts", {"id": 6, "card": "5500", "amount_cents": 900})

    assert service.processor.calls == ["5500"] * 5
    assert service.reviewed == [{"queue": "payouts.dead", "id": 6, "reason": "delivery_limit"}]


async def test_a_declined_payout_goes_to_review_as_rejected(broker: TestBroker) -> None:
    service.processor.script["5500"] = [service.Refusal.DECLINED]
    await broker.publish("payouts", {"id": 7, "card": "5500", "amount_cents": 900})

    assert service.processor.calls == ["5500"]
    assert service.reviewed == [{"queue": "payouts.dead", "id": 7, "reason": "rejected"}]
