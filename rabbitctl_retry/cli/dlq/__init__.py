"""``rr dlq``: inspect, replay, export, import and purge dead letters.

Safe by default: ``inspect`` and ``export`` take nothing from the queue; ``replay`` and
``purge`` ask first (``--yes`` to skip the question; without a terminal they refuse unless
``--yes`` is given); on a quorum queue, where every look counts as a delivery, ``inspect``,
``export`` and ``replay --dry-run`` say so and ask too.

The subcommands are the rows of :data:`SUBCOMMANDS`, one table: a name, the module of this
package that implements it and its function; the table's order is ``rr dlq --help``'s. The
typer group (``app``) is built from it on first use (cli/lazy.py loads it when ``rr dlq``
runs), so that importing a helper of this package (``common.py``) loads no command.
"""

from __future__ import annotations

import functools
import importlib
from dataclasses import dataclass

import typer

HELP = "Inspect, group, replay, move, export, import and purge dead letters."


@dataclass(frozen=True, slots=True)
class Subcommand:
    name: str
    """What ``rr dlq`` calls it."""
    module: str
    """The module of this package that implements it (``transfer``: cli/dlq/transfer.py)."""
    function: str
    """The typer command function in that module."""


SUBCOMMANDS = (
    Subcommand("inspect", "inspect", "inspect_command"),
    Subcommand("export", "export", "export_command"),
    Subcommand("import", "import_", "import_command"),
    Subcommand("purge", "purge", "purge_command"),
    Subcommand("edit", "edit", "edit_command"),
    Subcommand("groups", "groups", "groups_command"),
    Subcommand("replay", "transfer", "replay_command"),
    Subcommand("move", "transfer", "move_command"),
)
"""Every ``rr dlq`` subcommand, in the order ``rr dlq --help`` lists them."""


@functools.cache
def group() -> typer.Typer:
    """The ``rr dlq`` group: every row of :data:`SUBCOMMANDS`, in order."""
    built = typer.Typer(help=HELP, no_args_is_help=True, rich_markup_mode=None)
    for entry in SUBCOMMANDS:
        module = importlib.import_module(f"{__name__}.{entry.module}")
        built.command(entry.name)(getattr(module, entry.function))
    return built


def __getattr__(name: str) -> typer.Typer:
    """``app``, the group (built by :func:`group` when first asked for)."""
    if name == "app":
        return group()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["HELP", "SUBCOMMANDS", "Subcommand", "app", "group"]
