"""transport/content_header.py: the fast reader of a content header reads every header as the
general path does (pamqp's decoder with rr's corrections, then ``values.properties_from_header``),
or gives ``None`` and leaves it to the general path."""

from __future__ import annotations

import contextvars
import struct
from datetime import UTC, datetime

import pamqp.frame
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pamqp import exceptions
from pamqp.header import ContentHeader

from rabbitctl_retry.fields import FieldTable, FieldValue

# importing values (or codec) makes rr's codec corrections on pamqp (doubles as ``d``, whole
# header names): done here, before any test encodes or decodes a frame
from rabbitctl_retry.transport import codec, values
from rabbitctl_retry.transport.base import Properties
from rabbitctl_retry.transport.content_header import read_content_header

Read = tuple[int, Properties]


def _fits(text: str) -> bool:
    """An AMQP short string: at most 255 bytes of UTF-8."""
    return len(text.encode()) <= 255


short_strings = st.one_of(st.text(max_size=24), st.text(max_size=255).filter(_fits))
keys = st.text(max_size=40).filter(_fits)
leaves: st.SearchStrategy[FieldValue] = st.one_of(
    st.text(max_size=40),
    st.integers(-(2**63), 2**63 - 1),
    st.booleans(),
    st.floats(allow_nan=False),
    st.binary(max_size=40),
    st.none(),
)
field_values: st.SearchStrategy[FieldValue] = st.recursive(
    leaves,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(keys, inner, max_size=4)),
    max_leaves=12,
)
headers: st.SearchStrategy[FieldTable] = st.dictionaries(keys, field_values, max_size=6)
timestamps = st.datetimes(
    min_value=datetime(1970, 1, 1),
    max_value=datetime(2100, 1, 1),
    timezones=st.just(UTC),
).map(lambda stamp: stamp.replace(microsecond=0))
body_sizes = st.integers(0, 2**64 - 1)

properties = st.builds(
    Properties,
    content_type=st.none() | short_strings,
    content_encoding=st.none() | short_strings,
    headers=st.none() | headers,
    delivery_mode=st.none() | st.sampled_from([1, 2]),
    priority=st.none() | st.integers(0, 255),
    correlation_id=st.none() | short_strings,
    reply_to=st.none() | short_strings,
    expiration=st.none() | short_strings,
    message_id=st.none() | short_strings,
    timestamp=st.none() | timestamps,
    type=st.none() | short_strings,
    user_id=st.none() | short_strings,
    app_id=st.none() | short_strings,
)


def _encoded(props: Properties, body_size: int) -> bytes:
    """A content-header frame's payload, as pamqp (with rr's corrections) writes it."""
    header = ContentHeader(0, body_size, values.basic_properties(props))
    payload = header.marshal()
    assert payload == pamqp.frame.marshal(header, 1)[7:-1]
    return payload


def _pamqp_read(payload: bytes) -> Read:
    """The general path as pamqp decodes a well-formed header."""
    decoded = ContentHeader()
    decoded.unmarshal(payload)
    return decoded.body_size, values.properties_from_header(decoded, None)


def _general_read(payload: bytes) -> Read | None:
    """The general path on any payload: rr's lenient frame decoder (``codec.unmarshal_frame``,
    pamqp's first), in a context of its own (no channel waiting for a raw header); ``None``
    when even it refuses the frame."""
    frame = struct.pack(">BHI", 2, 1, len(payload)) + payload + b"\xce"
    try:
        _consumed, _channel, decoded = contextvars.Context().run(codec.unmarshal_frame, frame)
    except exceptions.UnmarshalingException:
        return None
    assert isinstance(decoded, ContentHeader)
    return decoded.body_size, values.properties_from_header(decoded, None)


def _assert_agrees(payload: bytes) -> Read | None:
    """The fast reader's answer is ``None`` or the general path's."""
    fast = read_content_header(payload)
    if fast is not None:
        assert fast == _general_read(payload)
    return fast


@given(properties, body_sizes)
def test_reads_what_the_general_path_reads(props: Properties, body_size: int) -> None:
    payload = _encoded(props, body_size)
    fast = read_content_header(payload)
    assert fast is None or fast == _pamqp_read(payload)
    assert fast is None or fast == _general_read(payload)


common_strings = st.text(min_size=1, max_size=64).filter(_fits)


