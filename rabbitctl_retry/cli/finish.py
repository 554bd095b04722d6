"""The one result handler every command ends in (docs/architecture.md, "How a command reads").

A command parses, calls one operation, and hands :func:`finish` an :class:`Outcome`: what it
prints for each output format (``table``, ``json``; ``jsonl`` prints nothing at the end: its
lines were written as they were read; ``tsv`` prints the tables of ``table`` as
tab-separated lines, ``tsv.py``), the notes on stderr after it, and how it exits (an
error's one line and code, or a code). The formatting itself is the render modules' own
(``render.py``, ``dlq/render.py``, ``dlq/report.py``, ``dlq/summary.py``).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from rabbitctl_retry.cli._common import (
    exit_with,
    fail,
    print_json,
    print_json_line,
    stderr_console,
    stdout_console,
)
from rabbitctl_retry.cli.plain_table import LARGE_TABLE_ROWS, Rows, plain_lines


@dataclass(frozen=True, slots=True)
class Unwrapped:
    """A line printed with ``soft_wrap``: never folded, whatever the terminal's width."""

    text: str


@dataclass(frozen=True, slots=True)
class Raw:
    """Text written to stdout as it is, line breaks included (a table too large for rich:
    cli/plain_table.py; a completion script)."""

    chunks: Iterable[str]


@dataclass(frozen=True, slots=True)
class TsvOnly:
    """A table only ``--output tsv`` prints (an empty one: its header line, where the table
    output says so in a sentence instead)."""

    table: Table


Piece = RenderableType | Unwrapped | Raw | Rows | TsvOnly
"""One thing a table output prints: a rich table, a line of text, a blank line (``""``), a
table as text (:class:`Rows`: a rich table, or plain lines past ``LARGE_TABLE_ROWS`` rows)."""


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a command prints and how it ends."""

    document: Callable[[], Any] | None = None
    """``--output json``: the one JSON document (None: nothing on stdout)."""
    table: Callable[[], Iterable[Piece]] | None = None
    """``--output table``: what is printed, in order."""
    notes: Sequence[RenderableType] = ()
    """Lines on stderr after the output (notes, ``rr: warning:`` lines), in any format."""
    error: BaseException | None = None
    """Ends the command with its one ``rr: error:`` line and its exit code."""
    code: int = 0
    """The exit code, when there is no error."""
    on_stderr: bool = False
    """The table goes to stderr (stdout holds the data itself: ``rr dlq export ... -``)."""
    one_line: bool = False
    """The JSON document on one line (``rr status --watch``: one document per reading)."""
    clear: bool = False
    """Clear the terminal before the table (``rr status --watch``)."""
    tsv_title: str | None = None
    """``--output tsv``: the tables are one section, under a ``# TITLE`` line and followed by
    an empty line (a reading of ``rr status --watch``, titled with its time)."""


def render(outcome: Outcome, output: str) -> None:
    """Print ``outcome`` for ``output`` (``table``, ``json``, ``jsonl`` or ``tsv``), then its
    notes."""
    if output == "json":
        if outcome.document is not None:
            (_print_json_on_one_line if outcome.one_line else print_json)(outcome.document())
    elif output in ("table", "tsv") and outcome.table is not None:
        pieces = list(outcome.table())
        tables = tables_of(pieces) if output == "tsv" else []
        if tables:
            _print_tsv(tables, on_stderr=outcome.on_stderr, title=outcome.tsv_title)
        else:  # tsv without a table: its lines as the table output prints them
            console = stderr_console() if outcome.on_stderr else stdout_console()
            if outcome.clear and output == "table" and console.is_terminal:
                console.clear()
            for piece in pieces:
                _print(console, piece)
    for note in outcome.notes:
        stderr_console().print(note)


def tables_of(pieces: Sequence[Piece]) -> list[Rows]:
    """The tables among ``pieces`` (a rich table, :class:`Rows`, the tables of a rich
    group), in order, as raw text: what ``--output tsv`` prints (docs/reference/cli.md, "Output
    formats"). The lines around them (counts, footers, verdicts) are left out."""
    found: list[Rows] = []
    for piece in pieces:
        if isinstance(piece, Rows):
            found.append(piece)
        elif isinstance(piece, Table):
            found.append(_rows_of(piece))
        elif isinstance(piece, TsvOnly):
            found.append(_rows_of(piece.table))
        elif isinstance(piece, Group):
            found += tables_of(piece.renderables)
    return found


def _rows_of(table: Table) -> Rows:
    columns = [list(column.cells) for column in table.columns]
    return Rows(
        _raw(table.title) if table.title is not None else "",
        tuple(_raw(column.header) for column in table.columns),
        [tuple(_raw(item) for item in row) for row in zip(*columns, strict=True)],
    )


def _raw(renderable: Any) -> str:
    """A cell's raw value (``cli/render.py`` ``Cell``), else its text."""
    from rabbitctl_retry.cli.render import Cell

    if isinstance(renderable, Cell):
        return renderable.raw
    if isinstance(renderable, Text):
        return renderable.plain
    return str(renderable)


def _print_tsv(tables: Sequence[Rows], *, on_stderr: bool, title: str | None) -> None:
    from rabbitctl_retry.cli.tsv import tsv_lines, tsv_section

    stream = sys.stderr if on_stderr else sys.stdout
    lines = tsv_lines(tables) if title is None else tsv_section(title, tables)
    stream.writelines(f"{line}\n" for line in lines)
    stream.flush()


def finish(outcome: Outcome, output: str = "table") -> None:
    """Print ``outcome`` (:func:`render`) and end the command as it says: an error's line
    and code (``cli/_common.py`` ``fail``), else a code other than 0; else return."""
    render(outcome, output)
    if outcome.error is not None:
        fail(outcome.error)
    if outcome.code:
        exit_with(outcome.code)


def _print(console: Console, piece: Piece) -> None:
    if isinstance(piece, TsvOnly):
        return
    if isinstance(piece, Raw):
        sys.stdout.writelines(piece.chunks)
    elif isinstance(piece, Rows):
        from rabbitctl_retry.cli.render import escaped_rows, rich_table

        if len(piece.rows) > LARGE_TABLE_ROWS:  # rich would take minutes (cli/plain_table.py)
            sys.stdout.writelines(f"{line}\n" for line in plain_lines(escaped_rows(piece)))
        else:
            console.print(rich_table(piece))
    elif isinstance(piece, Unwrapped):
        console.print(piece.text, soft_wrap=True)
    elif isinstance(piece, str) and not piece:
        console.print()
    else:
        console.print(piece)


def _print_json_on_one_line(document: Any) -> None:
    print_json_line(document, compact=False, flush=True)


__all__ = ["Outcome", "Raw", "TsvOnly", "Unwrapped", "finish", "render", "tables_of"]
