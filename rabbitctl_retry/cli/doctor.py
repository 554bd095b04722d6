"""``rr doctor [--topology T] [--management-url M]``: what this RabbitMQ means for the
topology (docs/reference/cli.md, "rr doctor").

The version comes from the AMQP handshake; which deprecated features the server permits or
denies from its management API, when a management URL is given (``--management-url``,
``$RR_MANAGEMENT_URL`` or ``[broker] management_url``, as for ``rr declare``), once its
``/api/overview`` shows it answers for the server the AMQP URL reached; on RabbitMQ 3.x also
the vhost's policies and the topology's queues, for classic queue mirroring, which 4.0
removed. An API that answers
for another server, has no table, cannot be reached, refuses the login or answers something
else is a finding (the checks it would have made are named as not made), never the end of the
command.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from rabbitctl_retry.cli import _common as common
from rabbitctl_retry.cli.finish import Outcome, Piece, finish
from rabbitctl_retry.cli.render import cell
from rabbitctl_retry.doctor import (
    Finding,
    Level,
    ServerFacts,
    TableUnread,
    examine,
    healthy,
    safe,
)
from rabbitctl_retry.ops.doctor import server_facts
from rabbitctl_retry.topology.expand import expand


def doctor_command(
    ctx: typer.Context,
    topology_file: Annotated[
        Path | None,
        common.topology_option("Also check this topology file's queues."),
    ] = None,
    no_topology: common.NoTopologyOption = False,
    url: common.UrlOption = None,
    management_url: Annotated[
        str | None,
        common.management_url_option(
            "The management plugin's URL (http://USER:PASSWORD@HOST:15672/): read which "
            "deprecated features the server permits or denies, which AMQP does not tell, "
            "the nodes' memory and disk alarms, quorum queues' members online, the vhost's "
            "default queue type, the consumers that are not rr, "
            "and on RabbitMQ 3.x which queues an ha-mode policy mirrors "
            '(rr docs cli "rr doctor"). Else [broker] management_url; without one, those '
            "findings are assumed from the version or not made."
        ),
    ] = None,
    output: common.OutputOption = common.OutputFormat.TABLE,
) -> None:
    """Print the server's version and every behaviour of it that matters for retries; with
    --topology, what it means for that file's queues, whether the queues the server holds
    are as the file says (as rr declare checks them), and how they are now (consumers,
    dead letters). Exit 1 when something in the topology is unsafe on this server, or the
    server is not healthy now (rr docs cli "rr doctor")."""
    topology = common.topology_of(topology_file, no_topology)
    common.check_given_management_url(management_url)
    desired = expand(topology) if topology is not None else None
    broker_urls = common.resolve_urls(url, topology.broker.urls if topology else ())
    api_url = common.resolve_management_url(management_url, topology)
    facts = common.run(
        server_facts(
            common.connect_to(ctx, broker_urls),
            desired,
            common.management_connector_of(ctx),
            api_url,
            topology,
        )
    )
    retried = frozenset(
        queue.name
        for queue in (topology.queues if topology else ())
        if queue.max_attempts is not None
    )
    dead_letters = frozenset(  # and the queues that keep what is rejected: no consumer
        target
        for queue in (topology.queues if topology else ())
        for target in (queue.dead_letter, queue.rejected)
        if target is not None
    )
    findings = examine(desired, facts, retried, dead_letters)
    finish(doctor_outcome(facts, findings), output)


def doctor_outcome(facts: ServerFacts, findings: list[Finding]) -> Outcome:
    """The server's line, the findings and the verdict, or the JSON document; exit 1 when
    something is unsafe or an error."""

    def table() -> list[Piece]:
        server = (
            [] if facts.url is None else [cell(f"{facts.product} {facts.version} at {facts.url}")]
        )
        return [*server, _table(findings), verdict(findings)]

    return Outcome(
        document=lambda: _document(facts, findings),
        table=table,
        code=0 if safe(findings) and healthy(findings) else 1,
    )


def verdict(findings: list[Finding]) -> str:
    """The last line: ``safe on this server``, ``unsafe on this server``, and what the errors
    of the server now are."""
    line = "safe on this server" if safe(findings) else "unsafe on this server"
    errors = sum(finding.level is Level.ERROR for finding in findings)
    if errors:
        line += f"; not healthy now: {errors} error{'' if errors == 1 else 's'}"
    return line


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
        "healthy": healthy(findings),
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


_STYLE = {
    Level.INFO: "",
    Level.WARNING: "yellow",
    Level.UNSAFE: "bold red",
    Level.ERROR: "bold red",
}


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
