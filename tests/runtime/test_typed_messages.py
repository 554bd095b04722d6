"""Typed handlers (docs/reference/handlers.md, "Typed messages"): the body decoded into the first
parameter's type; a body that does not decode is never handled and never retried: rr
dead-letters it after its one delivery (``rr-error-type = rr.DecodeError``, the reason in
``rr-error-message``) on classic and quorum queues, or drops it with
``on_decode_error="drop"`` (a classic queue forgets it; a quorum queue's dead-letter queue
gets rr's copy, which says why); the messages beside it are handled as ever. On RabbitMQ (3.10,
4.0, 4.3) and the emulator, then on ``TestBroker`` for every kind of type.
"""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from dataclasses import dataclass
from typing import Any

import msgspec
import pydantic
import pytest

from rabbitctl_retry import Message
from rabbitctl_retry.emulator.events import Delivered
from rabbitctl_retry.runtime import consumer as consumer_module
from rabbitctl_retry.runtime import service as service_module
from rabbitctl_retry.runtime.handlers import Subscriber, subscriber
from rabbitctl_retry.runtime.invocation import Invocation
from rabbitctl_retry.runtime.loader import HandlerSet
from rabbitctl_retry.runtime.service import RunOptions, Service
from rabbitctl_retry.testing import TestBroker
from rabbitctl_retry.topology.load import load_text
from rabbitctl_retry.transport.base import Properties
from tests.backends import Backend, publish
from tests.observe import depth, peek

TOPOLOGY = '[queues.work]\ntype = "{type}"\nmax_attempts = 5\ndead_letter = "work.dead"\n'
QUEUE_TYPES = pytest.mark.parametrize("queue_type", ["classic", "quorum"])
JSON = "application/json"


@dataclass
class Line:
    sku: str
    quantity: int


@dataclass
class Order:
    id: int
    amount: float
    lines: list[Line] = dataclasses.field(default_factory=list)
    note: str | None = None


class Invoice(pydantic.BaseModel):
    id: int
    amount: float


class Receipt(msgspec.Struct):
    id: int
    amount: float


@pytest.fixture
def seen(monkeypatch: pytest.MonkeyPatch) -> Counter[str | None]:
    """How many times the consumer took each message_id in hand (its arguments built: once
    per delivery, before the handler)."""
    counts: Counter[str | None] = Counter()
    build = service_module.invocation_for

    def counting(handler: Any, **keywords: Any) -> Invocation:
        made = build(handler, **keywords)

        def arguments(message: Message) -> tuple[Any, ...]:
            counts[message.message_id] += 1
            return made.arguments(message)

        return Invocation(arguments)

    # the service builds each invocation once per run (runtime/service.py); the consumer
    # builds its own only when given none
    monkeypatch.setattr(service_module, "invocation_for", counting)
    monkeypatch.setattr(consumer_module, "invocation_for", counting)
    return counts


async def serve(
    backend: Backend,
    queue_type: str,
    handler: Any,
    messages: list[tuple[str, bytes]],
    *,
    done: Any,
) -> Service:
    """Run ``handler`` on ``work``, publish ``messages`` (message_id, JSON body), wait for
    ``done(service)``, stop."""
    service = Service(
        HandlerSet(module="t", subscribers=(Subscriber("work", handler, "t:orders"),)),
        topology=load_text(TOPOLOGY.format(type=queue_type)),
        connect=backend.connect,
        options=RunOptions(prefetch=10, shutdown_timeout_s=5),
        clock=backend.clock,
    )
    async with service.running():
        for message_id, body in messages:
            properties = Properties(message_id=message_id, content_type=JSON, delivery_mode=2)
            await publish(backend, "work", body, properties)

        async def finished() -> bool:
            return bool(await done(service))

        await backend.until(finished, "the messages settled")
    return service


BAD = b'{"id": 1, "amount": "x"}'
GOOD = b'{"id": 2, "amount": 9.5, "lines": [{"sku": "A", "quantity": 3}]}'
REASON = "amount: expected a number, got str"


