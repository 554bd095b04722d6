"""What the transport makes of what other clients write, on RabbitMQ (docs/runtime.md,
"Malformed messages"): properties pamqp cannot decode arrive marked, not as a closed
connection; floats stay 64-bit; header names of 129 to 255 bytes stay whole; a message moved
with its raw properties arrives byte for byte."""

from __future__ import annotations

import datetime
import struct
from collections.abc import AsyncIterator
from uuid import uuid4

import pytest
from pamqp import commands

from rabbitctl_retry.errors import DataError
from rabbitctl_retry.transport import amqp
from rabbitctl_retry.transport.base import Channel, Properties

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
