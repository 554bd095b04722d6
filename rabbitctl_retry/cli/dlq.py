"""``rr dlq``: inspect, replay, export, import and purge dead letters.

Safe by default: ``inspect`` and ``export`` take nothing from the queue; ``replay`` and
``purge`` ask first (``--yes`` to skip the question; without a terminal they refuse unless
``--yes`` is given); on a quorum queue, where every look counts as a delivery, ``inspect``,
``export`` and ``replay --dry-run`` say so and ask too.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Annotated

import typer

from rabbitctl_retry.cli import dlq_inspect  # noqa: F401  (registers inspect, first)
from rabbitctl_retry.cli._common import (
    OutputFormat,
    OutputOption,
    UrlOption,
    connect_to,
    guard,
    resolve_urls,
    run,
)
from rabbitctl_retry.cli.dlq_common import (
    TopologyOption,
    YesOption,
    agree_to_read,
    app,
    ask,
    load_topology,
    progress_bar,
    require_answerable,
    where_option,
)
from rabbitctl_retry.cli.dlq_report import import_document, import_failure, import_summary
from rabbitctl_retry.cli.export_file import ExportFile
from rabbitctl_retry.cli.finish import Outcome, finish
from rabbitctl_retry.cli.output import require_stdout
from rabbitctl_retry.cli.queue_names import check_queue_names
from rabbitctl_retry.cli.render import cell
from rabbitctl_retry.dlq.filters import Condition, matches, parse_all
from rabbitctl_retry.dlq.jsonl import short_string_problem
from rabbitctl_retry.dlq.origin import WaitQueues, facts
from rabbitctl_retry.errors import UsageError
from rabbitctl_retry.ops import dlq as shell
from rabbitctl_retry.ops import dlq_runs as runs
from rabbitctl_retry.transport.base import Delivery

# --------------------------------------------------------------------------- export / import


@app.command("export")
def export_command(
    ctx: typer.Context,
    queue: Annotated[str, typer.Argument(help="The queue to copy.")],
    file: Annotated[
        str,
        typer.Argument(
            help="The JSON Lines file to write (must not exist); - for stdout (./- is a file).",
            metavar="FILE",
        ),
    ],
    limit: Annotated[
        int | None, typer.Option("--limit", "-n", min=1, help="Read at most this many.")
    ] = None,
    where: Annotated[list[str] | None, where_option("messages")] = None,
    yes: YesOption = False,
    topology_file: TopologyOption = None,
    url: UrlOption = None,
    output: OutputOption = OutputFormat.TABLE,
) -> None:
    """Copy messages to a file, one JSON object per line; the queue keeps them all.

    Each line holds the body (base64), every property and every header, typed, so that
    `rr dlq import` restores them exactly. With --where, only the messages it matches.
    """
    with guard():
        check_queue_names([queue])
        conditions = parse_all(where or [])
    topology = load_topology(topology_file)
    broker_urls = resolve_urls(url, topology.broker.urls if topology else ())
    to_stdout = file == "-"  # only a bare -: ./- is a file named - (docs/dlq.md, "Export")
    with guard():  # every check, and the file made, before rr connects (cli/export_file.py)
        if to_stdout and output is OutputFormat.JSON:
            raise UsageError("an export to stdout (-) is the output itself: -o json needs a file")
        if to_stdout:
            require_stdout()
        target = None if to_stdout else ExportFile(Path(file))

    # to stdout, the lines are the output and the summary goes to stderr
    out = sys.stdout if target is None else target.stream
    try:
        read = run(
            runs.export(
                connect_to(ctx, broker_urls),
                queue,
                out,
                limit=limit,
                look=partial(agree_to_read, yes=yes, action=f"export {queue!r}"),
                bar=partial(progress_bar, OutputFormat.TABLE),
                keep=_matching(conditions, WaitQueues.of(topology)) if conditions else None,
            )
        )
        if target is not None:
            with guard():
                target.commit()
    finally:
        if target is not None:
            target.discard()
    exported = read.exported
    matching = f" matching {' and '.join(where)}" if where else ""
    finish(
        Outcome(
            document=lambda: {
                "queue": queue,
                "file": str(file),
                "exported": exported,
                "in_queue": read.in_queue,
            },
            table=lambda: [
                cell(
                    f"exported {exported:,} message(s){matching} of {read.in_queue:,} from "
                    f"{queue!r} "
                    f"to {'stdout' if to_stdout else file}; the queue still holds them"
                )
            ],
            on_stderr=to_stdout,
        ),
        output,
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
    output: OutputOption = OutputFormat.TABLE,
) -> None:
    """Publish every message of an export file into a queue, with publisher confirms.

    The whole file is checked first: a line the broker or the AMQP client would refuse
    stops the import with exit 65, naming the line and field, and nothing is published.
    Bodies, properties and headers are published exactly as exported, in file order (a
    user_id that is not the login user's is left out). An import the broker stops half-way
    names the first line not imported: rerun with --from-line (docs/dlq.md, "Import").
    """
    with guard():
        if short_string_problem(to) is None:  # else check_file says what AMQP cannot carry
            check_queue_names([to], "--to")
    broker_urls = resolve_urls(url)
    user = shell.login_user(broker_urls[0])  # the nodes of one cluster share their users
    with guard():  # the whole file, before connecting: a bad line is exit 65 even offline
        checked = shell.check_file(file, to, from_line=from_line, user=user)

    report = run(
        runs.import_(
            connect_to(ctx, broker_urls),
            file,
            to,
            from_line=from_line,
            user=user,
            checked=checked,
            bar=partial(progress_bar, OutputFormat.TABLE),
        )
    )
    dropped = report.checked.user_ids_dropped
    who = f"{user!r}, the user rr logs in as" if user else "the user rr logs in as"
    dropped_note = (
        f"{dropped:,} message(s) carried a user_id other than {who}: imported without it "
        "(RabbitMQ refuses a message whose user_id is not its publisher's)"
    )
    finish(
        Outcome(
            document=lambda: import_document(report),
            table=lambda: [cell(import_summary(report))],
            notes=[cell(dropped_note)] if dropped else [],
            error=import_failure(report),
        ),
        output,
    )


def _matching(
    conditions: tuple[Condition, ...], wait_queues: WaitQueues
) -> Callable[[Delivery], bool]:
    """Whether a message read matches every ``--where`` (ages from the start of the read)."""
    now = datetime.now(UTC)

    def keep(delivery: Delivery) -> bool:
        return matches(conditions, facts(delivery.properties.headers, wait_queues), now)

    return keep


# --------------------------------------------------------------------------- purge


@app.command("purge")
def purge_command(
    ctx: typer.Context,
    queue: Annotated[str, typer.Argument(help="The queue to empty.")],
    where: Annotated[list[str] | None, where_option("messages")] = None,
    dry_run: Annotated[
        bool,
        typer.Option("--dry-run", help="With --where: show what would go; remove nothing."),
    ] = False,
    yes: YesOption = False,
    topology_file: TopologyOption = None,
    url: UrlOption = None,
    output: OutputOption = OutputFormat.TABLE,
) -> None:
    """Delete every ready message of a queue, after asking. `rr dlq export` first keeps a copy.

    With --where (group=ID from rr dlq groups, origin=Q, ...), only the messages it matches:
    each is read and acked; the others stay, in their order (docs/dlq.md, "7. Empty the
    dead-letter queue").
    """
    with guard():
        check_queue_names([queue])
        conditions = parse_all(where or [])
        if dry_run and not conditions:
            raise UsageError("--dry-run shows what a purge --where would remove: give --where")
        if not dry_run:
            require_answerable(yes, f"purge {queue!r}")
    if conditions:
        from rabbitctl_retry.cli.dlq_transfer import purge_matching

        purge_matching(
            ctx,
            queue,
            conditions,
            where or [],
            topology=load_topology(topology_file),
            url=url,
            dry_run=dry_run,
            yes=yes,
            output=output,
        )
        return

    async def agree(state: shell.QueueState) -> None:
        await ask(
            f"Purge {state.message_count:,} message(s) from {queue!r}? They cannot be recovered",
            yes,
            f"purge {queue!r}",
        )

    purged = run(runs.purge_queue(connect_to(ctx, resolve_urls(url)), queue, agree))
    finish(
        Outcome(
            document=lambda: {"queue": queue, "purged": purged},
            table=lambda: [cell(f"purged {purged:,} message(s) from {queue!r}")],
        ),
        output,
    )


# groups, edit, replay and move register themselves on the same group
from rabbitctl_retry.cli import dlq_edit, dlq_groups, dlq_transfer  # noqa: E402, F401

__all__ = ["app"]
