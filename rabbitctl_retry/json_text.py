"""Pure. JSON text with nothing a terminal acts on: what every JSON document and line rr
writes goes through (the CLI's ``--output json`` and ``jsonl``, ``rr dlq export`` files, the
pending-copies file of ``rr run``; docs/reference/cli.md, "Output", and docs/reference/dlq.md, "JSON
output"). A document's longest array (a replay's results) can be written item by item
(:class:`StreamedArray`, :func:`json_chunks`), so that writing it holds one item at a time.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator
from typing import Any

_UNSAFE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff]"
)
"""What a terminal may act on or a UTF-8 encoder refuses: C0 (but tab and line feed), DEL,
C1, the bidi controls, U+2028/U+2029 and lone surrogates."""


def escape_unsafe(document: str) -> str:
    """``document`` (JSON text) with every :data:`_UNSAFE` character as a ``\\uXXXX`` escape.

    Outside strings JSON text holds only ASCII punctuation, digits, letters and whitespace,
    and ``json.dumps`` escapes C0 inside strings itself; so every match is inside a string,
    where the escape decodes to the same character: the same JSON value.
    """
    if document.isascii() and document.isprintable():
        return document
    return _UNSAFE.sub(lambda found: f"\\u{ord(found.group()):04x}", document)


class StreamedArray:
    """A JSON array too long to hold at once (a replay's results: one per dead letter): its
    items are made as :func:`json_chunks` writes them. Equal to a list of the same items."""

    __slots__ = ("_items", "_length")

    def __init__(self, items: Callable[[], Iterable[Any]], length: int) -> None:
        self._items = items
        self._length = length

    def __iter__(self) -> Iterator[Any]:
        return iter(self._items())

    def __len__(self) -> int:
        return self._length

    def __eq__(self, other: object) -> bool:
        if isinstance(other, StreamedArray | list | tuple):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"StreamedArray({self._length:,} items)"


def json_default(value: object) -> object:
    """``default=`` of every ``json.dumps`` of a document: a :class:`StreamedArray` as the
    list of its items (held whole: one line has no room to stream), anything else as text."""
    return list(value) if isinstance(value, StreamedArray) else str(value)


def json_chunks(document: Any, *, indent: int = 2) -> Iterator[str]:
    """``document`` as indented JSON text, in pieces, unsafe characters escaped
    (:func:`escape_unsafe`); each :class:`StreamedArray` in it written item by item, so that
    only one item is held at a time. The pieces joined are the text ``json.dumps`` would
    write for the same values."""
    streamed: list[StreamedArray] = []

    def placeholder(value: object) -> object:
        if not isinstance(value, StreamedArray):
            return str(value)
        streamed.append(value)
        return f"\x00rr-streamed:{len(streamed) - 1}\x00"

    text = json.dumps(document, indent=indent, ensure_ascii=False, default=placeholder)
    if not streamed:
        yield escape_unsafe(text)
        return
    pieces = _PLACEHOLDER.split(text)
    if pieces[1::2] != [str(number) for number in range(len(streamed))]:
        # a value inside the document reads like a placeholder: write it whole instead
        yield escape_unsafe(
            json.dumps(document, indent=indent, ensure_ascii=False, default=json_default)
        )
        return
    for number, piece in enumerate(pieces):
        if number % 2 == 0:
            yield escape_unsafe(piece)
            continue
        before = pieces[number - 1]
        line = before[before.rfind("\n") + 1 :]
        pad = " " * (len(line) - len(line.lstrip(" ")))
        yield from _array_chunks(streamed[int(piece)], pad, " " * indent)


_PLACEHOLDER = re.compile(r'"\\u0000rr-streamed:(\d+)\\u0000"')
"""A streamed array's place in the text ``json.dumps`` wrote (the NULs escaped)."""


def _array_chunks(array: StreamedArray, pad: str, step: str) -> Iterator[str]:
    """One streamed array's text, its opening bracket where the placeholder was, its items
    one indentation ``step`` deeper than the line ``pad`` starts."""
    inner = "\n" + pad + step
    opening = "[" + inner
    for item in array:
        text = json.dumps(item, indent=len(step), ensure_ascii=False, default=str)
        yield opening + escape_unsafe(text.replace("\n", inner))
        opening = "," + inner
    yield "[]" if opening.startswith("[") else "\n" + pad + "]"
