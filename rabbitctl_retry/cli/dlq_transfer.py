"""``rr dlq replay`` and ``rr dlq move``: messages from a queue to others, on the transfer engine
(``ops/transfer.py``), with one way to print the reports and pick the exit code
(``cli/dlq_report.py``)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Annotated, Any

import typer

from rabbitctl_retry.cli._common import (
    OutputFormat,
    OutputOption,
    UrlOption,
    fail,
    guard,
    open_connection,
    print_json,
    resolve_urls,
    stdout_console,
)
from rabbitctl_retry.cli.dlq_common import (
    TopologyOption,
    YesOption,
    app,
    ask,
    load_topology,
    note,
    progress_bar,
    quorum_warning,
    require_answerable,
    stop_on_interrupt,
)
from rabbitctl_retry.cli.dlq_render import transfer_table
from rabbitctl_retry.cli.dlq_report import transfer_document, transfer_exit_code, transfer_summary
from rabbitctl_retry.cli.queue_names import check_queue_names
from rabbitctl_retry.cli.render import cell
from rabbitctl_retry.dlq.choice import Chooser
from rabbitctl_retry.dlq.filters import parse_all
from rabbitctl_retry.dlq.move import MovePlan, choose_move
from rabbitctl_retry.dlq.move import to_problem as move_to_problem
from rabbitctl_retry.dlq.origin import WaitQueues
from rabbitctl_retry.dlq.rate import parse_rate
from rabbitctl_retry.dlq.replay import ReplayPlan, choose, set_aside_queue, to_problem
from rabbitctl_retry.dlq.report import TransferKind, TransferReport
from rabbitctl_retry.errors import AccessRefused, BrokerUnreachable, RrError, UsageError
from rabbitctl_retry.ops import dlq as shell
from rabbitctl_retry.ops import transfer as engine
from rabbitctl_retry.ops.transfer import TransferOptions
from rabbitctl_retry.topology.model import Topology
from rabbitctl_retry.topology.naming import DEFAULT_RETRY_HEADER
from rabbitctl_retry.transport.base import Connection

AttemptLimitOption = Annotated[
    int | None,
    typer.Option(
        "--limit",
        "-n",
        min=1,
        help="Attempt at most this many (failed ones count, skipped ones do not).",
    ),
]
RateOption = Annotated[
    str | None,
    typer.Option(
        "--rate",
        metavar="MSG_PER_S",
        help="At most this many messages per second (a finite number, at least 0.001).",
    ),
]


def where_option(items: str) -> Any:
    """``--where``, in the words of the command's messages."""
    return typer.Option(
        "--where",
        "-w",
        help=f"Only {items} for which this holds: origin=Q, reason=R, queue=Q, "
        "header.NAME=VALUE (or !=), age>1h, age<10m. Repeat to require several.",
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


ForceOption = Annotated[
    bool,
    typer.Option(
        "--force",
        help="Send to a --to that drops messages over its length limit (x-overflow = "
        "drop-head) all the same (docs/dlq.md).",
    ),
]


async def _check_target(connection: Connection, to: str | None, force: bool) -> None:
    """A --to that confirms copies and then drops them is refused unless --force, with what
    it would do (dlq/target.py); with --force, a note says so."""
    if to is None:
        return
    drops = await shell.target_drops(connection, to)
    if drops is None:
        return
    if not force:
        raise RrError(f"--to {to!r} {drops}; nothing was moved (--force sends to it anyway)")
    note(f"--to {to!r} {drops} (--force: sending to it anyway)")


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
    limit: AttemptLimitOption = None,
    where: Annotated[list[str] | None, where_option("dead letters")] = None,
    rate: RateOption = None,
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
    force: ForceOption = False,
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
    topology = load_topology(topology_file)
    with guard():
        conditions = parse_all(where or [])
        rate_per_s = parse_rate(rate) if rate is not None else None
        sources = _sources(queue, topology)
        check_queue_names(sources)
        to_wrong = to_problem(to, sources) if to is not None else None
        if to_wrong is not None:
            raise UsageError(to_wrong)
        if not dry_run:
            require_answerable(yes, "replay")
    broker_urls = resolve_urls(url, topology.broker.urls if topology else ())
    run_id = engine.new_run_id()
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
    jobs: list[tuple[str, Chooser]] = [(plan.source, partial(choose, plan)) for plan in plans]

    async def prepare(connection: Connection, states: list[shell.QueueState]) -> None:
        await _check_target(connection, None if undecodable else to, force)
        if dry_run:
            return
        for state in states:
            if state.quorum is not False and state.message_count:
                note(_quorum_note(state, "dead letter", "replay"))
        await ask(_replay_question(states, to, limit, where or []), yes, "replay")
        if undecodable and to is None:
            await _declare_set_aside_queues(connection, [plan.source for plan in plans])

    _transfer_all(
        ctx,
        broker_urls,
        jobs,
        TransferKind.REPLAY,
        TransferOptions(limit=limit, rate_per_s=rate_per_s),
        prepare=prepare,
        dry_run=dry_run,
        yes=yes,
        output=output,
    )


def _quorum_note(state: shell.QueueState, item: str, command: str) -> str:
    """What leaving a message in a (maybe) quorum queue costs it."""
    limit = (
        f", and past x-delivery-limit = {state.delivery_limit} it is dead-lettered or dropped"
        if state.delivery_limit is not None
        else ""
    )
    return (
        f"{state.name!r} is (or may be) a quorum queue: a {item} this {command} leaves there "
        f"(skipped, failed, past --limit) goes back with x-delivery-count + 1{limit}"
    )


Prepare = Callable[[Connection, list[shell.QueueState]], Awaitable[None]]


def _transfer_all(
    ctx: typer.Context,
    broker_urls: tuple[str, ...],
    jobs: list[tuple[str, Chooser]],
    kind: TransferKind,
    options: TransferOptions,
    *,
    prepare: Prepare,
    dry_run: bool,
    yes: bool,
    output: OutputFormat,
) -> None:
    """Run (or dry-run) each ``(source, chooser)`` on the engine, one after the other; print
    the reports and exit with their code (``cli/dlq_report.py``)."""
    reports: list[TransferReport] = []
    stop = options.stop = asyncio.Event()

    async def transfer_all() -> None:
        connection = await open_connection(ctx, broker_urls)
        try:
            states = [await shell.queue_state(connection, source) for source, _ in jobs]
            if dry_run:
                version = str(connection.server_version)
                for state in states:
                    warning = quorum_warning(state, state.message_count, version)
                    if warning is not None:
                        note(warning)
                        await ask("Read them anyway?", yes, f"{kind} --dry-run {state.name!r}")
            await prepare(connection, states)
            with progress_bar(output) as progress, stop_on_interrupt(stop):
                for source, choose in jobs:
                    act = engine.dry_run if dry_run else engine.transfer
                    report = await act(
                        connection, source, choose, options, kind=kind, progress=progress
                    )
                    reports.append(report)
                    if report.interrupted or stop.is_set():
                        break
        finally:
            await connection.close()

    with guard():
        try:
            asyncio.run(transfer_all())
        finally:
            _print_reports(reports, output, several=len(jobs) > 1)
    interrupted = next((report for report in reports if report.interrupted), None)
    if interrupted is not None and interrupted.refused:
        fail(AccessRefused(_refused_text(interrupted)))
    if interrupted is not None:
        fail(
            BrokerUnreachable(
                f"{kind} of {interrupted.source!r} interrupted: {interrupted.interrupted}; up "
                f"to {interrupted.possible_duplicates:,} message(s) may now be duplicated; "
                f"rerun to {kind} the rest"
            )
        )
    if stop.is_set():
        raise typer.Exit(130)
    code = transfer_exit_code(reports)
    if code:
        raise typer.Exit(int(code))


def _refused_text(report: TransferReport) -> str:
    """The one error line of a transfer the broker refused access to (exit 77)."""
    past = report.kind.past
    item = "dead letter" if report.kind is TransferKind.REPLAY else "message"
    head = f"{report.kind} of {report.source!r} refused: {report.interrupted}"
    if report.possible_duplicates:
        return (
            f"{head}; {report.sent:,} {past} before that; up to "
            f"{report.possible_duplicates:,} message(s) may now be duplicated"
        )
    if report.sent:
        return f"{head}; {report.sent:,} {past} before that, the rest are still there"
    return f"{head}; nothing was {past}, every {item} is still there"


async def _declare_set_aside_queues(connection: Connection, sources: list[str]) -> None:
    """``--undecodable`` without ``--to``: each source's ``.undecodable`` queue (durable,
    classic) exists before the first letter moves (docs/dlq.md, "Undecodable")."""
    channel = await connection.channel()
    try:
        for source in sources:
            await channel.queue_declare(set_aside_queue(source), durable=True)
    finally:
        await channel.close()


def _replay_question(
    states: list[shell.QueueState], to: str | None, limit: int | None, where: list[str]
) -> str:
    listed = ", ".join(f"{state.name!r} ({state.message_count:,})" for state in states)
    target = f"to {to!r}" if to else "to the queues they failed in"
    return (
        f"Replay the dead letters of {listed}{_bounds(limit, where)} {target}? Each is removed "
        "once the broker confirmed its copy"
    )


def _bounds(limit: int | None, where: list[str]) -> str:
    """`` (at most 10) matching origin=refunds and age>1h``: what a question's run is limited
    to, so the answer covers exactly what will happen."""
    text = f" (at most {limit:,})" if limit is not None else ""
    if where:
        text += " matching " + " and ".join(where)
    return text


def _print_reports(reports: list[TransferReport], output: OutputFormat, *, several: bool) -> None:
    if not reports:
        return
    if output is OutputFormat.JSON:
        documents = [transfer_document(report) for report in reports]
        print_json(documents if several else documents[0])
        return
    console = stdout_console()
    for report in reports:
        if report.results:
            console.print(transfer_table(report))
        console.print(cell(transfer_summary(report)))


# --------------------------------------------------------------------------- move


@app.command("move")
def move_command(
    ctx: typer.Context,
    queue: Annotated[str, typer.Argument(help="The queue to move messages from.")],
    to: Annotated[str, typer.Option("--to", help="The queue to move them to.")],
    limit: AttemptLimitOption = None,
    where: Annotated[list[str] | None, where_option("messages")] = None,
    rate: RateOption = None,
    reset_retries: Annotated[
        bool,
        typer.Option(
            "--reset-retries",
            help="Start each message's attempts afresh: remove the retry header, x-death and "
            "rr's failure headers (by default they move with it).",
        ),
    ] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Show what would move; move nothing.")
    ] = False,
    force: ForceOption = False,
    yes: YesOption = False,
    topology_file: TopologyOption = None,
    output: OutputOption = OutputFormat.TABLE,
    url: UrlOption = None,
) -> None:
    """Move messages from one queue to another, then remove them (docs/dlq.md, "Move").

    Each message keeps its body, headers (retry count and x-death included, unless
    --reset-retries) and properties (not expiration, not user_id), is published mandatory
    with publisher confirms, and only then is it acked. A copy the broker returns or refuses
    leaves its message in place (exit 3).
    """
    topology = load_topology(topology_file)
    with guard():
        conditions = parse_all(where or [])
        rate_per_s = parse_rate(rate) if rate is not None else None
        check_queue_names([queue])
        to_wrong = move_to_problem(queue, to)
        if to_wrong is not None:
            raise UsageError(to_wrong)
        if not dry_run:
            require_answerable(yes, "move")
    broker_urls = resolve_urls(url, topology.broker.urls if topology else ())
    plan = MovePlan(
        source=queue,
        to=to,
        conditions=conditions,
        reset_retries=reset_retries,
        retry_header=topology.broker.retry_header if topology else DEFAULT_RETRY_HEADER,
        wait_queues=WaitQueues.of(topology),
    )

    async def prepare(connection: Connection, states: list[shell.QueueState]) -> None:
        await _check_target(connection, to, force)
        if dry_run:
            return
        (state,) = states
        if state.quorum is not False and state.message_count:
            note(_quorum_note(state, "message", "move"))
        await ask(
            f"Move the messages of {queue!r} ({state.message_count:,}){_bounds(limit, where or [])}"
            f" to {to!r}? "
            "Each is removed once the broker confirmed its copy",
            yes,
            "move",
        )

    _transfer_all(
        ctx,
        broker_urls,
        [(queue, partial(choose_move, plan))],
        TransferKind.MOVE,
        TransferOptions(limit=limit, rate_per_s=rate_per_s),
        prepare=prepare,
        dry_run=dry_run,
        yes=yes,
        output=output,
    )