@given(
    common_strings,
    common_strings,
    st.sampled_from([1, 2]),
    st.dictionaries(
        keys, st.one_of(st.text(max_size=64), st.integers(-(2**63), 2**63 - 1)), max_size=8
    ),
    body_sizes,
)
def test_reads_the_common_header_itself(
    message_id: str, content_type: str, delivery_mode: int, table: FieldTable, body_size: int
) -> None:
    props = Properties(
        message_id=message_id,
        content_type=content_type,
        delivery_mode=delivery_mode,
        headers=table,
    )
    payload = _encoded(props, body_size)
    assert read_content_header(payload) == _pamqp_read(payload) == (body_size, props)


def _short(value: bytes) -> bytes:
    return bytes([len(value)]) + value


def _payload(flags: int, *encoded_values: bytes, body_size: int = 3) -> bytes:
    """A content header's payload built by hand: class 60, weight 0, body size, one flags
    word, the values as given."""
    return struct.pack(">HHQH", 60, 0, body_size, flags) + b"".join(encoded_values)


CONTENT_TYPE, HEADERS, DELIVERY_MODE, MESSAGE_ID = 1 << 15, 1 << 13, 1 << 12, 1 << 7
TIMESTAMP, CLUSTER_ID, MORE_FLAGS = 1 << 6, 1 << 2, 1


def test_hand_built_payload_is_pamqps() -> None:
    props = Properties(content_type="text/plain", delivery_mode=2, message_id="m-1")
    built = _payload(
        CONTENT_TYPE | DELIVERY_MODE | MESSAGE_ID, _short(b"text/plain"), b"\x02", _short(b"m-1")
    )
    assert built == _encoded(props, 3)
    assert read_content_header(built) == (3, props)


def test_no_properties() -> None:
    assert read_content_header(_payload(0, body_size=0)) == (0, Properties())
    assert read_content_header(_encoded(Properties(), 2**64 - 1)) == (2**64 - 1, Properties())


def test_timestamp_and_nested_headers() -> None:
    props = Properties(
        headers={
            "x-death": [{"count": 2, "queue": "orders", "time": None}],
            "blob": b"\x00\xff",
            "ratio": 0.1,
            "ok": True,
            "é": "ü",
        },
        timestamp=datetime(2100, 1, 1, tzinfo=UTC),
        app_id="rr",
    )
    payload = _encoded(props, 10)
    assert read_content_header(payload) == _pamqp_read(payload) == (10, props)


def test_cluster_id_is_left_to_the_general_path() -> None:
    payload = _payload(MESSAGE_ID | CLUSTER_ID, _short(b"m-1"), _short(b"cluster"))
    assert read_content_header(payload) is None
    general = _general_read(payload)
    assert general is not None
    assert general[1].message_id == "m-1"


def test_empty_cluster_id_is_left_to_the_general_path() -> None:
    assert read_content_header(_payload(CLUSTER_ID, _short(b""))) is None


def test_second_flags_word_is_left_to_the_general_path() -> None:
    payload = _payload(MESSAGE_ID | MORE_FLAGS, b"\x00\x00", _short(b"m-1"))
    assert read_content_header(payload) is None
    assert _general_read(payload) == (3, Properties(message_id="m-1"))


@pytest.mark.parametrize(
    ("flags", "encoded"),
    [
        (MESSAGE_ID, [_short(b"\xff\xfe")]),
        (MESSAGE_ID, [_short(b"ok\x80")]),
        (MESSAGE_ID, [_short(b"\xc3")]),  # a two-byte character cut in two
        (MESSAGE_ID, [_short(b"\xed\xa0\x80")]),  # an encoded surrogate: not UTF-8
        (CONTENT_TYPE | MESSAGE_ID, [_short(b"\xff"), _short(b"m-1")]),
        (CONTENT_TYPE | MESSAGE_ID, [_short(b"text/plain"), _short(b"m-\xff")]),
    ],
)
def test_short_string_that_is_not_utf8_gives_none(flags: int, encoded: list[bytes]) -> None:
    payload = _payload(flags, *encoded)
    assert read_content_header(payload) is None
    general = _general_read(payload)
    assert general is not None
    assert general[1].undecodable  # the general path names it: the fast one could not


def test_header_name_that_is_not_utf8_gives_none() -> None:
    table = b"\x02\xff\xfeb\x01"
    payload = _payload(HEADERS, struct.pack(">I", len(table)) + table)
    assert read_content_header(payload) is None


