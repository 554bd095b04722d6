"""What the transport makes of what other clients write, on RabbitMQ (docs/reference/runtime.md,
"Malformed messages"): properties pamqp cannot decode, and a routing key that is not UTF-8,
arrive marked, not as a closed connection; floats stay 64-bit; header names of 129 to 255
bytes stay whole; a message moved with its raw properties arrives byte for byte; the
corrections hold whatever was imported first."""

from __future__ import annotations

import contextvars
import datetime
import struct
import subprocess
import sys
from collections.abc import AsyncIterator
from uuid import uuid4

import pamqp.frame
import pytest
from pamqp import commands, exceptions, header
from pamqp.base import Frame

from rabbitctl_retry.errors import DataError
from rabbitctl_retry.transport import amqp, codec, values
from rabbitctl_retry.transport.base import Channel, Properties
from tests.backends import RabbitBackend
from tests.hostile.raw_amqp import BrokerClosed, RawExchangeDeclare, RawPublish, send_raw
from tests.observe import Recorder

EPOCH_2020_S = 1_577_836_800


def raw_properties(**values: object) -> bytes:
    return commands.Basic.Properties(**values).marshal()  # type: ignore[arg-type]


def with_nanosecond_timestamp(message_id: str) -> bytes:
    good = raw_properties(
        message_id=message_id,
        timestamp=datetime.datetime.fromtimestamp(EPOCH_2020_S, tz=datetime.UTC),
    )
    seconds = struct.pack(">Q", EPOCH_2020_S)
    at = good.index(seconds)
    return good[:at] + struct.pack(">Q", EPOCH_2020_S * 10**9) + good[at + 8 :]


def with_invalid_utf8_type(message_id: str) -> bytes:
    marker = "TYPE"
    good = raw_properties(message_id=message_id, message_type=marker)
    return good.replace(b"\x04" + marker.encode(), b"\x04\xff\xfe\xfd\xfc")


@pytest.fixture
async def channel(amqp_url: str) -> AsyncIterator[tuple[Channel, str]]:
    connection = await amqp.connect(amqp_url)
    opened = await connection.channel(confirms=True)
    queue = f"rr-codec-{uuid4().hex[:8]}"
    await opened.queue_declare(queue, durable=True)
    try:
        yield opened, queue
    finally:
        await opened.queue_delete(queue)
        await connection.close()


@pytest.mark.parametrize(
    ("raw", "undecodable"),
    [
        (with_nanosecond_timestamp("bad-1"), ("timestamp",)),
        (with_invalid_utf8_type("bad-1"), ("type",)),
    ],
    ids=["timestamp in ns", "invalid UTF-8 type"],
)
async def test_undecodable_properties_arrive_marked_and_the_connection_stays(
    channel: tuple[Channel, str], raw: bytes, undecodable: tuple[str, ...]
) -> None:
    opened, queue = channel
    await opened.publish(b"bad", routing_key=queue, properties=Properties(raw=raw))
    await opened.publish(b"good", routing_key=queue, properties=Properties(message_id="good-1"))
    bad = await opened.get(queue, no_ack=True)
    good = await opened.get(queue, no_ack=True)
    assert bad is not None
    assert good is not None
    assert bad.body == b"bad"
    assert bad.properties.message_id == "bad-1"
    assert bad.properties.undecodable == undecodable
    assert bad.properties.raw == raw
    assert (good.body, good.properties.message_id, good.properties.undecodable) == (
        b"good",
        "good-1",
        (),
    )
    assert good.properties.raw is None
    assert not opened.is_closed


async def test_header_values_and_names_survive_a_round_trip(channel: tuple[Channel, str]) -> None:
    opened, queue = channel
    long_name = "k" * 200
    headers = {long_name: 0.1, "huge": 1e39, "nested": {"n" * 130: [1.5, -2.25]}}
    await opened.publish(b"x", routing_key=queue, properties=Properties(headers=headers))
    delivery = await opened.get(queue, no_ack=True)
    assert delivery is not None
    assert delivery.properties.headers == headers


async def test_a_header_name_past_255_bytes_is_refused_not_cut(
    channel: tuple[Channel, str],
) -> None:
    opened, queue = channel
    with pytest.raises(DataError, match="string exceeds maximum length of 255 bytes"):
        await opened.publish(b"x", routing_key=queue, properties=Properties(headers={"k" * 256: 1}))


# --------------------------------------------------------- method frames that are not UTF-8

NOT_UTF8 = b"\xff\xfe\x1b[31m"
"""A routing key as another client may publish it: not UTF-8, with an ESC sequence."""
SHOWN = "\\xff\\xfe\x1b[31m"
"""What rr reads for it: the bytes that are not UTF-8 written ``\\xff`` (the ESC stays a
character, which every output escapes: docs/reference/cli.md, "Output")."""
PLACEHOLDER = "K" * len(NOT_UTF8)


def with_raw_routing_key(method: Frame, channel: int = 3) -> bytes:
    """``method`` (built with :data:`PLACEHOLDER` as its routing key) as a frame whose routing
    key is :data:`NOT_UTF8`."""
    data = pamqp.frame.marshal(method, channel)
    marked = bytes([len(NOT_UTF8)]) + PLACEHOLDER.encode()
    assert data.count(marked) == 1
    return data.replace(marked, bytes([len(NOT_UTF8)]) + NOT_UTF8)


def content_header_frame(properties: bytes, channel: int) -> bytes:
    payload = struct.pack(">HHQ", 60, 0, 4) + properties
    return struct.pack(">BHI", 2, channel, len(payload)) + payload + b"\xce"


