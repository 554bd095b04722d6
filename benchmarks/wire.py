"""The ceiling: the benchmarks' shapes as raw pamqp frames over a plain blocking socket.

No client library, no event loop, no per-message objects beyond pamqp's own: one socket,
frames split by hand (7-byte header, payload, 0xCE), method and content-header frames decoded
by ``pamqp.frame.unmarshal``, bodies taken as bytes, and everything a batch of received frames
calls for written back in one ``sendall``. What a Python client could reach at best on this
machine and broker; each benchmark prints its cases' ratio to it (docs/reference/runtime.md and
docs/reference/dlq.md, "Speed").

Only what the shapes need: PLAIN login, heartbeats off, one consuming channel (and one
confirm channel for copies), ``basic.ack(multiple=true)`` every ``batch`` settled messages.
Every message id seen is returned, so the benchmarks check the ceiling's counts as they check
every other case's.

Run these in a thread (``asyncio.to_thread``): they block.
"""

from __future__ import annotations

import socket
import struct
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

import pamqp.frame
from pamqp import commands as spec
from pamqp.body import ContentBody
from pamqp.header import ContentHeader

_HEADER = struct.Struct(">BHI")
_FRAME_END = 0xCE
_METHOD, _CONTENT_HEADER, _BODY = 1, 2, 3
CONSUME_CHANNEL = 1
COPY_CHANNEL = 2


@dataclass
class WireResult:
    rate: float
    """Messages per second, from basic.consume to the broker's answer after the last ack."""
    ids: Counter[str]
    """Every message id handled, with how often."""


class WireConnection:
    """One AMQP 0-9-1 connection on a blocking socket, opened with PLAIN, heartbeats off."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self._socket = socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 5672))
        self._socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._buffer = bytearray()
        vhost = unquote(parts.path[1:]) if len(parts.path) > 1 else "/"
        self._socket.sendall(b"AMQP\x00\x00\x09\x01")
        self._expect(spec.Connection.Start)
        login = f"\0{unquote(parts.username or 'guest')}\0{unquote(parts.password or 'guest')}"
        self.send(0, spec.Connection.StartOk(client_properties={}, response=login))
        tune = self._expect(spec.Connection.Tune)
        self.send(
            0,
            spec.Connection.TuneOk(
                channel_max=tune.channel_max, frame_max=tune.frame_max, heartbeat=0
            ),
        )
        self.frame_max = tune.frame_max
        self.send(0, spec.Connection.Open(virtual_host=vhost))
        self._expect(spec.Connection.OpenOk)

    def send(self, channel: int, *frames: object) -> None:
        self._socket.sendall(b"".join(pamqp.frame.marshal(f, channel) for f in frames))  # type: ignore[arg-type]

    def write(self, data: bytes | bytearray) -> None:
        self._socket.sendall(data)

    def batches(self) -> Iterator[list[tuple[int, int, bytes]]]:
        """The frames of each read from the socket: (type, channel, payload), in order."""
        buffer = self._buffer
        while True:
            chunk = self._socket.recv(1 << 17)
            if not chunk:
                raise ConnectionError("the broker closed the connection")
            buffer += chunk
            frames = []
            offset = 0
            end = len(buffer)
            while end - offset >= 8:
                kind, channel, size = _HEADER.unpack_from(buffer, offset)
                stop = offset + 7 + size
                if stop >= end:
                    break
                if buffer[stop] != _FRAME_END:
                    raise ConnectionError("frame end missing")
                frames.append((kind, channel, bytes(buffer[offset + 7 : stop])))
                offset = stop + 1
            del buffer[:offset]
            if frames:
                yield frames

    def _expect(self, kind: type) -> object:
        for frames in self.batches():
            for frame_type, _, payload in frames:
                if frame_type == _METHOD:
                    frame = decode(_METHOD, payload)
                    if isinstance(frame, spec.Connection.Close | spec.Channel.Close):
                        raise ConnectionError(f"{frame.reply_code} {frame.reply_text}")
                    if isinstance(frame, kind):
                        return frame
        raise AssertionError("unreachable")

    def call(self, channel: int, request: object, answer: type) -> object:
        """Send ``request`` and read frames until its ``answer`` comes."""
        self.send(channel, request)
        return self._expect(answer)

    def close(self) -> None:
        try:
            self.call(
                0,
                spec.Connection.Close(reply_code=200, reply_text="bye", class_id=0, method_id=0),
                spec.Connection.CloseOk,
            )
        except OSError:
            pass
        finally:
            self._socket.close()


def decode(kind: int, payload: bytes) -> object:
    """pamqp's frame for a method (or content header) ``payload``."""
    return pamqp.frame.unmarshal(_HEADER.pack(kind, 0, len(payload)) + payload + b"\xce")[2]


