"""The root ``rr`` group loads a command's module only when that command runs.

``rr --help`` lists every command from :data:`COMMANDS` alone (its name and the first
paragraph of its help), and ``rr topology validate`` imports the topology command and nothing
of the runtime, the emulator or the AMQP client: every command starts in about the time of a
bare typer app (docs/reference/cli.md, "Start-up"; ``benchmarks/startup.py`` measures it). A test
holds each entry's help to the command's own docstring.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, ClassVar

import typer
from typer import _click
from typer._click.utils import make_default_short_help

from rabbitctl_retry.cli.group import RrGroup
from rabbitctl_retry.suggestions import close_matches, did_you_mean


@dataclass(frozen=True, slots=True)
class LazyCommand:
    name: str
    module: str
    attribute: str
    """A typer command function, or a ``typer.Typer`` group."""
    help: str
    """The first paragraph of the command's help, as the command itself gives it."""

    def load(self) -> _click.Command:
        from rabbitctl_retry.cli.broker_choice import add_broker_options
        from rabbitctl_retry.cli.plain_help import plain_help

        found = getattr(importlib.import_module(self.module), self.attribute)
        if isinstance(found, typer.Typer):
            command: _click.Command = typer.main.get_group(found)
        else:
            single = typer.Typer(add_completion=False, rich_markup_mode=None)
            single.command(name=self.name)(found)
            command = typer.main.get_command(single)
        command.name = self.name
        return plain_help(add_broker_options(command))


COMMANDS = (
    LazyCommand(
        "declare",
        "rabbitctl_retry.cli.declare",
        "declare",
        "Declare the queues, exchanges and bindings of a topology file.",
    ),
    LazyCommand(
        "migrate",
        "rabbitctl_retry.cli.migrate",
        "migrate_command",
        "Rebuild the queues whose settings RabbitMQ cannot change in place (type, durability, "
        "an x- argument), with their wait queues, bindings and messages.",
    ),
    LazyCommand(
        "run",
        "rabbitctl_retry.cli.run",
        "run_command",
        "Consume the queues of @subscriber handlers: ack, retry, delay and dead-letter their "
        "messages as the topology says. SIGINT/SIGTERM stop gracefully.",
    ),
    LazyCommand(
        "simulate",
        "rabbitctl_retry.cli.simulate",
        "simulate_command",
        "Run handlers on the built-in emulator with a virtual clock and print the timeline: "
        "every delivery with its attempt, outcome and where the message went.",
    ),
    LazyCommand(
        "asyncapi",
        "rabbitctl_retry.cli.asyncapi",
        "asyncapi_command",
        "Write the service's contract as an AsyncAPI 3.0.0 document: its queues as channels, "
        "a receive operation for each with RustStream's x-ruststream-retry, the dead letters, "
        "the message schemas of typed handlers.",
    ),
    LazyCommand(
        "status",
        "rabbitctl_retry.cli.status",
        "status_command",
        "Show each queue's messages, consumers and type, and whether it matches the topology "
        "file; exit 1 when a queue is missing or differs from the file.",
    ),
    LazyCommand(
        "doctor",
        "rabbitctl_retry.cli.doctor",
        "doctor_command",
        "Print the server's version and every behaviour of it that matters for retries; with "
        "--topology, what it means for that file's queues, whether the queues the server "
        "holds are as the file says (as rr declare checks them), and how they are now "
        "(consumers, dead letters). Exit 1 when something in the topology is unsafe on this "
        'server, or the server is not healthy now (rr docs cli "rr doctor").',
    ),
    LazyCommand(
        "docs",
        "rabbitctl_retry.cli.docs",
        "docs_command",
        "Show rr's docs in the terminal: the index and the topics, or one page (or one section).",
    ),
    LazyCommand(
        "completion",
        "rabbitctl_retry.cli.completions",
        "completion",
        "Print the completion script for SHELL.",
    ),
    LazyCommand(
        "topology",
        "rabbitctl_retry.cli.topology",
        "app",
        "Check, show and export a topology file without touching a broker.",
    ),
    LazyCommand(
        "dlq",
        "rabbitctl_retry.cli.dlq",
        "app",
        "Inspect, group, replay, move, export, import and purge dead letters.",
    ),
    LazyCommand(
        "publish",
        "rabbitctl_retry.cli.publish",
        "publish_command",
        "Publish messages into a queue or an exchange, with publisher confirms.",
    ),
    LazyCommand(
        "console",
        "rabbitctl_retry.cli.console",
        "console_command",
        "Serve the failed-message console: dead letters grouped by cause, retry or discard a "
        "group, a message's deaths, edit and retry; a local web page that needs the printed "
        "token (rr docs console).",
    ),
)


class LazyRootGroup(RrGroup):
    """:class:`RrGroup` whose commands are the entries of :data:`COMMANDS`, each loaded on
    first use."""

    lazy: ClassVar[Mapping[str, LazyCommand]] = MappingProxyType(
        {entry.name: entry for entry in COMMANDS}
    )

    def list_commands(self, ctx: _click.Context) -> list[str]:
        return [*self.commands, *(name for name in self.lazy if name not in self.commands)]

    def get_command(self, ctx: _click.Context, cmd_name: str) -> _click.Command | None:
        if cmd_name not in self.commands and cmd_name in self.lazy:
            self.commands[cmd_name] = self.lazy[cmd_name].load()
        return self.commands.get(cmd_name)

    def resolve_command(
        self, ctx: _click.Context, args: list[str]
    ) -> tuple[str | None, _click.Command | None, list[str]]:
        """As typer's, but a typo is matched against every command, loaded or not (typer
        suggests among the loaded ones only: ``rr stat`` got no "Did you mean")."""
        try:
            return super().resolve_command(ctx, args)
        except _click.exceptions.UsageError as error:
            if args and "Did you mean" not in error.message:
                matches = close_matches(args[0], self.list_commands(ctx))
                if matches:
                    error.message = f"{error.message.rstrip('.')}.{did_you_mean(matches)}"
            raise

    def format_commands(self, ctx: _click.Context, formatter: _click.HelpFormatter) -> None:
        """The command list of ``rr --help``, without loading a command."""
        names = self.list_commands(ctx)
        limit = formatter.width - 6 - max(len(name) for name in names)
        rows = [(name, self._short_help(ctx, name, limit)) for name in names]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def _short_help(self, ctx: _click.Context, name: str, limit: int) -> str:
        if name in self.commands or name not in self.lazy:
            command: Any = self.get_command(ctx, name)
            return str(command.get_short_help_str(limit))
        return make_default_short_help(self.lazy[name].help, limit)
