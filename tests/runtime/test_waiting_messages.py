"""``TestBroker.messages()`` items have the names of a handler's ``Message``
(rabbitctl_retry/queued_messages.py; docs/reference/testing.md, "Messages in a queue"): a test
reads ``.message_id`` where ``.properties.message_id`` was needed, and the old names work."""

from __future__ import annotations

import inspect

from rabbitctl_retry import Message, Outcome, subscriber
from rabbitctl_retry.emulator.snapshots import QueuedMessage
from rabbitctl_retry.testing import TestBroker, WaitingMessage

TOPOLOGY = """
[queues.orders]
max_attempts = 2
dead_letter = "orders.dead"
"""

handled: list[dict[str, object]] = []


@subscriber("orders")
async def fails(msg: Message) -> Outcome:
    handled.append(
        {
            "message_id": msg.message_id,
            "body": msg.body,
            "json": msg.json(),
            "retry_count": msg.retry_count,
            "routing_key": msg.routing_key,
        }
    )
    return Outcome.retry("not yet")


def public_names(kind: type) -> set[str]:
    return {name for name, _ in inspect.getmembers(kind) if not name.startswith("_")}


def test_every_name_of_a_handlers_message_is_there() -> None:
    assert public_names(Message) <= public_names(WaitingMessage)
    old = set(QueuedMessage.__dataclass_fields__) | {"headers"}
    assert old <= public_names(WaitingMessage) | set(WaitingMessage.__dataclass_fields__)


async def test_a_dead_letter_reads_as_its_handler_read_it() -> None:
    handled.clear()
    async with TestBroker(TOPOLOGY) as broker:
        await broker.run(fails)
        await broker.publish("orders", {"id": 7}, message_id="order-7", headers={"tenant": "a"})
        await broker.settle()
        assert len(handled) == 2
        (letter,) = broker.messages("orders.dead")
        assert letter.message_id == "order-7" == letter.properties.message_id
        assert letter.body == handled[-1]["body"]
        assert letter.json() == {"id": 7} == handled[-1]["json"]
        assert letter.headers["tenant"] == "a"
        assert letter.headers is not None
        assert letter.retry_count == 2
        assert (handled[-1]["routing_key"], letter.routing_key) == ("orders", "orders.dead")
        assert letter.queue == "orders.dead"
        assert letter.deaths == Message(letter.delivery, "orders.dead").deaths
        assert letter.delivery_count is None
        assert letter.attempt == 3
        assert isinstance(letter.message, int)
        assert letter.enqueued_at_s >= 0
        assert letter.expires_at_s is None


async def test_a_waiting_message_before_any_delivery() -> None:
    async with TestBroker("[queues.q]\n") as broker:
        await broker.publish("q", "text", message_id="m1")
        (waiting,) = broker.messages("q")
        assert (waiting.message_id, waiting.text(), waiting.retry_count) == ("m1", "text", 0)
        assert (waiting.attempt, waiting.delivery_count, waiting.redelivered) == (1, None, False)
        assert waiting.headers == {}
        assert waiting.deaths == ()
