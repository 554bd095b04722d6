"""transport/frames.py: the frame splitter over any chunking, and the hand-written frames
byte for byte against pamqp's."""

from __future__ import annotations

import contextlib
import struct

import pamqp.frame
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pamqp import commands as spec
from pamqp.base import Frame as PamqpFrame
from pamqp.header import ContentHeader
from pamqp.heartbeat import Heartbeat

# rr's codec corrections on pamqp (non-ASCII exchange names in basic.deliver), made on import
import rabbitctl_retry.transport.values  # noqa: F401
from rabbitctl_retry.transport.frames import (
    BODY,
    CONTENT_HEADER,
    FRAME_OVERHEAD_BYTES,
    HEARTBEAT,
    HEARTBEAT_FRAME,
    METHOD,
    Confirm,
    Deliver,
    Frame,
    FrameError,
    FrameSplitter,
    ack_frame,
    frame_bytes,
    is_deliver,
    nack_frame,
    read_confirm,
    read_deliver,
    reject_frame,
)

KINDS = (METHOD, CONTENT_HEADER, BODY, HEARTBEAT)
TAGS = (1, 2, 255, 256, 2**32, 2**63, 2**64 - 1)

frames = st.builds(
    Frame,
    st.sampled_from(KINDS),
    st.integers(0, 65535),
    st.binary(max_size=300),
)


@st.composite
def chunked(draw: st.DrawFn, data: bytes) -> list[bytes]:
    """``data`` cut into chunks of random sizes (1-byte chunks included), in order."""
    chunks: list[bytes] = []
    offset = 0
    while offset < len(data):
        size = draw(st.one_of(st.just(1), st.integers(1, 64), st.integers(1, len(data))))
        chunks.append(data[offset : offset + size])
        offset += size
    return chunks


@given(st.lists(frames, max_size=20), st.data())
def test_splitter_gives_the_frames_back_in_order_whatever_the_chunks(
    sent: list[Frame], data: st.DataObject
) -> None:
    encoded = [frame_bytes(frame.kind, frame.channel, frame.payload) for frame in sent]
    stream = b"".join(encoded)
    ends: list[int] = []  # where each frame's end octet lies in the stream
    for one in encoded:
        ends.append((ends[-1] if ends else 0) + len(one))
    splitter = FrameSplitter()
    received: list[Frame] = []
    fed = 0
    for chunk in data.draw(chunked(stream)):
        received += splitter.feed(chunk)
        fed += len(chunk)
        # each frame comes out with the chunk that completes it, not later
        assert len(received) == sum(1 for end in ends if end <= fed)
    assert received == sent
    # nothing left over: the next frame is read from its first byte
    assert splitter.feed(b"") == []
    assert splitter.feed(HEARTBEAT_FRAME) == [Frame(HEARTBEAT, 0, b"")]


@given(st.lists(frames, min_size=1, max_size=10))
def test_splitter_reads_frames_fed_all_at_once(sent: list[Frame]) -> None:
    stream = b"".join(frame_bytes(frame.kind, frame.channel, frame.payload) for frame in sent)
    assert FrameSplitter().feed(stream) == sent


def test_frame_bytes_layout() -> None:
    assert frame_bytes(METHOD, 0x0102, b"abc") == b"\x01\x01\x02\x00\x00\x00\x03abc\xce"
    assert len(frame_bytes(BODY, 7, b"x" * 10)) == 10 + FRAME_OVERHEAD_BYTES


@pytest.mark.parametrize("end", [0x00, 0xCD, 0xCF, 0xFF])
def test_frame_without_its_end_octet_raises(end: int) -> None:
    broken = frame_bytes(METHOD, 1, b"payload")[:-1] + bytes([end])
    with pytest.raises(FrameError):
        FrameSplitter().feed(broken)


def test_frame_without_its_end_octet_raises_once_it_is_all_there() -> None:
    broken = frame_bytes(BODY, 1, b"payload")[:-1] + b"\x00"
    splitter = FrameSplitter()
    assert splitter.feed(broken[:-1]) == []
    with pytest.raises(FrameError):
        splitter.feed(broken[-1:])


def test_frame_after_a_good_one_without_its_end_octet_raises() -> None:
    stream = frame_bytes(METHOD, 1, b"ok") + frame_bytes(BODY, 1, b"broken")[:-1] + b"\xcd"
    with pytest.raises(FrameError):
        FrameSplitter().feed(stream)


