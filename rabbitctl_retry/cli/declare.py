"""``rr declare TOPOLOGY.toml``: plan against the broker, apply only a clean plan."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from rabbitctl_retry.cli import _common as common
from rabbitctl_retry.cli.finish import Outcome, finish
from rabbitctl_retry.cli.render import (
    default_type_line,
    plan_document,
    plan_summary,
    plan_table,
    setting_lines,
)
from rabbitctl_retry.errors import ConflictError, censor_urls, escape_unprintable
from rabbitctl_retry.ops.declare import Declared, declare_topology
from rabbitctl_retry.ops.preflight import load_checked


def declare(
    ctx: typer.Context,
    topology_file: common.TopologyArgument,
    dry_run: Annotated[bool, common.dry_run_option("Show the plan; change nothing.")] = False,
    url: common.UrlOption = None,
    management_url: Annotated[
        str | None,
        common.management_url_option(
            "The management plugin's URL (http://USER:PASSWORD@HOST:15672/): check "
            "replicas against the cluster's nodes, and show where each queue lives "
            '(rr docs run-on-a-cluster); needed for settings = "policy" (rr docs topology). Else '
            "[broker] management_url."
        ),
    ] = None,
    output: common.OutputOption = common.OutputFormat.TABLE,
) -> None:
    """Declare the queues, exchanges and bindings of a topology file.

    Everything is checked against the broker first; if any existing queue or exchange
    differs from the file, the differences are shown and nothing is changed.
    """
    with common.guard():
        # Checked and every frame encoded before the first one is sent (docs/reference/topology.md,
        # "Malformed files"); the management URL by the rules of broker URLs (docs/reference/cli.md,
        # "Malformed input").
        topology, _ = load_checked(topology_file)
        common.check_given_management_url(management_url)
    broker_urls = common.resolve_urls(url, topology.broker.urls)
    # a dry run too: it reads that broker, and its plan is about it (docs/reference/cli.md)
    broker = common.announce_target(broker_urls)
    declared = common.run(
        declare_topology(
            topology,
            broker_urls,
            dry_run=dry_run,
            connector=common.connector_of(ctx),
            management_url=common.resolve_management_url(management_url, topology),
            management=common.management_connector_of(ctx),
        )
    )
    finish(
        declare_outcome(declared, dry_run=dry_run, topology_file=topology_file, broker=broker),
        output,
    )


def declare_outcome(
    declared: Declared,
    *,
    dry_run: bool,
    topology_file: Path | None = None,
    broker: str | None = None,
) -> Outcome:
    """The plan as a table and its summary, or its JSON document; a warning line for each
    transient queue and for placements that could not be read; a conflict ends the command
    with its error."""
    result = declared.plan
    problem = declared.placement_problem

    def document() -> dict[str, Any]:
        shown = plan_document(result, dry_run=dry_run)
        shown["vhost_default_queue_type"] = declared.default_queue_type
        if problem is not None:
            shown["placement_error"] = censor_urls(str(problem))
        if broker is not None:
            shown["broker"] = broker
        return shown

    # transient queues on RabbitMQ 4 (docs/reference/topology.md)
    warnings = [warning_line(warning) for warning in result.warnings]
    if declared.default_type_problem is not None:
        warnings.append(
            warning_line(
                "the vhost's default queue type could not be read (rr declares every queue "
                f"with its type all the same): {declared.default_type_problem}"
            )
        )
    if problem is not None:
        # The apply is done and stands; only the report of where the queues live is
        # missing: a warning, exit 0 (docs/how-to/run-on-a-cluster.md, "Replicas").
        warnings.append(
            warning_line(
                f"the declare is done, but where the queues live could not be read: {problem}"
            )
        )
    conflicting = ", ".join(sorted({op.name for op in result.conflicts}))
    rebuilds_only = all(op.rebuild and not op.blocked for op in result.conflicts)
    migrate = (
        f"; rr migrate {topology_file} rebuilds {'it' if len(result.conflicts) == 1 else 'them'} "
        'with their messages (rr docs migrate-to-quorum "Migrating a queue")'
        if rebuilds_only and topology_file is not None
        else ""
    )
    return Outcome(
        document=document,
        table=lambda: [
            plan_table(result),
            *setting_lines(result),
            plan_summary(result, dry_run=dry_run),
            *(
                [default_type_line(declared.default_queue_type)]
                if declared.default_queue_type is not None
                else []
            ),
        ],
        notes=warnings,
        error=ConflictError(
            f"the broker conflicts with the file ({conflicting}); nothing was changed{migrate}"
        )
        if result.conflicts
        else None,
    )


def warning_line(message: str) -> str:
    """One ``rr: warning:`` line for stderr, censored and escaped as ``fail`` writes errors."""
    return f"rr: warning: {escape_unprintable(censor_urls(message))}"
