"""Pure. TOML key paths as users write them: ``queues."refunds.dead".durable``."""

from __future__ import annotations

import re

_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


def quote_key(part: str) -> str:
    """A key as TOML spells it: bare when it can be, double-quoted otherwise."""
    if _BARE_KEY.match(part):
        return part
    escaped = part.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'


def key_path(*parts: str | int) -> str:
    """``("queues", "refunds.dead", "bindings", 0)`` -> ``queues."refunds.dead".bindings[0]``."""
    text = ""
    for part in parts:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += ("." if text else "") + quote_key(part)
    return text


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
            quote = char
            index += 1
            key = ""
            while index < length and text[index] != quote:
                if quote == '"' and text[index] == "\\" and index + 1 < length:
                    index += 1
                key += text[index]
                index += 1
            index += 1
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
            index += 1
            key = ""
            while index < length and path[index] != '"':
                if path[index] == "\\" and index + 1 < length:
                    index += 1
                key += path[index]
                index += 1
            index += 1
            parts.append(key)
        else:
            start = index
            while index < length and path[index] not in ".[":
                index += 1
            parts.append(path[start:index])
    return parts
