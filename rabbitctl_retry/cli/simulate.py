"""``rr simulate TOPOLOGY MODULE[:ATTR] --publish QUEUE=BODY ... [--publish-file FILE]``: a run
on the emulator (docs/reference/runtime.md, "rr simulate")."""

from __future__ import annotations

import logging
from dataclasses import asdict
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from rabbitctl_retry.cli import _common as common
from rabbitctl_retry.cli.finish import Outcome, Piece, finish
from rabbitctl_retry.cli.logs import LogFormat, configure_logging
from rabbitctl_retry.cli.render import Cell, cell
from rabbitctl_retry.cli.threads import exit_without_joining
from rabbitctl_retry.errors import DataError, UsageError
from rabbitctl_retry.runtime.loader import load_state_source, load_target
from rabbitctl_retry.runtime.state import made_state
from rabbitctl_retry.simulation import (
    HANDLER_TIMEOUT_S,
    HandlerWatch,
    Simulation,
    parse_publish,
    parse_publish_file,
    simulate,
)
from rabbitctl_retry.testing import EMULATED_RELEASES
from rabbitctl_retry.topology.load import load_file
from rabbitctl_retry.topology.naming import parse_duration_ms
from rabbitctl_retry.user_files import PUBLISH_FILE_LIMIT_BYTES, FileRefused, read_text


def simulate_command(
    topology_file: Annotated[Path, typer.Argument(help="The topology file (TOML).")],
    target: Annotated[str, typer.Argument(help="module, module:handler or path/to/file.py.")],
    publish: Annotated[
        list[str] | None,
        typer.Option(
            "--publish",
            "-p",
            help="QUEUE=BODY to publish (JSON bodies stay JSON), with the id m1, m2, ... by "
            "its place among the messages.",
        ),
    ] = None,
    publish_file: Annotated[
        Path | None,
        typer.Option(
            "--publish-file",
            help='Messages to publish first, one JSON object a line: {"queue": Q, '
            '"message_id": ID, "body": B} (rr docs runtime "rr simulate").',
        ),
    ] = None,
    horizon: Annotated[
        str, typer.Option("--for", help="How much virtual time to simulate, e.g. 30s, 5m, 1h.")
    ] = "1h",
    handler_timeout: Annotated[
        str,
        typer.Option(
            "--handler-timeout",
            help="Real time a handler call may take before the run stops (the virtual clock "
            "waits for it), e.g. 30s.",
        ),
    ] = f"{HANDLER_TIMEOUT_S:g}s",
    server_version: Annotated[
        str | None,
        typer.Option(
            "--server-version",
            help="The RabbitMQ release the emulator behaves as: "
            + ", ".join(EMULATED_RELEASES)
            + ' (default: 4.3.6 when a queue has delay = "server", else 4.0.5).',
        ),
    ] = None,
    state: Annotated[
        str | None,
        typer.Option(
            "--state",
            help="module:attr or path/to/file.py:attr: the service's state to give the "
            "handlers (a value, or a function with no arguments, maybe async, that returns "
            "it); the module's @on_startup and @on_shutdown hooks then do not run "
            '(rr docs test-a-service "Testing handlers").',
        ),
    ] = None,
    output: common.OutputOption = common.OutputFormat.TABLE,
) -> None:
    """Run handlers on the built-in emulator with a virtual clock and print the timeline:
    every delivery with its attempt, outcome and where the message went."""
    configure_logging("error", LogFormat.TEXT)
    # rr's own lines stay quiet (the timeline says what happened); a handler's own warnings
    # and errors print, as they would under rr run (docs/reference/handlers.md, "Logs from
    # handlers")
    logging.getLogger().setLevel(logging.WARNING)
    with common.guard():
        topology = load_file(topology_file)
        handlers = load_target(target)
        state_source = load_state_source(state) if state is not None else None
        try:
            publishes = []
            if publish_file is not None:
                publishes += parse_publish_file(_publish_text(publish_file), str(publish_file))
            publishes += [parse_publish(spec) for spec in publish or []]
            horizon_s = parse_duration_ms(horizon) / 1000
            handler_timeout_s = parse_duration_ms(handler_timeout) / 1000
        except ValueError as error:
            raise UsageError(str(error)) from None
        if handler_timeout_s <= 0:
            raise UsageError("--handler-timeout must be longer than 0s")
        if server_version is not None and server_version not in EMULATED_RELEASES:
            raise UsageError(
                f"--server-version must be one of {', '.join(EMULATED_RELEASES)}, not "
                f"{server_version!r}"
            )
    watch = HandlerWatch()

    async def simulation() -> Simulation:
        given = await made_state(state_source, state) if state is not None else None
        return await simulate(
            topology,
            handlers,
            publishes,
            horizon_s=horizon_s,
            watch=watch,
            handler_timeout_s=handler_timeout_s,
            server_version=server_version,
            state=given,
        )

    try:
        result = common.run(simulation())
    except typer.Exit as stop:
        exit_without_joining(watch.threads_running, stop.exit_code)  # cli/threads.py
        raise
    finish(simulation_outcome(result), output)


