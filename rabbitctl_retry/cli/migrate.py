"""``rr migrate TOPOLOGY.toml``: rebuild the queues RabbitMQ cannot change in place, with their
messages (docs/how-to/migrate-to-quorum.md, "Migrating a queue")."""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer

from rabbitctl_retry.cli import _common as common
from rabbitctl_retry.cli.declare import warning_line
from rabbitctl_retry.cli.dlq import common as dlq
from rabbitctl_retry.cli.finish import Outcome, Unwrapped, finish, render
from rabbitctl_retry.cli.render import printable
from rabbitctl_retry.ops.migrate import Look, MigrateHooks, Migration, StepReport, migrate_topology
from rabbitctl_retry.ops.preflight import load_checked
from rabbitctl_retry.topology.migration import AFTER_STEPS, BEFORE_STEPS, Phase, Step
from rabbitctl_retry.topology.plan import Status


def migrate_command(
    ctx: typer.Context,
    topology_file: common.TopologyArgument,
    queue: Annotated[
        list[str] | None,
        typer.Option(
            "--queue",
            "-q",
            help="Rebuild only this queue (with its wait queues); repeat for several.",
            show_default=False,
        ),
    ] = None,
    dry_run: Annotated[
        bool, common.dry_run_option("Show the steps and the messages; change nothing.")
    ] = False,
    yes: common.YesOption = False,
    force: Annotated[
        bool,
        common.force_option(
            "Go ahead although consumers are attached to a queue being rebuilt (what "
            "they hold unacknowledged when it is deleted is lost), or publishing by name cannot "
            'be checked (no management URL) or is seen (rr docs migrate-to-quorum "Migrating a '
            'queue").',
        ),
    ] = False,
    url: common.UrlOption = None,
    management_url: Annotated[
        str | None,
        common.management_url_option(
            'The management plugin\'s URL: needed for settings = "policy", and to check '
            "publishing by name (without it: --force) and weigh messages "
            "(rr docs topology). Else [broker] management_url."
        ),
    ] = None,
    output: Annotated[
        common.OutputFormat,
        common.output_option(
            common.OutputFormat,
            "table or json (the steps and what each did); tsv prints the table's lines",
        ),
    ] = common.OutputFormat.TABLE,
) -> None:
    """Rebuild the queues whose settings RabbitMQ cannot change in place (type, durability,
    an x- argument), with their wait queues, bindings and messages.

    Messages move with publisher confirms before acks; a run stopped anywhere is finished by
    running the same command again (rr docs migrate-to-quorum "Migrating a queue").
    """
    with common.guard():
        topology, _ = load_checked(topology_file)
        common.check_given_management_url(management_url)
        if not dry_run:
            dlq.require_answerable(yes, "migrate")

    async def agreed(migration: Migration) -> None:
        if migration.dry_run or not migration.looks:
            return
        await dlq.ask(_question(migration), yes, "migrate")

    done = Migration()
    hooks = MigrateHooks(agreed=agreed, step=_step_line, warn=_warning)
    broker_urls = common.resolve_urls(url, topology.broker.urls)
    broker = common.announce_target(broker_urls)
    common.run(
        migrate_topology(
            topology,
            broker_urls,
            dry_run=dry_run,
            force=force,
            only=tuple(queue or ()),
            connector=common.connector_of(ctx),
            hooks=hooks,
            done=done,
            management_url=common.resolve_management_url(management_url, topology),
            management=common.management_connector_of(ctx),
        ),
        then=lambda: _report(done, output, broker),
    )
    finish(Outcome())


def _warning(text: str) -> None:
    """``rr: warning: ...`` on stderr at once: before the question and the first step."""
    common.stderr_console().print(warning_line(text), soft_wrap=True)


def _step_line(report: StepReport) -> None:
    """``rr: migrate refunds: drain`` on stderr as each step begins: a run that was stopped
    shows where. On a terminal the line is rewritten in place and cleared at the end (the
    report lists every step done: printed twice, the steps read as if each ran twice); into
    a file or a pipe, one line per step."""
    line = f"rr: migrate {printable(report.queue)}: {report.step.value}"
    if sys.stderr.isatty():
        sys.stderr.write(_CLEAR_LINE + line)
        sys.stderr.flush()
        return
    common.stderr_console().print(line, soft_wrap=True)


_CLEAR_LINE = "\r\x1b[K"


def _report(done: Migration, output: common.OutputFormat, broker: str) -> None:
    """The last step's line off the terminal, then the report."""
    if sys.stderr.isatty():
        sys.stderr.write(_CLEAR_LINE)
        sys.stderr.flush()
    render(migration_outcome(done, broker), output)