def _delivery_tag(payload: bytes) -> int:
    """The delivery tag of a basic.deliver payload (after the consumer tag, a short string)."""
    return int(_TAG.unpack_from(payload, 5 + payload[4])[0])


def _is(payload: bytes, method: bytes) -> bool:
    return payload[:4] == method


_TAG = struct.Struct(">Q")
_DELIVER = b"\x00\x3c\x00\x3c"
_CONFIRM_ACK = b"\x00\x3c\x00\x50"
_CONFIRM_NACK = b"\x00\x3c\x00\x78"
_CHANNEL_CLOSE = b"\x00\x14\x00\x28"
_RETURN = b"\x00\x3c\x00\x32"


def consume_and_ack(url: str, queue: str, count: int, prefetch: int, batch: int) -> WireResult:
    """Consume ``count`` messages of ``queue``; ack with multiple=true every ``batch``."""
    wire = WireConnection(url)
    try:
        wire.call(CONSUME_CHANNEL, spec.Channel.Open(), spec.Channel.OpenOk)
        wire.call(CONSUME_CHANNEL, spec.Basic.Qos(prefetch_count=prefetch), spec.Basic.QosOk)
        ids: Counter[str] = Counter()
        started = time.perf_counter()
        wire.send(CONSUME_CHANNEL, spec.Basic.Consume(queue=queue))
        handled = unacked = last_tag = 0
        for frames in wire.batches():
            for kind, _, payload in frames:
                if kind == _CONTENT_HEADER:
                    header = decode(kind, payload)
                    assert isinstance(header, ContentHeader)
                    ids[header.properties.message_id or ""] += 1
                    handled += 1
                    unacked += 1
                elif kind == _METHOD:
                    if _is(payload, _DELIVER):
                        last_tag = _delivery_tag(payload)
                    elif _is(payload, _CHANNEL_CLOSE):
                        raise ConnectionError(str(decode(kind, payload)))
            if unacked >= batch or handled == count:
                unacked = 0
                wire.send(CONSUME_CHANNEL, spec.Basic.Ack(delivery_tag=last_tag, multiple=True))
            if handled == count:
                break
        wire.call(CONSUME_CHANNEL, spec.Basic.Qos(prefetch_count=prefetch), spec.Basic.QosOk)
        return WireResult(count / (time.perf_counter() - started), ids)
    finally:
        wire.close()


