"""Each kind of type a handler's first parameter may take, through the real consumer runtime
on RabbitMQ 3.10, 4.0, 4.3 and the emulator (docs/reference/handlers.md, "What the first parameter
can be"): the value the handler receives, one delivery, nothing dead-lettered, nothing left."""

from __future__ import annotations

import json
from typing import Any

import pytest

from rabbitctl_retry.runtime.handlers import Subscriber
from rabbitctl_retry.runtime.loader import HandlerSet
from rabbitctl_retry.runtime.service import RunOptions, Service
from rabbitctl_retry.topology.load import load_text
from rabbitctl_retry.transport.base import Properties
from tests.backends import Backend, publish
from tests.observe import depth
from tests.runtime.test_typed_messages import (
    EMULATED,
    Invoice,
    Line,
    Order,
    Receipt,
    as_any,
    as_bytes,
    as_dataclass,
    as_dict,
    as_list,
    as_message,
    as_msgspec,
    as_pydantic,
    as_text,
    got,
)

JSON = "application/json"


def json_body(value: Any) -> tuple[bytes, str]:
    return json.dumps(value).encode(), JSON


@pytest.fixture(autouse=True)
def fresh() -> None:
    got.clear()


@pytest.mark.parametrize(
    ("handler", "body", "value"),
    [
        (
            as_dataclass,
            json_body({"id": 1, "amount": 2, "lines": [{"sku": "A", "quantity": 1}]}),
            (Order(1, 2.0, [Line("A", 1)]), "m-1", 1),
        ),
        (as_pydantic, json_body({"id": 1, "amount": 2.5}), Invoice(id=1, amount=2.5)),
        (as_msgspec, json_body({"id": 1, "amount": 2.5}), Receipt(id=1, amount=2.5)),
        (as_dict, json_body({"a": [1]}), ({"a": [1]}, JSON)),
        (as_list, json_body([1, 2]), [1, 2]),
        (as_any, json_body([{"a": None}]), "Message"),
        (as_text, ("héllo".encode(), "text/plain; charset=utf-8"), "héllo"),
        (as_bytes, (b"\x00\xff", "application/octet-stream"), b"\x00\xff"),
        (as_message, (b"raw", "application/octet-stream"), b"raw"),
    ],
    ids=lambda value: getattr(value, "__name__", "-"),
)
async def test_each_type_receives_its_value_on_each_server(
    backend: Backend, handler: Any, body: tuple[bytes, str], value: Any
) -> None:
    payload, content_type = body
    service = Service(
        HandlerSet(module="t", subscribers=(Subscriber("typed", handler, "t:typed"),)),
        topology=load_text(EMULATED),
        connect=backend.connect,
        options=RunOptions(prefetch=10, shutdown_timeout_s=5),
        clock=backend.clock,
    )
    async with service.running():
        properties = Properties(message_id="m-1", content_type=content_type, delivery_mode=2)
        await publish(backend, "typed", payload, properties)
        await backend.until(lambda: len(got) >= 1, "the handler called")
    assert got == [value]
    assert service.stats.decode_failures == 0
    assert await depth(backend, "typed") == 0
    assert await depth(backend, "typed.dead") == 0