def _publish_text(path: Path) -> str:
    """``--publish-file``: a regular file of UTF-8, at most 16 MiB (docs/reference/cli.md, "Files rr
    reads"); :class:`DataError` (exit 65) naming it otherwise."""
    try:
        return read_text(path, limit_bytes=PUBLISH_FILE_LIMIT_BYTES)
    except FileRefused as refused:
        where = f"{path}:{refused.line}" if refused.line is not None else str(path)
        raise DataError(f"--publish-file {where}: {refused.reason}") from None


def simulation_outcome(result: Simulation) -> Outcome:
    """The timeline, its legend and what was left, or the JSON document."""

    def table() -> list[Piece]:
        return [
            timeline_table(result),
            "attempt = 1 + retry + x-dc; retry = the retry header; x-dc = the quorum "
            "queue's x-delivery-count; carried retry = a dead letter's retry header, the "
            "attempts of the queue it came from (not counted here)",
            footer(result),
        ]

    return Outcome(document=lambda: simulation_document(result), table=table)


def footer(result: Simulation) -> str:
    """The last line: how much virtual time, and why the run ended there."""
    left = ", ".join(f"{queue}={count}" for queue, count in result.queues.items() if count)
    if result.finished:
        ended = (
            f"simulated {result.elapsed_s:g}s of virtual time: nothing was left to happen after it"
        )
    else:
        ended = (
            f"simulated {result.elapsed_s:g}s of virtual time and stopped with timers still "
            f"due (last event at {result.last_event_s:g}s)"
        )
    return f"{ended}; messages left: {left or 'none'}"


def simulation_document(result: Simulation) -> dict[str, Any]:
    return {
        "elapsed_s": result.elapsed_s,
        "last_event_s": result.last_event_s,
        "finished": result.finished,
        "events": [
            {
                "time_s": row.time_s,
                "queue": row.queue,
                "event": row.event,
                "attempt": row.attempt,
                "retry_count": row.retry_count,
                "delivery_count": row.delivery_count,
                "message_id": row.message_id,
                "carried_retry_count": row.carried_retry_count,
                "origin_queue": row.origin_queue,
                "detail": row.detail or None,
                "output": None if row.output is None else asdict(row.output),
            }
            for row in result.rows
        ],
        "queues": result.queues,
    }


def timeline_table(result: Simulation) -> Table:
    table = Table(show_edge=False, header_style="bold")
    for column in ("time", "queue", "message", "event", "attempt", "retry", "x-dc", "detail"):
        table.add_column(column, overflow="fold")
    for row in result.rows:
        table.add_row(
            Cell(f"{row.time_s:.3f}s", f"{row.time_s:8.3f}s"),  # unpadded in TSV
            cell(row.queue),
            cell(row.message_id or ""),
            cell(row.event),
            cell("" if row.attempt is None else str(row.attempt)),
            cell("" if row.retry_count is None else str(row.retry_count)),
            cell("" if row.delivery_count is None else str(row.delivery_count)),
            cell(row.detail),
        )
    return table
