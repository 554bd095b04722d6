"""``rr dlq groups``: the dead letters of one or more queues grouped by cause, without taking
any, in bounded memory (dlq/groups.py; docs/reference/dlq.md, "Groups")."""

from __future__ import annotations

import functools
from datetime import datetime
from functools import partial
from typing import Annotated, Any

import typer
from rich.table import Table

from rabbitctl_retry.cli import _common as common
from rabbitctl_retry.cli.dlq import common as dlq
from rabbitctl_retry.cli.dlq.inspect import InspectReading
from rabbitctl_retry.cli.finish import Outcome, TsvOnly, finish
from rabbitctl_retry.cli.output import FirstFailure
from rabbitctl_retry.cli.queue_names import check_queue_names
from rabbitctl_retry.cli.render import cell, count_cell
from rabbitctl_retry.dlq.groups import (
    ALL_DIMENSIONS,
    BoundedNames,
    Dimension,
    Group,
    Grouping,
    Seen,
    parse_dimensions,
)
from rabbitctl_retry.dlq.letter import Letter
from rabbitctl_retry.dlq.report import plural
from rabbitctl_retry.errors import UsageError
from rabbitctl_retry.ops import dlq as shell
from rabbitctl_retry.ops import dlq_runs as runs
from rabbitctl_retry.retry.headers import utc_stamp
from rabbitctl_retry.transport.base import Delivery

EVERY_DIMENSION = ",".join(dimension.value for dimension in ALL_DIMENSIONS)
"""``--by``'s default: every dimension."""


def groups_command(
    ctx: typer.Context,
    queues: Annotated[
        list[str], typer.Argument(help="The dead-letter queue(s).", metavar="QUEUE...")
    ],
    by: Annotated[
        str,
        typer.Option(
            "--by",
            metavar="DIMENSIONS",
            help="What makes a group: any of type, message, origin, handler, comma-separated.",
        ),
    ] = EVERY_DIMENSION,
    topology_file: dlq.TopologyOption = None,
    no_topology: dlq.NoTopologyOption = False,
    yes: common.YesOption = False,
    url: common.UrlOption = None,
    output: common.OutputOption = common.OutputFormat.TABLE,
) -> None:
    """Group dead letters by cause, without taking any: the exception's type and message
    (numbers, UUIDs and ids replaced), the queue it failed in, the handler.

    One row per group: its id, count, first and last failure, origin queues and a sample
    message id. Letters without rr's failure headers group by their x-death reason. rr dlq
    replay, move and export take --where group=ID (rr docs dlq "Groups"). Reads every
    letter in bounded memory; on a quorum queue every look counts as a delivery: rr says so and asks
    first.
    """
    with common.guard():
        check_queue_names(queues)
        try:
            dimensions = parse_dimensions(by)
        except ValueError as error:
            raise UsageError(f"--by {by[:60]!r}: {error}") from None
    topology = dlq.load_topology(topology_file, no_topology)
    connect = dlq.connect_of(ctx, url, topology)
    reading = InspectReading.starting_now(topology)
    grouping = Grouping(dimensions=dimensions)
    scans: list[tuple[str, shell.ScanResult]] = []
    for queue in queues:
        written = FirstFailure()
        scan = common.run(
            runs.inspect(
                connect,
                queue,
                reading.taker(functools.partial(_add, grouping, queue), written),
                limit=None,
                look=partial(dlq.agree_to_read, yes=yes, action=f"read {queue!r}"),
                bar=partial(dlq.progress_bar, output),
            )
        )
        with common.guard():
            written.raise_first()
        scans.append((queue, scan))
    finish(_outcome(grouping, scans), output)


def _add(grouping: Grouping, queue: str, letter: Letter[Delivery]) -> None:
    grouping.add(Seen.of(queue, letter))


