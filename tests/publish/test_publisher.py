"""``rr.Publisher`` on RabbitMQ and on the emulator: typed encodings (the mirror of the
handlers' decoding), message ids, confirms, and a returned message raised
(docs/reference/publishing.md)."""

from __future__ import annotations

import dataclasses
import enum
from typing import Any

import msgspec
import pydantic
import pytest

import rabbitctl_retry as rr
from rabbitctl_retry.errors import PublishFailed, PublishReturned, UsageError
from rabbitctl_retry.runtime.decoding import decoder_for
from rabbitctl_retry.runtime.encoding import EncodeFailure, encode
from rabbitctl_retry.transport.base import Connection
from tests.backends import Backend, EmulatorBackend, RabbitBackend
from tests.dlq.support import declare
from tests.observe import peek as read_all


class Currency(enum.Enum):
    EUR = "EUR"


@dataclasses.dataclass
class Refund:
    order: str
    cents: int
    currency: Currency = Currency.EUR


class RefundModel(pydantic.BaseModel):
    order: str
    cents: int


class RefundStruct(msgspec.Struct):
    order: str
    cents: int


def publisher_of(backend: Backend, **options: Any) -> rr.Publisher:
    if isinstance(backend, RabbitBackend):
        return rr.Publisher(backend.url, **options)
    assert isinstance(backend, EmulatorBackend)
    emulator = backend.emulator

    async def connect() -> Connection:
        return emulator.connect()

    return rr.Publisher(connect=connect, **options)


async def test_typed_messages_arrive_decodable_with_ids_and_confirms(backend: Backend) -> None:
    await declare(backend, "refunds")
    async with publisher_of(backend) as pub:
        first = await pub.publish(Refund("o-1", 150), to="refunds")
        second = await pub.publish(RefundModel(order="o-2", cents=20), to="refunds")
        third = await pub.publish(
            {"order": "o-3", "cents": 3},
            to="refunds",
            message_id="given",
            headers={"origin": "web", "n": 5},
            correlation_id="c-3",
        )
        fourth = await pub.publish("plain text", to="refunds", persistent=False)
    assert third == "given"
    held = await read_all(backend, "refunds")
    assert [d.properties.message_id for d in held] == [first, second, third, fourth]
    assert len({first, second, fourth}) == 3
    decode = decoder_for(Refund, where="refund")
    assert decode(held[0].body, held[0].properties.content_type, None) == Refund("o-1", 150)
    decode_model = decoder_for(RefundModel, where="refund")
    assert decode_model(held[1].body, held[1].properties.content_type, None) == RefundModel(
        order="o-2", cents=20
    )
    assert held[2].properties.headers == {"origin": "web", "n": 5}
    assert held[2].properties.correlation_id == "c-3"
    assert held[3].body == b"plain text"
    assert held[3].properties.content_type == "text/plain; charset=utf-8"
    assert [d.properties.delivery_mode for d in held] == [2, 2, 2, 1]
    assert held[0].properties.content_type == "application/json"


async def test_a_returned_message_raises(backend: Backend) -> None:
    async with publisher_of(backend) as pub:
        with pytest.raises(PublishReturned, match="returned"):
            await pub.publish(b"lost", exchange="amq.direct", routing_key="nowhere")
        await declare(backend, "after")
        await pub.publish(b"kept", to="after")  # the publisher goes on
    assert [d.body for d in await read_all(backend, "after")] == [b"kept"]


async def test_a_nacked_message_raises(backend: Backend) -> None:
    await declare(backend, "full", arguments={"x-max-length": 1, "x-overflow": "reject-publish"})
    async with publisher_of(backend) as pub:
        await pub.publish(b"one", to="full")
        with pytest.raises(PublishFailed, match="refused") as raised:
            await pub.publish(b"two", to="full")
        assert not isinstance(raised.value, PublishReturned)


def test_encodings_mirror_the_decoders() -> None:
    assert encode(b"\x00") == (b"\x00", "application/octet-stream")
    assert encode(RefundStruct(order="o", cents=1)) == (
        b'{"order":"o","cents":1}',
        "application/json",
    )
    body, kind = encode(Refund("o", 1))
    assert decoder_for(Refund, where="r")(body, kind, None) == Refund("o", 1)
    assert encode(["é"]) == ('["é"]'.encode(), "application/json")
    with pytest.raises(EncodeFailure):
        encode(object())
    with pytest.raises(EncodeFailure):
        encode(float("nan"))


def test_a_bad_url_is_refused_at_once() -> None:
    with pytest.raises(UsageError):
        rr.Publisher("http://not-amqp/")


async def test_a_lost_connection_is_opened_again_on_the_emulator() -> None:
    """The broker drops the connection (a node stopped), and the first reconnection finds
    no node answering: the publish waits, connects again and the message arrives."""
    from rabbitctl_retry.errors import BrokerUnreachable
    from rabbitctl_retry.testing import TestBroker

    async with TestBroker() as broker:
        connects = 0

        async def connect() -> Connection:
            nonlocal connects
            connects += 1
            if connects == 2:
                raise BrokerUnreachable("cannot connect: nothing listens (a node stopped)")
            return await broker.connect()

        channel = await (await broker.connect()).channel()
        await channel.queue_declare("refunds")
        async with rr.Publisher(connect=connect) as pub:
            await pub.publish({"n": 1}, to="refunds", message_id="one")
            broker.emulator.drop_connections()
            await pub.publish({"n": 2}, to="refunds", message_id="two")
            assert pub.reconnects == 1
        assert connects == 3
        ids = [m.properties.message_id for m in broker.messages("refunds")]
        assert ids == ["one", "two"]


async def test_the_sync_twin_publishes_with_confirms(backend: Backend) -> None:
    if not isinstance(backend, RabbitBackend):
        pytest.skip("the sync twin runs its own event loop: the emulator lives on the test's")
    from rabbitctl_retry.publisher import SyncPublisher

    await declare(backend, "sync")
    with SyncPublisher(backend.url) as pub:
        first = pub.publish(Refund("o-1", 1), to="sync")
        with pytest.raises(PublishReturned):
            pub.publish(b"lost", exchange="amq.direct", routing_key="nowhere")
        second = pub.publish(b"two", to="sync", message_id="two")
    held = await read_all(backend, "sync")
    assert [d.properties.message_id for d in held] == [first, second]
    assert second == "two"


async def test_a_missing_exchange_raises_at_once_and_the_publisher_goes_on(
    backend: Backend,
) -> None:
    from rabbitctl_retry.errors import NotFound

    await declare(backend, "after")
    async with publisher_of(backend) as pub:
        with pytest.raises(NotFound):
            await pub.publish(b"x", exchange="no-such-exchange", routing_key="k")
        await pub.publish(b"kept", to="after")  # a new channel, the same connection
        assert pub.reconnects == 0
    assert [d.body for d in await read_all(backend, "after")] == [b"kept"]
