"""Pure. Which line of a TOML text a key path was written on.

``tomllib`` gives values but no positions, so this reads the text once and records, for every
table header (``[queues.payouts]``, ``[[queues.a.bindings]]``) and every ``key = value`` line,
the key path it starts. A lookup falls back to the closest enclosing key that was found (an
inline table's keys resolve to the line of the key that holds it). Best effort by design: it
only ever improves an error message.

Linear in the size of the text: each line is scanned once, left to right, by hand (no
backtracking regular expression), so an error in a file with megabyte-long lines is reported
as fast as one in a short file.
"""

from __future__ import annotations

from rabbitctl_retry.topology.keypath import parse_key_path, unescape

Path = tuple[str | int, ...]

_BARE_KEY_CHARACTERS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
_BLANK = " \t"


def index_lines(text: str) -> dict[Path, int]:
    """Every key path the text spells out -> the 1-based line where it first appears."""
    lines: dict[Path, int] = {}
    table: Path = ()
    array_counts: dict[Path, int] = {}
    open_quote: str | None = None
    # TOML ends a line with LF or CRLF only; str.splitlines() would also split on \x0c,
    # \x1c, \u2028 and others that TOML allows inside strings and comments.
    for number, raw_line in enumerate(text.split("\n"), start=1):
        line = raw_line.removesuffix("\r")
        if open_quote is not None:
            # Inside a multi-line string: nothing here is a key.
            if line.count(open_quote) % 2 == 1:
                open_quote = None
            continue
        for quote in ('"""', "'''"):
            if line.count(quote) % 2 == 1:
                open_quote = quote
        header = _read_header(line)
        if header is not None:
            keys, is_array = header
            if is_array:
                count = array_counts.get(keys, 0)
                array_counts[keys] = count + 1
                lines.setdefault(keys, number)
                keys = (*keys, count)
            table = keys
            _record_prefixes(lines, table, number)
            continue
        assigned = _read_assigned_key(line)
        if assigned is not None:
            _record_prefixes(lines, (*table, *assigned), number)
    return lines


def _skip_blank(line: str, index: int) -> int:
    length = len(line)
    while index < length and line[index] in _BLANK:
        index += 1
    return index


def _read_dotted_key(line: str, index: int) -> tuple[Path, int] | None:
    """The keys of the dotted key starting at ``line[index]`` and the index after it, or
    ``None`` if no key starts there. Each character is looked at once."""
    keys: list[str | int] = []
    length = len(line)
    while True:
        index = _skip_blank(line, index)
        if index >= length:
            return None
        char = line[index]
        if char == '"':
            key, index = _read_basic_string(line, index + 1)
            if index < 0:
                return None
        elif char == "'":
            end = line.find("'", index + 1)
            if end < 0:
                return None
            key, index = line[index + 1 : end], end + 1
        elif char in _BARE_KEY_CHARACTERS:
            start = index
            while index < length and line[index] in _BARE_KEY_CHARACTERS:
                index += 1
            key = line[start:index]
        else:
            return None
        keys.append(key)
        index = _skip_blank(line, index)
        if index < length and line[index] == ".":
            index += 1
            continue
        return tuple(keys), index


def _read_basic_string(line: str, index: int) -> tuple[str, int]:
    """The text of the basic string whose body starts at ``line[index]`` and the index after
    its closing quote; index -1 if it does not close on this line."""
    pieces: list[str] = []
    length = len(line)
    while index < length:
        char = line[index]
        if char == '"':
            return "".join(pieces), index + 1
        if char == "\\" and index + 1 < length:
            decoded, index = unescape(line, index + 1)
            pieces.append(decoded)
            continue
        pieces.append(char)
        index += 1
    return "", -1


def _read_header(line: str) -> tuple[Path, bool] | None:
    """``[a.b]`` -> ``(("a", "b"), False)``, ``[[a.b]]`` -> ``(("a", "b"), True)``."""
    index = _skip_blank(line, 0)
    if not line.startswith("[", index):
        return None
    is_array = line.startswith("[[", index)
    read = _read_dotted_key(line, index + (2 if is_array else 1))
    if read is None:
        return None
    keys, index = read
    closing = "]]" if is_array else "]"
    if not line.startswith(closing, index):
        return None
    index = _skip_blank(line, index + len(closing))
    if index < len(line) and line[index] != "#":
        return None
    return keys, is_array


def _read_assigned_key(line: str) -> Path | None:
    """The keys of ``a."b.c" = value``, or ``None`` if the line assigns nothing."""
    read = _read_dotted_key(line, 0)
    if read is None:
        return None
    keys, index = read
    if not line.startswith("=", index):
        return None
    return keys


_MAX_RECORDED_DEPTH = 64
"""Deeper keys are not recorded (their line is that of their 64-key prefix): recording every
prefix of a key of n parts costs n * n, and rr reports nothing that deep."""


def _record_prefixes(lines: dict[Path, int], path: Path, number: int) -> None:
    for end in range(1, min(len(path), _MAX_RECORDED_DEPTH) + 1):
        lines.setdefault(path[:end], number)


def line_of(text: str, key_path: str) -> int | None:
    """The line of ``key_path`` (as :func:`~rabbitctl_retry.topology.keypath.key_path` spells
    it), or of the closest enclosing key written in the text; ``None`` if none is."""
    lines = index_lines(text)
    path: Path = tuple(parse_key_path(key_path))[:_MAX_RECORDED_DEPTH]
    while path:
        if path in lines:
            return lines[path]
        path = path[:-1]
    return None
