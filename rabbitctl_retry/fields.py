"""Pure. AMQP field values as plain Python: one name for queue arguments, binding arguments
and message headers alike, shared by every layer (the pure core, the port, the emulator)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import TypeAlias

FieldValue: TypeAlias = (
    "str | int | float | bool | bytes | datetime | list[FieldValue] | dict[str, FieldValue] | None"
)
"""A value in an AMQP field table: a queue or binding argument, a message header."""

FieldTable: TypeAlias = "dict[str, FieldValue]"
"""An AMQP field table as plain Python."""


class EncodedTable(dict[str, "FieldValue"]):
    """A field table read from the wire, or made from one: its plain values (a ``dict``, in
    the order of the bytes) and ``encoded``, the bytes of the table they were read from (its
    fields, without the length in front).

    Written again (``field_codec.py``), each value still equal to the one read there, type
    and all, takes the bytes it was read from: its AMQP type tag, nested tables and arrays
    included; a value changed or added is encoded from its Python type. So a copy of a message
    keeps each header as it came (docs/explanation/attempts.md, "What a copy keeps"). A copy made
    with
    ``dict(table)`` forgets the bytes."""

    __slots__ = ("encoded",)

    def __init__(
        self,
        values: Mapping[str, FieldValue] | Iterable[tuple[str, FieldValue]] = (),
        /,
        *,
        encoded: bytes,
    ) -> None:
        super().__init__(values)
        self.encoded = encoded


def like(source: Mapping[str, FieldValue] | None, values: Mapping[str, FieldValue]) -> FieldTable:
    """``values`` (a table made from ``source``'s: a copy's headers), keeping ``source``'s
    bytes when it has them (:class:`EncodedTable`), so that the values it kept keep them."""
    if isinstance(source, EncodedTable):
        return EncodedTable(values, encoded=source.encoded)
    return values if type(values) is dict else dict(values)
