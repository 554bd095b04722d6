"""Other clients next to rr's topology (docs/how-to/other-clients.md, "Declare passively"): each
consumes rr's queues with a passive declare (or none) and gets every message; the same client's own
declare of rr's quorum queue, with the client's defaults, is refused by RabbitMQ (406
PRECONDITION_FAILED): the queue carries a type, a delivery limit and a dead-letter route the
defaults do not. (rr's classic queue has no argument: a durable declare without one matches
it.) Every message id is counted."""

from __future__ import annotations

import asyncio
from typing import Any

import aio_pika
import kombu
import pika
import pika.exceptions
import pytest
from faststream.rabbit import RabbitBroker, RabbitMessage, RabbitQueue

from tests.backends import RabbitBackend
from tests.interop.conftest import amqplib, publish
from tests.observe import depth

IDS = [f"m{n}" for n in range(3)]


# -- pika -----------------------------------------------------------------------------------


def _pika_take(url: str, queue: str, count: int) -> list[str]:
    connection = pika.BlockingConnection(pika.URLParameters(url))
    try:
        channel = connection.channel()
        channel.queue_declare(queue, passive=True)
        taken = []
        while len(taken) < count:
            method, properties, _ = channel.basic_get(queue)
            if method is None:
                break
            taken.append(properties.message_id)
            channel.basic_ack(method.delivery_tag)
        return taken
    finally:
        connection.close()


def _pika_declare(url: str, queue: str) -> str:
    connection = pika.BlockingConnection(pika.URLParameters(url))
    try:
        try:
            connection.channel().queue_declare(queue)
        except pika.exceptions.ChannelClosedByBroker as error:
            return f"{error.reply_code} {error.reply_text}"
        return "declared"
    finally:
        connection.close()


@pytest.mark.parametrize("queue", ["jobs", "payments"])
async def test_pika(rabbit: RabbitBackend, queue: str) -> None:
    await publish(rabbit, queue, IDS)
    assert await asyncio.to_thread(_pika_take, rabbit.url, queue, 3) == IDS
    # pika declares a transient queue by default: refused for rr's durable ones too
    refused = await asyncio.to_thread(_pika_declare, rabbit.url, queue)
    assert refused.startswith("406 PRECONDITION_FAILED - inequivalent arg"), refused


# -- aio-pika -------------------------------------------------------------------------------


@pytest.mark.parametrize("queue", ["jobs", "payments"])
async def test_aio_pika(rabbit: RabbitBackend, queue: str) -> None:
    await publish(rabbit, queue, IDS)
    connection = await aio_pika.connect(rabbit.url)
    try:
        channel = await connection.channel()
        passive = await channel.declare_queue(queue, passive=True)
        taken = []
        while (message := await passive.get(fail=False)) is not None:
            taken.append(message.message_id)
            await message.ack()
        assert taken == IDS
        if queue == "payments":
            with pytest.raises(aio_pika.exceptions.ChannelPreconditionFailed):
                await (await connection.channel()).declare_queue(queue, durable=True)
    finally:
        await connection.close()


# -- FastStream -----------------------------------------------------------------------------


async def _faststream_take(url: str, queue: RabbitQueue, count: int) -> list[str | None]:
    broker = RabbitBroker(url, logger=None)
    taken: list[str | None] = []
    enough = asyncio.Event()

    @broker.subscriber(queue)
    async def handle(body: bytes, message: RabbitMessage) -> None:
        taken.append(message.message_id)
        if len(taken) >= count:
            enough.set()

    await broker.start()
    try:
        await asyncio.wait_for(enough.wait(), 30)
    finally:
        await broker.stop()
    return taken


@pytest.mark.parametrize("queue", ["jobs", "payments"])
async def test_faststream(rabbit: RabbitBackend, queue: str) -> None:
    await publish(rabbit, queue, IDS)
    taken = await _faststream_take(rabbit.url, RabbitQueue(queue, declare=False), 3)
    assert sorted(taken, key=str) == IDS  # handled concurrently: in any order
    assert await depth(rabbit, queue) == 0  # acked
    if queue != "payments":
        return
    broker = RabbitBroker(rabbit.url, logger=None)

    @broker.subscriber(RabbitQueue(queue, durable=True))
    async def handle(body: bytes) -> None:
        raise AssertionError("never delivered")

    with pytest.raises(aio_pika.exceptions.ChannelPreconditionFailed):
        await broker.start()
    await broker.stop()


# -- kombu ----------------------------------------------------------------------------------


def _kombu_take(url: str, queue: kombu.Queue, count: int) -> list[Any]:
    taken: list[Any] = []
    with kombu.Connection(url) as connection:

        def on_message(body: Any, message: kombu.Message) -> None:
            taken.append(message.properties.get("message_id"))
            message.ack()

        with kombu.Consumer(connection, queues=[queue], callbacks=[on_message], accept=None):
            while len(taken) < count:
                connection.drain_events(timeout=30)
    return taken


def _kombu_declare(url: str, queue: kombu.Queue) -> str:
    with kombu.Connection(url) as connection:
        try:
            queue(connection.default_channel).declare()
        except Exception as error:  # amqp.exceptions.PreconditionFailed
            return str(error)
    return "declared"


@pytest.mark.parametrize("queue", ["jobs", "payments"])
async def test_kombu(rabbit: RabbitBackend, queue: str) -> None:
    await publish(rabbit, queue, IDS)
    passive = kombu.Queue(queue, no_declare=True)
    assert await asyncio.to_thread(_kombu_take, rabbit.url, passive, 3) == IDS
    if queue == "payments":
        refused = await asyncio.to_thread(_kombu_declare, rabbit.url, kombu.Queue(queue))
        assert "PRECONDITION_FAILED - inequivalent arg" in refused, refused


# -- Node's amqplib -------------------------------------------------------------------------


@pytest.mark.parametrize("queue", ["jobs", "payments"])
async def test_amqplib(rabbit: RabbitBackend, queue: str) -> None:
    for message_id in IDS:
        sent = await amqplib(rabbit.url, "publish", queue, message_id, message_id)
        assert sent == {"ok": True}
    checked = await amqplib(rabbit.url, "check", queue)
    assert checked == {"ok": True, "messages": 3}
    taken = await amqplib(rabbit.url, "take", queue, "3", "ack")
    assert [message["id"] for message in taken["taken"]] == IDS
    if queue == "payments":
        refused = await amqplib(rabbit.url, "assert", queue)
        assert refused["ok"] is False
        assert "PRECONDITION_FAILED - inequivalent arg" in refused["error"], refused
