"""``rr dlq``: inspect, replay, export, import and purge dead letters.

Safe by default: ``inspect`` and ``export`` take nothing from the queue; ``replay`` and
``purge`` ask first (``--yes`` to skip the question; without a terminal they refuse unless
``--yes`` is given); on a quorum queue, where every look counts as a delivery, ``inspect``,
``export`` and ``replay --dry-run`` say so and ask too.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from rabbitctl_retry.cli._common import (
    OutputFormat,
    OutputOption,
    UrlOption,
    connector_of,
    fail,
    guard,
    print_json,
    resolve_url,
    run,
    stderr_console,
    stdout_console,
)
from rabbitctl_retry.cli.dlq_render import (
    inspect_document,
    inspect_footer,
    inspect_table,
    letters,
    replay_table,
)
from rabbitctl_retry.cli.render import cell, printable
from rabbitctl_retry.dlq.filters import parse_all
from rabbitctl_retry.dlq.origin import WaitQueues
from rabbitctl_retry.dlq.rate import parse_rate
from rabbitctl_retry.dlq.replay import ReplayPlan, set_aside_queue, to_problem
from rabbitctl_retry.dlq.report import (
    ReplayReport,
    replay_document,
    replay_exit_code,
    replay_summary,
)
from rabbitctl_retry.errors import AccessRefused, BrokerUnreachable, RrError, UsageError
from rabbitctl_retry.ops import dlq as shell
from rabbitctl_retry.ops import replay as replayer
from rabbitctl_retry.topology.load import load_file
from rabbitctl_retry.topology.model import Topology
from rabbitctl_retry.topology.naming import DEFAULT_RETRY_HEADER
from rabbitctl_retry.transport.base import Connection

app = typer.Typer(
    help="Inspect, replay, export, import and purge dead letters.",
    no_args_is_help=True,
    rich_markup_mode=None,
)

DEFAULT_INSPECT_LIMIT = 1000

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


# --------------------------------------------------------------------------- helpers


def _load(topology_file: Path | None) -> Topology | None:
    with guard():
        return load_file(topology_file) if topology_file is not None else None


def _interactive() -> bool:
    """Whether a question can be asked (stdin is a terminal)."""
    return sys.stdin.isatty()


def _require_answerable(yes: bool, action: str) -> None:
    """Refuse (exit 2) to act without a question when nobody can answer it."""
    if not yes and not _interactive():
        raise UsageError(f"{action}: stdin is not a terminal, so rr cannot ask; pass --yes")


async def _ask(question: str, yes: bool, action: str) -> None:
    """Ask on the terminal; an answer other than yes ends the command (exit 1)."""
    if yes:
        return
    _require_answerable(yes, action)
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
def _progress(output: OutputFormat) -> Iterator[shell.ProgressSink]:
    """A progress bar on stderr when it is a terminal and the output is a table."""
    if output is OutputFormat.JSON or not sys.stderr.isatty():
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


def _note(text: str) -> None:
    stderr_console().print(cell(text))


def _quorum_warning(state: shell.QueueState, count: int, version: str) -> str | None:
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


# --------------------------------------------------------------------------- inspect


@app.command("inspect")
def inspect_command(
    ctx: typer.Context,
    queue: Annotated[str, typer.Argument(help="The dead-letter queue.")],
    limit: Annotated[
        int, typer.Option("--limit", "-n", min=1, help="Read at most this many messages.")
    ] = DEFAULT_INSPECT_LIMIT,
    topology_file: TopologyOption = None,
    output: OutputOption = OutputFormat.TABLE,
    body: Annotated[bool, typer.Option("--body/--no-body", help="Show message bodies.")] = True,
    yes: YesOption = False,
    url: UrlOption = None,
) -> None:
    """Show dead letters without taking them: the queue keeps the same messages, in order.

    Each message: position, message id, origin queue and reason, retry count, delivery
    count, the x-death timeline, rr's error headers, and the body (text, pretty JSON, or
    base64; long bodies are cut). On a quorum queue every look counts as a delivery: rr says
    so and asks first.
    """
    topology = _load(topology_file)
    broker_url = resolve_url(url, topology.broker.url if topology else None)
    retry_header = topology.broker.retry_header if topology else DEFAULT_RETRY_HEADER

    async def inspect() -> shell.ReadResult:
        connection = await connector_of(ctx)(broker_url)
        try:
            state = await shell.queue_state(connection, queue)
            warning = _quorum_warning(
                state, min(limit, state.message_count), str(connection.server_version)
            )
            if warning is not None:
                _note(warning)
                await _ask("Read them anyway?", yes, f"inspect {queue!r}")
            with _progress(output) as progress:
                return await shell.read_messages(connection, queue, limit=limit, progress=progress)
        finally:
            await connection.close()

    read = run(inspect())
    found = letters(read.deliveries, retry_header=retry_header, wait_queues=WaitQueues.of(topology))
    if output is OutputFormat.JSON:
        print_json(inspect_document(queue, found, with_body=body))
    else:
        console = stdout_console()
        if found:
            console.print(inspect_table(found, with_body=body))
        console.print(cell(inspect_footer(queue, found, read.in_queue)))
    if not read.complete:
        _note(
            f"only {len(found):,} message(s) came before the queue went quiet: another consumer "
            "may be taking them"
        )


# --------------------------------------------------------------------------- replay


def _sources(queue: str | None, topology: Topology | None) -> list[str]:
    if queue is not None:
        return [queue]
    if topology is None:
        raise UsageError(
            "name the dead-letter QUEUE to replay, or give --topology to replay every "
            "dead-letter queue of a topology"
        )
    names = list(dict.fromkeys(q.dead_letter for q in topology.queues if q.dead_letter))
    if not names:
        raise UsageError("the topology names no dead-letter queue (dead_letter = ...)")
    return names


@app.command("replay")
def replay_command(
    ctx: typer.Context,
    queue: Annotated[
        str | None,
        typer.Argument(help="The dead-letter queue; without it, every one of --topology."),
    ] = None,
    to: Annotated[
        str | None,
        typer.Option("--to", help="Send every copy to this queue, not to its origin queue."),
    ] = None,
    limit: Annotated[
        int | None,
        typer.Option(
            "--limit",
            "-n",
            min=1,
            help="Attempt at most this many (failed ones count, skipped ones do not).",
        ),
    ] = None,
    where: Annotated[
        list[str] | None,
        typer.Option(
            "--where",
            "-w",
            help="Only dead letters for which this holds: origin=Q, reason=R, queue=Q, "
            "header.NAME=VALUE (or !=), age>1h, age<10m. Repeat to require several.",
        ),
    ] = None,
    rate: Annotated[
        str | None,
        typer.Option(
            "--rate",
            metavar="MSG_PER_S",
            help="At most this many messages per second (a finite number, at least 0.001).",
        ),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Show where each would go; move nothing.")
    ] = False,
    undecodable: Annotated[
        bool,
        typer.Option(
            "--undecodable",
            help="Move only the dead letters whose properties cannot be decoded, byte for "
            "byte, to --to (default: QUEUE.undecodable, declared if missing).",
        ),
    ] = False,
    yes: YesOption = False,
    topology_file: TopologyOption = None,
    output: OutputOption = OutputFormat.TABLE,
    url: UrlOption = None,
) -> None:
    """Send dead letters back to the queue they failed in, then remove them.

    The target is --to, or the dead letter's origin: rr-origin-queue, else the newest x-death
    entry that is not a wait queue. Each copy gets a fresh start (retry header removed,
    x-death and rr's failure headers stripped, rr-replayed-count + 1, rr-replayed-at), is
    published mandatory with publisher confirms, and only then is the dead letter acked. A
    copy the broker returns or refuses leaves its dead letter in place (exit 3). A copy that
    comes round again in the same run stops the run.
    """
    topology = _load(topology_file)
    with guard():
        conditions = parse_all(where or [])
        rate_per_s = parse_rate(rate) if rate is not None else None
        sources = _sources(queue, topology)
        to_wrong = to_problem(to, sources) if to is not None else None
        if to_wrong is not None:
            raise UsageError(to_wrong)
        if not dry_run:
            _require_answerable(yes, "replay")
    broker_url = resolve_url(url, topology.broker.url if topology else None)
    run_id = replayer.new_run_id()
    plans = [
        ReplayPlan(
            source=source,
            run_id=run_id,
            retry_header=topology.broker.retry_header if topology else DEFAULT_RETRY_HEADER,
            to=to,
            wait_queues=WaitQueues.of(topology),
            conditions=conditions,
            set_aside=undecodable,
        )
        for source in sources
    ]
    reports: list[ReplayReport] = []
    stop = asyncio.Event()

    async def replay() -> None:
        options = replayer.ReplayOptions(limit=limit, rate_per_s=rate_per_s, stop=stop)
        connection = await connector_of(ctx)(broker_url)
        try:
            states = [await shell.queue_state(connection, plan.source) for plan in plans]
            version = str(connection.server_version)
            if dry_run:
                for state in states:
                    warning = _quorum_warning(state, state.message_count, version)
                    if warning is not None:
                        _note(warning)
                        await _ask("Read them anyway?", yes, f"replay --dry-run {state.name!r}")
            else:
                for state in states:
                    if state.quorum is not False and state.message_count:
                        _note(
                            f"{state.name!r} is (or may be) a quorum queue: a dead letter "
                            "this replay leaves there (skipped, failed, past --limit) goes back "
                            "with x-delivery-count + 1"
                            + (
                                f", and past x-delivery-limit = {state.delivery_limit} it is "
                                "dead-lettered or dropped"
                                if state.delivery_limit is not None
                                else ""
                            )
                        )
                await _ask(_replay_question(states, to, limit), yes, "replay")
                if undecodable and to is None:
                    await _declare_set_aside_queues(connection, [p.source for p in plans])
            with _progress(output) as progress, _stop_on_interrupt(stop):
                for plan in plans:
                    act = replayer.dry_run if dry_run else replayer.replay_queue
                    report = await act(connection, plan, options, progress=progress)
                    reports.append(report)
                    if report.interrupted or stop.is_set():
                        break
        finally:
            await connection.close()

    with guard():
        try:
            asyncio.run(replay())
        finally:
            _print_replay(reports, output, several=len(plans) > 1)
    interrupted = next((report for report in reports if report.interrupted), None)
    if interrupted is not None and interrupted.refused:
        fail(AccessRefused(_refused_text(interrupted)))
    if interrupted is not None:
        fail(
            BrokerUnreachable(
                f"replay of {interrupted.source!r} interrupted: {interrupted.interrupted}; up to "
                f"{interrupted.possible_duplicates:,} message(s) may now be duplicated; rerun "
                "to replay the rest"
            )
        )
    if stop.is_set():
        raise typer.Exit(130)
    code = replay_exit_code(reports)
    if code:
        raise typer.Exit(int(code))


@contextmanager
def _stop_on_interrupt(stop: asyncio.Event) -> Iterator[None]:
    """The first Ctrl-C (or SIGTERM) ends the replay cleanly: copies under way finish and their
    dead letters are acked, the report is printed. A second Ctrl-C quits at once."""
    loop = asyncio.get_running_loop()
    installed: list[signal.Signals] = []

    def first(signum: signal.Signals) -> None:
        stop.set()
        _note("stopping: finishing the copies under way (Ctrl-C again to quit at once)")
        loop.remove_signal_handler(signum)

    for signum in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(signum, first, signum)
        except (NotImplementedError, RuntimeError, ValueError):  # not the main thread
            continue
        installed.append(signum)
    try:
        yield
    finally:
        for signum in installed:
            loop.remove_signal_handler(signum)


def _refused_text(report: ReplayReport) -> str:
    """The one error line of a replay the broker refused access to (exit 77)."""
    head = f"replay of {report.source!r} refused: {report.interrupted}"
    if report.possible_duplicates:
        return (
            f"{head}; {report.replayed:,} replayed before that; up to "
            f"{report.possible_duplicates:,} message(s) may now be duplicated"
        )
    if report.replayed:
        return f"{head}; {report.replayed:,} replayed before that, the rest are still there"
    return f"{head}; nothing was replayed, every dead letter is still there"


async def _declare_set_aside_queues(connection: Connection, sources: list[str]) -> None:
    """``--undecodable`` without ``--to``: each source's ``.undecodable`` queue (durable,
    classic) exists before the first letter moves (docs/dlq.md, "Undecodable")."""
    channel = await connection.channel()
    try:
        for source in sources:
            await channel.queue_declare(set_aside_queue(source), durable=True)
    finally:
        await channel.close()


def _replay_question(states: list[shell.QueueState], to: str | None, limit: int | None) -> str:
    listed = ", ".join(f"{state.name!r} ({state.message_count:,})" for state in states)
    where = f"to {to!r}" if to else "to the queues they failed in"
    bound = f" (at most {limit:,})" if limit is not None else ""
    return (
        f"Replay the dead letters of {listed}{bound} {where}? Each is removed once the "
        "broker confirmed its copy"
    )


def _print_replay(reports: list[ReplayReport], output: OutputFormat, *, several: bool) -> None:
    if not reports:
        return
    if output is OutputFormat.JSON:
        documents = [replay_document(report) for report in reports]
        print_json(documents if several else documents[0])
        return
    console = stdout_console()
    for report in reports:
        if report.results:
            console.print(replay_table(report))
        console.print(cell(replay_summary(report)))


# --------------------------------------------------------------------------- export / import


@app.command("export")
def export_command(
    ctx: typer.Context,
    queue: Annotated[str, typer.Argument(help="The queue to copy.")],
    file: Annotated[Path, typer.Argument(help="The JSON Lines file to write (must not exist).")],
    limit: Annotated[
        int | None, typer.Option("--limit", "-n", min=1, help="Copy at most this many.")
    ] = None,
    yes: YesOption = False,
    topology_file: TopologyOption = None,
    url: UrlOption = None,
) -> None:
    """Copy messages to a file, one JSON object per line; the queue keeps them all.

    Each line holds the body (base64), every property and every header, typed, so that
    `rr dlq import` restores them exactly.
    """
    topology = _load(topology_file)
    broker_url = resolve_url(url, topology.broker.url if topology else None)
    with guard():
        if file.exists():
            raise UsageError(f"{file} exists; rr does not overwrite an export: choose another name")

    async def export() -> shell.ReadResult:
        connection = await connector_of(ctx)(broker_url)
        try:
            state = await shell.queue_state(connection, queue)
            count = state.message_count if limit is None else min(limit, state.message_count)
            warning = _quorum_warning(state, count, str(connection.server_version))
            if warning is not None:
                _note(warning)
                await _ask("Read them anyway?", yes, f"export {queue!r}")
            directory = file.parent if str(file.parent) else Path(".")
            handle, temporary = tempfile.mkstemp(prefix=f".{file.name}.", dir=directory)
            try:
                with (
                    os.fdopen(handle, "w", encoding="utf-8") as out,
                    _progress(OutputFormat.TABLE) as progress,
                ):
                    read = await shell.export_queue(
                        connection, queue, out, limit=limit, progress=progress
                    )
                os.replace(temporary, file)
            except BaseException:
                Path(temporary).unlink(missing_ok=True)
                raise
            return read
        finally:
            await connection.close()

    read = run(export())
    stdout_console().print(
        cell(
            f"exported {len(read.deliveries):,} message(s) of {read.in_queue:,} from {queue!r} "
            f"to {file}; the queue still holds them"
        )
    )


@app.command("import")
def import_command(
    ctx: typer.Context,
    file: Annotated[Path, typer.Argument(help="A file written by `rr dlq export`.")],
    to: Annotated[str, typer.Option("--to", help="The queue to publish into.")],
    from_line: Annotated[
        int,
        typer.Option(
            "--from-line",
            min=1,
            help="Publish the messages from this line of the file on (1-based; the lines "
            "before it are checked, not published): resume an import that stopped.",
        ),
    ] = 1,
    url: UrlOption = None,
) -> None:
    """Publish every message of an export file into a queue, with publisher confirms.

    The whole file is checked first: a line the broker or the AMQP client would refuse
    stops the import with exit 65, naming the line and field, and nothing is published.
    Bodies, properties and headers are published exactly as exported, in file order (a
    user_id that is not the login user's is left out). An import the broker stops half-way
    names the first line not imported: rerun with --from-line (docs/dlq.md, "Import").
    """
    broker_url = resolve_url(url)
    user = shell.login_user(broker_url)
    with guard():  # the whole file, before connecting: a bad line is exit 65 even offline
        checked = shell.check_file(file, to, from_line=from_line, user=user)

    async def import_() -> shell.ImportReport:
        connection = await connector_of(ctx)(broker_url)
        try:
            with _progress(OutputFormat.TABLE) as progress:
                return await shell.import_file(
                    connection,
                    file,
                    to,
                    from_line=from_line,
                    user=user,
                    checked=checked,
                    progress=progress,
                )
        finally:
            await connection.close()

    report = run(import_())
    stdout_console().print(cell(shell.import_summary(report)))
    dropped = report.checked.user_ids_dropped
    if dropped:
        who = f"{user!r}, the user rr logs in as" if user else "the user rr logs in as"
        _note(
            f"{dropped:,} message(s) carried a user_id other than {who}: imported without it "
            "(RabbitMQ refuses a message whose user_id is not its publisher's)"
        )
    failure = shell.import_failure(report)
    if failure is not None:
        fail(failure)


# --------------------------------------------------------------------------- purge


@app.command("purge")
def purge_command(
    ctx: typer.Context,
    queue: Annotated[str, typer.Argument(help="The queue to empty.")],
    yes: YesOption = False,
    url: UrlOption = None,
) -> None:
    """Delete every ready message of a queue, after asking. `rr dlq export` first keeps a copy."""
    with guard():
        _require_answerable(yes, f"purge {queue!r}")

    async def purge() -> int:
        connection = await connector_of(ctx)(resolve_url(url))
        try:
            state = await shell.queue_state(connection, queue)
            await _ask(
                f"Purge {state.message_count:,} message(s) from {queue!r}? They cannot be "
                "recovered",
                yes,
                f"purge {queue!r}",
            )
            return await shell.purge(connection, queue)
        finally:
            await connection.close()

    purged = run(purge())
    stdout_console().print(cell(f"purged {purged:,} message(s) from {queue!r}"))


__all__ = ["app"]