def consume_copy_and_ack(
    url: str,
    queue: str,
    to: str,
    count: int,
    prefetch: int,
    batch: int,
    headers: dict[str, object] | None = None,
) -> WireResult:
    """Consume ``count`` messages of ``queue``; publish each to ``to`` (mandatory, on a confirm
    channel; its properties kept, ``headers`` replacing its headers when given) and, once the
    broker confirmed the copies of every delivery up to a tag, ack them with
    multiple=true every ``batch``."""
    wire = WireConnection(url)
    try:
        wire.call(CONSUME_CHANNEL, spec.Channel.Open(), spec.Channel.OpenOk)
        wire.call(COPY_CHANNEL, spec.Channel.Open(), spec.Channel.OpenOk)
        wire.call(COPY_CHANNEL, spec.Confirm.Select(), spec.Confirm.SelectOk)
        wire.call(CONSUME_CHANNEL, spec.Basic.Qos(prefetch_count=prefetch), spec.Basic.QosOk)
        ids: Counter[str] = Counter()
        publish = pamqp.frame.marshal(
            spec.Basic.Publish(exchange="", routing_key=to, mandatory=True), COPY_CHANNEL
        )
        started = time.perf_counter()
        wire.send(CONSUME_CHANNEL, spec.Basic.Consume(queue=queue))
        tag_of_copy: list[int] = [0]  # publish sequence number -> delivery tag
        confirmed_tags: set[int] = set()
        settled = acked = delivery_tag = 0
        confirmed = 0  # every copy up to this publish sequence number is confirmed
        header: ContentHeader | None = None
        for frames in wire.batches():
            out = bytearray()
            for kind, channel, payload in frames:
                if kind == _BODY and header is not None:
                    properties = header.properties
                    ids[properties.message_id or ""] += 1
                    if headers is not None:
                        properties.headers = headers
                    out += publish
                    out += pamqp.frame.marshal(
                        ContentHeader(0, len(payload), properties), COPY_CHANNEL
                    )
                    out += pamqp.frame.marshal(ContentBody(payload), COPY_CHANNEL)
                    tag_of_copy.append(delivery_tag)
                    header = None
                elif kind == _CONTENT_HEADER:
                    decoded = decode(kind, payload)
                    assert isinstance(decoded, ContentHeader)
                    header = decoded
                elif kind == _METHOD and channel == CONSUME_CHANNEL:
                    if _is(payload, _DELIVER):
                        delivery_tag = _delivery_tag(payload)
                    elif _is(payload, _CHANNEL_CLOSE):
                        raise ConnectionError(str(decode(kind, payload)))
                elif kind == _METHOD:
                    if _is(payload, _CONFIRM_ACK):
                        ack = decode(kind, payload)
                        assert isinstance(ack, spec.Basic.Ack)
                        # multiple: every copy up to it (one already confirmed alone again:
                        # harmless, its tag is settled already or waits in the set)
                        first = confirmed + 1 if ack.multiple else ack.delivery_tag
                        for sequence in range(first, ack.delivery_tag + 1):
                            confirmed_tags.add(tag_of_copy[sequence])
                        if ack.multiple:
                            confirmed = ack.delivery_tag
                        while settled + 1 in confirmed_tags:
                            settled += 1
                            confirmed_tags.remove(settled)
                    elif payload[:4] in (_RETURN, _CONFIRM_NACK, _CHANNEL_CLOSE):
                        raise ConnectionError(f"copy refused: {decode(kind, payload)}")
            if settled > acked and (settled - acked >= batch or settled == count):
                acked = settled
                out += pamqp.frame.marshal(
                    spec.Basic.Ack(delivery_tag=acked, multiple=True), CONSUME_CHANNEL
                )
            if out:
                wire.write(out)
            if acked >= count:
                break
        wire.call(CONSUME_CHANNEL, spec.Basic.Qos(prefetch_count=prefetch), spec.Basic.QosOk)
        return WireResult(count / (time.perf_counter() - started), ids)
    finally:
        wire.close()


def publish_consume_and_ack(url: str, queue: str, count: int, prefetch: int) -> float:
    """Publish ``count`` persistent 200-byte messages to ``queue`` (no confirms, one write per
    thousand), then consume them and ack each one (every read's acks in one write); the rate
    from the first publish to the broker's answer after the last ack."""
    wire = WireConnection(url)
    try:
        wire.call(CONSUME_CHANNEL, spec.Channel.Open(), spec.Channel.OpenOk)
        wire.call(COPY_CHANNEL, spec.Channel.Open(), spec.Channel.OpenOk)
        wire.call(CONSUME_CHANNEL, spec.Basic.Qos(prefetch_count=prefetch), spec.Basic.QosOk)
        body = b"x" * 200
        message = b"".join(
            pamqp.frame.marshal(frame, COPY_CHANNEL)
            for frame in (
                spec.Basic.Publish(exchange="", routing_key=queue),
                ContentHeader(0, len(body), spec.Basic.Properties(delivery_mode=2)),
                ContentBody(body),
            )
        )
        started = time.perf_counter()
        for start in range(0, count, 1000):
            wire.write(message * min(1000, count - start))
        wire.send(CONSUME_CHANNEL, spec.Basic.Consume(queue=queue))
        acked = 0
        for frames in wire.batches():
            out = bytearray()
            for kind, _, payload in frames:
                if kind == _METHOD and _is(payload, _DELIVER):
                    out += pamqp.frame.marshal(
                        spec.Basic.Ack(delivery_tag=_delivery_tag(payload)), CONSUME_CHANNEL
                    )
                    acked += 1
                elif kind == _METHOD and _is(payload, _CHANNEL_CLOSE):
                    raise ConnectionError(str(decode(kind, payload)))
            if out:
                wire.write(out)
            if acked >= count:
                break
        wire.call(CONSUME_CHANNEL, spec.Basic.Qos(prefetch_count=prefetch), spec.Basic.QosOk)
        return count / (time.perf_counter() - started)
    finally:
        wire.close()
