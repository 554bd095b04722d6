"""Corrections to pamqp, the AMQP codec under aiormq and rr's own client (docs/reference/runtime.md,
"Malformed messages" and "What a copy keeps").

**Field tables are rr's** (``field_codec.py``). pamqp sorts a table's names, writes every
``int`` as the smallest type that holds it and every float as a 32-bit ``f``, reads decimals
as ``Decimal`` and cuts names past 128 bytes: a copy of a message would change its headers'
types and order. rr's codec reads every type RabbitMQ takes, keeps the bytes of a table it
read beside its values (an ``EncodedTable``), and writes a table in its own order, each value
read from it as it was read, new values by their Python type (floats as 64-bit ``d``, names
whole up to 255 bytes, longer ones refused). :func:`install` makes pamqp read and write every
table with it.

**Non-ASCII names pass.** pamqp checks queue and exchange names against
``[a-zA-Z0-9-_.:@#,/+ ]`` before it sends a frame; RabbitMQ takes any UTF-8 name of at most
255 bytes, so a queue it holds (``dead.é``) could not even be inspected (docs/reference/dlq.md,
"Queue names"). :func:`install` widens the rule to non-ASCII characters; the ASCII rule stays.

**Content headers the codec cannot decode are decoded as far as possible.**

A message's properties are written by whoever published it. Some clients write values
pamqp refuses to decode: a ``timestamp`` in nanoseconds (a year past 9999), a header table
with a field type it does not know. pamqp then raises while reading the frame, aiormq closes
the whole connection, and the same message comes back on the next connection: a consumer
would reconnect forever and never get past it, and no ``rr dlq`` command could read the queue.

:func:`unmarshal_frame` wraps pamqp's frame decoder: a content-header frame it refuses is
decoded property by property instead; a property that cannot be decoded is skipped (its
length is known from its type) and named in :attr:`LenientContentHeader.undecodable`, and the
header keeps the raw property bytes, so rr can tell the message apart, settle it by its
documented rule and, when asked, move it aside byte for byte. Every other frame, and every
header pamqp decodes, is exactly what pamqp returns.

**Method frames that carry a message are decoded as far as possible too.** The routing key of
``basic.deliver``, ``basic.get-ok`` and ``basic.return`` is whatever the publisher wrote:
RabbitMQ takes one that is not UTF-8 (``b"\\xff\\xfe"``; it refuses such exchange names), and
pamqp refuses the whole frame, with the same result as above. :func:`unmarshal_frame` decodes
such a frame field by field instead: a short string that is not UTF-8 (``exchange``,
``routing_key``, ``consumer_tag``, ``reply_text``) is read with each byte that is not UTF-8
written as the four characters ``\\xff``, and named in the frame's ``undecodable``
(a :class:`LenientDeliver`, :class:`LenientGetOk` or :class:`LenientReturn`); the content
header that follows it on its channel keeps its raw property bytes (a
:class:`LenientContentHeader` with nothing undecodable), so such a message is set aside byte
for byte as well (docs/reference/runtime.md, "Malformed messages"). Which channels wait for such a
header is known per connection: aiormq reads each connection's frames in one task of its
own, and the set lives in a context variable of that task.

The corrections are made when this module is first imported (:func:`install`). Every rr module
that builds or reads frames imports it, directly or through ``transport/values.py``, so every
command has them, whatever it imported first (``rr topology validate`` builds frames without
the AMQP client; docs/reference/topology.md).
"""

from __future__ import annotations

import re
import struct
from contextvars import ContextVar
from typing import Final

import pamqp.frame
from pamqp import commands, constants, decode, encode, exceptions, header
from pamqp.frame import FrameTypes

from rabbitctl_retry.field_codec import decode_table as read_table
from rabbitctl_retry.field_codec import encode_table, encode_value
from rabbitctl_retry.fields import EncodedTable

_FIXED_SIZES: Final = {"octet": 1, "short": 2, "long": 4, "longlong": 8, "timestamp": 8}
_LENGTH_PREFIXES: Final = {"shortstr": (">B", 1), "longstr": (">I", 4), "table": (">I", 4)}
_PROPERTY_NAMES: Final = tuple(commands.Basic.Properties.__slots__)


class LenientContentHeader(header.ContentHeader):
    """A content header with properties rr could not decode.

    ``properties`` holds what could be decoded (the others are ``None``), ``undecodable``
    the names of the others (pamqp's names: ``message_type`` for ``type``), and
    ``raw_properties`` the property flags and values exactly as the broker sent them.
    """

    def __init__(
        self,
        *,
        body_size: int,
        properties: commands.Basic.Properties,
        undecodable: tuple[str, ...],
        raw_properties: bytes,
    ) -> None:
        super().__init__(0, body_size, properties)
        self.class_id = commands.Basic.frame_id  # type: ignore[assignment]
        self.undecodable = undecodable
        self.raw_properties = raw_properties


