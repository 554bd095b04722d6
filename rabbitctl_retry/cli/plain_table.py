"""Pure. Tables as text (:class:`Rows`), and those too big for rich as plain lines, written
as they are made.

rich measures and lays out a whole table before it prints a line: a topology of 10,000
queues (40,000 rows) took a minute and a gigabyte. Past :data:`LARGE_TABLE_ROWS` rows a
table is printed here instead, one line at a time, in the same columns (a cell's lines kept,
its control characters escaped by the caller), without folding to the terminal's width.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

LARGE_TABLE_ROWS = 2000
"""Tables with more rows than this are printed plain."""


@dataclass(frozen=True, slots=True)
class Rows:
    """A table as text: its title, column names and rows of cells (a cell may hold lines)."""

    title: str
    columns: tuple[str, ...]
    rows: Sequence[tuple[str, ...]]


def plain_lines(table: Rows) -> Iterator[str]:
    """The table's lines: the title, the header, a rule, then each row (a cell of several
    lines makes its row that many lines high). Pure."""
    widths = [len(name) for name in table.columns]
    for row in table.rows:
        for index, text in enumerate(row):
            widths[index] = max(widths[index], *(len(line) for line in text.split("\n")))
    yield table.title
    yield _line(table.columns, widths)
    yield "─┼─".join("─" * width for width in widths)
    for row in table.rows:
        cells = [text.split("\n") for text in row]
        for depth in range(max(len(lines) for lines in cells)):
            yield _line([lines[depth] if depth < len(lines) else "" for lines in cells], widths)


def _line(texts: Sequence[str], widths: Sequence[int]) -> str:
    return " │ ".join(text.ljust(width) for text, width in zip(texts, widths, strict=True)).rstrip()
