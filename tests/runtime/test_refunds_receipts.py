"""The refunds example (examples/refunds/) publishes one receipt per refund paid to
``refunds.receipts``, on the emulator and on RabbitMQ 3.10, 4.0 and 4.3: counted by message id
in the queue, both ways the service is written (functions, classes)."""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

import pytest

from rabbitctl_retry.runtime.loader import load_target
from rabbitctl_retry.runtime.service import RunOptions, Service
from rabbitctl_retry.testing import as_topology
from rabbitctl_retry.transport.base import Properties
from tests.backends import Backend, publish
from tests.observe import depth, peek

EXAMPLE = Path(__file__).parents[2] / "examples" / "refunds"
REFUNDS = [
    ("refunds-1", {"id": 1, "card": "4111", "amount_cents": 1250}),  # paid
    ("refunds-2", {"id": 2, "card": "5500", "amount_cents": 300}),  # unavailable once, paid
    ("refunds-3", {"id": 3, "card": "unavailable", "amount_cents": 990}),  # spent: review
    ("refunds-4", {"id": 4, "card": "declined", "amount_cents": 100}),  # dropped
]


@pytest.mark.parametrize("module", ["service.py", "service_classes.py"])
async def test_one_receipt_per_refund_paid(backend: Backend, module: str) -> None:
    handlers = load_target(str(EXAMPLE / module))
    example = sys.modules["service"]  # service_classes.py imports it too
    service = Service(
        handlers,
        topology=as_topology(EXAMPLE / "topology.toml"),
        connect=backend.connect,
        options=RunOptions(prefetch=10, shutdown_timeout_s=5),
        clock=backend.clock,
    )
    async with service.running():
        clients = service.state
        assert isinstance(clients, example.Clients)
        clients.processor.script["5500"] = [example.Refusal.UNAVAILABLE, None]
        for message_id, body in REFUNDS:
            properties = Properties(content_type="application/json", message_id=message_id)
            await publish(backend, "refunds", json.dumps(body).encode(), properties)
        await publish(
            backend,
            "payouts",
            b'{"id": 5, "card": "4111", "amount_cents": 5000}',
            Properties(content_type="application/json", message_id="payouts-5"),
        )

        async def ended() -> bool:
            return (
                len(clients.desk.reviewed) == 1
                and await depth(backend, "refunds.receipts") == 2
                and await depth(backend, "refunds") == 0
                and await depth(backend, "payouts") == 0
            )

        await backend.until(ended, "two receipts, one refund reviewed")
        assert service.stats.outputs_confirmed == 2
    receipts = await peek(backend, "refunds.receipts")
    assert Counter(r.properties.message_id for r in receipts) == {"receipt-1": 1, "receipt-2": 1}
    bodies = {r.properties.message_id: json.loads(r.body) for r in receipts}
    assert bodies == {
        "receipt-1": {"refund": 1, "amount_cents": 1250},
        "receipt-2": {"refund": 2, "amount_cents": 300},
    }
    assert clients.processor.calls.count("5500") == 2
    assert clients.desk.reviewed == [{"queue": "refunds.dead", "id": 3, "deliveries": "5"}]
