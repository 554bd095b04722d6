"""``rr dlq import``: an export file's messages published into a queue, with publisher
confirms, the whole file checked first (docs/reference/dlq.md, "Import")."""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Annotated

import typer

from rabbitctl_retry.cli import _common as common
from rabbitctl_retry.cli.dlq import common as dlq
from rabbitctl_retry.cli.dlq.report import import_document, import_failure, import_summary
from rabbitctl_retry.cli.finish import Outcome, finish
from rabbitctl_retry.cli.queue_names import check_queue_names
from rabbitctl_retry.cli.render import cell
from rabbitctl_retry.dlq.jsonl import short_string_problem
from rabbitctl_retry.ops import dlq as shell
from rabbitctl_retry.ops import dlq_runs as runs


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
    topology_file: Annotated[
        Path | None, common.topology_option("The topology file: its [broker] url.")
    ] = None,
    no_topology: common.NoTopologyOption = False,
    url: common.UrlOption = None,
    output: common.OutputOption = common.OutputFormat.TABLE,
) -> None:
    """Publish every message of an export file into a queue, with publisher confirms.

    The whole file is checked first: a line the broker or the AMQP client would refuse
    stops the import with exit 65, naming the line and field, and nothing is published.
    Bodies, properties and headers are published exactly as exported, in file order (a
    user_id that is not the login user's is left out). An import the broker stops half-way
    names the first line not imported: rerun with --from-line (rr docs dlq "Import").
    """
    with common.guard():
        if short_string_problem(to) is None:  # else check_file says what AMQP cannot carry
            check_queue_names([to], "--to")
    topology = dlq.load_topology(topology_file, no_topology)
    broker_urls = common.resolve_urls(url, topology.broker.urls if topology else ())
    user = shell.login_user(broker_urls[0])  # the nodes of one cluster share their users
    with common.guard():  # the whole file, before connecting: a bad line is exit 65 even offline
        checked = shell.check_file(file, to, from_line=from_line, user=user)
    broker = common.announce_target(broker_urls)

    report = common.run(
        runs.import_(
            common.connect_to(ctx, broker_urls),
            file,
            to,
            from_line=from_line,
            user=user,
            checked=checked,
            bar=partial(dlq.progress_bar, common.OutputFormat.TABLE),
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
            document=lambda: common.carrying_broker(import_document(report), broker),
            table=lambda: [cell(import_summary(report))],
            notes=[cell(dropped_note)] if dropped else [],
            error=import_failure(report),
        ),
        output,
    )
