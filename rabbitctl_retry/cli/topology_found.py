"""Which topology file a command that takes ``--topology`` uses: the one rule, the same for
every such command (docs/reference/cli.md, "Where the broker is").

``--topology FILE`` when given; else ``./topology.toml`` when the current directory holds it
(a regular file), said in one note on stderr; else none. ``--no-topology`` says "none", even
where a ``topology.toml`` is; giving it with ``--topology`` is a usage error. The commands whose
file is an argument (``rr declare FILE``, ``rr migrate FILE``, ``rr topology ...``,
``rr simulate FILE``) do not look for one.

:func:`choose_topology` and the texts are pure; :func:`load_chosen` reads the file.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rabbitctl_retry.errors import ConfigError, UsageError

if TYPE_CHECKING:
    from rabbitctl_retry.topology.model import Topology

DEFAULT_TOPOLOGY = Path("topology.toml")
"""The file a command uses, when the current directory holds it, without ``--topology``."""

FOUND_SHOWN = f"./{DEFAULT_TOPOLOGY}"
"""The found file as rr names it (in the note, the error and JSON's ``"topology"``)."""

BOTH_GIVEN = "give --topology FILE or --no-topology, not both"


@dataclass(frozen=True, slots=True)
class TopologyChoice:
    """The file a command uses (``None``: none), and whether rr found it (not given)."""

    path: Path | None
    found: bool = False

    @property
    def shown(self) -> str | None:
        """The file as rr names it: ``./topology.toml`` when found, else as given."""
        if self.path is None:
            return None
        return FOUND_SHOWN if self.found else str(self.path)


def choose_topology(
    given: Path | None, *, no_topology: bool, cwd_holds_one: bool
) -> TopologyChoice:
    """Pure: ``given`` if any; else ``./topology.toml`` when ``cwd_holds_one`` (the current
    directory holds it, a regular file) and not ``no_topology``; else none.

    Raises:
        UsageError: both ``--topology`` and ``--no-topology`` given.
    """
    if given is not None and no_topology:
        raise UsageError(BOTH_GIVEN)
    if given is not None:
        return TopologyChoice(given)
    if no_topology or not cwd_holds_one:
        return TopologyChoice(None)
    return TopologyChoice(DEFAULT_TOPOLOGY, found=True)


def found_note() -> str:
    """The one stderr line a command prints first when it uses the file it found."""
    return (
        f"rr: topology {FOUND_SHOWN} (found in the current directory; --topology FILE for "
        "another, --no-topology for none)"
    )


def found_error(error: ConfigError) -> ConfigError:
    """``error`` of the found file, saying it was the found one (the same exit, 78)."""
    return ConfigError(
        f"{error.detail} (the {DEFAULT_TOPOLOGY} found in the current directory; "
        "--no-topology to go without it)",
        path=error.path,
        source=error.source,
        line=error.line,
    )


def chosen_topology(given: Path | None, no_topology: bool) -> TopologyChoice:
    """:func:`choose_topology` for the current directory."""
    return choose_topology(
        given, no_topology=no_topology, cwd_holds_one=(Path.cwd() / DEFAULT_TOPOLOGY).is_file()
    )


def load_chosen(choice: TopologyChoice) -> Topology | None:
    """Read the chosen file (``None``: none); an invalid found file's error says it was the
    found one."""
    from rabbitctl_retry.topology.load import load_file

    if choice.path is None:
        return None
    if not choice.found:
        return load_file(choice.path)
    try:
        return load_file(FOUND_SHOWN)
    except ConfigError as error:
        raise found_error(error) from None


__all__ = [
    "BOTH_GIVEN",
    "DEFAULT_TOPOLOGY",
    "FOUND_SHOWN",
    "TopologyChoice",
    "choose_topology",
    "chosen_topology",
    "found_error",
    "found_note",
    "load_chosen",
]
