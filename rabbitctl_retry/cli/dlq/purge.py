"""``rr dlq purge``: a queue's ready messages deleted, after asking; with --where only those
it matches, read and acked (docs/how-to/after-an-outage.md, "7. Empty the dead-letter queue")."""

from __future__ import annotations

from typing import Annotated

import typer

from rabbitctl_retry.cli import _common as common
from rabbitctl_retry.cli.dlq import common as dlq
from rabbitctl_retry.cli.finish import Outcome, finish
from rabbitctl_retry.cli.queue_names import check_queue_names
from rabbitctl_retry.cli.render import cell
from rabbitctl_retry.dlq.filters import parse_all
from rabbitctl_retry.errors import UsageError
from rabbitctl_retry.ops import dlq as shell
from rabbitctl_retry.ops import dlq_runs as runs


def purge_command(
    ctx: typer.Context,
    queue: Annotated[str, typer.Argument(help="The queue to empty.")],
    where: Annotated[list[str] | None, dlq.where_option("messages")] = None,
    dry_run: Annotated[
        bool,
        common.dry_run_option("With --where: show what would go; remove nothing."),
    ] = False,
    yes: common.YesOption = False,
    topology_file: dlq.TopologyOption = None,
    no_topology: dlq.NoTopologyOption = False,
    url: common.UrlOption = None,
    output: common.OutputOption = common.OutputFormat.TABLE,
) -> None:
    """Delete every ready message of a queue, after asking. `rr dlq export` first keeps a copy.

    With --where (group=ID from rr dlq groups, origin=Q, ...), only the messages it matches:
    each is read and acked; the others stay, in their order (rr docs after-an-outage "7.
    Empty the dead-letter queue").
    """
    with common.guard():
        check_queue_names([queue])
        conditions = parse_all(where or [])
        if dry_run and not conditions:
            raise UsageError("--dry-run shows what a purge --where would remove: give --where")
        if not dry_run:
            dlq.require_answerable(yes, f"purge {queue!r}")
    topology = dlq.load_topology(topology_file, no_topology)
    if conditions:
        from rabbitctl_retry.cli.dlq.transfer import purge_matching

        purge_matching(
            ctx,
            queue,
            conditions,
            where or [],
            topology=topology,
            url=url,
            dry_run=dry_run,
            yes=yes,
            output=output,
        )
        return

    async def agree(state: shell.QueueState) -> None:
        await dlq.ask(
            f"Purge {state.message_count:,} message(s) from {queue!r}? They cannot be recovered",
            yes,
            f"purge {queue!r}",
        )

    connect, broker = dlq.changing_connect_of(ctx, url, topology)
    purged = common.run(runs.purge_queue(connect, queue, agree))
    finish(
        Outcome(
            document=lambda: {"queue": queue, "purged": purged, "broker": broker},
            table=lambda: [cell(f"purged {purged:,} message(s) from {queue!r}")],
        ),
        output,
    )
