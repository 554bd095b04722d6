"""Pure. JSON-shaped data (dicts with string keys, lists, strings, numbers, booleans, None)
as YAML text that any YAML 1.1 or 1.2 reader loads back to the same data, with nothing a
terminal acts on: ``rr asyncapi -o yaml`` (docs/reference/cli.md, "rr asyncapi").

A string is written plain only when no reader can take it for anything else (letters,
digits and ``_ . - / $`` and inner spaces, starting with a letter, ``_`` or ``$``, and not a
word a reader turns into a boolean or null); every other string is double-quoted, with
``\\`` escapes for the quote, the backslash and every character that is not printable (line
breaks, tabs, controls, bidi controls, U+2028/U+2029). A float always has a ``.`` (``1.0e+16``,
not ``1e+16``, which YAML 1.1 reads as a string).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence

INDENT = 2

_PLAIN = re.compile(r"[A-Za-z_$](?:[A-Za-z0-9_.\-/$ ]*[A-Za-z0-9_.\-/$])?")
_WORDS = frozenset({"y", "n", "yes", "no", "on", "off", "true", "false", "null"})
"""Words a YAML reader turns into a boolean or null (YAML 1.1's and 1.2's), in any case."""

_LONGEST_SIMPLE_KEY = 1000
"""A key written as ``key: value`` must be shorter than 1024 characters (YAML's simple-key
limit); a longer one is written as an explicit ``? key`` line."""

_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\t": "\\t"}


def yaml_text(value: object) -> str:
    """``value`` as a YAML document, ending in a line break."""
    if _is_block(value):
        return "\n".join(_block(value, 0)) + "\n"
    return _inline(value) + "\n"


def _is_block(value: object) -> bool:
    """A non-empty mapping or list: written over lines of its own."""
    return isinstance(value, Mapping | list | tuple) and len(value) > 0


def _block(value: object, indent: int) -> list[str]:
    if isinstance(value, Mapping):
        return _mapping(value, indent)
    assert isinstance(value, Sequence)
    return _sequence(value, indent)


def _mapping(value: Mapping[object, object], indent: int) -> list[str]:
    pad = " " * indent
    lines: list[str] = []
    for key, item in value.items():
        if not isinstance(key, str):
            raise TypeError(f"a YAML mapping key here is a string, not {type(key).__name__}")
        written = scalar_text(key)
        if len(written) > _LONGEST_SIMPLE_KEY:
            lines.append(f"{pad}? {written}")
            written = ""
        if _is_block(item):
            lines.append(f"{pad}{written}:")
            lines += _block(item, indent + INDENT)
        else:
            lines.append(f"{pad}{written}: {_inline(item)}")
    return lines


def _sequence(value: Sequence[object], indent: int) -> list[str]:
    pad = " " * indent
    lines: list[str] = []
    for item in value:
        if _is_block(item):
            inner = _block(item, indent + INDENT)
            lines.append(f"{pad}- {inner[0][indent + INDENT :]}")
            lines += inner[1:]
        else:
            lines.append(f"{pad}- {_inline(item)}")
    return lines


def _inline(value: object) -> str:
    """A scalar, or an empty mapping or list, on one line."""
    if isinstance(value, Mapping):
        assert not value
        return "{}"
    if isinstance(value, list | tuple):
        assert not value
        return "[]"
    return scalar_text(value)


def scalar_text(value: object) -> str:
    """One scalar as YAML: null, true/false, a number, or a string plain or double-quoted."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _float_text(value)
    if isinstance(value, str):
        return value if _plain(value) else _quoted(value)
    raise TypeError(f"YAML here holds JSON-shaped data, not {type(value).__name__}")


def _float_text(value: float) -> str:
    if not math.isfinite(value):
        raise ValueError(f"{value} is not a JSON number")
    text = repr(value)
    mantissa, e, exponent = text.partition("e")
    if "." not in mantissa:
        mantissa += ".0"
    return f"{mantissa}{e}{exponent}"


def _plain(text: str) -> bool:
    return _PLAIN.fullmatch(text) is not None and text.lower() not in _WORDS


def _quoted(text: str) -> str:
    return '"' + "".join(_escaped(char) for char in text) + '"'


def _escaped(char: str) -> str:
    known = _ESCAPES.get(char)
    if known is not None:
        return known
    if char.isprintable():
        return char
    code = ord(char)
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


__all__ = ["scalar_text", "yaml_text"]
