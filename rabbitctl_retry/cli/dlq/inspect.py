"""``rr dlq inspect``: dead letters without taking them, as a table, one line each, JSON, JSON
lines, or a summary of counts (docs/reference/dlq.md, "Inspecting without taking" and "Big queues").

Only the table keeps what it reads until the end: ``--output json`` keeps each message's
document in bounded memory (the rest in a temporary file, ``dlq/spill.py``) and writes them one
by one, ``--format lines`` and ``--output jsonl`` print each message as it is read and
``--summary`` only counts, so those four read any number of dead letters in constant memory.
A line that cannot be written stops the read (cli/output.py: exit 74, or 141 quietly when
stdout's reader went away).
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from functools import partial
from typing import Annotated, Any

import typer

from rabbitctl_retry.cli import _common as common
from rabbitctl_retry.cli.dlq import common as dlq
from rabbitctl_retry.cli.dlq.render import (
    inspect_document,
    inspect_footer,
    inspect_table,
    message_document,
)
from rabbitctl_retry.cli.dlq.summary import summary_document, summary_head, summary_view
from rabbitctl_retry.cli.finish import Outcome, TsvOnly, finish
from rabbitctl_retry.cli.output import FirstFailure
from rabbitctl_retry.cli.queue_names import check_queue_names
from rabbitctl_retry.cli.render import cell, printable
from rabbitctl_retry.dlq.filters import Condition, matches, parse_all
from rabbitctl_retry.dlq.letter import Letter, letter_of
from rabbitctl_retry.dlq.oneline import letter_line
from rabbitctl_retry.dlq.origin import WaitQueues, contents_of, facts
from rabbitctl_retry.dlq.spill import SpilledRows
from rabbitctl_retry.dlq.summary import Summary
from rabbitctl_retry.errors import UsageError
from rabbitctl_retry.ops import dlq as shell
from rabbitctl_retry.ops import dlq_runs as runs
from rabbitctl_retry.topology.model import Topology
from rabbitctl_retry.transport.base import Delivery

DEFAULT_INSPECT_LIMIT = 1000
"""Messages inspect reads without --limit (--summary: the whole queue)."""

DOCUMENTS_IN_MEMORY = 256
"""``--output json``: message documents held in memory before they go to the temporary file
together (a document holds its body)."""


class InspectOutput(StrEnum):
    TABLE = "table"
    JSON = "json"
    JSONL = "jsonl"
    TSV = "tsv"


class InspectFormat(StrEnum):
    TABLE = "table"
    LINES = "lines"


def inspect_command(
    ctx: typer.Context,
    queue: Annotated[str, typer.Argument(help="The dead-letter queue.", metavar="QUEUE")],
    limit: Annotated[
        int | None,
        typer.Option(
            "--limit",
            "-n",
            min=1,
            metavar="N",
            help=f"Read at most N messages [default: {DEFAULT_INSPECT_LIMIT:,}; with --summary "
            "the whole queue].",
            show_default=False,
        ),
    ] = None,
    summary: Annotated[
        bool,
        typer.Option(
            "--summary",
            help="Counts by origin, reason, retry count and age, the oldest and newest; no "
            'bodies, constant memory (rr docs dlq "Big queues").',
        ),
    ] = False,
    view: Annotated[
        InspectFormat,
        typer.Option("--format", help="table, or lines: one line per message, printed as read."),
    ] = InspectFormat.TABLE,
    where: Annotated[list[str] | None, dlq.where_option("dead letters shown (or counted)")] = None,
    topology_file: dlq.TopologyOption = None,
    no_topology: dlq.NoTopologyOption = False,
    output: Annotated[
        InspectOutput,
        common.output_option(
            InspectOutput,
            "table for people, json for scripts, jsonl: one message per line, printed as "
            "read, tsv: the table as tab-separated lines",
        ),
    ] = InspectOutput.TABLE,
    body: Annotated[bool, typer.Option("--body/--no-body", help="Show message bodies.")] = True,
    yes: common.YesOption = False,
    url: common.UrlOption = None,
) -> None:
    """Show dead letters without taking them: the queue keeps the same messages, in order.

    Each message: position, message id, origin queue and reason, retry count, delivery
    count, the x-death timeline, rr's error headers, and the body (text, pretty JSON, or
    base64; long bodies are cut). For big queues: --summary (counts only), --format lines,
    --output jsonl. On a quorum queue every look counts as a delivery: rr says so and asks
    first.
    """
    problem = inspect_usage_problem(summary=summary, view=view, output=output)
    with common.guard():
        if problem is not None:
            raise UsageError(problem)
        check_queue_names([queue])
        conditions = parse_all(where or [])
    topology = dlq.load_topology(topology_file, no_topology)
    connect = dlq.connect_of(ctx, url, topology)
    reading = InspectReading.starting_now(topology)
    wanted = limit if limit is not None else (None if summary else DEFAULT_INSPECT_LIMIT)
    kept = Kept(summary=Summary(now=reading.now) if summary else None)
    take = kept.taker(output=output, view=view, with_body=body, now=reading.now)
    if conditions:
        take = partial(_if_matching, take, conditions, reading)
    streaming = output is InspectOutput.JSONL or view is InspectFormat.LINES
    bar_output = (
        common.OutputFormat.JSON if output is InspectOutput.JSON else common.OutputFormat.TABLE
    )
    written = FirstFailure()

    scan = common.run(
        runs.inspect(
            connect,
            queue,
            reading.taker(take, written),
            limit=wanted,
            look=partial(dlq.agree_to_read, yes=yes, action=f"inspect {queue!r}"),
            bar=partial(dlq.progress_bar, bar_output, streaming=streaming),
        )
    )
    with common.guard():
        written.raise_first()
    outcome = kept.outcome(queue, scan, output=output, view=view, with_body=body)
    if where:
        matching = " and ".join(where)
        note = cell(f"only the dead letters matching {matching}, of {scan.read:,} read")
        outcome = dataclasses.replace(outcome, notes=[*outcome.notes, note])
    finish(outcome, output)


@dataclass(slots=True)
class Kept:
    """What inspect keeps of the letters it reads: counters (``--summary``), every letter (the
    table), every letter's document in bounded memory (``--output json``), or nothing (the
    views printed as read)."""

    summary: Summary | None = None
    letters: list[Letter[Delivery]] = field(default_factory=list)
    documents: SpilledRows[dict[str, Any]] = field(
        default_factory=lambda: SpilledRows(chunk=DOCUMENTS_IN_MEMORY)
    )

    def taker(
        self, *, output: InspectOutput, view: InspectFormat, with_body: bool, now: datetime
    ) -> Callable[[Letter[Delivery]], None]:
        """What is done with each letter as it is read."""
        if self.summary is not None:
            return self.summary.add
        if output is InspectOutput.JSONL:
            return functools.partial(_print_message_line, with_body=with_body)
        if view is InspectFormat.LINES:
            return functools.partial(_print_letter_line, now=now, with_body=with_body)
        if output is InspectOutput.JSON:
            return functools.partial(_keep_document, self.documents, with_body=with_body)
        return self.letters.append

    def outcome(
        self,
        queue: str,
        scan: shell.ScanResult,
        *,
        output: InspectOutput,
        view: InspectFormat,
        with_body: bool,
    ) -> Outcome:
        """What is printed of what was kept, once the read is over (``--output jsonl`` and
        ``--format lines`` printed theirs as they read), and the note of a read cut short."""
        notes = []
        if self.summary is None and view is InspectFormat.LINES:
            notes.append(
                cell(f"{scan.read:,} dead letter(s) shown of {scan.in_queue:,} in {queue!r}")
            )
        if not scan.complete:
            notes.append(
                cell(
                    f"only {scan.read:,} message(s) came before the queue went quiet: another "
                    "consumer may be taking them"
                )
            )
        tally = self.summary
        if tally is not None:
            return Outcome(
                document=lambda: summary_document(
                    queue, tally, in_queue=scan.in_queue, complete=scan.complete
                ),
                table=lambda: [
                    cell(summary_head(queue, tally, scan.in_queue)),
                    *([summary_view(tally)] if tally.count else []),
                ],
                notes=notes,
            )
        if view is InspectFormat.LINES:
            return Outcome(notes=notes)
        if output is InspectOutput.JSON:
            return Outcome(
                document=lambda: inspect_document(queue, self.documents, in_queue=scan.in_queue),
                notes=notes,
            )
        return Outcome(
            table=lambda: [
                inspect_table(self.letters, with_body=with_body)
                if self.letters
                else TsvOnly(inspect_table([], with_body=with_body)),
                cell(inspect_footer(queue, self.letters, scan.in_queue)),
            ],
            notes=notes,
        )


def inspect_usage_problem(
    *, summary: bool, view: InspectFormat, output: InspectOutput
) -> str | None:
    """Why these inspect options do not go together, or None."""
    if summary and view is InspectFormat.LINES:
        return "--summary and --format lines are two different views: pick one"
    if summary and output is InspectOutput.JSONL:
        return "--summary prints one document: use --output json (or table), not jsonl"
    if view is InspectFormat.LINES and output is not InspectOutput.TABLE:
        return f"--format lines is a view for people: drop it with --output {output.value}"
    return None


@dataclass(frozen=True, slots=True)
class InspectReading:
    """What turns each delivery read into a :class:`Letter`."""

    retry_header: str
    wait_queues: WaitQueues
    now: datetime
    """When the read started: ages are measured from it."""

    @classmethod
    def starting_now(cls, topology: Topology | None) -> InspectReading:
        """The reading of a read that starts now, with the topology's retry header and wait
        queues (the defaults without one)."""
        return cls(
            retry_header=dlq.retry_header_of(topology),
            wait_queues=WaitQueues.of(topology),
            now=datetime.now(UTC),
        )

    def taker(
        self, take: Callable[[Letter[Delivery]], None], written: FirstFailure | None = None
    ) -> Callable[[Delivery], bool]:
        """A :func:`~rabbitctl_retry.ops.dlq.scan_messages` callback numbering the deliveries
        from 1 and giving each one's letter to ``take``; the read goes on to the end, or stops
        at the first output ``take`` cannot write (kept in ``written``: the transport would
        drop an exception raised here)."""
        positions = itertools.count(1)
        failures = written if written is not None else FirstFailure()

        def on_delivery(delivery: Delivery) -> bool:
            letter = letter_of(
                next(positions),
                delivery,
                retry_header=self.retry_header,
                wait_queues=self.wait_queues,
            )
            return failures.attempt(functools.partial(take, letter))

        return on_delivery


def _if_matching(
    take: Callable[[Letter[Delivery]], None],
    conditions: tuple[Condition, ...],
    reading: InspectReading,
    letter: Letter[Delivery],
) -> None:
    """``take`` the letter only when it matches every ``--where``."""
    properties = letter.delivery.properties
    contents = contents_of(properties.message_id, letter.delivery.body, properties.undecodable)
    if matches(conditions, facts(properties.headers, reading.wait_queues, contents), reading.now):
        take(letter)


def _keep_document(
    documents: SpilledRows[dict[str, Any]], letter: Letter[Delivery], *, with_body: bool
) -> None:
    documents.append(message_document(letter, with_body=with_body))


def _print_message_line(letter: Letter[Delivery], *, with_body: bool) -> None:
    common.print_json_line(message_document(letter, with_body=with_body))


def _print_letter_line(letter: Letter[Delivery], *, now: datetime, with_body: bool) -> None:
    sys.stdout.write(printable(letter_line(letter, now, with_body=with_body)) + "\n")


__all__ = ["inspect_command"]