def test_header_of_a_type_pamqp_does_not_know_gives_none() -> None:
    table = b"\x01a?\x00"
    payload = _payload(HEADERS, struct.pack(">I", len(table)) + table)
    assert read_content_header(payload) is None
    general = _general_read(payload)
    assert general is not None
    assert general[1].undecodable == ("headers",)


def test_timestamp_pamqp_cannot_decode_gives_none() -> None:
    """A timestamp in nanoseconds: pamqp reads it as milliseconds, a year past 9999."""
    nanoseconds = 1_700_000_000 * 10**9
    payload = _payload(TIMESTAMP, struct.pack(">Q", nanoseconds))
    assert read_content_header(payload) is None
    general = _general_read(payload)
    assert general is not None
    assert general[1].undecodable == ("timestamp",)


@pytest.mark.parametrize("extra", [b"\x00", b"\xce", b"\x01x", b"\x00" * 8])
def test_bytes_left_over_give_none(extra: bytes) -> None:
    props = Properties(content_type="application/json", headers={"a": 1}, message_id="m-1")
    payload = _encoded(props, 3)
    assert read_content_header(payload) == (3, props)
    assert read_content_header(payload + extra) is None


def test_bytes_left_over_with_no_properties_give_none() -> None:
    assert read_content_header(_payload(0, b"\x00")) is None


@pytest.mark.parametrize(
    "props",
    [
        Properties(message_id="m-1"),
        Properties(delivery_mode=2, priority=9),
        Properties(
            content_type="application/json",
            content_encoding="gzip",
            headers={"x-retry": 3, "x-death": [{"count": 1}], "é": b"\x00"},
            delivery_mode=2,
            priority=0,
            correlation_id="c",
            reply_to="amq.rabbitmq.reply-to",
            expiration="60000",
            message_id="m-é",
            timestamp=datetime(2024, 5, 6, 7, 8, 9, tzinfo=UTC),
            type="order.created",
            user_id="guest",
            app_id="rr",
        ),
    ],
)
def test_payload_cut_short_gives_none(props: Properties) -> None:
    payload = _encoded(props, 3)
    assert read_content_header(payload) == (3, props)
    answered = {
        size: read_content_header(payload[:size])
        for size in range(len(payload))
        if read_content_header(payload[:size]) is not None
    }
    assert answered == {}


@given(properties, body_sizes, st.data())
def test_payload_cut_short_anywhere_gives_none(
    props: Properties, body_size: int, data: st.DataObject
) -> None:
    payload = _encoded(props, body_size)
    size = data.draw(st.integers(0, len(payload) - 1))
    assert read_content_header(payload[:size]) is None


@given(properties, body_sizes, st.data())
def test_damaged_payload_is_none_or_read_as_the_general_path_reads_it(
    props: Properties, body_size: int, data: st.DataObject
) -> None:
    """Bytes changed, cut out or added anywhere: whatever the fast reader still answers is
    what the general path answers."""
    payload = bytearray(_encoded(props, body_size))
    for _ in range(data.draw(st.integers(1, 3))):
        at = data.draw(st.integers(0, len(payload)))
        change = data.draw(st.sampled_from(["set", "cut", "add"]))
        if change == "set" and at < len(payload):
            payload[at] = data.draw(st.integers(0, 255))
        elif change == "cut":
            del payload[at : at + data.draw(st.integers(1, 4))]
        else:
            payload[at:at] = data.draw(st.binary(min_size=1, max_size=4))
    _assert_agrees(bytes(payload))


@pytest.mark.parametrize(
    ("declared", "entries", "after"),
    [
        # a long string ("S", 10 bytes) whose bytes lie past the table's declared end
        (7, b"\x01aS" + struct.pack(">I", 10), _short(b"abcdefghi")),
        # a byte array ("x") likewise
        (7, b"\x01ax" + struct.pack(">I", 10), _short(b"abcdefghi")),
        # a field name with its value's type past the table's declared end
        (2, b"\x01a", _short(b"V")),
    ],
    ids=["long-string", "byte-array", "value-type"],
)
def test_table_whose_entries_overrun_its_size_is_none_or_read_as_the_general_path_reads_it(
    declared: int, entries: bytes, after: bytes
) -> None:
    assert len(entries) == declared
    payload = _payload(HEADERS | MESSAGE_ID, struct.pack(">I", declared) + entries, after)
    _assert_agrees(payload)
