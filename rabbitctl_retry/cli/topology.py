"""``rr topology validate | show | export``: offline work on a topology file (no broker)."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from rabbitctl_retry.cli._common import (
    OutputFormat,
    OutputOption,
    guard,
    print_json,
    stdout_console,
)
from rabbitctl_retry.cli.render import printable, topology_document, topology_tables
from rabbitctl_retry.topology.definitions import to_definitions
from rabbitctl_retry.topology.expand import expand
from rabbitctl_retry.topology.load import load_file
from rabbitctl_retry.topology.model import Topology

app = typer.Typer(
    help="Check, show and export a topology file without touching a broker.",
    no_args_is_help=True,
)

TopologyArgument = Annotated[Path, typer.Argument(help="The topology file (TOML).")]


class ExportFormat(StrEnum):
    DEFINITIONS = "definitions"


def _load(path: Path) -> Topology:
    with guard():
        return load_file(path)


@app.command()
def validate(topology_file: TopologyArgument) -> None:
    """Parse and check a topology file; exit 78 with the key and line of the first problem."""
    topology = _load(topology_file)
    desired = expand(topology)
    stdout_console().print(
        f"{printable(str(topology_file))}: ok ({len(topology.queues)} queues in the file; "
        f"{len(desired.queues)} queues, {len(desired.exchanges)} exchanges and "
        f"{len(desired.bindings)} bindings to declare)"
    )


@app.command()
def show(topology_file: TopologyArgument, output: OutputOption = OutputFormat.TABLE) -> None:
    """Show the retry policy of each queue and every entity the file declares, with its
    exact arguments."""
    topology = _load(topology_file)
    desired = expand(topology)
    if output is OutputFormat.JSON:
        print_json(topology_document(topology, desired))
        return
    console = stdout_console()
    for table in topology_tables(topology, desired):
        console.print(table)
        console.print()
    if desired.referenced_exchanges:
        console.print(
            "must already exist: " + ", ".join(printable(n) for n in desired.referenced_exchanges)
        )


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
    topology = _load(topology_file)
    match format:
        case ExportFormat.DEFINITIONS:
            print_json(to_definitions(expand(topology), vhost=vhost))
