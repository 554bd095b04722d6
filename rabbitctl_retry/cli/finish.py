"""The one result handler every command ends in (docs/architecture.md, "How a command reads").

A command parses, calls one operation, and hands :func:`finish` an :class:`Outcome`: what it
prints for each output format (``table``, ``json``; ``jsonl`` prints nothing at the end: its
lines were written as they were read), the notes on stderr after it, and how it exits (an
error's one line and code, or a code). The formatting itself is the render modules' own
(``render.py``, ``dlq_render.py``, ``dlq_report.py``, ``dlq_summary.py``).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from rich.console import Console, RenderableType

from rabbitctl_retry.cli._common import (
    exit_with,
    fail,
    print_json,
    print_json_line,
    stderr_console,
    stdout_console,
)


@dataclass(frozen=True, slots=True)
class Unwrapped:
    """A line printed with ``soft_wrap``: never folded, whatever the terminal's width."""

    text: str


@dataclass(frozen=True, slots=True)
class Raw:
    """Text written to stdout as it is, line breaks included (a table too large for rich:
    cli/plain_table.py; a completion script)."""

    chunks: Iterable[str]


Piece = RenderableType | Unwrapped | Raw
"""One thing a table output prints: a rich table, a line of text, a blank line (``""``)."""


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


def render(outcome: Outcome, output: str) -> None:
    """Print ``outcome`` for ``output`` (``table``, ``json`` or ``jsonl``), then its notes."""
    if output == "json":
        if outcome.document is not None:
            (_print_json_on_one_line if outcome.one_line else print_json)(outcome.document())
    elif output == "table" and outcome.table is not None:
        console = stderr_console() if outcome.on_stderr else stdout_console()
        if outcome.clear and console.is_terminal:
            console.clear()
        for piece in outcome.table():
            _print(console, piece)
    for note in outcome.notes:
        stderr_console().print(note)


def finish(outcome: Outcome, output: str = "table") -> None:
    """Print ``outcome`` (:func:`render`) and end the command as it says: an error's line
    and code (``cli/_common.py`` ``fail``), else a code other than 0; else return."""
    render(outcome, output)
    if outcome.error is not None:
        fail(outcome.error)
    if outcome.code:
        exit_with(outcome.code)


def _print(console: Console, piece: Piece) -> None:
    if isinstance(piece, Raw):
        sys.stdout.writelines(piece.chunks)
    elif isinstance(piece, Unwrapped):
        console.print(piece.text, soft_wrap=True)
    elif isinstance(piece, str) and not piece:
        console.print()
    else:
        console.print(piece)


def _print_json_on_one_line(document: Any) -> None:
    print_json_line(document, compact=False, flush=True)


__all__ = ["Outcome", "Raw", "Unwrapped", "finish", "render"]