MESSAGE_METHODS = [
    commands.Basic.Deliver(
        consumer_tag="ctag-1",
        delivery_tag=7,
        redelivered=True,
        exchange="fan",
        routing_key=PLACEHOLDER,
    ),
    commands.Basic.GetOk(
        delivery_tag=7,
        redelivered=True,
        exchange="fan",
        routing_key=PLACEHOLDER,
        message_count=5,
    ),
    commands.Basic.Return(
        reply_code=312, reply_text="NO_ROUTE", exchange="fan", routing_key=PLACEHOLDER
    ),
]


@pytest.mark.parametrize("method", MESSAGE_METHODS, ids=lambda m: m.name)
def test_a_message_method_frame_with_a_routing_key_not_utf8_is_read_and_named(
    method: Frame,
) -> None:
    data = with_raw_routing_key(method)
    with pytest.raises(exceptions.UnmarshalingException):
        codec._strict_unmarshal(data)  # what pamqp alone does with it

    consumed, channel, decoded = codec.unmarshal_frame(data)

    assert (consumed, channel) == (len(data), 3)
    assert type(decoded).__mro__[1] is type(method)  # its lenient kind: aiormq matches it
    assert codec.undecodable_fields(decoded) == ("routing_key",)
    assert decoded.routing_key == SHOWN  # type: ignore[union-attr]
    for name in method.__slots__:
        if name != "routing_key":
            assert getattr(decoded, name) == getattr(method, name), name


def test_the_content_header_after_it_keeps_its_bytes_on_its_own_channel_only() -> None:
    raw = raw_properties(message_id="m-1", headers={"n": 1})

    def read() -> list[object]:
        frames = [
            with_raw_routing_key(MESSAGE_METHODS[0], channel=3),
            content_header_frame(raw, channel=4),  # another channel's message: as pamqp reads
            content_header_frame(raw, channel=3),
            content_header_frame(raw, channel=3),  # the next message of channel 3: as pamqp
        ]
        return [codec.unmarshal_frame(data)[2] for data in frames]

    _method, other, after, next_one = contextvars.copy_context().run(read)
    assert type(other) is header.ContentHeader
    assert isinstance(after, codec.LenientContentHeader)
    assert (after.undecodable, after.raw_properties) == ((), raw)
    assert after.properties.message_id == "m-1"
    assert type(next_one) is header.ContentHeader
    properties = values.properties_from_header(after, _method)
    assert (properties.undecodable, properties.raw) == (("routing_key",), raw)
    assert values.properties_from_header(next_one).undecodable == ()


def test_frames_rr_cannot_read_either_are_still_refused() -> None:
    deliver = with_raw_routing_key(MESSAGE_METHODS[0])
    cut = bytearray(deliver)
    at = deliver.index(NOT_UTF8) - 1
    cut[at] = 200  # the routing key's length runs past the frame
    other = pamqp.frame.marshal(
        commands.Queue.DeclareOk(queue="QQ", message_count=0, consumer_count=0), 1
    )
    not_utf8_queue = other.replace(b"\x02QQ", b"\x02\xff\xfe")
    for data in (bytes(cut), not_utf8_queue):
        with pytest.raises(exceptions.UnmarshalingException):
            contextvars.copy_context().run(codec.unmarshal_frame, data)


def test_the_corrections_hold_whatever_was_imported_first() -> None:
    """pamqp imported and used first, rr's values module after: non-ASCII names pass, floats
    are doubles (docs/reference/topology.md, "Queue and exchange names")."""
    script = (
        "from pamqp import commands, encode\n"
        "import rabbitctl_retry.transport.values\n"
        "commands.Queue.Declare(queue='bi.def.é').marshal()\n"
        "assert encode.encode_table_value(0.5)[:1] == b'd'\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


@pytest.fixture
async def rabbit(amqp_url: str) -> AsyncIterator[RabbitBackend]:
    backend = RabbitBackend(amqp_url)
    backend.setup()  # a fresh vhost
    try:
        yield backend
    finally:
        await backend.close()


async def test_a_routing_key_not_utf8_arrives_marked_and_the_connection_stays(
    rabbit: RabbitBackend,
) -> None:
    channel = await rabbit.channel()
    await channel.queue_declare("q")
    await channel.exchange_declare("fan", type="fanout")
    await channel.queue_bind("q", "fan")
    raw = raw_properties(message_id="bad-1", delivery_mode=2, headers={"n": 1})
    await send_raw(rabbit.url, [RawPublish(b"fan", NOT_UTF8, b"bad", raw)] * 2)
    await channel.publish(b"good", routing_key="q", properties=Properties(message_id="good-1"))

    got = await channel.get("q", no_ack=True)
    recorder = Recorder(channel, "ack")
    await channel.consume("q", recorder)
    await rabbit.until(lambda: len(recorder.deliveries) == 2, "two deliveries")

    consumed, good = recorder.deliveries
    for delivery in (got, consumed):
        assert delivery is not None
        assert (delivery.body, delivery.exchange, delivery.routing_key) == (b"bad", "fan", SHOWN)
        assert delivery.properties.undecodable == ("routing_key",)
        assert delivery.properties.raw == raw  # as received: a copy can be byte for byte
        assert (delivery.properties.message_id, delivery.properties.headers) == (
            "bad-1",
            {"n": 1},
        )
    assert (good.body, good.routing_key, good.properties.undecodable) == (b"good", "q", ())
    assert good.properties.raw is None
    assert not channel.is_closed


async def test_rabbitmq_refuses_an_exchange_name_that_is_not_utf8(rabbit: RabbitBackend) -> None:
    """So a delivery's exchange is UTF-8 in practice; rr reads it leniently all the same."""
    with pytest.raises(BrokerClosed, match="Malformed UTF-8"):
        await send_raw(rabbit.url, [RawExchangeDeclare(b"ex\xff")])