@pytest.mark.parametrize("kind", [0, 4, 5, 7, 9, 65, 206, 255])
def test_unknown_frame_type_raises(kind: int) -> None:
    with pytest.raises(FrameError):
        FrameSplitter().feed(frame_bytes(kind, 1, b"payload"))


@pytest.mark.parametrize("frame_max", [4096, 131_072])
def test_frame_over_frame_max_raises(frame_max: int) -> None:
    largest = frame_bytes(BODY, 1, b"x" * (frame_max - FRAME_OVERHEAD_BYTES))
    assert len(largest) == frame_max
    splitter = FrameSplitter()
    splitter.limit(frame_max)
    assert splitter.feed(largest) == [Frame(BODY, 1, largest[7:-1])]
    too_large = frame_bytes(BODY, 1, b"x" * (frame_max - FRAME_OVERHEAD_BYTES + 1))
    with pytest.raises(FrameError):
        splitter.feed(too_large)


def test_frame_over_frame_max_raises_on_its_head_alone() -> None:
    """The size in the head is enough: the splitter does not wait for (or buffer) the rest."""
    splitter = FrameSplitter(frame_max=4096)
    with pytest.raises(FrameError):
        splitter.feed(frame_bytes(BODY, 1, b"x" * 5000)[:8])


def test_frame_max_zero_takes_any_size() -> None:
    payload = b"x" * 300_000
    splitter = FrameSplitter(frame_max=4096)
    splitter.limit(0)
    assert splitter.feed(frame_bytes(BODY, 1, payload)) == [Frame(BODY, 1, payload)]


def _pamqp(method: PamqpFrame, channel: int) -> bytes:
    return pamqp.frame.marshal(method, channel)


def _signed(tag: int) -> int:
    """The tag as pamqp takes it: pamqp encodes a ``longlong`` signed (``>q``), AMQP says
    unsigned; both write the same 8 bytes for ``tag - 2**64``."""
    return tag if tag < 2**63 else tag - 2**64


@pytest.mark.parametrize("channel", [0, 1, 65535])
@pytest.mark.parametrize("tag", TAGS)
@pytest.mark.parametrize("multiple", [False, True])
def test_ack_frame_is_pamqps(channel: int, tag: int, multiple: bool) -> None:
    expected = _pamqp(spec.Basic.Ack(delivery_tag=_signed(tag), multiple=multiple), channel)
    assert ack_frame(channel, tag, multiple=multiple) == expected


@pytest.mark.parametrize("channel", [0, 1, 65535])
@pytest.mark.parametrize("tag", TAGS)
@pytest.mark.parametrize("requeue", [False, True])
def test_reject_frame_is_pamqps(channel: int, tag: int, requeue: bool) -> None:
    expected = _pamqp(spec.Basic.Reject(delivery_tag=_signed(tag), requeue=requeue), channel)
    assert reject_frame(channel, tag, requeue=requeue) == expected


@pytest.mark.parametrize("channel", [0, 1, 65535])
@pytest.mark.parametrize("tag", TAGS)
@pytest.mark.parametrize("multiple", [False, True])
@pytest.mark.parametrize("requeue", [False, True])
def test_nack_frame_is_pamqps(channel: int, tag: int, multiple: bool, requeue: bool) -> None:
    method = spec.Basic.Nack(delivery_tag=_signed(tag), multiple=multiple, requeue=requeue)
    expected = _pamqp(method, channel)
    assert nack_frame(channel, tag, multiple=multiple, requeue=requeue) == expected


@given(st.integers(0, 65535), st.integers(1, 2**64 - 1), st.booleans(), st.booleans())
def test_settlement_frames_are_pamqps_for_any_tag(
    channel: int, tag: int, multiple: bool, requeue: bool
) -> None:
    assert ack_frame(channel, tag, multiple=multiple) == _pamqp(
        spec.Basic.Ack(delivery_tag=_signed(tag), multiple=multiple), channel
    )
    assert reject_frame(channel, tag, requeue=requeue) == _pamqp(
        spec.Basic.Reject(delivery_tag=_signed(tag), requeue=requeue), channel
    )
    assert nack_frame(channel, tag, multiple=multiple, requeue=requeue) == _pamqp(
        spec.Basic.Nack(delivery_tag=_signed(tag), multiple=multiple, requeue=requeue), channel
    )


def test_settlement_frames_split_back_into_one_method_frame() -> None:
    stream = ack_frame(3, 5, multiple=False) + nack_frame(3, 6, multiple=True, requeue=True)
    frames_read = FrameSplitter().feed(stream + reject_frame(4, 7, requeue=False))
    assert [(frame.kind, frame.channel) for frame in frames_read] == [
        (METHOD, 3),
        (METHOD, 3),
        (METHOD, 4),
    ]


