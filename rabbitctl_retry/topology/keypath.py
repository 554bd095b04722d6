"""Pure. TOML key paths as users write them: ``queues."refunds.dead".durable``."""

from __future__ import annotations

import re

_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


_ESCAPES = {"b": "\b", "t": "\t", "n": "\n", "f": "\f", "r": "\r", '"': '"', "\\": "\\"}
_ESCAPE_OF = {value: f"\\{key}" for key, value in _ESCAPES.items()}


def quote_key(part: str) -> str:
    """A key as TOML spells it: bare when it can be, a basic string otherwise."""
    if _BARE_KEY.fullmatch(part):
        return part
    escaped = "".join(_ESCAPE_OF.get(char) or _escape_unprintable(char) for char in part)
    return f'"{escaped}"'


def _escape_unprintable(char: str) -> str:
    if char.isprintable():
        return char
    code = ord(char)
    return f"\\u{code:04X}" if code <= 0xFFFF else f"\\U{code:08X}"


def unescape(text: str, index: int) -> tuple[str, int]:
    """The character of the TOML escape at ``text[index]`` (just after the backslash), and
    the index after it."""
    char = text[index]
    if char in _ESCAPES:
        return _ESCAPES[char], index + 1
    width = {"u": 4, "U": 8}.get(char)
    if width is not None:
        digits = text[index + 1 : index + 1 + width]
        try:
            return chr(int(digits, 16)), index + 1 + width
        except ValueError:
            pass
    return char, index + 1


def key_path(*parts: str | int) -> str:
    """``("queues", "refunds.dead", "bindings", 0)`` -> ``queues."refunds.dead".bindings[0]``."""
    pieces: list[str] = []
    for part in parts:
        if isinstance(part, int):
            pieces.append(f"[{part}]")
        else:
            pieces.append(("." if pieces else "") + quote_key(part))
    return "".join(pieces)


def split_keys(text: str) -> list[str]:
    """The keys of a dotted TOML key or table header body: ``a."b.c".d`` -> ``[a, b.c, d]``.

    Bare keys, "basic strings" (with backslash escapes) and 'literal strings' are
    understood; white space around dots is ignored.
    """
    keys: list[str] = []
    index = 0
    length = len(text)
    while index < length:
        char = text[index]
        if char in " \t.":
            index += 1
            continue
        if char in "\"'":
            key, index = _quoted(text, index)
            keys.append(key)
            continue
        start = index
        while index < length and text[index] not in " \t.":
            index += 1
        keys.append(text[start:index])
    return keys


def parse_key_path(path: str) -> list[str | int]:
    """The inverse of :func:`key_path`.

    ``queues."a.b".bindings[0]`` -> ``["queues", "a.b", "bindings", 0]``.
    """
    parts: list[str | int] = []
    index = 0
    length = len(path)
    while index < length:
        char = path[index]
        if char == ".":
            index += 1
        elif char == "[":
            end = path.index("]", index)
            parts.append(int(path[index + 1 : end]))
            index = end + 1
        elif char == '"':
            key, index = _quoted(path, index)
            parts.append(key)
        else:
            start = index
            while index < length and path[index] not in ".[":
                index += 1
            parts.append(path[start:index])
    return parts


def _quoted(text: str, index: int) -> tuple[str, int]:
    """The key quoted at ``text[index]``: a "basic string" with its backslash escapes, or a
    'literal string' as it stands; with the index just past its closing quote."""
    quote = text[index]
    index += 1
    length = len(text)
    pieces: list[str] = []
    while index < length and text[index] != quote:
        if quote == '"' and text[index] == "\\" and index + 1 < length:
            char, index = unescape(text, index + 1)
            pieces.append(char)
            continue
        pieces.append(text[index])
        index += 1
    return "".join(pieces), index + 1