@QUEUE_TYPES
async def test_a_body_that_does_not_decode_is_dead_lettered_after_one_delivery(
    backend: Backend, queue_type: str, seen: Counter[str | None]
) -> None:
    handled: list[tuple[Order, str | None]] = []

    async def orders(order: Order, msg: Message) -> None:
        handled.append((order, msg.message_id))

    async def done(service: Service) -> bool:
        return bool(handled) and await depth(backend, "work.dead") == 1

    service = await serve(backend, queue_type, orders, [("bad", BAD), ("good", GOOD)], done=done)
    assert handled == [(Order(2, 9.5, [Line("A", 3)]), "good")]  # bad: 0 calls
    assert seen == {"bad": 1, "good": 1}  # one delivery each: not retried
    assert service.stats.decode_failures == 1
    assert await depth(backend, "work") == 0
    (letter,) = await peek(backend, "work.dead")
    assert letter.body == BAD
    assert letter.properties.message_id == "bad"
    headers = letter.properties.headers or {}
    # rr's own copy on both queue types: the letter says why
    assert headers["rr-error-type"] == "rr.DecodeError"
    assert headers["rr-error-message"] == REASON
    assert headers["rr-origin-queue"] == "work"
    assert "x-death" not in headers


@QUEUE_TYPES
async def test_on_decode_error_drop(
    backend: Backend, queue_type: str, seen: Counter[str | None]
) -> None:
    handled: list[Order] = []

    @subscriber("work", on_decode_error="drop")
    async def orders(order: Order) -> None:
        handled.append(order)

    async def done(service: Service) -> bool:
        return bool(handled) and service.stats.decode_failures == 1

    service = await serve(backend, queue_type, orders, [("bad", BAD), ("good", GOOD)], done=done)
    assert handled == [Order(2, 9.5, [Line("A", 3)])]
    assert seen == {"bad": 1, "good": 1}
    assert service.stats.decode_failures == 1
    assert await depth(backend, "work") == 0
    letters = await peek(backend, "work.dead")
    if queue_type == "classic":  # basic.reject(requeue=false): gone
        assert letters == []
        return
    # a quorum queue with a dead-letter queue: a drop that knows why goes by rr's copy, so
    # the letter says why (retry/policy.py, the drop rows), as a mapped exception's does
    (letter,) = letters
    assert letter.properties.message_id == "bad"
    assert letter.body == BAD
    headers = letter.properties.headers or {}
    assert headers["rr-error-type"] == "rr.DecodeError"
    assert headers["rr-error-message"] == REASON
    assert headers["rr-origin-queue"] == "work"
    assert "x-death" not in headers


async def test_one_malformed_message_among_many(
    backend: Backend, seen: Counter[str | None]
) -> None:
    handled: list[int] = []

    def orders(order: Order) -> None:  # a sync handler, in a worker thread
        handled.append(order.id)

    good = [(f"good-{n}", json.dumps({"id": n, "amount": n}).encode()) for n in range(10)]
    bad = [("bad-json", b"{"), ("bad-type", b"[]"), ("bad-field", b'{"amount": 1}')]
    messages = [*good[:5], *bad, *good[5:]]

    async def done(service: Service) -> bool:
        return len(handled) == 10 and await depth(backend, "work.dead") == 3

    service = await serve(backend, "quorum", orders, messages, done=done)
    assert sorted(handled) == list(range(10))
    assert seen == dict.fromkeys([message_id for message_id, _ in messages], 1)
    assert service.stats.decode_failures == 3
    letters = {
        letter.properties.message_id: (letter.properties.headers or {})["rr-error-message"]
        for letter in await peek(backend, "work.dead")
    }
    assert letters == {
        "bad-json": "the body is not JSON: Expecting property name enclosed in double quotes: "
        "line 1 column 2 (char 1)",
        "bad-type": "expected an object (Order), got list",
        "bad-field": "Order needs the field 'id'",
    }


# -- TestBroker: each kind of type ----------------------------------------------------------

EMULATED = '[queues.typed]\nmax_attempts = 5\ndead_letter = "typed.dead"\n'
got: list[Any] = []


@subscriber("typed")
async def as_dataclass(order: Order, msg: Message) -> None:
    got.append((order, msg.message_id, msg.attempt))


@subscriber("typed")
async def as_pydantic(invoice: Invoice) -> None:
    got.append(invoice)


@subscriber("typed")
async def as_msgspec(receipt: Receipt) -> None:
    got.append(receipt)


@subscriber("typed")
async def as_dict(data: dict[str, Any], msg: Message) -> None:
    got.append((data, msg.properties.content_type))


