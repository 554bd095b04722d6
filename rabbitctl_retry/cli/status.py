"""``rr status [QUEUE...] [--topology T] [--watch SECONDS]``: depth, consumers and drift of
each queue, from passive declares (docs/cli.md, "rr status").

Ctrl-C ends ``--watch`` with exit 0 whenever it comes, during a reading too; a plain
``rr status`` interrupted prints ``rr: interrupted`` and exits 130 (docs/cli.md, "Exit
codes")."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from rabbitctl_retry.cli._common import (
    OutputFormat,
    OutputOption,
    UrlOption,
    connect_to,
    exit_with,
    guard,
    management_connector_of,
    resolve_urls,
    run,
)
from rabbitctl_retry.cli.finish import Outcome, Piece, finish, render

if TYPE_CHECKING:
    from rich.table import Table

    from rabbitctl_retry.ops.status import QueueStatus


def status_command(
    ctx: typer.Context,
    queues: Annotated[
        list[str] | None,
        typer.Argument(help="Queues to show (besides those of --topology).", show_default=False),
    ] = None,
    topology_file: Annotated[
        Path | None,
        typer.Option(
            "--topology",
            "-t",
            help="Show every queue the file declares (wait queues and dead-letter queues "
            "included) and whether each is what the file says.",
        ),
    ] = None,
    watch: Annotated[
        str | None,
        typer.Option(
            "--watch",
            "-w",
            help="Show it again every this many seconds, until Ctrl-C.",
            show_default=False,
        ),
    ] = None,
    url: UrlOption = None,
    management_url: Annotated[
        str | None,
        typer.Option(
            "--management-url",
            envvar="RR_MANAGEMENT_URL",
            help="The management plugin's URL (http://USER:PASSWORD@HOST:15672/): also show "
            "each queue's settings, with the policy and operator policy that apply and the "
            "effective value (docs/topology.md). Else [broker] management_url of --topology.",
            show_default=False,
        ),
    ] = None,
    output: OutputOption = OutputFormat.TABLE,
) -> None:
    """Show each queue's messages, consumers and type, and whether it matches the topology
    file; exit 1 when a queue is missing or differs from the file."""
    from rabbitctl_retry.cli.queue_names import check_queue_names
    from rabbitctl_retry.cli.status_watch import parse_watch_s
    from rabbitctl_retry.errors import UsageError
    from rabbitctl_retry.ops.status import read_statuses
    from rabbitctl_retry.topology.expand import QueueEntity, expand
    from rabbitctl_retry.topology.load import load_file

    with guard():
        watch_s = parse_watch_s(watch) if watch is not None else None
        check_queue_names(queues or ())
        topology = load_file(topology_file) if topology_file is not None else None
        if topology is None and not queues:
            raise UsageError("name the queues to show, or give --topology")
    listed = list(expand(topology).queues) if topology is not None else []
    in_file = {queue.name for queue in listed}
    named = [QueueEntity(name=name) for name in queues or () if name not in in_file]
    urls = resolve_urls(url, topology.broker.urls if topology else ())
    connect = connect_to(ctx, urls)
    read_live = None
    given = management_url or (topology.broker.management_url if topology else None)
    if given is not None:
        from functools import partial

        from rabbitctl_retry.ops.live import live_settings
        from rabbitctl_retry.transport.management import check_management_url, vhost_of

        with guard():
            check_management_url(given)
        read_live = partial(
            live_settings,
            management_url=given,
            vhost=vhost_of(urls[0]),
            management=management_connector_of(ctx),
        )
    if watch_s is None:
        finish(
            status_outcome(run(read_statuses(connect, listed, named, read_live=read_live))),
            output,
        )
        return
    try:  # Ctrl-C, during a reading too, is the end of the watch: exit 0
        while True:
            statuses = run(
                read_statuses(connect, listed, named, read_live=read_live), quiet_interrupt=True
            )
            render(status_outcome(statuses, watching=True), output)
            time.sleep(watch_s)
    except KeyboardInterrupt:
        exit_with(0)


def status_outcome(statuses: list[QueueStatus], *, watching: bool = False) -> Outcome:
    """A table and its count line, or the JSON document (``--watch``: one per line, the
    table on a cleared terminal); exit 1 when a queue is not as expected."""

    def table() -> list[Piece]:
        bad = [status for status in statuses if not status.ok]
        count = f"{len(statuses)} queue(s); " + (f"{len(bad)} not as expected" if bad else "ok")
        live = [status.live for status in statuses if status.live is not None]
        if not live:
            return [status_table(statuses), count]
        from rabbitctl_retry.cli.render import live_rows, rich_table

        return [status_table(statuses), count, "", rich_table(live_rows(live))]

    return Outcome(
        document=lambda: status_document(statuses),
        table=table,
        code=0 if watching or all(status.ok for status in statuses) else 1,
        one_line=watching,
        clear=watching,
    )


def _type_of(status: QueueStatus) -> str:
    if not status.listed:
        return "-"
    kind = status.entity.arguments.get("x-queue-type")
    return str(kind) if isinstance(kind, str) else "classic"


def _state_of(status: QueueStatus) -> str:
    if not status.present:
        return "missing"
    if status.drift is not None:
        return f"differs: {status.drift}"
    return "ok" if status.listed else "exists"


def status_document(statuses: list[QueueStatus]) -> dict[str, Any]:
    """``rr status --output json`` (docs/cli.md, "rr status")."""
    from rabbitctl_retry.cli.render import json_arguments, live_document

    return {
        "queues": [
            {
                "name": status.entity.name,
                "type": _type_of(status) if status.listed else None,
                "role": status.entity.role if status.listed else None,
                "present": status.present,
                "messages": status.messages,
                "consumers": status.consumers,
                "matches": status.drift is None if status.present and status.listed else None,
                "differences": status.drift,
                "arguments": json_arguments(status.entity.arguments) if status.listed else None,
                **({} if status.live is None else {"live": live_document([status.live])[0]}),
            }
            for status in statuses
        ],
        "ok": all(status.ok for status in statuses),
    }


def status_table(statuses: list[QueueStatus]) -> Table:
    from rich.table import Table

    from rabbitctl_retry.cli.render import cell

    table = Table(show_edge=False, pad_edge=False, header_style="bold")
    for column in ("queue", "type", "messages", "consumers", "state", "role"):
        table.add_column(column, overflow="fold")
    for status in statuses:
        table.add_row(
            cell(status.entity.name),
            cell(_type_of(status)),
            cell("-" if status.messages is None else f"{status.messages:,}"),
            cell("-" if status.consumers is None else f"{status.consumers:,}"),
            cell(_state_of(status), "" if status.ok else "red"),
            cell(status.entity.role if status.listed else ""),
        )
    return table


__all__ = ["status_command", "status_document", "status_table"]
