"""``rr topology validate | show | export``: offline work on a topology file (no broker).

Every command here, and ``rr declare``, loads a file through :func:`load_checked`: the file is
read and checked (docs/topology.md, "Malformed files"), expanded, and every frame ``rr
declare`` would send for it is encoded with the AMQP client's own encoder, offline. So a file
``validate`` calls ok is one ``rr declare`` can send whole, and a file that cannot be sent is
refused before the first frame goes out (exit 78), never half way through a declare.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from enum import StrEnum
from functools import partial
from pathlib import Path
from typing import Annotated

import typer
from pamqp import commands as spec
from pamqp.base import Frame

from rabbitctl_retry.cli._common import (
    OutputFormat,
    OutputOption,
    guard,
    print_json,
    stdout_console,
)
from rabbitctl_retry.cli.plain_table import LARGE_TABLE_ROWS, plain_lines
from rabbitctl_retry.cli.render import printable, rich_table, topology_document, topology_rows
from rabbitctl_retry.errors import ConfigError
from rabbitctl_retry.topology.definitions import to_definitions
from rabbitctl_retry.topology.expand import (
    BindingEntity,
    Desired,
    ExchangeEntity,
    QueueEntity,
    expand,
)
from rabbitctl_retry.topology.load import load_text, read_topology_text, source_name
from rabbitctl_retry.topology.locate import line_of
from rabbitctl_retry.topology.model import Topology
from rabbitctl_retry.topology.wire import describe_text

# The transport's own conversion of plain tables to pamqp values: the pre-flight encodes
# exactly what a declare sends.
from rabbitctl_retry.transport.values import wire_arguments

app = typer.Typer(
    help="Check, show and export a topology file without touching a broker.",
    no_args_is_help=True,
    rich_markup_mode=None,
)

TopologyArgument = Annotated[Path, typer.Argument(help="The topology file (TOML).")]


class ExportFormat(StrEnum):
    DEFINITIONS = "definitions"


def _passive_exchange_frame(name: str) -> Frame:
    return spec.Exchange.Declare(exchange=name, passive=True)


def _exchange_frame(exchange: ExchangeEntity) -> Frame:
    return spec.Exchange.Declare(
        exchange=exchange.name,
        exchange_type=exchange.type,
        durable=exchange.durable,
        arguments=wire_arguments(exchange.arguments),
    )


def _queue_frame(queue: QueueEntity) -> Frame:
    return spec.Queue.Declare(
        queue=queue.name, durable=queue.durable, arguments=wire_arguments(queue.arguments)
    )


def _bind_frame(binding: BindingEntity) -> Frame:
    return spec.Queue.Bind(
        queue=binding.queue,
        exchange=binding.exchange,
        routing_key=binding.routing_key,
        arguments=wire_arguments(binding.arguments),
    )


def declaration_frames(desired: Desired) -> list[tuple[str, str, Callable[[], Frame]]]:
    """Every frame ``rr declare`` sends for ``desired`` (passive look-ups, declarations and
    bindings), as ``(key path, what, build)``; ``build`` raises if the frame cannot be
    built. Pure."""
    frames: list[tuple[str, str, Callable[[], Frame]]] = [
        ("", f"exchange {describe_text(name)}", partial(_passive_exchange_frame, name))
        for name in desired.referenced_exchanges
    ]
    frames.extend(
        (e.source, f"exchange {describe_text(e.name)}", partial(_exchange_frame, e))
        for e in desired.exchanges
    )
    frames.extend(
        (q.source, f"queue {describe_text(q.name)}", partial(_queue_frame, q))
        for q in desired.queues
    )
    frames.extend(
        (
            b.source,
            f"binding of {describe_text(b.queue)} to {describe_text(b.exchange)}",
            partial(_bind_frame, b),
        )
        for b in desired.bindings
    )
    return frames


def preflight(desired: Desired) -> None:
    """Encode every frame of ``desired`` as the transport would; offline.

    Raises:
        ConfigError: a frame cannot be encoded (with the key path of the entity), which the
            load-time checks should already have refused.
    """
    for path, what, build in declaration_frames(desired):
        try:
            build().marshal()
        except Exception as error:  # any encoder failure: ValueError, TypeError, struct.error
            raise ConfigError(
                f"{what} cannot be sent to RabbitMQ: {error}", path=path or None
            ) from None


def load_checked(path: Path) -> tuple[Topology, Desired]:
    """Read, check, expand and pre-flight a topology file (see the module docstring).

    Raises:
        ConfigError: the file is unreadable, invalid, or cannot be sent whole.
    """
    text = read_topology_text(path)
    source = source_name(path)
    topology = load_text(text, source=source)
    desired = expand(topology)
    try:
        preflight(desired)
    except ConfigError as error:
        line = line_of(text, error.path) if error.path else None
        raise error.located(source=source, line=line) from None
    return topology, desired


def _load(path: Path) -> tuple[Topology, Desired]:
    with guard():
        return load_checked(path)


@app.command()
def validate(topology_file: TopologyArgument) -> None:
    """Parse and check a topology file; exit 78 with the key and line of the first problem."""
    topology, desired = _load(topology_file)
    stdout_console().print(
        f"{printable(str(topology_file))}: ok ({len(topology.queues)} queues in the file; "
        f"{len(desired.queues)} queues, {len(desired.exchanges)} exchanges and "
        f"{len(desired.bindings)} bindings to declare)",
        soft_wrap=True,
    )


@app.command()
def show(topology_file: TopologyArgument, output: OutputOption = OutputFormat.TABLE) -> None:
    """Show the retry policy of each queue and every entity the file declares, with its
    exact arguments."""
    topology, desired = _load(topology_file)
    if output is OutputFormat.JSON:
        print_json(topology_document(topology, desired))
        return
    console = stdout_console()
    for rows in topology_rows(topology, desired):
        if len(rows.rows) > LARGE_TABLE_ROWS:  # rich would take minutes (cli/plain_table.py)
            sys.stdout.writelines(f"{line}\n" for line in plain_lines(rows))
        else:
            console.print(rich_table(rows))
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
    _, desired = _load(topology_file)
    match format:
        case ExportFormat.DEFINITIONS:
            print_json(to_definitions(desired, vhost=vhost))
