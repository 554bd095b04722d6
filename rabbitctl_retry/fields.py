"""Pure. AMQP field values as plain Python: one name for queue arguments, binding arguments
and message headers alike, shared by every layer (the pure core, the port, the emulator)."""

from __future__ import annotations

from datetime import datetime
from typing import TypeAlias

FieldValue: TypeAlias = (
    "str | int | float | bool | bytes | datetime | list[FieldValue] | dict[str, FieldValue] | None"
)
"""A value in an AMQP field table: a queue or binding argument, a message header."""

FieldTable: TypeAlias = "dict[str, FieldValue]"
"""An AMQP field table as plain Python."""
