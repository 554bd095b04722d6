"""Pure. Which line of a TOML text a key path was written on.

``tomllib`` gives values but no positions, so this reads the text once and records, for every
table header (``[queues.payouts]``, ``[[queues.a.bindings]]``) and every ``key = value`` line,
the key path it starts. A lookup falls back to the closest enclosing key that was found (an
inline table's keys resolve to the line of the key that holds it). Best effort by design: it
only ever improves an error message.
"""

from __future__ import annotations

import re

from rabbitctl_retry.topology.keypath import parse_key_path, split_keys

Path = tuple[str | int, ...]

_HEADER = re.compile(r"^\s*(\[\[?)\s*(.+?)\s*\]\]?\s*(#.*)?$")
_KEY_VALUE = re.compile(
    r"""^\s*((?:[A-Za-z0-9_-]+|"[^"]*"|'[^']*')(?:\s*\.\s*(?:[A-Za-z0-9_-]+|"[^"]*"|'[^']*'))*)\s*="""
)


def index_lines(text: str) -> dict[Path, int]:
    """Every key path the text spells out -> the 1-based line where it first appears."""
    lines: dict[Path, int] = {}
    table: Path = ()
    array_counts: dict[Path, int] = {}
    open_quote: str | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        if open_quote is not None:
            # Inside a multi-line string: nothing here is a key.
            if line.count(open_quote) % 2 == 1:
                open_quote = None
            continue
        for quote in ('"""', "'''"):
            if line.count(quote) % 2 == 1:
                open_quote = quote
        header = _HEADER.match(line)
        if header is not None and not line.lstrip().startswith("#"):
            keys: Path = tuple(split_keys(header.group(2)))
            if header.group(1) == "[[":
                count = array_counts.get(keys, 0)
                array_counts[keys] = count + 1
                lines.setdefault(keys, number)
                keys = (*keys, count)
            table = keys
            _record_prefixes(lines, table, number)
            continue
        key_value = _KEY_VALUE.match(line)
        if key_value is not None:
            path = (*table, *split_keys(key_value.group(1)))
            _record_prefixes(lines, path, number)
    return lines


def _record_prefixes(lines: dict[Path, int], path: Path, number: int) -> None:
    for end in range(1, len(path) + 1):
        lines.setdefault(path[:end], number)


def line_of(text: str, key_path: str) -> int | None:
    """The line of ``key_path`` (as :func:`~rabbitctl_retry.topology.keypath.key_path` spells
    it), or of the closest enclosing key written in the text; ``None`` if none is."""
    lines = index_lines(text)
    path: Path = tuple(parse_key_path(key_path))
    while path:
        if path in lines:
            return lines[path]
        path = path[:-1]
    return None
