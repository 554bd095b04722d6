"""Pure. AMQP 0-9-1 frames as bytes: split a byte stream into frames, encode the hot ones.

The sans-io half of rr's own AMQP client (``transport/native.py``): :class:`FrameSplitter`
takes whatever the socket gave, in any chunks, and hands out whole frames in order; the
encoders write the frames a consumer sends most (``basic.ack``, ``basic.reject``,
``basic.nack``) and the readers read those it receives most (``basic.deliver``, a publisher's
confirms) without a general codec. Every
other frame is encoded and decoded by pamqp, through ``transport/codec.py``.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

METHOD, CONTENT_HEADER, BODY, HEARTBEAT = 1, 2, 3, 8
FRAME_END = 0xCE
FRAME_OVERHEAD_BYTES = 8
"""A frame's own bytes around its payload: type, channel, size (7) and the end octet."""

PROTOCOL_HEADER = b"AMQP\x00\x00\x09\x01"

_HEAD = struct.Struct(">BHI")
_SETTLE = struct.Struct(">BHIHHQB")
_SETTLE_END = bytes([FRAME_END])
_DELIVER_ID = b"\x00\x3c\x00\x3c"
_CONFIRM = struct.Struct(">HHQB")
_ACK_ID = (60, 80)
_NACK_ID = (60, 120)
_TAG = struct.Struct(">Q")
HEARTBEAT_FRAME = _HEAD.pack(HEARTBEAT, 0, 0) + _SETTLE_END


class FrameError(Exception):
    """The stream is not AMQP 0-9-1 frames (a frame without its end octet, an unknown type)."""


@dataclass(frozen=True, slots=True)
class Frame:
    kind: int
    """METHOD, CONTENT_HEADER, BODY or HEARTBEAT."""
    channel: int
    payload: bytes
    """The frame's payload: what lies between its 7-byte head and its end octet."""


class FrameSplitter:
    """Bytes in, in chunks of any size; whole frames out, in order."""

    __slots__ = ("_buffer", "_frame_max")

    def __init__(self, *, frame_max: int = 0) -> None:
        self._buffer = bytearray()
        self._frame_max = frame_max
        """Largest frame accepted (0: any size), once the connection is tuned."""

    def limit(self, frame_max: int) -> None:
        self._frame_max = frame_max

    def feed(self, data: bytes) -> list[Frame]:
        """The frames ``data`` completes; raises :class:`FrameError` on a broken stream."""
        buffer = self._buffer
        buffer += data
        frames: list[Frame] = []
        offset = 0
        end = len(buffer)
        head = _HEAD
        while end - offset >= 8:
            kind, channel, size = head.unpack_from(buffer, offset)
            if self._frame_max and size + FRAME_OVERHEAD_BYTES > self._frame_max:
                raise FrameError(f"a frame of {size} bytes is over frame_max {self._frame_max}")
            stop = offset + 7 + size
            if stop >= end:
                break
            if buffer[stop] != FRAME_END:
                raise FrameError(f"frame end missing (type {kind}, channel {channel})")
            if kind not in (METHOD, CONTENT_HEADER, BODY, HEARTBEAT):
                raise FrameError(f"unknown frame type {kind}")
            frames.append(Frame(kind, channel, bytes(buffer[offset + 7 : stop])))
            offset = stop + 1
        if offset:
            del buffer[:offset]
        return frames


def frame_bytes(kind: int, channel: int, payload: bytes) -> bytes:
    """One whole frame: head, payload, end octet."""
    return _HEAD.pack(kind, channel, len(payload)) + payload + _SETTLE_END


def ack_frame(channel: int, delivery_tag: int, *, multiple: bool) -> bytes:
    """``basic.ack`` (class 60, method 80)."""
    return _SETTLE.pack(METHOD, channel, 13, 60, 80, delivery_tag, multiple) + _SETTLE_END


def reject_frame(channel: int, delivery_tag: int, *, requeue: bool) -> bytes:
    """``basic.reject`` (class 60, method 90)."""
    return _SETTLE.pack(METHOD, channel, 13, 60, 90, delivery_tag, requeue) + _SETTLE_END


def nack_frame(channel: int, delivery_tag: int, *, multiple: bool, requeue: bool) -> bytes:
    """``basic.nack`` (class 60, method 120): bit 0 multiple, bit 1 requeue."""
    bits = int(multiple) | int(requeue) << 1
    return _SETTLE.pack(METHOD, channel, 13, 60, 120, delivery_tag, bits) + _SETTLE_END


@dataclass(frozen=True, slots=True)
class Deliver:
    """``basic.deliver``, read without a general codec."""

    consumer_tag: str
    delivery_tag: int
    redelivered: bool
    exchange: str
    routing_key: str


def is_deliver(payload: bytes) -> bool:
    return payload[:4] == _DELIVER_ID


def read_deliver(payload: bytes) -> Deliver | None:
    """A ``basic.deliver`` payload's fields; ``None`` when a short string in it is not UTF-8
    (then the lenient codec reads it, ``transport/codec.py``). Raises :class:`FrameError` on
    a payload cut short."""
    try:
        consumer_tag, offset = _short_string(payload, 4)
        (delivery_tag,) = _TAG.unpack_from(payload, offset)
        redelivered = bool(payload[offset + 8] & 1)
        exchange, offset = _short_string(payload, offset + 9)
        routing_key, offset = _short_string(payload, offset)
    except UnicodeDecodeError:
        return None
    except (IndexError, struct.error) as error:
        raise FrameError("basic.deliver cut short") from error
    return Deliver(consumer_tag, delivery_tag, redelivered, exchange, routing_key)


@dataclass(frozen=True, slots=True)
class Confirm:
    """A publisher confirm (``basic.ack`` or ``basic.nack`` from the broker), read without a
    general codec."""

    nack: bool
    delivery_tag: int
    multiple: bool


def read_confirm(payload: bytes) -> Confirm | None:
    """A ``basic.ack`` or ``basic.nack`` method payload's fields; ``None`` for any other
    payload (then the general codec reads it)."""
    if len(payload) != _CONFIRM.size:
        return None
    class_id, method_id, delivery_tag, bits = _CONFIRM.unpack(payload)
    if (class_id, method_id) == _ACK_ID:
        return Confirm(False, delivery_tag, bool(bits & 1))
    if (class_id, method_id) == _NACK_ID:
        return Confirm(True, delivery_tag, bool(bits & 1))
    return None


def _short_string(payload: bytes, offset: int) -> tuple[str, int]:
    """The short string at ``offset`` and the offset after it; ``IndexError`` when the
    payload ends first, ``UnicodeDecodeError`` when it is not UTF-8."""
    end = offset + 1 + payload[offset]
    if end > len(payload):
        raise IndexError("short string cut short")
    return payload[offset + 1 : end].decode(), end
