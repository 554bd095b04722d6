"""Two corrections to pamqp, the AMQP codec under aiormq (docs/runtime.md, "Malformed
messages").

**Doubles stay doubles.** pamqp encodes every Python float in a field table as a 32-bit
``f``, though it decodes RabbitMQ's and other clients' 64-bit ``d``: a header ``0.1`` would
come back from a copy as ``0.10000000149011612``, and a double beyond 3.4e38 would make the
copy fail. :func:`encode_table_value` writes floats as ``d``.

**Header names are never cut.** pamqp shortens every table key longer than 128 bytes (the
spec's advice) and logs the raw key: a copy of a message whose header name another client
wrote at 200 bytes would silently lose the end of it. RabbitMQ takes keys up to 255 bytes
(an AMQP short string); :func:`field_table` writes them whole, and refuses longer ones.

**Non-ASCII names pass.** pamqp checks queue and exchange names against
``[a-zA-Z0-9-_.:@#,/+ ]`` before it sends a frame; RabbitMQ takes any UTF-8 name of at most
255 bytes, so a queue it holds (``dead.é``) could not even be inspected (docs/dlq.md, "Queue
names"). :func:`install` widens the rule to non-ASCII characters; the ASCII rule stays.

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
"""

from __future__ import annotations

import re
import struct
from typing import Final

import pamqp.frame
from pamqp import commands, common, constants, decode, encode, exceptions, header
from pamqp.frame import FrameTypes

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
_strict_encode_table_value = encode.encode_table_value


def field_table(value: common.FieldTable) -> bytes:
    """pamqp's field-table encoder, without shortening keys (module docstring)."""
    if not value:
        return struct.pack(">I", 0)
    if not isinstance(value, dict):
        raise TypeError(f"dict required, received {type(value)}")
    parts: list[bytes] = []
    for key, item in sorted(value.items()):
        try:
            parts.append(encode.short_string(key))
            parts.append(encode.encode_table_value(item))
        except TypeError as error:
            raise TypeError(f"{key[:64]!r} error: {error}") from error
    payload = b"".join(parts)
    return struct.pack(">I", len(payload)) + payload


def encode_table_value(value: common.FieldArray | common.FieldTable | common.FieldValue) -> bytes:
    """pamqp's table value encoder, with floats as 64-bit doubles (``d``)."""
    if isinstance(value, float):
        return b"d" + encode.double(value)
    return _strict_encode_table_value(value)


def unmarshal_frame(data_in: bytes) -> tuple[int, int, FrameTypes]:
    """pamqp's ``frame.unmarshal``, lenient about the properties of content headers."""
    try:
        return _strict_unmarshal(data_in)
    except exceptions.UnmarshalingException:
        frame_type, channel_id, frame_size = pamqp.frame.frame_parts(data_in)
        if frame_type != constants.FRAME_HEADER or frame_size is None:
            raise
        start = constants.FRAME_HEADER_SIZE
        frame_data = data_in[start : start + frame_size]
        content_header = decode_content_header(frame_data)
        if content_header is None:
            raise
        return start + frame_size + 1, channel_id, content_header


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
    """Make pamqp read frames with :func:`unmarshal_frame` and write tables with
    :func:`field_table` and :func:`encode_table_value` (idempotent).

    aiormq calls ``pamqp.frame.unmarshal`` by attribute, and pamqp's table encoders call
    ``encode_table_value`` by module global; the replacements only differ for a content
    header pamqp would refuse (a :class:`LenientContentHeader` instead of an exception), for
    floats (``d`` instead of ``f``) and for keys of 129 to 255 bytes (kept whole).
    """
    pamqp.frame.unmarshal = unmarshal_frame
    encode.encode_table_value = encode_table_value
    for domain in ("exchange-name", "queue-name"):
        constants.DOMAIN_REGEX[domain] = _NAME_WITH_NON_ASCII
    encode.field_table = field_table
    encode.METHODS["table"] = field_table