@pytest.mark.parametrize("tag", TAGS)
def test_settlement_frames_layout(tag: int) -> None:
    def method(method_id: int, bits: int) -> bytes:
        return struct.pack(">BHIHHQB", METHOD, 513, 13, 60, method_id, tag, bits) + b"\xce"

    assert ack_frame(513, tag, multiple=True) == method(80, 1)
    assert reject_frame(513, tag, requeue=True) == method(90, 1)
    assert nack_frame(513, tag, multiple=False, requeue=True) == method(120, 2)
    assert nack_frame(513, tag, multiple=True, requeue=False) == method(120, 1)


def test_heartbeat_frame_is_pamqps() -> None:
    assert pamqp.frame.marshal(Heartbeat(), 0) == HEARTBEAT_FRAME


def _short(text: str) -> bool:
    return len(text.encode()) <= 255


short_strings = st.text(max_size=255).filter(_short)
exchange_names = st.text(
    st.one_of(
        st.sampled_from("abcXYZ019-_.:@#,/+ "),
        st.characters(min_codepoint=0x80, exclude_categories=["Cs"]),
    ),
    max_size=127,  # pamqp's limit (in characters) for an exchange name
).filter(_short)


def _deliver_payload(method: spec.Basic.Deliver, channel: int = 1) -> bytes:
    frame = pamqp.frame.marshal(method, channel)
    return frame[7:-1]


@given(
    short_strings,
    st.integers(1, 2**64 - 1),
    st.booleans(),
    exchange_names,
    short_strings,
    st.integers(0, 65535),
)
def test_read_deliver_reads_what_pamqp_reads(
    consumer_tag: str,
    delivery_tag: int,
    redelivered: bool,
    exchange: str,
    routing_key: str,
    channel: int,
) -> None:
    method = spec.Basic.Deliver(
        consumer_tag=consumer_tag,
        delivery_tag=_signed(delivery_tag),
        redelivered=redelivered,
        exchange=exchange,
        routing_key=routing_key,
    )
    payload = _deliver_payload(method, channel)
    decoded = spec.Basic.Deliver()
    decoded.unmarshal(payload[4:])
    assert is_deliver(payload)
    read = read_deliver(payload)
    assert read is not None
    assert read.consumer_tag == decoded.consumer_tag
    assert decoded.delivery_tag is not None
    # pamqp reads a longlong signed: a tag from 2**63 on comes back negative, rr's unsigned
    assert read.delivery_tag == decoded.delivery_tag % 2**64
    assert read.redelivered == decoded.redelivered
    assert read.exchange == decoded.exchange
    assert read.routing_key == decoded.routing_key
    assert read == Deliver(consumer_tag, delivery_tag, redelivered, exchange, routing_key)


def test_read_deliver_of_a_frame_from_the_splitter() -> None:
    frame = pamqp.frame.marshal(spec.Basic.Deliver("ctag", 42, True, "dead.é", "orders.créées"), 9)
    (read,) = FrameSplitter().feed(frame)
    assert read.kind == METHOD
    assert read.channel == 9
    assert read_deliver(read.payload) == Deliver("ctag", 42, True, "dead.é", "orders.créées")


def _hand_built_deliver(
    consumer_tag: bytes, delivery_tag: int, redelivered: bool, exchange: bytes, routing_key: bytes
) -> bytes:
    return (
        struct.pack(">HH", 60, 60)
        + bytes([len(consumer_tag)])
        + consumer_tag
        + struct.pack(">QB", delivery_tag, redelivered)
        + bytes([len(exchange)])
        + exchange
        + bytes([len(routing_key)])
        + routing_key
    )


def test_hand_built_deliver_is_pamqps() -> None:
    method = spec.Basic.Deliver("c", 7, True, "ex", "rk")
    assert _hand_built_deliver(b"c", 7, True, b"ex", b"rk") == _deliver_payload(method)


@pytest.mark.parametrize(
    ("consumer_tag", "exchange", "routing_key"),
    [
        (b"ctag", b"ex", b"\xff\xfe"),
        (b"ctag", b"ex", b"ok\x80"),
        (b"ctag", b"ex", b"\xc3"),  # a two-byte character cut in two
        (b"ctag", b"ex", b"\xed\xa0\x80"),  # an encoded surrogate: not UTF-8
        (b"\xff", b"ex", b"rk"),
        (b"ctag", b"\xfe", b"rk"),
    ],
)
def test_read_deliver_of_a_short_string_that_is_not_utf8_is_none(
    consumer_tag: bytes, exchange: bytes, routing_key: bytes
) -> None:
    payload = _hand_built_deliver(consumer_tag, 5, False, exchange, routing_key)
    assert is_deliver(payload)
    assert read_deliver(payload) is None


