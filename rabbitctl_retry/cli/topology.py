"""``rr topology validate | show | export``: offline work on a topology file (no broker;
``show --live`` alone reads the broker's management API).

Every command here, and ``rr declare``, loads a file through
:func:`~rabbitctl_retry.ops.preflight.load_checked`: read, checked, expanded, and every frame
``rr declare`` would send for it encoded offline (docs/reference/topology.md, "Malformed files").
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from rabbitctl_retry.cli import _common as common
from rabbitctl_retry.cli.broker_choice import check_vhost_option
from rabbitctl_retry.cli.finish import Outcome, Piece, Unwrapped, finish
from rabbitctl_retry.cli.render import (
    default_type_line,
    live_document,
    live_rows,
    printable,
    topology_document,
    topology_rows,
)
from rabbitctl_retry.errors import UsageError
from rabbitctl_retry.ops.preflight import load_checked
from rabbitctl_retry.topology.definitions import to_definitions
from rabbitctl_retry.topology.expand import Desired
from rabbitctl_retry.topology.model import Topology
from rabbitctl_retry.transport.management import check_management_url, vhost_of

if TYPE_CHECKING:  # loaded by show --live only: the other commands run no operation
    from rabbitctl_retry.ops.live import Live

app = typer.Typer(
    help="Check, show and export a topology file without touching a broker.",
    no_args_is_help=True,
    rich_markup_mode=None,
)


class ExportFormat(StrEnum):
    DEFINITIONS = "definitions"


def _load(path: Path) -> tuple[Topology, Desired]:
    with common.guard():
        return load_checked(path)


@app.command()
def validate(topology_file: common.TopologyArgument) -> None:
    """Parse and check a topology file; exit 78 with the key and line of the first problem."""
    topology, desired = _load(topology_file)
    text = (
        f"{printable(str(topology_file))}: ok ({len(topology.queues)} queues in the file; "
        f"{len(desired.queues)} queues, {len(desired.exchanges)} exchanges and "
        f"{len(desired.bindings)} bindings to declare)"
    )
    finish(Outcome(table=lambda: [Unwrapped(text)]))


@app.command()
def show(
    ctx: typer.Context,
    topology_file: common.TopologyArgument,
    output: common.OutputOption = common.OutputFormat.TABLE,
    live: Annotated[
        bool,
        typer.Option(
            "--live",
            help="Also read each queue's settings on the broker through the management API: "
            "its type, argument, policy, operator policy and effective value beside the "
            "file's; what the broker lacks is marked missing (rr docs migrate-to-quorum "
            "'Changing a topology').",
        ),
    ] = False,
    url: common.UrlOption = None,
    management_url: Annotated[
        str | None,
        common.management_url_option(
            "With --live: the management plugin's URL (http://USER:PASSWORD@HOST:15672/). "
            "Else [broker] management_url."
        ),
    ] = None,
) -> None:
    """Show the retry policy of each queue and every entity the file declares, with its
    exact arguments (and, with --live, each setting's effective value on the broker)."""
    topology, desired = _load(topology_file)
    found: Live | None = None
    if live:
        with common.guard():
            given = common.resolve_management_url(management_url, topology)
            if given is None:
                common.fail(
                    UsageError(
                        "--live reads the broker's management API: give --management-url, "
                        f"${common.MANAGEMENT_URL_ENV} or [broker] management_url"
                    )
                )
            check_management_url(given)
            vhost = vhost_of(common.resolve_urls(url, topology.broker.urls)[0])
        from rabbitctl_retry.ops.live import live_topology

        found = common.run(
            live_topology(
                desired,
                management_url=given,
                vhost=vhost,
                management=common.management_connector_of(ctx),
            )
        )

    def document() -> dict[str, object]:
        shown = topology_document(topology, desired)
        if found is not None:
            shown["live"] = live_document(found.queues)
            shown["vhost_default_queue_type"] = found.default_queue_type
        return shown

    def table() -> list[Piece]:
        pieces = _show_pieces(topology, desired)
        if found is not None:
            pieces += [live_rows(found.queues), ""]
            if found.default_queue_type is not None:
                pieces.append(default_type_line(found.default_queue_type))
        return pieces

    finish(Outcome(document=document, table=table), output)


def _show_pieces(topology: Topology, desired: Desired) -> list[Piece]:
    """Each table, a blank line after it, and the exchanges that must already exist."""
    pieces: list[Piece] = []
    for rows in topology_rows(topology, desired):
        pieces += [rows, ""]  # plain lines past LARGE_TABLE_ROWS (cli/finish.py)
    if desired.referenced_exchanges:
        pieces.append(
            "must already exist: " + ", ".join(printable(n) for n in desired.referenced_exchanges)
        )
    return pieces


@app.command()
def export(
    topology_file: common.TopologyArgument,
    format: Annotated[
        ExportFormat,
        typer.Option("--format", help="definitions: a RabbitMQ definitions.json document."),
    ] = ExportFormat.DEFINITIONS,
    vhost: Annotated[
        str,
        typer.Option(
            "--vhost",
            callback=check_vhost_option,
            help="The vhost the entities go in.",
        ),
    ] = "/",
) -> None:
    """Print the topology as a RabbitMQ definitions document (for `rabbitmqctl
    import_definitions` or the management UI)."""
    _, desired = _load(topology_file)
    match format:
        case ExportFormat.DEFINITIONS:
            finish(Outcome(document=lambda: to_definitions(desired, vhost=vhost)), "json")