@subscriber("typed")
async def as_list(items: list[int]) -> None:
    got.append(items)


@subscriber("typed")
async def as_any(value: Any) -> None:
    # Any (like object, or no annotation) is the delivery itself, as before typed messages
    got.append(type(value).__name__)


@subscriber("typed")
async def as_text(text: str) -> None:
    got.append(text)


@subscriber("typed")
def as_bytes(body: bytes) -> None:
    got.append(body)


@subscriber("typed")
async def as_message(msg: Message) -> None:
    got.append(msg.body)


@pytest.fixture(autouse=True)
def fresh() -> None:
    got.clear()


@pytest.mark.parametrize(
    ("handler", "body", "value"),
    [
        (
            as_dataclass,
            {"id": 1, "amount": 2, "lines": [{"sku": "A", "quantity": 1}], "new": True},
            (Order(1, 2.0, [Line("A", 1)]), "m-1", 1),
        ),
        (as_pydantic, {"id": 1, "amount": 2.5}, Invoice(id=1, amount=2.5)),
        (as_msgspec, {"id": 1, "amount": 2.5}, Receipt(id=1, amount=2.5)),
        (as_dict, {"a": [1]}, ({"a": [1]}, "application/json")),
        (as_list, [1, 2], [1, 2]),
        (as_any, [{"a": None}], "Message"),
        (as_text, "héllo", "héllo"),
        (as_bytes, b"\x00\xff", b"\x00\xff"),
        (as_message, b"raw", b"raw"),
    ],
)
async def test_each_type_receives_its_value(handler: Any, body: Any, value: Any) -> None:
    async with TestBroker(EMULATED) as broker:
        service = await broker.run(handler)
        await broker.publish("typed", body, message_id="m-1")
        assert got == [value]
        assert service.stats.decode_failures == 0
        assert broker.messages("typed") == []
        assert broker.messages("typed.dead") == []


@pytest.mark.parametrize(
    ("handler", "body", "content_type", "reason"),
    [
        (as_dataclass, b'{"id": 1}', JSON, "Order needs the field 'amount'"),
        (
            as_pydantic,
            b'{"id": 1, "amount": "x"}',
            JSON,
            "the body does not fit Invoice: amount: Input should be a valid number, unable to "
            "parse string as a number",
        ),
        (
            as_msgspec,
            b'{"id": 1}',
            JSON,
            "the body does not fit Receipt: Object missing required field `amount`",
        ),
        (as_list, b'{"a": 1}', None, "expected a list, got dict"),
        (
            as_dict,
            b"{}",
            "text/plain",
            "content type text/plain is not JSON (application/json, text/json, "
            "application/*+json, or none), which dict[str, Any] takes; annotate the parameter "
            "bytes, str or Message to take this body",
        ),
        (
            as_text,
            b"\xff",
            "text/plain",
            "the body is not utf-8 text: 'utf-8' codec can't decode byte 0xff in position 0: "
            "invalid start byte",
        ),
    ],
)
async def test_each_type_dead_letters_what_does_not_fit(
    handler: Any, body: bytes, content_type: str | None, reason: str
) -> None:
    async with TestBroker(EMULATED) as broker:
        service = await broker.run(handler)
        properties = Properties(content_type=content_type, message_id="m-1", delivery_mode=2)
        await broker.publish("typed", body, properties=properties)
        assert got == []
        assert service.stats.decode_failures == 1
        assert broker.messages("typed") == []
        (letter,) = broker.messages("typed.dead")
        assert letter.body == body
        assert letter.headers["rr-error-type"] == "rr.DecodeError"
        assert letter.headers["rr-error-message"] == reason
        assert [event.queue for event in broker.events_of(Delivered)] == ["typed"]  # once


async def test_a_vendor_json_content_type_and_a_charset() -> None:
    async with TestBroker(EMULATED) as broker:
        await broker.run(as_dataclass)
        for content_type in ("application/vnd.acme.order+json", "text/json; charset=utf-8"):
            properties = Properties(content_type=content_type, message_id=content_type)
            await broker.publish("typed", b'{"id": 1, "amount": 1}', properties=properties)
        assert [message_id for _, message_id, _ in got] == [
            "application/vnd.acme.order+json",
            "text/json; charset=utf-8",
        ]
