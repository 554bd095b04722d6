"""Help texts name values the way Unix tools do: ``rr dlq inspect [OPTIONS] QUEUE``,
``--url URL``, ``--limit N``, ``--output [table|json]``.

typer writes a required argument as ``{queue}`` in the usage line and every value by its
Python type (``<str>``, ``<list[str]>``, ``<int range>``). :func:`plain_help` rewrites a loaded
command tree once, before its help is shown: each argument by its name in capitals (``[NAME]``
when optional, ``NAME...`` when it repeats), each option's value by :data:`OPTION_METAVARS`
(else its long name in capitals), choices as ``[a|b]`` (docs/reference/cli.md, "Output").
"""

from __future__ import annotations

from typer import _click
from typer.core import TyperArgument, TyperGroup, TyperOption

OPTION_METAVARS = {
    "--url": "URL",
    "--management-url": "URL",
    "--topology": "FILE",
    "--limit": "N",
    "--prefetch": "N",
    "--concurrency": "N",
    "--from-line": "N",
    "--to": "QUEUE",
    "--where": "EXPR",
    "--rate": "MSG_PER_S",
    "--publish": "QUEUE=BODY",
    "--for": "DURATION",
    "--watch": "SECONDS",
    "--shutdown-timeout": "SECONDS",
    "--reload-interval": "SECONDS",
    "--metrics-port": "PORT",
    "--vhost": "VHOST",
}
"""The value an option takes, by its long name, where the name alone does not say."""


class PlainArgument(TyperArgument):
    """A typer argument shown by its name in capitals (see the module doc)."""

    def _usage_display_name(self) -> str:
        name = self.display_name_raw
        if self.nargs != 1:
            name += "..."
        return name if self.required else f"[{name}]"

    def get_help_record(self, ctx: _click.Context) -> tuple[str, str] | None:
        record = super().get_help_record(ctx)
        if record is None:
            return None
        name = self.display_name_raw + ("..." if self.nargs != 1 else "")
        return name, record[1]


def plain_help(command: _click.Command) -> _click.Command:
    """Rewrite ``command`` and every command under it (see the module doc); returns it."""
    for param in command.params:
        if isinstance(param, TyperArgument):
            param.__class__ = PlainArgument
            if param.metavar is None:
                param.metavar = (param.name or "value").upper()
        elif isinstance(param, TyperOption) and param.metavar is None and not param.is_flag:
            param.metavar = option_metavar(param)
    if isinstance(command, TyperGroup):
        for child in command.commands.values():
            plain_help(child)
    return command


def option_metavar(option: TyperOption) -> str:
    """``[a|b]`` for a choice, else :data:`OPTION_METAVARS` or the long name in capitals."""
    described = option.type_descriptor
    if described.is_choice and described.choices:
        return "[" + "|".join(str(getattr(c, "value", c)) for c in described.choices) + "]"
    longest = max(option.opts, key=len)
    return OPTION_METAVARS.get(longest, longest.lstrip("-").replace("-", "_").upper())