class LenientDeliver(commands.Basic.Deliver):
    """``basic.deliver`` with short strings that are not UTF-8, named in ``undecodable``."""

    undecodable: tuple[str, ...] = ()


class LenientGetOk(commands.Basic.GetOk):
    """``basic.get-ok`` with short strings that are not UTF-8, named in ``undecodable``."""

    undecodable: tuple[str, ...] = ()


class LenientReturn(commands.Basic.Return):
    """``basic.return`` with short strings that are not UTF-8, named in ``undecodable``."""

    undecodable: tuple[str, ...] = ()


LenientMethod = LenientDeliver | LenientGetOk | LenientReturn

_LENIENT_METHODS: Final[dict[int, type[LenientMethod]]] = {
    commands.Basic.Deliver.index: LenientDeliver,
    commands.Basic.GetOk.index: LenientGetOk,
    commands.Basic.Return.index: LenientReturn,
}
"""The methods a message's content follows, by pamqp's method index."""

_channels_keeping_raw_header: ContextVar[frozenset[int]] = ContextVar(
    "rr_channels_keeping_raw_header", default=frozenset()
)
"""The channels of this connection (its reader task's context) whose next content header
follows a lenient method frame (module docstring)."""


def undecodable_fields(method: object) -> tuple[str, ...]:
    """The fields of a method frame :func:`unmarshal_frame` could not decode (pamqp's names:
    ``routing_key``), ``()`` for any other frame."""
    if isinstance(method, LenientDeliver | LenientGetOk | LenientReturn):
        return method.undecodable
    return ()


class RawProperties(commands.Basic.Properties):
    """Properties that encode to bytes given verbatim (moving an undecodable message aside)."""

    def __init__(self, raw: bytes) -> None:
        super().__init__()
        self._raw = raw

    def marshal(self) -> bytes:
        return self._raw


_NAME_WITH_NON_ASCII = re.compile("^[a-zA-Z0-9-_.:@#,/+ \u0080-\ud7ff\ue000-\U0010ffff]*$")
"""pamqp's name rule, plus every non-ASCII character but lone surrogates."""

_strict_unmarshal = pamqp.frame.unmarshal


def decode_table(data: bytes) -> tuple[int, EncodedTable]:
    """A table as pamqp's decoders are called: the bytes from the table on; what they took
    and the table (``field_codec.py``)."""
    return read_table(data, 0)


def unmarshal_frame(data_in: bytes) -> tuple[int, int, FrameTypes]:
    """pamqp's ``frame.unmarshal``, lenient about content headers and the method frames of a
    message (module docstring)."""
    try:
        decoded = _strict_unmarshal(data_in)
    except exceptions.UnmarshalingException:
        lenient = _lenient_unmarshal(data_in)
        if lenient is None:
            raise
        return lenient
    keeping = _channels_keeping_raw_header.get()
    if not keeping:
        return decoded
    consumed, channel_id, frame = decoded
    if channel_id not in keeping or not isinstance(frame, header.ContentHeader):
        return decoded
    _channels_keeping_raw_header.set(keeping - {channel_id})
    raw = data_in[constants.FRAME_HEADER_SIZE + 12 : consumed - 1]
    return consumed, channel_id, with_raw(frame, raw)


def _lenient_unmarshal(data_in: bytes) -> tuple[int, int, FrameTypes] | None:
    """What :func:`unmarshal_frame` makes of a frame pamqp refused; ``None`` if nothing."""
    frame_type, channel_id, frame_size = pamqp.frame.frame_parts(data_in)
    start = constants.FRAME_HEADER_SIZE
    if frame_size is None or len(data_in) <= start + frame_size:
        return None
    if data_in[start + frame_size] != constants.FRAME_END:
        return None
    frame_data = data_in[start : start + frame_size]
    decoded: FrameTypes | None = None
    if frame_type == constants.FRAME_HEADER:
        decoded = decode_content_header(frame_data)
        keeping = _channels_keeping_raw_header.get()
        if decoded is not None and channel_id in keeping:
            _channels_keeping_raw_header.set(keeping - {channel_id})
    elif frame_type == constants.FRAME_METHOD:
        decoded = decode_method(frame_data)
        if decoded is not None:
            keeping = _channels_keeping_raw_header.get()
            _channels_keeping_raw_header.set(keeping | {channel_id})
    if decoded is None:
        return None
    return start + frame_size + 1, channel_id, decoded


def with_raw(content_header: header.ContentHeader, raw: bytes) -> LenientContentHeader:
    """A content header pamqp decoded, with its raw property bytes kept."""
    return LenientContentHeader(
        body_size=content_header.body_size,
        properties=content_header.properties,
        undecodable=(),
        raw_properties=raw,
    )