@pytest.mark.parametrize(
    "method",
    [
        spec.Basic.Deliver("ctag", 5, False, "ex", "rk"),
        spec.Basic.Deliver("", 1, True, "", ""),
        spec.Basic.Deliver("é-ctag", _signed(2**64 - 1), True, "dead.é", "clé.ü"),
    ],
    ids=["ascii", "empty", "non-ascii"],
)
def test_read_deliver_cut_short_raises(method: spec.Basic.Deliver) -> None:
    payload = _deliver_payload(method)
    assert read_deliver(payload) is not None
    not_raising: dict[bytes, Deliver | None] = {}
    for size in range(len(payload)):
        with contextlib.suppress(FrameError):
            not_raising[payload[:size]] = read_deliver(payload[:size])
    assert not_raising == {}


@given(short_strings, exchange_names, short_strings, st.data())
def test_read_deliver_cut_short_anywhere_raises(
    consumer_tag: str, exchange: str, routing_key: str, data: st.DataObject
) -> None:
    payload = _deliver_payload(spec.Basic.Deliver(consumer_tag, 3, False, exchange, routing_key))
    size = data.draw(st.integers(0, len(payload) - 1))
    with pytest.raises(FrameError):
        read_deliver(payload[:size])


@pytest.mark.parametrize(
    "method",
    [
        spec.Basic.Ack(delivery_tag=1),
        spec.Basic.Nack(delivery_tag=1),
        spec.Basic.Reject(delivery_tag=1),
        spec.Basic.GetOk(delivery_tag=1, exchange="ex", routing_key="rk", message_count=0),
        spec.Basic.Return(reply_code=312, reply_text="NO_ROUTE", exchange="ex", routing_key="rk"),
        spec.Basic.Consume(queue="q"),
        spec.Basic.ConsumeOk(consumer_tag="ctag"),
        spec.Basic.Cancel(consumer_tag="ctag"),
        spec.Basic.Publish(exchange="ex", routing_key="rk"),
        spec.Channel.Open(),
        spec.Connection.Close(reply_code=200, reply_text="bye", class_id=0, method_id=0),
    ],
    ids=lambda method: method.name,
)
def test_is_deliver_only_for_basic_deliver(method: PamqpFrame) -> None:
    assert not is_deliver(pamqp.frame.marshal(method, 1)[7:-1])


@pytest.mark.parametrize(
    "payload",
    [b"", b"\x00", b"\x00<", b"\x00<\x00", b"\x00<\x00\x00", b"\x00\x3c\x00\x3d\x00"],
)
def test_is_deliver_false_for_short_or_other_payloads(payload: bytes) -> None:
    assert not is_deliver(payload)


def test_is_deliver_false_for_a_content_header_payload() -> None:
    assert not is_deliver(ContentHeader(0, 5, spec.Basic.Properties(message_id="m")).marshal())


def _payload(method: PamqpFrame) -> bytes:
    """The method frame's payload pamqp writes (between its 7-byte head and its end octet)."""
    return _pamqp(method, 1)[7:-1]


@given(st.integers(0, 2**64 - 1), st.booleans(), st.booleans())
def test_confirms_read_by_hand_are_what_pamqp_reads(
    tag: int, multiple: bool, requeue: bool
) -> None:
    for method, nack in (
        (spec.Basic.Ack(delivery_tag=_signed(tag), multiple=multiple), False),
        (spec.Basic.Nack(delivery_tag=_signed(tag), multiple=multiple, requeue=requeue), True),
    ):
        payload = _payload(method)
        decoded = pamqp.frame.unmarshal(_pamqp(method, 1))[2]
        assert read_confirm(payload) == Confirm(nack, tag, bool(decoded.multiple))
        assert decoded.multiple is multiple


@pytest.mark.parametrize(
    "method",
    [
        spec.Basic.Reject(delivery_tag=5, requeue=True),
        spec.Basic.Qos(prefetch_count=5),
        spec.Basic.Cancel(consumer_tag="c"),
        spec.Channel.Flow(active=True),
        spec.Basic.Deliver("c", 5, False, "", "q"),
    ],
)
def test_other_methods_are_not_read_as_confirms(method: PamqpFrame) -> None:
    assert read_confirm(_payload(method)) is None
