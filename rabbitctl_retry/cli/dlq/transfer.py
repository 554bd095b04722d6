"""``rr dlq replay`` and ``rr dlq move``: messages from a queue to others, one run over their
sources (``ops/transfers.py``) on the transfer engine (``ops/transfer.py``), with one way to
print the reports and pick the exit code (``cli/dlq/report.py``, ``cli/finish.py``)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import partial
from typing import Annotated, Any

import typer

from rabbitctl_retry.cli import _common as common
from rabbitctl_retry.cli.dlq import common as dlq
from rabbitctl_retry.cli.dlq.render import transfer_table
from rabbitctl_retry.cli.dlq.report import transfer_exit_code
from rabbitctl_retry.cli.finish import Outcome, Piece, TsvOnly, finish, render
from rabbitctl_retry.cli.queue_names import check_queue_names
from rabbitctl_retry.cli.render import cell
from rabbitctl_retry.dlq.choice import Chooser
from rabbitctl_retry.dlq.filters import Condition, parse_all
from rabbitctl_retry.dlq.move import MovePlan, choose_move
from rabbitctl_retry.dlq.move import to_problem as move_to_problem
from rabbitctl_retry.dlq.origin import WaitQueues
from rabbitctl_retry.dlq.purge import PurgePlan, choose_purge
from rabbitctl_retry.dlq.rate import Pace, parse_pace
from rabbitctl_retry.dlq.read_cost import Cost
from rabbitctl_retry.dlq.replay import ReplayPlan, choose, to_problem
from rabbitctl_retry.dlq.report import (
    TransferKind,
    TransferReport,
    transfer_document,
    transfer_summary,
)
from rabbitctl_retry.errors import AccessRefused, BrokerUnreachable, RrError, UsageError
from rabbitctl_retry.ops import dlq as shell
from rabbitctl_retry.ops import transfer as engine
from rabbitctl_retry.ops.probe import Connect
from rabbitctl_retry.ops.transfer import TransferOptions
from rabbitctl_retry.ops.transfers import TransferHooks, TransferRun, Transfers, transfer_sources
from rabbitctl_retry.telemetry.switch import tracing_for
from rabbitctl_retry.topology.model import Topology

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
    common.rate_option("At most this many messages per second (a finite number, at least 0.001)."),
]


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
    common.force_option(
        "Send to a --to that drops messages over its length limit (x-overflow = "
        "drop-head) all the same (rr docs dlq).",
    ),
]


def _check_target(to: str, drops: str, *, force: bool) -> None:
    """A --to that confirms copies and then drops them is refused unless --force, with what
    it would do (dlq/target.py); with --force, a note says so."""
    if not force:
        raise RrError(f"--to {to!r} {drops}; nothing was moved (--force sends to it anyway)")
    dlq.note(f"--to {to!r} {drops} (--force: sending to it anyway)")


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
    where: Annotated[list[str] | None, dlq.where_option("dead letters")] = None,
    rate: RateOption = None,
    ramp: common.RampOption = None,
    dry_run: Annotated[
        bool, common.dry_run_option("Show where each would go; move nothing.")
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
    yes: common.YesOption = False,
    topology_file: dlq.TopologyOption = None,
    no_topology: dlq.NoTopologyOption = False,
    output: common.OutputOption = common.OutputFormat.TABLE,
    url: common.UrlOption = None,
) -> None:
    """Send dead letters back to the queue they failed in, then remove them.

    The target is --to, or the dead letter's origin: rr-origin-queue, else the newest x-death
    entry that is not a wait queue. Each copy gets a fresh start (retry header removed,
    x-death and rr's failure headers stripped, rr-replayed-count + 1, rr-replayed-at), is
    published mandatory with publisher confirms, and only then is the dead letter acked. A
    copy the broker returns or refuses leaves its dead letter in place (exit 3). A copy that
    comes round again in the same run stops the run.
    """
    topology = dlq.load_topology(topology_file, no_topology)
    sources, conditions, pace = _checked(
        where,
        (rate, ramp),
        sources=lambda: _sources(queue, topology),
        target_problem=lambda sources: to_problem(to, sources) if to is not None else None,
        asks=None if dry_run else (yes, "replay"),
    )
    connect, broker = dlq.changing_connect_of(ctx, url, topology)
    run_id = engine.new_run_id()
    plans = [
        ReplayPlan(
            source=source,
            run_id=run_id,
            retry_header=dlq.retry_header_of(topology),
            to=to,
            wait_queues=WaitQueues.of(topology),
            conditions=conditions,
            set_aside=undecodable,
        )
        for source in sources
    ]
    jobs: list[tuple[str, Chooser]] = [(plan.source, partial(choose, plan)) for plan in plans]

    async def agreed(states: list[shell.QueueState]) -> None:
        _note_read_costs(states, "dead letter", "replay")
        await dlq.ask(_replay_question(states, to, limit, where or []), yes, "replay")

    _transfer_all(
        connect,
        TransferRun(
            jobs,
            TransferKind.REPLAY,
            TransferOptions(limit=limit, pace=pace, tracing=tracing_for()),
            dry_run=dry_run,
            target=None if undecodable else to,
            set_aside=[plan.source for plan in plans] if undecodable and to is None else [],
        ),
        agreed=agreed,
        force=force,
        yes=yes,
        output=output,
        broker=broker,
    )


def _checked(
    where: list[str] | None,
    rate_and_ramp: tuple[str | None, str | None],
    *,
    sources: Callable[[], list[str]],
    target_problem: Callable[[list[str]], str | None],
    asks: tuple[bool, str] | None,
) -> tuple[list[str], tuple[Condition, ...], Pace | None]:
    """A transfer's arguments checked before anything connects, in this order (the first
    wrong one is the usage error): --where, --rate and --ramp, the source queues' names, the
    target (``target_problem`` of the sources), and — ``asks``: (--yes, the action) when the
    run asks — whether a question can be answered. The sources, conditions and pace."""
    with common.guard():
        conditions = parse_all(where or [])
        pace = parse_pace(*rate_and_ramp)
        names = sources()
        check_queue_names(names)
        wrong = target_problem(names)
        if wrong is not None:
            raise UsageError(wrong)
        if asks is not None:
            dlq.require_answerable(*asks)
    return names, conditions, pace


def _note_read_costs(states: list[shell.QueueState], item: str, command: str) -> None:
    """Before the question: for each queue where a read counts a delivery, what a message
    left there costs it."""
    for state in states:
        if state.reads.cost is not Cost.FREE and state.message_count:
            dlq.note(_quorum_note(state, item, command))


def _quorum_note(state: shell.QueueState, item: str, command: str) -> str:
    """What leaving a message in the queue costs it, where a read counts (``dlq/read_cost.py``)."""
    return (
        f"{state.reads.why}: a {item} this {command} leaves there (skipped, failed, past "
        "--limit) goes back that way"
    )


def _transfer_all(
    connect: Connect,
    transfers: TransferRun,
    *,
    agreed: Callable[[list[shell.QueueState]], Awaitable[None]],
    force: bool,
    yes: bool,
    output: common.OutputFormat,
    broker: str,
) -> None:
    """Run (or dry-run) the sources on the engine (``ops/transfers.py``); print the reports,
    even of a run an error ended, and exit with their code (``cli/dlq/report.py``)."""
    kind = transfers.kind
    hooks = TransferHooks(
        reading=partial(_warn_before_dry_run, kind=kind, yes=yes),
        dropping=partial(_check_target, force=force),
        agreed=agreed,
        bar=partial(dlq.progress_bar, output),
        stopping=partial(dlq.note, STOPPING),
    )
    done = Transfers()
    several = len(transfers.jobs) > 1
    common.run(
        transfer_sources(connect, transfers, hooks, done),
        then=lambda: render(_reports_outcome(done.reports, several=several, broker=broker), output),
    )
    finish(_exit_of(done, kind))


STOPPING = "stopping: finishing the copies under way (Ctrl-C again to quit at once)"


async def _warn_before_dry_run(
    states: list[shell.QueueState], version: str, *, kind: TransferKind, yes: bool
) -> None:
    for state in states:
        await dlq.agree_to_read(
            state,
            state.message_count,
            version,
            yes=yes,
            action=f"{kind} --dry-run {state.name!r}",
        )


def _exit_of(done: Transfers, kind: TransferKind) -> Outcome:
    """How a replay or move ends: an interrupted run's error (77 refused, else 69), 130 when
    Ctrl-C stopped it, else :func:`transfer_exit_code`."""
    interrupted = next((report for report in done.reports if report.interrupted), None)
    if interrupted is not None and interrupted.refused:
        return Outcome(error=AccessRefused(_refused_text(interrupted)))
    if interrupted is not None:
        return Outcome(
            error=BrokerUnreachable(
                f"{kind} of {interrupted.source!r} interrupted: {interrupted.interrupted}; up "
                f"to {interrupted.possible_duplicates:,} message(s) may now be duplicated; "
                f"rerun to {kind} the rest"
            )
        )
    if done.stop.is_set():
        return Outcome(code=130)
    return Outcome(code=int(transfer_exit_code(done.reports)))


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


def _reports_outcome(
    reports: list[TransferReport], *, several: bool, broker: str | None = None
) -> Outcome:
    """Each source's table (when it has results) and summary, or the JSON documents (one
    source: its document alone); nothing when no source ran."""
    if not reports:
        return Outcome()

    def document() -> Any:
        documents = [transfer_document(report) for report in reports]
        if broker is not None:
            documents = [common.carrying_broker(doc, broker) for doc in documents]
        return documents if several else documents[0]

    def table() -> list[Piece]:
        pieces: list[Piece] = []
        for report in reports:
            table = transfer_table(report)
            pieces.append(table if report.results else TsvOnly(table))
            pieces.append(cell(transfer_summary(report)))
        return pieces

    return Outcome(document=document, table=table)


# --------------------------------------------------------------------------- purge --where


def purge_matching(
    ctx: typer.Context,
    queue: str,
    conditions: tuple[Condition, ...],
    where: list[str],
    *,
    topology: Topology | None,
    url: list[str] | None,
    dry_run: bool,
    yes: bool,
    output: common.OutputFormat,
) -> None:
    """``rr dlq purge QUEUE --where ...``: the matching messages acked on the transfer
    engine, copied nowhere; the others stay in their order (dlq/purge.py)."""
    plan = PurgePlan(source=queue, conditions=conditions, wait_queues=WaitQueues.of(topology))

    async def agreed(states: list[shell.QueueState]) -> None:
        (state,) = states
        _note_read_costs(states, "message", "purge")
        await dlq.ask(
            f"Purge the messages of {queue!r} ({state.message_count:,}){_bounds(None, where)}? "
            "They cannot be recovered",
            yes,
            f"purge {queue!r}",
        )

    connect, broker = dlq.changing_connect_of(ctx, url, topology)
    _transfer_all(
        connect,
        TransferRun(
            [(queue, partial(choose_purge, plan))],
            TransferKind.PURGE,
            TransferOptions(),
            dry_run=dry_run,
        ),
        agreed=agreed,
        force=False,
        yes=yes,
        output=output,
        broker=broker,
    )


# --------------------------------------------------------------------------- move


def move_command(
    ctx: typer.Context,
    queue: Annotated[str, typer.Argument(help="The queue to move messages from.")],
    to: Annotated[str, typer.Option("--to", help="The queue to move them to.")],
    limit: AttemptLimitOption = None,
    where: Annotated[list[str] | None, dlq.where_option("messages")] = None,
    rate: RateOption = None,
    ramp: common.RampOption = None,
    reset_retries: Annotated[
        bool,
        typer.Option(
            "--reset-retries",
            help="Start each message's attempts afresh: remove the retry header, x-death and "
            "rr's failure headers (by default they move with it).",
        ),
    ] = False,
    dry_run: Annotated[bool, common.dry_run_option("Show what would move; move nothing.")] = False,
    create: Annotated[
        bool,
        typer.Option(
            "--create",
            help="Declare --to first when it does not exist: a durable classic queue with no "
            "argument, like a topology's plain queue.",
        ),
    ] = False,
    force: ForceOption = False,
    yes: common.YesOption = False,
    topology_file: dlq.TopologyOption = None,
    no_topology: dlq.NoTopologyOption = False,
    output: common.OutputOption = common.OutputFormat.TABLE,
    url: common.UrlOption = None,
) -> None:
    """Move messages from one queue to another, then remove them (rr docs dlq "Move").

    Each message keeps its body, headers (retry count and x-death included, unless
    --reset-retries) and properties (not expiration, not user_id), is published mandatory
    with publisher confirms, and only then is it acked. A copy the broker returns or refuses
    leaves its message in place (exit 3).
    """
    topology = dlq.load_topology(topology_file, no_topology)
    _, conditions, pace = _checked(
        where,
        (rate, ramp),
        sources=lambda: [queue],
        target_problem=lambda _: move_to_problem(queue, to),
        asks=None if dry_run else (yes, "move"),
    )
    connect, broker = dlq.changing_connect_of(ctx, url, topology)
    plan = MovePlan(
        source=queue,
        to=to,
        conditions=conditions,
        reset_retries=reset_retries,
        retry_header=dlq.retry_header_of(topology),
        wait_queues=WaitQueues.of(topology),
    )

    async def agreed(states: list[shell.QueueState]) -> None:
        (state,) = states
        _note_read_costs(states, "message", "move")
        await dlq.ask(
            f"Move the messages of {queue!r} ({state.message_count:,}){_bounds(limit, where or [])}"
            f" to {to!r}? "
            "Each is removed once the broker confirmed its copy",
            yes,
            "move",
        )

    _transfer_all(
        connect,
        TransferRun(
            [(queue, partial(choose_move, plan))],
            TransferKind.MOVE,
            TransferOptions(limit=limit, pace=pace, tracing=tracing_for()),
            dry_run=dry_run,
            target=to,
            create=[to] if create else [],
        ),
        agreed=agreed,
        force=force,
        yes=yes,
        output=output,
        broker=broker,
    )
