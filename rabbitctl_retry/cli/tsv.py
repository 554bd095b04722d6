"""Pure. ``--output tsv``: tables as tab-separated lines for pipes (docs/reference/cli.md, "Output
formats").

One header line with the column names, then one line per row, the fields separated by a TAB:
no box, no colour, no count or footer line, no folding. A field is its raw value, escaped so
that each row stays one line and nothing in it acts on a terminal: a backslash is ``\\\\``,
a TAB ``\\t``, a line feed ``\\n``, a carriage return ``\\r``, and every other character the
table output escapes (C0 and C1 controls, DEL, bidi controls, U+2028/U+2029, lone
surrogates; ``cli/render.py`` ``printable``) is its Python escape (``\\x1b``, ``\\u202e``).
Several tables are sections separated by an empty line, each titled table's starting with a
``# TITLE`` line; a reading of ``rr status --watch`` is a section of its own, under its time.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

from rabbitctl_retry.cli.plain_table import Rows


def tsv_field(text: str) -> str:
    """``text`` as one TSV field: backslash, TAB, line breaks and control characters escaped."""
    if text.isprintable() and "\\" not in text:
        return text
    return "".join(
        char
        if (char.isprintable() or char == " ") and char != "\\"
        else char.encode("unicode_escape").decode("ascii")
        for char in text
    )


def tsv_line(fields: Iterable[str]) -> str:
    """One row: its fields escaped and joined by TABs (no line break at the end)."""
    return "\t".join(tsv_field(text) for text in fields)


def tsv_lines(tables: Sequence[Rows]) -> Iterator[str]:
    """Every line of ``tables``: one table is its header and its rows; several are sections
    separated by an empty line, a titled one starting with ``# TITLE``."""
    several = len(tables) > 1
    for index, table in enumerate(tables):
        if several and index:
            yield ""
        if several and table.title:
            yield "# " + tsv_field(table.title)
        yield tsv_line(table.columns)
        for row in table.rows:
            yield tsv_line(row)


def tsv_section(title: str, tables: Sequence[Rows]) -> Iterator[str]:
    """``tables`` as one titled section: a ``# TITLE`` line, their lines, an empty line (one
    reading of ``rr status --watch``: the readings follow one another in a pipe)."""
    yield "# " + tsv_field(title)
    yield from tsv_lines(tables)
    yield ""


__all__ = ["tsv_field", "tsv_line", "tsv_lines", "tsv_section"]