def _outcome(grouping: Grouping, scans: list[tuple[str, shell.ScanResult]]) -> Outcome:
    in_queues = sum(scan.in_queue for _, scan in scans)
    notes = [
        cell(
            f"only {scan.read:,} message(s) of {queue!r} came before the queue went quiet: "
            "another consumer may be taking them"
        )
        for queue, scan in scans
        if not scan.complete
    ]
    if grouping.ungrouped:
        notes.append(
            cell(
                f"{plural(grouping.ungrouped, 'dead letter')} of further causes not grouped: "
                f"rr keeps at most {grouping.max_groups:,} groups (--by fewer dimensions, or "
                "rr dlq inspect --summary)"
            )
        )
    listed = ", ".join(repr(queue) for queue, _ in scans)
    return Outcome(
        document=lambda: groups_document(grouping, scans),
        table=lambda: [
            groups_table(grouping) if grouping.groups else TsvOnly(groups_table(grouping)),
            cell(
                f"{plural(len(grouping.groups), 'group')} of "
                f"{plural(grouping.count, 'dead letter')} read of {in_queues:,} in {listed}"
            ),
            *(
                [
                    cell(
                        f"rr dlq replay {scans[0][0] if len(scans) == 1 else 'QUEUE'} "
                        "--where group=ID retries one group (move and export take it too)"
                    )
                ]
                if grouping.groups
                else []
            ),
        ],
        notes=notes,
    )


def groups_document(
    grouping: Grouping, scans: list[tuple[str, shell.ScanResult]]
) -> dict[str, Any]:
    """``rr dlq groups --output json`` (docs/reference/dlq.md, "Groups")."""
    return {
        "queues": [
            {
                "queue": queue,
                "in_queue": scan.in_queue,
                "read": scan.read,
                "complete": scan.complete,
            }
            for queue, scan in scans
        ],
        "by": [d.value for d in grouping.dimensions],
        "read": grouping.count,
        "ungrouped": grouping.ungrouped,
        "groups": [group_document(group) for group in grouping.ranked()],
    }


def group_document(group: Group) -> dict[str, Any]:
    key = group.key
    document: dict[str, Any] = {"id": group.id, "count": group.count}
    for dimension in group.key.dimensions:
        document[dimension.value] = key.value(dimension)
    document["reason"] = group.reason
    document["first_failed_at"] = _stamp(group.first_failed_at)
    document["last_failed_at"] = _stamp(group.last_failed_at)
    document["origins"] = _names(group.origins, "queue")
    document["dead_letter_queues"] = _names(group.queues, "queue")
    document["sample"] = {
        "message_id": group.sample.message_id,
        "queue": group.sample.queue,
        "position": group.sample.position,
        "error_message": group.sample.error_message,
    }
    return document


def _names(names: BoundedNames, label: str) -> dict[str, Any]:
    return {
        "counts": [{label: name, "count": n} for name, n in names.counts.most_common()],
        "others": names.others,
    }


def _stamp(moment: datetime | None) -> str | None:
    return utc_stamp(moment) if moment is not None else None


def groups_table(grouping: Grouping) -> Table:
    table = Table(show_edge=False, pad_edge=False, header_style="bold")
    table.add_column("group", no_wrap=True)
    table.add_column("count", justify="right", no_wrap=True)
    shown = [d for d in grouping.dimensions if d is not Dimension.ORIGIN]
    for dimension in shown:
        table.add_column(dimension.value, overflow="fold")
    table.add_column("origin", overflow="fold")
    table.add_column("first / last failure", no_wrap=True)
    table.add_column("sample", overflow="fold")
    for group in grouping.ranked():
        origins = ", ".join(
            f"{name} ({n:,})" if len(group.origins.counts) > 1 else name
            for name, n in group.origins.counts.most_common()
        )
        if group.origins.others:
            origins += f", {group.origins.others:,} more"
        times = f"{_stamp(group.first_failed_at) or '-'}\n{_stamp(group.last_failed_at) or '-'}"
        table.add_row(
            group.id,
            count_cell(group.count),
            *(cell(group.key.value(d) or "-") for d in shown),
            cell(origins),
            times,
            cell(group.sample.message_id or f"(no id, #{group.sample.position})"),
        )
    return table


__all__ = ["groups_command"]
