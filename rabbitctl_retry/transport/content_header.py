"""A content header's properties read straight into the port's :class:`Properties`.

The hot half of reading a message for rr's own client (``transport/native.py``): one pass over
the property flags and values, with rr's table codec for a header table (``field_codec.py``:
its values, and its bytes kept) and pamqp's decoder for a timestamp. Anything it does not read
the common way (a ``cluster_id``, a second flags word, a value that is not UTF-8, a table the
codec refuses, bytes left over) gives ``None``, and the caller reads the
frame with rr's lenient codec instead (``transport/codec.py``), whose answer is the rule:
tests/unit/test_content_header.py checks that both read every header alike.
"""

from __future__ import annotations

import struct

from pamqp import decode

from rabbitctl_retry.field_codec import decode_table
from rabbitctl_retry.transport.base import Properties

_SIZE_AND_FLAGS = struct.Struct(">QH")
_NOT_READ_HERE = 0b111
"""``cluster_id`` (bit 2) and the flags' continuation (bit 0): the general codec reads them."""


def read_content_header(payload: bytes) -> tuple[int, Properties] | None:
    """(body size, properties) of a content-header frame's payload, or ``None`` (module doc)."""
    try:
        body_size, flags = _SIZE_AND_FLAGS.unpack_from(payload, 4)
        if flags & _NOT_READ_HERE:
            return None
        offset = 14
        fields: dict[str, object] = {}
        for name, bit, kind in _LAYOUT:
            if not flags & bit:
                continue
            if kind == 0:  # shortstr
                size = payload[offset]
                end = offset + 1 + size
                if end > len(payload):
                    return None
                fields[name] = payload[offset + 1 : end].decode()
                offset = end
            elif kind == 1:  # octet
                fields[name] = payload[offset]
                offset += 1
            elif kind == 2:  # table: as the general path reads it
                offset, fields[name] = decode_table(payload, offset)
            else:  # timestamp
                consumed, stamp = decode.timestamp(payload[offset : offset + 8])
                fields[name] = stamp
                offset += consumed
    except (IndexError, ValueError, struct.error, TypeError, OverflowError):
        return None  # UnicodeDecodeError is a ValueError
    if offset != len(payload):
        return None
    return body_size, Properties(**fields)  # type: ignore[arg-type]


_SHORTSTR, _OCTET, _TABLE, _TIMESTAMP = 0, 1, 2, 3
_LAYOUT = (
    ("content_type", 1 << 15, _SHORTSTR),
    ("content_encoding", 1 << 14, _SHORTSTR),
    ("headers", 1 << 13, _TABLE),
    ("delivery_mode", 1 << 12, _OCTET),
    ("priority", 1 << 11, _OCTET),
    ("correlation_id", 1 << 10, _SHORTSTR),
    ("reply_to", 1 << 9, _SHORTSTR),
    ("expiration", 1 << 8, _SHORTSTR),
    ("message_id", 1 << 7, _SHORTSTR),
    ("timestamp", 1 << 6, _TIMESTAMP),
    ("type", 1 << 5, _SHORTSTR),
    ("user_id", 1 << 4, _SHORTSTR),
    ("app_id", 1 << 3, _SHORTSTR),
)
"""Each property rr reads: its name in :class:`Properties`, its flag, its AMQP type, in the
order of the frame."""

PROPERTY_NAMES = tuple(name for name, _, _ in _LAYOUT)
"""The basic properties by their names in :class:`Properties`, in the order of the frame
(``transport/values.py`` converts them to pamqp's and back by these)."""
