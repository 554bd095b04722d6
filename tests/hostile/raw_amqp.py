"""A minimal AMQP 0-9-1 client for RabbitMQ that writes and reads what pamqp and aiormq will
not: short strings that are not UTF-8 (a routing key ``b"\\xff\\xfe"``, an exchange name), and
a message's property bytes exactly as they travel.

Frames are pamqp's where pamqp can build them (handshake, channel, confirms, basic.get); the
methods that carry raw names are written field by field. Each call is one connection: open,
one channel in confirm mode, the methods, close.
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit

from pamqp import commands, constants, frame, header
from pamqp.base import Frame
from pamqp.body import ContentBody

from rabbitctl_retry.transport.management import vhost_of

NO_PROPERTIES = b"\x00\x00"
"""Property flags with none set."""


@dataclass(frozen=True, slots=True)
class RawPublish:
    """One ``basic.publish``: ``exchange`` and ``routing_key`` as bytes, whatever they hold;
    ``properties`` the encoded property flags and values."""

    exchange: bytes
    routing_key: bytes
    body: bytes
    properties: bytes = NO_PROPERTIES


@dataclass(frozen=True, slots=True)
class RawExchangeDeclare:
    """One ``exchange.declare`` (fanout, durable) of a name given as bytes."""

    name: bytes


@dataclass(frozen=True, slots=True)
class RawMessage:
    """A message as ``basic.get-ok`` and its content frames carried it."""

    exchange: bytes
    routing_key: bytes
    properties: bytes
    body: bytes


class BrokerClosed(AssertionError):
    """The broker closed the channel or the connection; ``reply`` is its code and text."""

    def __init__(self, reply: str) -> None:
        super().__init__(f"the broker closed: {reply}")
        self.reply = reply


def _short(value: bytes) -> bytes:
    return struct.pack(">B", len(value)) + value


def _frame(kind: int, channel: int, payload: bytes) -> bytes:
    return struct.pack(">BHI", kind, channel, len(payload)) + payload + bytes([constants.FRAME_END])


def _method(index: int, arguments: bytes, channel: int) -> bytes:
    return _frame(constants.FRAME_METHOD, channel, struct.pack(">I", index) + arguments)


def _publish_frames(publish: RawPublish, channel: int) -> bytes:
    arguments = b"\x00\x00" + _short(publish.exchange) + _short(publish.routing_key) + b"\x00"
    content = struct.pack(">HHQ", commands.Basic.frame_id, 0, len(publish.body))
    return (
        _method(commands.Basic.Publish.index, arguments, channel)
        + _frame(constants.FRAME_HEADER, channel, content + publish.properties)
        + frame.marshal(ContentBody(publish.body), channel)
    )


def _declare_frame(declare: RawExchangeDeclare, channel: int) -> bytes:
    arguments = b"\x00\x00" + _short(declare.name) + _short(b"fanout") + b"\x02" + b"\x00" * 4
    return _method(commands.Exchange.Declare.index, arguments, channel)


async def _read_raw(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    """The next frame: its type and payload."""
    head = await reader.readexactly(7)
    kind, _channel, size = struct.unpack(">BHI", head)
    payload = (await reader.readexactly(size + 1))[:-1]
    return kind, payload


def _decoded(kind: int, payload: bytes) -> object:
    return frame.unmarshal(_frame(kind, 0, payload))[2]


async def _expect(reader: asyncio.StreamReader, wanted: Any) -> Frame:
    """The next method frame of type ``wanted`` (others skipped); raises :class:`BrokerClosed`
    if the broker closes instead."""
    while True:
        kind, payload = await _read_raw(reader)
        if kind != constants.FRAME_METHOD:
            continue
        got = _decoded(kind, payload)
        if isinstance(got, commands.Connection.Close | commands.Channel.Close):
            raise BrokerClosed(f"{got.reply_code} {got.reply_text}")
        if isinstance(got, wanted):
            assert isinstance(got, Frame)
            return got


@asynccontextmanager
async def _channel(url: str) -> AsyncIterator[tuple[asyncio.StreamReader, asyncio.StreamWriter]]:
    """A connection to ``url`` (amqp://USER:PASSWORD@HOST:PORT/VHOST) with channel 1 open in
    confirm mode; closed after."""
    parts = urlsplit(url)
    reader, writer = await asyncio.open_connection(parts.hostname, parts.port or 5672)
    try:
        writer.write(header.ProtocolHeader().marshal())
        await _expect(reader, commands.Connection.Start)
        user, password = unquote(parts.username or "guest"), unquote(parts.password or "guest")
        start_ok = commands.Connection.StartOk(
            client_properties={"product": "rr-tests-raw"},
            mechanism="PLAIN",
            response=f"\0{user}\0{password}",
        )
        writer.write(frame.marshal(start_ok, 0))
        tune = await _expect(reader, commands.Connection.Tune)
        assert isinstance(tune, commands.Connection.Tune)
        tune_ok = commands.Connection.TuneOk(
            channel_max=tune.channel_max, frame_max=tune.frame_max, heartbeat=0
        )
        writer.write(frame.marshal(tune_ok, 0))
        writer.write(frame.marshal(commands.Connection.Open(virtual_host=vhost_of(url)), 0))
        await _expect(reader, commands.Connection.OpenOk)
        writer.write(frame.marshal(commands.Channel.Open(), 1))
        await _expect(reader, commands.Channel.OpenOk)
        writer.write(frame.marshal(commands.Confirm.Select(), 1))
        await _expect(reader, commands.Confirm.SelectOk)
        yield reader, writer
        writer.write(frame.marshal(commands.Connection.Close(200, "done", 0, 0), 0))
        await _expect(reader, commands.Connection.CloseOk)
    finally:
        writer.close()
        with suppress(ConnectionError):  # the broker may close the socket first
            await writer.wait_closed()


async def send_raw(url: str, methods: Sequence[RawPublish | RawExchangeDeclare]) -> None:
    """Send ``methods`` in order on one confirm channel: each declare answered, each publish
    confirmed (a nack fails the test)."""
    async with _channel(url) as (reader, writer):
        for method in methods:
            if isinstance(method, RawExchangeDeclare):
                writer.write(_declare_frame(method, 1))
                await _expect(reader, commands.Exchange.DeclareOk)
                continue
            writer.write(_publish_frames(method, 1))
            confirm = await _expect(reader, commands.Basic.Ack | commands.Basic.Nack)
            assert isinstance(confirm, commands.Basic.Ack), "the broker refused the publish"


def _get_ok_names(arguments: bytes) -> tuple[bytes, bytes]:
    """The exchange and routing key of a ``basic.get-ok``'s arguments, as bytes."""
    at = 8 + 1  # delivery tag, redelivered
    exchange = arguments[at + 1 : at + 1 + arguments[at]]
    at += 1 + arguments[at]
    return exchange, arguments[at + 1 : at + 1 + arguments[at]]


async def get_raw(url: str, queue: str) -> RawMessage | None:
    """Take the message at the head of ``queue`` (``basic.get``, no ack), as it travelled;
    ``None`` when the queue is empty."""
    async with _channel(url) as (reader, writer):
        writer.write(frame.marshal(commands.Basic.Get(queue=queue, no_ack=True), 1))
        while True:
            kind, payload = await _read_raw(reader)
            if kind != constants.FRAME_METHOD:
                continue
            (index,) = struct.unpack_from(">I", payload)
            if index == commands.Basic.GetEmpty.index:
                return None
            if index == commands.Basic.GetOk.index:
                exchange, routing_key = _get_ok_names(payload[4:])
                break
            got = _decoded(kind, payload)
            if isinstance(got, commands.Connection.Close | commands.Channel.Close):
                raise BrokerClosed(f"{got.reply_code} {got.reply_text}")
        kind, content = await _read_raw(reader)
        assert kind == constants.FRAME_HEADER
        (body_size,) = struct.unpack_from(">Q", content, 4)
        body = b""
        while len(body) < body_size:
            kind, part = await _read_raw(reader)
            assert kind == constants.FRAME_BODY
            body += part
        return RawMessage(exchange, routing_key, content[12:], body)