def decode_method(frame_data: bytes) -> LenientMethod | None:
    """Decode ``basic.deliver``, ``basic.get-ok`` or ``basic.return`` field by field, short
    strings that are not UTF-8 included (module docstring); ``None`` for any other method, or
    when the frame cannot be read even so."""
    try:
        (index,) = struct.unpack_from(">I", frame_data, 0)
    except struct.error:
        return None
    kind = _LENIENT_METHODS.get(index)
    if kind is None:
        return None
    method = kind()
    undecodable: list[str] = []
    data = frame_data[4:]
    bit, in_bits = 0, False
    try:
        for name in method.__slots__:
            data_type = method.amqp_type(name)
            if in_bits and (data_type != "bit" or bit == 8):
                data, bit, in_bits = data[1:], 0, False
            if data_type == "bit":
                setattr(method, name, decode.bit(data, bit)[1])
                bit, in_bits = bit + 1, True
                continue
            if data_type == "shortstr":
                consumed, text, decodable = _short_string(data)
                if not decodable:
                    undecodable.append(name)
                setattr(method, name, text)
            else:
                consumed, value = decode.by_type(data, data_type)
                setattr(method, name, value)
            data = data[consumed:]
    except (ValueError, struct.error):
        return None
    if not undecodable:
        return None  # pamqp refused it for another reason: not rr's to read
    method.undecodable = tuple(undecodable)
    return method


def _short_string(data: bytes) -> tuple[int, str, bool]:
    """A short string: bytes consumed, its text (bytes that are not UTF-8 written ``\\xff``),
    and whether it was UTF-8."""
    (length,) = struct.unpack_from(">B", data, 0)
    raw = data[1 : 1 + length]
    if len(raw) < length:
        raise ValueError("short string cut short")
    try:
        return 1 + length, raw.decode("utf-8"), True
    except UnicodeDecodeError:
        return 1 + length, raw.decode("utf-8", "backslashreplace"), False


def decode_content_header(frame_data: bytes) -> LenientContentHeader | None:
    """Decode a content header's properties one by one; ``None`` when even the layout (class,
    body size, flags, value lengths) cannot be read."""
    try:
        _class_id, _weight, body_size = struct.unpack_from(">HHQ", frame_data, 0)
        flags, offset = _flags(frame_data, 12)
    except struct.error:
        return None
    raw_properties = frame_data[12:]
    properties = commands.Basic.Properties()
    undecodable: list[str] = []
    for name in _PROPERTY_NAMES:
        if not flags & commands.Basic.Properties.flags[name]:
            continue
        data_type: str = getattr(commands.Basic.Properties, "_" + name)
        size = _encoded_size(frame_data, offset, data_type)
        if size is None:
            return None
        try:
            _consumed, value = decode.by_type(frame_data[offset : offset + size], data_type)
        except (ValueError, struct.error, OverflowError, UnicodeDecodeError):
            undecodable.append(name)
        else:
            setattr(properties, name, value)
        offset += size
    return LenientContentHeader(
        body_size=body_size,
        properties=properties,
        undecodable=tuple(undecodable),
        raw_properties=raw_properties,
    )


def _flags(data: bytes, offset: int) -> tuple[int, int]:
    """The property flags (16-bit words, bit 0 = another word follows) and the offset after."""
    flags = 0
    shift = 0
    while True:
        (word,) = struct.unpack_from(">H", data, offset)
        offset += 2
        flags |= (word & 0xFFFE) << shift
        if not word & 1:
            return flags, offset
        shift += 16


def _encoded_size(data: bytes, offset: int, data_type: str) -> int | None:
    """How many bytes the value at ``offset`` takes, read from its type (and length prefix)."""
    fixed = _FIXED_SIZES.get(data_type)
    if fixed is not None:
        size = fixed
    else:
        prefix = _LENGTH_PREFIXES.get(data_type)
        if prefix is None or offset + prefix[1] > len(data):
            return None
        (length,) = struct.unpack_from(prefix[0], data, offset)
        size = prefix[1] + length
    return size if offset + size <= len(data) else None


def install() -> None:
    """Make pamqp read frames with :func:`unmarshal_frame`, read and write tables with rr's
    codec (``field_codec.py``), and take non-ASCII names (idempotent; done when this module
    is imported).

    aiormq calls ``pamqp.frame.unmarshal`` by attribute, and pamqp's property and method
    codecs find their table codec by module global; the replacements only differ for a frame
    pamqp would refuse (a :class:`LenientContentHeader` or a lenient method frame instead of
    an exception), for the content header after such a method frame (its raw bytes kept), and
    for tables (module doc).
    """
    pamqp.frame.unmarshal = unmarshal_frame
    encode.encode_table_value = encode_value
    for domain in ("exchange-name", "queue-name"):
        constants.DOMAIN_REGEX[domain] = _NAME_WITH_NON_ASCII
    encode.field_table = encode_table  # type: ignore[assignment]
    encode.METHODS["table"] = encode_table
    decode.field_table = decode_table  # type: ignore[assignment]
    decode.METHODS["table"] = decode_table  # type: ignore[assignment]


install()  # on import: whoever builds a frame has the corrections (module docstring)
