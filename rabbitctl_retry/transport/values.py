"""The port's values as pamqp encodes them, and back: arguments and message properties.

Only pamqp (the codec under aiormq) is needed here, not the AMQP client: the shells use
:func:`encoding_problem` as a dry run of the adapter's own encoder (``rr dlq import`` checks
every record before it publishes anything, docs/reference/dlq.md "Import"). Header tables go to and
come from the wire through rr's table codec (``field_codec.py``, installed by ``codec.py``): a table
read keeps its bytes (an ``EncodedTable``), and is written again as it was read.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from datetime import datetime
from decimal import Decimal
from operator import attrgetter
from typing import cast

from pamqp import commands as spec
from pamqp import common as wire
from pamqp.header import ContentHeader

from rabbitctl_retry.errors import DataError, RrError
from rabbitctl_retry.fields import FieldValue
from rabbitctl_retry.transport import codec
from rabbitctl_retry.transport.base import Properties, QueueInfo
from rabbitctl_retry.transport.content_header import PROPERTY_NAMES

_WIRE_READY = frozenset({str, int, bool, float, type(None), datetime})


def wire_arguments(arguments: Mapping[str, FieldValue] | None) -> wire.FieldTable | None:
    return None if arguments is None else wire_table(arguments)


def wire_table(table: Mapping[str, FieldValue]) -> wire.FieldTable:
    """Queue or binding arguments as pamqp takes them: bytes as bytearray (byte array),
    tuples as lists; a value of another type is refused here, naming its field."""
    if type(table) is dict:
        for value in table.values():
            if type(value) not in _WIRE_READY:
                break
        else:
            return cast(wire.FieldTable, table)
    return {key: _wire_value(key, value) for key, value in table.items()}


def _wire_value(key: str, value: object) -> wire.FieldValue:
    if value is None or isinstance(value, bool | int | float | str | datetime | Decimal):
        return value
    if isinstance(value, bytes | bytearray | memoryview):
        return bytearray(value)
    if isinstance(value, Mapping):
        return wire_table(value)
    if isinstance(value, list | tuple):
        return [_wire_value(key, item) for item in value]
    raise DataError(f"field {key!r}: {type(value).__name__} values cannot go in an AMQP table")


def queue_info(ok: spec.Queue.DeclareOk, name: str) -> QueueInfo:
    """What a queue.declare-ok says of the queue ``name`` was asked for (a field pamqp left
    ``None``: the name asked, or 0)."""
    return QueueInfo(
        name=ok.queue or name,
        message_count=ok.message_count or 0,
        consumer_count=ok.consumer_count or 0,
    )


def basic_properties(
    properties: Properties, kind: type[spec.Basic.Properties] = spec.Basic.Properties
) -> spec.Basic.Properties:
    """``properties`` as pamqp's ``kind`` (raw ones as :class:`codec.RawProperties`); header
    tables as they are: rr's codec writes them (``field_codec.py``)."""
    if properties.raw is not None:
        return codec.RawProperties(properties.raw)
    return kind(**dict(zip(_PAMQP_NAMES, _rr_values(properties), strict=True)))


def properties_from_header(content_header: ContentHeader, method: object = None) -> Properties:
    """A message's properties, from its content header and the method frame before it.

    ``undecodable`` names what the codec could not decode: the method frame's fields first
    (``routing_key``, as :class:`~rabbitctl_retry.transport.base.Delivery` names them), then
    the properties; ``raw`` keeps the property bytes as received whenever it names any
    (docs/reference/runtime.md, "Malformed messages").
    """
    undecodable = codec.undecodable_fields(method)
    raw: bytes | None = None
    if isinstance(content_header, codec.LenientContentHeader):
        undecodable += tuple(_RR_NAMES.get(name, name) for name in content_header.undecodable)
        raw = content_header.raw_properties if undecodable else None
    read = zip(PROPERTY_NAMES, _pamqp_values(content_header.properties), strict=True)
    return Properties(**dict(read), undecodable=undecodable, raw=raw)


_RR_NAMES = {"message_type": "type"}
"""pamqp's property names that rr's :class:`Properties` spells differently."""

_PAMQP_NAMES = tuple(
    {rr: pamqp for pamqp, rr in _RR_NAMES.items()}.get(name, name) for name in PROPERTY_NAMES
)
"""pamqp's name of each property, in the order of :data:`PROPERTY_NAMES`."""

_rr_values = attrgetter(*PROPERTY_NAMES)
_pamqp_values = attrgetter(*_PAMQP_NAMES)


FRAME_MAX_BYTES = 131_072
"""RabbitMQ's default ``frame_max``. A message's properties and headers travel in one content
header frame: a bigger one makes RabbitMQ close the connection (FRAME_ERROR 501)."""

_HEADER_FRAME_OVERHEAD_BYTES = 8 + 12
"""A frame's own bytes (type, channel, size, end) and the content header's class id, weight
and body size, around the encoded properties."""


def encoding_problem(properties: Properties) -> str | None:
    """Why the AMQP client cannot send ``properties``, or None: a dry run of the adapter's
    own encoder, and the frame size RabbitMQ takes."""
    try:
        encoded = basic_properties(properties).marshal()
    except (RrError, ValueError, TypeError, OverflowError, struct.error, RecursionError) as error:
        return f"properties and headers cannot be encoded: {error}"
    size = len(encoded) + _HEADER_FRAME_OVERHEAD_BYTES
    if size > FRAME_MAX_BYTES:
        return (
            f"properties and headers take {size:,} bytes encoded; RabbitMQ takes at most "
            f"{FRAME_MAX_BYTES:,} (its frame_max) and closes the connection otherwise"
        )
    return None