def _question(migration: Migration) -> str:
    names = ", ".join(look.rebuild.name for look in migration.looks)
    messages = sum(sum(look.messages.values()) for look in migration.looks)
    return (
        f"Rebuild {names} ({messages:,} messages move to holding queues and back, each "
        "removed only once its copy is confirmed)?"
    )


def steps_of(look: Look) -> list[Step]:
    """The steps a run of ``look`` goes through, from where the broker stands."""
    rebuild = look.rebuild
    if look.phase is Phase.DONE:
        return []
    steps = list(BEFORE_STEPS if look.phase is Phase.BEFORE else ()) + list(AFTER_STEPS)
    if rebuild.holding is None:
        steps = [step for step in steps if step not in (Step.REDIRECT, Step.RESTORE)]
    return steps


def _look_document(look: Look) -> dict[str, Any]:
    rebuild = look.rebuild
    return {
        "queue": rebuild.name,
        "rebuilt": list(rebuild.subjects),
        "reasons": {name: list(keys) for name, keys in (rebuild.reasons or {}).items()},
        "phase": look.phase.value,
        "holding_queues": [entity.name for entity in rebuild.holding_queues],
        "bindings": [
            {"exchange": b.exchange, "routing_key": b.routing_key} for b in rebuild.bindings
        ],
        "messages": dict(look.messages),
        "consumers": dict(look.consumers),
        "steps": [step.value for step in steps_of(look)],
    }


def migration_document(migration: Migration) -> dict[str, Any]:
    """The JSON document of ``rr migrate -o json`` (docs/how-to/migrate-to-quorum.md)."""
    document: dict[str, Any] = {
        "dry_run": migration.dry_run,
        "rebuilds": [_look_document(look) for look in migration.looks],
        "steps": [
            {
                "queue": report.queue,
                "step": report.step.value,
                "done": list(report.done),
                "moved": report.moved,
                "possible_duplicates": report.possible_duplicates,
            }
            for report in migration.steps
        ],
        "moved": migration.moved,
        "possible_duplicates": migration.possible_duplicates,
    }
    if migration.final is not None:
        document["conflicts_left"] = [
            {"name": op.name, "detail": op.detail} for op in migration.final.conflicts
        ]
    return document


def migration_lines(migration: Migration) -> list[Unwrapped]:
    """The table output: each rebuild, its messages and steps; then what each step did."""
    lines: list[str] = []
    if not migration.looks and migration.finished:
        lines.append("nothing to rebuild: every queue of the file is as the file says")
    for look in migration.looks:
        rebuild = look.rebuild
        reasons = "; ".join(
            f"{name}: {', '.join(keys)}" for name, keys in (rebuild.reasons or {}).items()
        )
        state = {
            Phase.BEFORE: "to rebuild",
            Phase.AFTER: "a stopped run goes on",
            Phase.DONE: "done",
        }[look.phase]
        lines.append(f"{rebuild.name}: {state}" + (f" ({reasons})" if reasons else ""))
        if look.messages:
            shown = ", ".join(f"{name} {count:,}" for name, count in look.messages.items())
            lines.append(f"  messages: {shown}")
        if rebuild.bindings and rebuild.holding is not None:
            shown = ", ".join(f"{b.exchange} ({b.routing_key!r})" for b in rebuild.bindings)
            lines.append(f"  bindings moved to {rebuild.holding.name} and back: {shown}")
        if look.consumers:
            shown = ", ".join(f"{name} {count}" for name, count in look.consumers.items())
            lines.append(f"  consumers: {shown}")
        steps = steps_of(look)
        if steps:
            lines.append("  steps: " + " -> ".join(step.value for step in steps))
    for report in migration.steps:
        for done in report.done:
            lines.append(f"{report.queue}: {report.step.value}: {done}")
    if migration.steps:
        drained, refilled = (migration.moved_by(step) for step in (Step.DRAIN, Step.REFILL))
        lines.append(
            f"messages moved: {drained:,} out to the holding queues, {refilled:,} back into "
            f"the rebuilt queues; possible duplicates: {migration.possible_duplicates:,} "
            "(copies under way when a connection was lost)"
        )
    if migration.final is not None:
        left = [op.name for op in migration.final.conflicts]
        if left:
            lines.append("still to rebuild or resolve: " + ", ".join(left))
        elif any(op.status is not Status.CONFLICT for op in migration.final.operations):
            lines.append("every queue of the file is now as the file says")
    return [Unwrapped(printable(line)) for line in lines]


def migration_outcome(migration: Migration, broker: str | None = None) -> Outcome:
    """What was found and done, printed however the run ended (before an error's line)."""
    if not migration.looks and not migration.finished:
        return Outcome()
    return Outcome(
        document=lambda: (
            migration_document(migration)
            if broker is None
            else common.carrying_broker(migration_document(migration), broker)
        ),
        table=lambda: migration_lines(migration),
    )
