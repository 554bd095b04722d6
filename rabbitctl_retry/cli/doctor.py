"""``rr doctor [--topology T] [--management-url M]``: what this RabbitMQ means for the
topology (docs/cli.md, "rr doctor").

The version comes from the AMQP handshake; which deprecated features the server permits or
denies from its management API, when a management URL is given (``--management-url``,
``$RR_MANAGEMENT_URL`` or ``[broker] management_url``, as for ``rr declare``), once its
``/api/overview`` shows it answers for the server the AMQP URL reached. An API that answers
for another server, has no table, cannot be reached, refuses the login or answers something
else is a finding (the checks it would have made are named as not made), never the end of the
command.
"""

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
    fail,
    guard,
    management_connector_of,
    print_json,
    resolve_urls,
    run,
    stdout_console,
)
from rabbitctl_retry.cli.render import cell
from rabbitctl_retry.doctor import (
    Finding,
    Level,
    ServerFacts,
    TableUnread,
    Unread,
    examine,
    identity_mismatch,
    names_to_compare,
    safe,
)
from rabbitctl_retry.errors import (
    TransportError,
    UsageError,
    censor_urls,
    escape_unprintable,
)
from rabbitctl_retry.server import DeprecatedFeature, ServerIdentity, Unstated
from rabbitctl_retry.topology.expand import Desired, expand
from rabbitctl_retry.topology.load import load_file
from rabbitctl_retry.transport.base import Connection, Connector, identity_of
from rabbitctl_retry.transport.failover import connect_any
from rabbitctl_retry.transport.management import (
    ManagementApi,
    ManagementConnector,
    check_management_url,
    vhost_of,
)

DELAYED_EXCHANGE_TYPE = "x-delayed-message"
MANAGEMENT_URL_ENV = "RR_MANAGEMENT_URL"
"""The same variable as ``rr declare``'s (docs/cli.md, "The management URL")."""


def doctor_command(
    ctx: typer.Context,
    topology_file: Annotated[
        Path | None,
        typer.Option("--topology", "-t", help="Also check this topology file's queues."),
    ] = None,
    url: UrlOption = None,
    management_url: Annotated[
        str | None,
        typer.Option(
            "--management-url",
            envvar=MANAGEMENT_URL_ENV,
            help="The management plugin's URL (http://USER:PASSWORD@HOST:15672/): read which "
            "deprecated features the server permits or denies, which AMQP does not tell "
            '(docs/cli.md, "rr doctor"). Else [broker] management_url; without one, those '
            "findings are assumed from the version.",
            show_default=False,
        ),
    ] = None,
    output: OutputOption = OutputFormat.TABLE,
) -> None:
    """Print the server's version and every behaviour of it that matters for retries; with
    --topology, what it means for that file's queues. Exit 1 when something in the topology
    is unsafe on this server (docs/cli.md, "rr doctor")."""
    with guard():
        topology = load_file(topology_file) if topology_file else None
        if management_url is not None:
            try:
                check_management_url(management_url)
            except UsageError as error:
                fail(UsageError(f"{error} (given by --management-url or ${MANAGEMENT_URL_ENV})"))
    desired = expand(topology) if topology is not None else None
    broker_urls = resolve_urls(url, topology.broker.urls if topology else ())
    api_url = management_url or (topology.broker.management_url if topology else None)
    facts = run(
        _read_facts(broker_urls, desired, connector_of(ctx), management_connector_of(ctx), api_url)
    )
    retried = frozenset(
        queue.name
        for queue in (topology.queues if topology else ())
        if queue.max_attempts is not None
    )
    findings = examine(desired, facts, retried)
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
    urls: tuple[str, ...],
    desired: Desired | None,
    connector: Connector,
    management: ManagementConnector,
    management_url: str | None,
) -> ServerFacts:
    connection = await connect_any(connector, urls)
    try:
        plugin: bool | None = None
        if desired is not None and any(x.type == DELAYED_EXCHANGE_TYPE for x in desired.exchanges):
            plugin = await _has_delayed_plugin(connection)
        version, reached = connection.server_version, connection.url
        identity = identity_of(connection)
    finally:
        await connection.close()
    features = (
        await _management_answers(
            management(management_url, vhost=vhost_of(reached)), identity, reached
        )
        if management_url is not None
        else TableUnread(Unread.NOT_GIVEN)
    )
    return ServerFacts(
        version=version,
        cluster_name=identity.cluster_name,
        delayed_message_plugin=plugin,
        url=reached,
        deprecated_features=features,
    )


async def _management_answers(
    api: ManagementApi, identity: ServerIdentity, reached: str
) -> tuple[DeprecatedFeature, ...] | TableUnread:
    """What the management API says, once its ``/api/overview`` shows it answers for the
    server AMQP reached (the same cluster name, when both tell one, and the same version):
    else why none of its answers is used."""
    try:
        overview = await api.overview()
    except TransportError as error:
        return TableUnread(Unread.FAILED, escape_unprintable(censor_urls(str(error))))
    try:
        nodes = await api.nodes() if names_to_compare(identity, overview) else ()
    except TransportError as error:
        return TableUnread(Unread.FAILED, escape_unprintable(censor_urls(str(error))))
    mismatch = identity_mismatch(
        identity, overview, amqp_url=reached, api_url=api.shown, api_nodes=nodes
    )
    if mismatch is not None:
        return TableUnread(Unread.MISMATCH, censor_urls(mismatch))
    return await _deprecated_features(api)


async def _deprecated_features(api: ManagementApi) -> tuple[DeprecatedFeature, ...] | TableUnread:
    """The server's deprecated-features table, or why it could not be read: an API without
    it (404 or 406), one that lists no states (RabbitMQ 4.0.5's), or one that failed
    (unreachable, a refused login, an answer of the wrong shape), said in one censored,
    escaped line."""
    try:
        features = await api.deprecated_features()
    except TransportError as error:
        return TableUnread(Unread.FAILED, escape_unprintable(censor_urls(str(error))))
    if features is None:
        return TableUnread(Unread.MISSING)
    if isinstance(features, Unstated):
        return TableUnread(Unread.UNSTATED)
    return features


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
        "server": {
            "product": facts.product,
            "version": str(facts.version),
            "url": facts.url,
            "cluster_name": facts.cluster_name,
            "deprecated_features": _features_document(facts),
        },
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


def _features_document(facts: ServerFacts) -> dict[str, Any]:
    """``{"checked": true, "features": [...]}``, or ``{"checked": false, "not_checked":
    why, "detail": ...}``."""
    read = facts.deprecated_features
    if isinstance(read, TableUnread):
        return {"checked": False, "not_checked": read.why.value, "detail": read.detail or None}
    return {
        "checked": True,
        "features": [
            {
                "name": feature.name,
                "state": "permitted" if feature.permitted else "denied",
                "phase": feature.phase,
            }
            for feature in read
        ],
    }


_STYLE = {Level.INFO: "", Level.WARNING: "yellow", Level.UNSAFE: "bold red"}


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
