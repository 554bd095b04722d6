"""What the ``rr dlq`` commands share: the questions they ask, progress bars,
notes on stderr and the quorum-queue warning."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from rabbitctl_retry.cli import _common
from rabbitctl_retry.cli._common import (
    OutputFormat,
    announce_target,
    connect_to,
    resolve_urls,
    stderr_console,
    topology_option,
)
from rabbitctl_retry.cli.render import cell, printable
from rabbitctl_retry.dlq.read_cost import Cost
from rabbitctl_retry.errors import RrError, UsageError
from rabbitctl_retry.ops import dlq as shell
from rabbitctl_retry.ops.probe import Connect
from rabbitctl_retry.retry.headers import DEFAULT_RETRY_HEADER
from rabbitctl_retry.topology.model import Topology

TopologyOption = Annotated[
    Path | None,
    topology_option(
        "The topology file: its retry header, wait queues, dead-letter queues and URL."
    ),
]


def where_option(items: str) -> Any:
    """``--where``, in the words of the command's messages."""
    return typer.Option(
        "--where",
        "-w",
        help=f"Only {items} for which this holds: origin=Q, reason=R, queue=Q, "
        "header.NAME=VALUE, group=ID from rr dlq groups, id=ID, ids=A,B,C, text=WORD (or "
        "!=), age>1h, age<10m. Repeat to require several.",
    )


# --------------------------------------------------------------------------- helpers


NoTopologyOption = _common.NoTopologyOption


def load_topology(topology_file: Path | None, no_topology: bool = False) -> Topology | None:
    """The topology a ``rr dlq`` command uses: ``--topology``, else ``./topology.toml`` found
    in the current directory, else none (``cli/_common.py`` :func:`topology_of`)."""
    return _common.topology_of(topology_file, no_topology)


def connect_of(ctx: typer.Context, url: list[str] | None, topology: Topology | None) -> Connect:
    """What a ``rr dlq`` command connects with: ``--url`` / ``$RR_URL``, else the broker of
    ``--topology`` (``cli/_common.py`` ``resolve_urls``: every URL checked here, before the
    command goes on)."""
    return connect_to(ctx, resolve_urls(url, topology.broker.urls if topology else ()))


def changing_connect_of(
    ctx: typer.Context, url: list[str] | None, topology: Topology | None
) -> tuple[Connect, str]:
    """:func:`connect_of` for a command that changes something: its target printed once
    on stderr first (``rr: on URL``), and the masked URL its JSON document carries as
    ``"broker"`` (docs/reference/cli.md, "Where the broker is")."""
    urls = resolve_urls(url, topology.broker.urls if topology else ())
    return connect_to(ctx, urls), announce_target(urls)


def retry_header_of(topology: Topology | None) -> str:
    """The header a dead letter's attempts are counted in: the file's ``[broker]
    retry_header``, else rr's default."""
    return topology.broker.retry_header if topology else DEFAULT_RETRY_HEADER


def interactive() -> bool:
    """Whether a question can be asked (stdin is a terminal)."""
    return sys.stdin.isatty()


def require_answerable(yes: bool, action: str) -> None:
    """Refuse (exit 2) to act without a question when nobody can answer it."""
    if not yes and not interactive():
        raise UsageError(f"{action}: stdin is not a terminal, so rr cannot ask; pass --yes")


async def ask(question: str, yes: bool, action: str) -> None:
    """Ask on the terminal; an answer other than yes ends the command (exit 1)."""
    if yes:
        return
    require_answerable(yes, action)
    agreed = await asyncio.to_thread(typer.confirm, printable(question), default=False, err=True)
    if not agreed:
        raise RrError(f"{action}: not confirmed; nothing was done")


class _BarProgress:
    """rr's ProgressSink on a rich progress bar (stderr, transient)."""

    def __init__(self, progress: Progress) -> None:
        self._progress = progress
        self._task: Any = None

    def begin(self, total: int, description: str) -> None:
        if self._task is not None:
            self._progress.remove_task(self._task)
        self._task = self._progress.add_task(printable(description), total=total)

    def advance(self, count: int = 1) -> None:
        if self._task is not None:
            self._progress.advance(self._task, count)


@contextmanager
def progress_bar(output: OutputFormat, *, streaming: bool = False) -> Iterator[shell.ProgressSink]:
    """A progress bar on stderr when it is a terminal and the output is a table; with
    ``streaming`` output (printed while reading) only when stdout is not that terminal."""
    if (
        output is OutputFormat.JSON
        or not sys.stderr.isatty()
        or (streaming and sys.stdout.isatty())
    ):
        yield shell.NO_PROGRESS
        return
    bar = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=stderr_console(),
        transient=True,
    )
    with bar:
        yield _BarProgress(bar)


def note(text: str) -> None:
    stderr_console().print(cell(text))


def read_warning(state: shell.QueueState, count: int) -> str | None:
    """What reading ``count`` messages of the queue costs them, when a read counts a
    delivery (``dlq/read_cost.py``), or None when it is free."""
    if state.reads.cost is Cost.FREE or count <= 0:
        return None
    return f"{state.reads.why}. Reading {count:,} message(s) adds one delivery to each."


async def agree_to_read(
    state: shell.QueueState, count: int, version: str, *, yes: bool, action: str
) -> None:
    """Before a read of ``count`` messages: what it costs them, and — where a read can drop
    a letter — the question (``ops/dlq_runs.py`` ``Look``, with ``yes`` and ``action``
    given). A read that counts but can drop nothing is only noted; a free one says nothing."""
    warning = read_warning(state, count)
    if warning is not None:
        note(warning)
    if warning is not None and state.reads.can_drop:
        await ask("Read them anyway?", yes, action)
