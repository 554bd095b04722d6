"""Pure. What a value of a topology file must be to go on the AMQP 0-9-1 wire unchanged.

The rules and why (docs/reference/topology.md, "Malformed files"):

* Queue and exchange names: RabbitMQ accepts any UTF-8 short string (it even strips line
  breaks from a name silently). The AMQP client rr uses refuses, before anything reaches the
  wire, ASCII characters outside the AMQP 0-9-1 name grammar ``[A-Za-z0-9-_.:]`` (extended
  with ``@ # , / +`` and space) and exchange names over 127 characters; rr's transport lets
  non-ASCII characters through. So a name is made of those ASCII characters and printable
  non-ASCII ones (no C1 control, no bidi or other format character): a queue name at most
  255 bytes of UTF-8, an exchange name at most 127 characters and 255 bytes. A name with a
  non-ASCII character is at most 170 bytes: RabbitMQ cuts the text of an error at 252 bytes
  (measured on 3.10.8: ``NOT_FOUND - no queue '<name>...``), and a name cut inside a
  character makes the client drop the whole connection on the broker's reply; the longest
  text rr can get back about a declared name has about 80 bytes before the name.
* Routing keys, binding keys, header and argument names, argument strings: printable Unicode
  only (no C0/C1 controls, no bidi or other format characters, no NUL); short strings (routing
  keys, the exchange type) at most 255 bytes of UTF-8, table keys at most 128 (the client
  truncates longer ones silently).
* Integers: AMQP's signed 64 bits. TTLs and delays: 0 to 4294967295 ms, the bound of every
  RabbitMQ release (and of ``retry_after``).
* Argument values: strings, integers, finite floats that fit in 32 bits (the client sends
  floats as 32-bit), booleans, arrays and tables; no dates or times (TOML's local dates and
  times have no AMQP type, and a timestamp loses its sub-second part and time zone).
* Nesting: at most :data:`MAX_NESTING_DEPTH` tables and arrays deep, counted from the top of
  the file.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
MAX_TTL_MS = 2**32 - 1
"""The longest TTL, delay or expiry rr lets through: 4294967295 ms, about 49.7 days."""
MAX_QUEUE_NAME_BYTES = 255
MAX_EXCHANGE_NAME_BYTES = 255
MAX_EXCHANGE_NAME_CHARACTERS = 127
MAX_NON_ASCII_NAME_BYTES = 170
MAX_SHORT_STRING_BYTES = 255
MAX_FIELD_NAME_BYTES = 128
MAX_NESTING_DEPTH = 32
FLOAT32_MAX = 3.4028234663852886e38
NAME_ASCII_CHARACTERS = frozenset(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.:@#,/+ "
)
NAME_CHARACTERS_TEXT = (
    "letters, digits, - _ . : @ # , / + or space, and printable non-ASCII characters"
)

PathParts = tuple[str | int, ...]


@dataclass(frozen=True, slots=True)
class WireProblem:
    """Why a value cannot go on the wire, and where below the value it was checked from."""

    at: PathParts
    reason: str


def describe_text(text: str, limit: int = 40) -> str:
    """A short, escaped rendering of user text for an error message."""
    if len(text) > limit:
        return repr(text[:limit]) + "..."
    return repr(text)


def escape_unprintable(text: str) -> str:
    """``text`` with every non-printable character written as a Python escape (``\\x1b``)."""
    if text.isprintable():
        return text
    return "".join(
        char if char.isprintable() else char.encode("unicode_escape").decode("ascii")
        for char in text
    )


def unprintable_character(text: str) -> str | None:
    """The first character of ``text`` that is not printable (a control, format, separator
    other than space, or unassigned character), as ``U+XXXX``; ``None`` if all are."""
    if text.isprintable():
        return None
    for char in text:
        if not char.isprintable():
            return f"U+{ord(char):04X}"
    return None  # pragma: no cover - isprintable() said otherwise


SENDABLE_CHARACTERS = "letters, digits, - _ . : @ # , / + space and non-ASCII characters"


def sendable_queue_name_problem(name: str) -> str | None:
    """Why rr's AMQP client cannot send ``name`` as a queue name, or ``None``: UTF-8 of 1 to
    255 bytes whose ASCII characters keep to the client's name grammar (any other character
    but a lone surrogate goes). Looser than :func:`name_problem` (the rule of names rr
    declares): a queue someone else made can be read whenever its name can be sent."""
    try:
        size = len(name.encode("utf-8"))
    except UnicodeEncodeError as error:
        bad = name[error.start]
        return (
            f"is not UTF-8 text (it holds U+{ord(bad):04X}: a byte the command line could not "
            "decode)"
        )
    if size == 0:
        return f"is empty; a queue name is 1 to {MAX_QUEUE_NAME_BYTES} bytes"
    if size > MAX_QUEUE_NAME_BYTES:
        return f"is {size:,} bytes long; a queue name is at most {MAX_QUEUE_NAME_BYTES}"
    for char in name:
        if char < "\x80" and char not in NAME_ASCII_CHARACTERS:
            shown = repr(char) if char.isprintable() else f"U+{ord(char):04X}"
            return f"holds {shown}; a queue name rr can send holds only {SENDABLE_CHARACTERS}"
    return None


def name_problem(name: str, *, exchange: bool = False) -> str | None:
    """Why ``name`` cannot be a queue (or ``exchange``) name on the wire (module docstring)."""
    size = len(name.encode("utf-8"))
    limit = MAX_EXCHANGE_NAME_BYTES if exchange else MAX_QUEUE_NAME_BYTES
    if size > limit:
        return f"is {size} bytes long; at most {limit} go on the wire"
    if size > MAX_NON_ASCII_NAME_BYTES and not name.isascii():
        return (
            f"holds non-ASCII characters and is {size} bytes long; such a name is at most "
            f"{MAX_NON_ASCII_NAME_BYTES} bytes (RabbitMQ cuts its error messages at 252 "
            "bytes, and a name cut inside a character breaks the connection)"
        )
    if exchange and len(name) > MAX_EXCHANGE_NAME_CHARACTERS:
        return (
            f"is {len(name)} characters long; rr's AMQP client sends at most "
            f"{MAX_EXCHANGE_NAME_CHARACTERS}"
        )
    for char in name:
        allowed = char in NAME_ASCII_CHARACTERS if char < "\x80" else char.isprintable()
        if not allowed:
            shown = f"U+{ord(char):04X}" if not char.isprintable() else repr(char)
            return f"holds {shown}; a name may only hold {NAME_CHARACTERS_TEXT}"
    return None


def text_problem(text: str, max_bytes: int | None = None) -> str | None:
    """Why ``text`` cannot go on the wire as a routing key, table key or string value."""
    bad = unprintable_character(text)
    if bad is not None:
        return f"holds the control or format character {bad}; only printable characters go"
    if max_bytes is not None:
        size = len(text.encode("utf-8"))
        if size > max_bytes:
            return f"is {size} bytes long; at most {max_bytes} go on the wire"
    return None


def integer_problem(value: int, low: int = INT64_MIN, high: int = INT64_MAX) -> str | None:
    """Why ``value`` is outside ``low..high`` (AMQP's signed 64 bits by default); never
    formats a huge number in full."""
    if low <= value <= high:
        return None
    if value < INT64_MIN or value > INT64_MAX:
        return f"is outside AMQP's signed 64-bit range ({INT64_MIN} to {INT64_MAX})"
    return f"must be from {low} to {high}, not {value}"


def describe_value(value: object) -> str:
    """A short description of a TOML value for an error message (never a full repr)."""
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        if integer_problem(value) is not None:
            return "an integer outside the signed 64-bit range"
        return f"the integer {value}"
    if isinstance(value, float):
        return f"the float {value}"
    if isinstance(value, str):
        return f"the string {describe_text(value)}"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a table"
    return f"a TOML {type(value).__name__}"


def document_problem(document: Mapping[str, object]) -> WireProblem | None:
    """The first value of a parsed TOML document nested deeper than
    :data:`MAX_NESTING_DEPTH`, or an integer outside the signed 64-bit range, in file order.

    Iterative, so a document as deep as the parser could read never exhausts the stack.
    """
    for at, value, depth in _walk(document):
        if depth > MAX_NESTING_DEPTH:
            return WireProblem(
                at[:MAX_NESTING_DEPTH],
                f"tables and arrays nest more than {MAX_NESTING_DEPTH} levels deep here",
            )
        if isinstance(value, int) and not isinstance(value, bool):
            problem = integer_problem(value)
            if problem is not None:
                return WireProblem(at, problem)
    return None


def _walk(document: Mapping[str, object]) -> Iterator[tuple[PathParts, object, int]]:
    """Every value below ``document`` with its path and depth (the document's keys are at
    depth 1), depth first in file order, without recursion."""
    stack: list[tuple[PathParts, object, int]] = [
        ((key,), value, 1) for key, value in reversed(list(document.items()))
    ]
    while stack:
        at, value, depth = stack.pop()
        yield at, value, depth
        if depth > MAX_NESTING_DEPTH:
            continue
        children: list[tuple[PathParts, object, int]] = []
        if isinstance(value, dict):
            children = [((*at, str(key)), item, depth + 1) for key, item in value.items()]
        elif isinstance(value, list):
            children = [((*at, index), item, depth + 1) for index, item in enumerate(value)]
        stack.extend(reversed(children))


def table_problem(table: Mapping[str, object]) -> WireProblem | None:
    """Why a table of arguments (queue, exchange or binding) cannot go on the wire as an
    AMQP field table, with the path below the table; ``None`` if it can."""
    stack: list[tuple[PathParts, object]] = [((), table)]
    while stack:
        at, value = stack.pop()
        problem = _value_problem(value)
        if problem is not None:
            return WireProblem(at, problem)
        if isinstance(value, Mapping):
            for key in value:
                key_problem = text_problem(str(key), MAX_FIELD_NAME_BYTES)
                if key_problem is not None:
                    return WireProblem((*at, str(key)), f"the key {key_problem}")
            stack.extend(((*at, str(key)), item) for key, item in reversed(list(value.items())))
        elif isinstance(value, list | tuple):
            stack.extend(((*at, index), item) for index, item in reversed(list(enumerate(value))))
    return None


def _value_problem(value: object) -> str | None:
    if isinstance(value, bool | Mapping | list | tuple):
        return None
    if isinstance(value, int):
        return integer_problem(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            return f"{value} has no AMQP value; use a finite number"
        if abs(value) > FLOAT32_MAX:
            return f"the float {value} does not fit the 32-bit float AMQP tables carry"
        return None
    if isinstance(value, str):
        return text_problem(value)
    return (
        f"{describe_value(value)} has no AMQP type rr sends; use a string, an integer, a "
        "float, a boolean, an array or a table"
    )
