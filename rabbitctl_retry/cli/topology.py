"""``rr topology validate | show | export``: offline work on a topology file (no broker).

Every command here, and ``rr declare``, loads a file through
:func:`~rabbitctl_retry.ops.preflight.load_checked`: read, checked, expanded, and every frame
``rr declare`` would send for it encoded offline (docs/topology.md, "Malformed files").
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from rabbitctl_retry.cli._common import OutputFormat, OutputOption, guard
from rabbitctl_retry.cli.finish import Outcome, Piece, Raw, Unwrapped, finish
from rabbitctl_retry.cli.plain_table import LARGE_TABLE_ROWS, plain_lines
from rabbitctl_retry.cli.render import printable, rich_table, topology_document, topology_rows
from rabbitctl_retry.ops.preflight import load_checked
from rabbitctl_retry.topology.definitions import to_definitions
from rabbitctl_retry.topology.expand import Desired
from rabbitctl_retry.topology.model import Topology

app = typer.Typer(
    help="Check, show and export a topology file without touching a broker.",
    no_args_is_help=True,
    rich_markup_mode=None,
)

TopologyArgument = Annotated[Path, typer.Argument(help="The topology file (TOML).")]


class ExportFormat(StrEnum):
    DEFINITIONS = "definitions"


def _load(path: Path) -> tuple[Topology, Desired]:
    with guard():
        return load_checked(path)


@app.command()
def validate(topology_file: TopologyArgument) -> None:
    """Parse and check a topology file; exit 78 with the key and line of the first problem."""
    topology, desired = _load(topology_file)
    text = (
        f"{printable(str(topology_file))}: ok ({len(topology.queues)} queues in the file; "
        f"{len(desired.queues)} queues, {len(desired.exchanges)} exchanges and "
        f"{len(desired.bindings)} bindings to declare)"
    )
    finish(Outcome(table=lambda: [Unwrapped(text)]))


@app.command()
def show(topology_file: TopologyArgument, output: OutputOption = OutputFormat.TABLE) -> None:
    """Show the retry policy of each queue and every entity the file declares, with its
    exact arguments."""
    topology, desired = _load(topology_file)
    finish(
        Outcome(
            document=lambda: topology_document(topology, desired),
            table=lambda: _show_pieces(topology, desired),
        ),
        output,
    )


def _show_pieces(topology: Topology, desired: Desired) -> list[Piece]:
    """Each table, a blank line after it, and the exchanges that must already exist."""
    pieces: list[Piece] = []
    for rows in topology_rows(topology, desired):
        if len(rows.rows) > LARGE_TABLE_ROWS:  # rich would take minutes (cli/plain_table.py)
            pieces.append(Raw(f"{line}\n" for line in plain_lines(rows)))
        else:
            pieces.append(rich_table(rows))
        pieces.append("")
    if desired.referenced_exchanges:
        pieces.append(
            "must already exist: " + ", ".join(printable(n) for n in desired.referenced_exchanges)
        )
    return pieces


@app.command()
def export(
    topology_file: TopologyArgument,
    format: Annotated[
        ExportFormat,
        typer.Option("--format", help="definitions: a RabbitMQ definitions.json document."),
    ] = ExportFormat.DEFINITIONS,
    vhost: Annotated[str, typer.Option("--vhost", help="The vhost the entities go in.")] = "/",
) -> None:
    """Print the topology as a RabbitMQ definitions document (for `rabbitmqctl
    import_definitions` or the management UI)."""
    _, desired = _load(topology_file)
    match format:
        case ExportFormat.DEFINITIONS:
            finish(Outcome(document=lambda: to_definitions(desired, vhost=vhost)), "json")
