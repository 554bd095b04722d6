"""What the ``rr dlq`` commands share: the typer group, the questions they ask, progress bars,
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

from rabbitctl_retry.cli._common import OutputFormat, guard, stderr_console
from rabbitctl_retry.cli.render import cell, printable
from rabbitctl_retry.errors import RrError, UsageError
from rabbitctl_retry.ops import dlq as shell
from rabbitctl_retry.topology.load import load_file
from rabbitctl_retry.topology.model import Topology

app = typer.Typer(
    help="Inspect, group, replay, move, export, import and purge dead letters.",
    no_args_is_help=True,
    rich_markup_mode=None,
)

TopologyOption = Annotated[
    Path | None,
    typer.Option(
        "--topology",
        "-t",
        help="The topology file: its retry header, wait queues, dead-letter queues and URL.",
    ),
]
YesOption = Annotated[
    bool, typer.Option("--yes", "-y", help="Do not ask; go ahead (needed without a terminal).")
]


def where_option(items: str) -> Any:
    """``--where``, in the words of the command's messages."""
    return typer.Option(
        "--where",
        "-w",
        help=f"Only {items} for which this holds: origin=Q, reason=R, queue=Q, "
        "header.NAME=VALUE, group=ID from rr dlq groups (or !=), age>1h, age<10m. Repeat "
        "to require several.",
    )


# --------------------------------------------------------------------------- helpers


def load_topology(topology_file: Path | None) -> Topology | None:
    with guard():
        return load_file(topology_file) if topology_file is not None else None


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


def quorum_warning(state: shell.QueueState, count: int, version: str) -> str | None:
    """What reading ``count`` messages of a (maybe) quorum queue costs, or None."""
    if state.quorum is False or count <= 0:
        return None
    which = (
        f"{state.name!r} is a quorum queue"
        if state.quorum
        else f"rr could not tell whether {state.name!r} is a quorum queue; if it is"
    )
    limit = (
        f" This queue has x-delivery-limit = {state.delivery_limit}: a message returned more "
        "often than that is dead-lettered (or dropped, without a dead-letter exchange)."
        if state.delivery_limit is not None
        else ""
    )
    return (
        f"{which}: on RabbitMQ {version} every message rr reads goes back when rr closes its "
        f"channel, and the queue counts that as a delivery (x-delivery-count + 1). Reading "
        f"{count:,} message(s) adds one delivery to each.{limit}"
    )


async def warn_of_quorum(
    state: shell.QueueState, count: int, version: str, *, yes: bool, action: str
) -> None:
    """Before a read of ``count`` messages: what it costs a (maybe) quorum queue, and the
    question (``ops/dlq_runs.py`` ``Look``, with ``yes`` and ``action`` given)."""
    warning = quorum_warning(state, count, version)
    if warning is not None:
        note(warning)
        await ask("Read them anyway?", yes, action)
