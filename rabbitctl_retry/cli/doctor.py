"""``rr doctor [--topology T]``: what this RabbitMQ's version means for the topology."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from rabbitctl_retry.cli._common import (
    OutputFormat,
    OutputOption,
    UrlOption,
    connector_of,
    guard,
    print_json,
    resolve_urls,
    run,
    stdout_console,
)
from rabbitctl_retry.cli.render import cell
from rabbitctl_retry.doctor import Finding, Level, ServerFacts, examine, safe
from rabbitctl_retry.errors import TransportError
from rabbitctl_retry.topology.expand import Desired, expand
from rabbitctl_retry.topology.load import load_file
from rabbitctl_retry.transport.base import Connection, Connector
from rabbitctl_retry.transport.failover import connect_any

DELAYED_EXCHANGE_TYPE = "x-delayed-message"


def doctor_command(
    ctx: typer.Context,
    topology_file: Annotated[
        Path | None,
        typer.Option("--topology", "-t", help="Also check this topology file's queues."),
    ] = None,
    url: UrlOption = None,
    output: OutputOption = OutputFormat.TABLE,
) -> None:
    """Print the server's version and every behaviour of it that matters for retries; with
    --topology, what it means for that file's queues. Exit 1 when something in the topology
    is unsafe on this server (docs/cli.md, "rr doctor")."""
    with guard():
        topology = load_file(topology_file) if topology_file else None
    desired = expand(topology) if topology is not None else None
    broker_urls = resolve_urls(url, topology.broker.urls if topology else ())
    facts = run(_read_facts(broker_urls, desired, connector_of(ctx)))
    findings = examine(desired, facts)
    if output is OutputFormat.JSON:
        print_json(_document(facts, findings))
    else:
        console = stdout_console()
        if facts.url is not None:
            console.print(cell(f"{facts.product} {facts.version} at {facts.url}"))
        console.print(_table(findings))
        console.print("safe on this server" if safe(findings) else "unsafe on this server")
    if not safe(findings):
        raise typer.Exit(1)


async def _read_facts(
    urls: tuple[str, ...], desired: Desired | None, connector: Connector
) -> ServerFacts:
    connection = await connect_any(connector, urls)
    try:
        plugin: bool | None = None
        if desired is not None and any(x.type == DELAYED_EXCHANGE_TYPE for x in desired.exchanges):
            plugin = await _has_delayed_plugin(connection)
        return ServerFacts(
            version=connection.server_version,
            delayed_message_plugin=plugin,
            url=connection.url,
        )
    finally:
        await connection.close()


async def _has_delayed_plugin(connection: Connection) -> bool:
    """Declare (and delete) a throwaway ``x-delayed-message`` exchange: only the plugin
    knows that type."""
    name = f"rr.doctor.{uuid.uuid4().hex[:12]}"
    channel = await connection.channel()
    try:
        await channel.exchange_declare(
            name,
            type=DELAYED_EXCHANGE_TYPE,
            durable=False,
            auto_delete=True,
            arguments={"x-delayed-type": "direct"},
        )
    except TransportError:
        return False
    try:
        await channel.exchange_delete(name)
    finally:
        await channel.close()
    return True


def _document(facts: ServerFacts, findings: list[Finding]) -> dict[str, Any]:
    return {
        "server": {"product": facts.product, "version": str(facts.version), "url": facts.url},
        "safe": safe(findings),
        "findings": [
            {
                "code": finding.code,
                "level": finding.level.value,
                "queue": finding.queue,
                "message": finding.message,
            }
            for finding in findings
        ],
    }


_STYLE = {Level.INFO: "", Level.UNSAFE: "bold red"}


def _table(findings: list[Finding]) -> Table:
    table = Table(show_edge=False, pad_edge=False, header_style="bold")
    for column in ("level", "finding", "detail"):
        table.add_column(column, overflow="fold")
    for finding in findings:
        table.add_row(
            cell(finding.level.value, _STYLE[finding.level]),
            cell(finding.code),
            cell(finding.message),
        )
    return table
