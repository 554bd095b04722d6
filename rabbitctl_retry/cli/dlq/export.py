"""``rr dlq export``: a queue's messages copied to a JSON Lines file (or stdout), the queue
keeping them all (docs/reference/dlq.md, "Export")."""

from __future__ import annotations

import sys
from collections.abc import Callable
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Annotated

import typer

from rabbitctl_retry.cli import _common as common
from rabbitctl_retry.cli.dlq import common as dlq
from rabbitctl_retry.cli.dlq.export_file import ExportFile
from rabbitctl_retry.cli.finish import Outcome, finish
from rabbitctl_retry.cli.output import require_stdout
from rabbitctl_retry.cli.queue_names import check_queue_names
from rabbitctl_retry.cli.render import cell
from rabbitctl_retry.dlq.filters import Condition, matches, parse_all
from rabbitctl_retry.dlq.origin import WaitQueues, contents_of, facts
from rabbitctl_retry.errors import UsageError
from rabbitctl_retry.ops import dlq_runs as runs
from rabbitctl_retry.transport.base import Delivery


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
    where: Annotated[list[str] | None, dlq.where_option("messages")] = None,
    yes: common.YesOption = False,
    topology_file: dlq.TopologyOption = None,
    no_topology: dlq.NoTopologyOption = False,
    url: common.UrlOption = None,
    output: common.OutputOption = common.OutputFormat.TABLE,
) -> None:
    """Copy messages to a file, one JSON object per line; the queue keeps them all.

    Each line holds the body (base64), every property and every header, typed, so that
    `rr dlq import` restores them exactly. With --where, only the messages it matches.
    """
    with common.guard():
        check_queue_names([queue])
        conditions = parse_all(where or [])
    topology = dlq.load_topology(topology_file, no_topology)
    connect = dlq.connect_of(ctx, url, topology)
    to_stdout = (
        file == "-"
    )  # only a bare -: ./- is a file named - (docs/reference/dlq.md, "Export")
    with (
        common.guard()
    ):  # every check, and the file made, before rr connects (cli/dlq/export_file.py)
        if to_stdout and output is common.OutputFormat.JSON:
            raise UsageError("an export to stdout (-) is the output itself: -o json needs a file")
        if to_stdout:
            require_stdout()
        target = None if to_stdout else ExportFile(Path(file))

    # to stdout, the lines are the output and the summary goes to stderr
    out = sys.stdout if target is None else target.stream
    try:
        read = common.run(
            runs.export(
                connect,
                queue,
                out,
                limit=limit,
                look=partial(dlq.agree_to_read, yes=yes, action=f"export {queue!r}"),
                bar=partial(dlq.progress_bar, common.OutputFormat.TABLE),
                keep=_matching(conditions, WaitQueues.of(topology)) if conditions else None,
            )
        )
        if target is not None:
            with common.guard():
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


def _matching(
    conditions: tuple[Condition, ...], wait_queues: WaitQueues
) -> Callable[[Delivery], bool]:
    """Whether a message read matches every ``--where`` (ages from the start of the read)."""
    now = datetime.now(UTC)

    def keep(delivery: Delivery) -> bool:
        properties = delivery.properties
        contents = contents_of(properties.message_id, delivery.body, properties.undecodable)
        return matches(conditions, facts(properties.headers, wait_queues, contents), now)

    return keep
