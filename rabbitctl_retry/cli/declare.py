"""``rr declare TOPOLOGY.toml``: plan against the broker, apply only a clean plan."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from rabbitctl_retry.cli._common import (
    OutputFormat,
    OutputOption,
    UrlOption,
    connector_of,
    fail,
    guard,
    print_json,
    resolve_urls,
    run,
    stdout_console,
)
from rabbitctl_retry.cli.render import plan_document, plan_summary, plan_table
from rabbitctl_retry.cli.topology import load_checked
from rabbitctl_retry.errors import ConflictError
from rabbitctl_retry.ops.declare import declare_topology


def declare(
    ctx: typer.Context,
    topology_file: Annotated[Path, typer.Argument(help="The topology file (TOML).")],
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Show the plan; change nothing.")
    ] = False,
    url: UrlOption = None,
    output: OutputOption = OutputFormat.TABLE,
) -> None:
    """Declare the queues, exchanges and bindings of a topology file.

    Everything is checked against the broker first; if any existing queue or exchange
    differs from the file, the differences are shown and nothing is changed.
    """
    with guard():
        # Checked and every frame encoded before the first one is sent (docs/topology.md,
        # "Malformed files").
        topology, _ = load_checked(topology_file)
    result = run(
        declare_topology(
            topology,
            resolve_urls(url, topology.broker.urls),
            dry_run=dry_run,
            connector=connector_of(ctx),
        )
    )
    if output is OutputFormat.JSON:
        print_json(plan_document(result, dry_run=dry_run))
    else:
        console = stdout_console()
        console.print(plan_table(result))
        console.print(plan_summary(result, dry_run=dry_run))
    if result.conflicts:
        names = ", ".join(sorted({op.name for op in result.conflicts}))
        fail(ConflictError(f"the broker conflicts with the file ({names}); nothing was changed"))
