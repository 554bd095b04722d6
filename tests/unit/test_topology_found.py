"""The one rule for which topology file a command with ``--topology`` uses
(``cli/topology_found.py``; docs/reference/cli.md, "Where the broker is")."""

from __future__ import annotations

from pathlib import Path

import pytest

from rabbitctl_retry.cli.topology_found import (
    BOTH_GIVEN,
    DEFAULT_TOPOLOGY,
    TopologyChoice,
    choose_topology,
    found_error,
    found_note,
)
from rabbitctl_retry.errors import ConfigError, ExitCode, UsageError

GIVEN = Path("mine.toml")


@pytest.mark.parametrize(
    ("given", "no_topology", "cwd_holds_one", "expected"),
    [
        (GIVEN, False, False, TopologyChoice(GIVEN)),
        (GIVEN, False, True, TopologyChoice(GIVEN)),  # given wins over the found one
        (None, False, True, TopologyChoice(DEFAULT_TOPOLOGY, found=True)),
        (None, False, False, TopologyChoice(None)),
        (None, True, True, TopologyChoice(None)),  # the opt-out, where one is
        (None, True, False, TopologyChoice(None)),
    ],
)
def test_the_rule(
    given: Path | None, no_topology: bool, cwd_holds_one: bool, expected: TopologyChoice
) -> None:
    chosen = choose_topology(given, no_topology=no_topology, cwd_holds_one=cwd_holds_one)
    assert chosen == expected


@pytest.mark.parametrize("cwd_holds_one", [False, True])
def test_a_file_and_the_opt_out_is_a_usage_error(cwd_holds_one: bool) -> None:
    with pytest.raises(UsageError) as raised:
        choose_topology(GIVEN, no_topology=True, cwd_holds_one=cwd_holds_one)
    assert str(raised.value) == BOTH_GIVEN == "give --topology FILE or --no-topology, not both"


def test_how_a_choice_is_shown() -> None:
    assert TopologyChoice(DEFAULT_TOPOLOGY, found=True).shown == "./topology.toml"
    assert TopologyChoice(GIVEN).shown == "mine.toml"
    assert TopologyChoice(None).shown is None


def test_the_note_and_the_error_say_the_file_was_found() -> None:
    assert found_note() == (
        "rr: topology ./topology.toml (found in the current directory; --topology FILE for "
        "another, --no-topology for none)"
    )
    error = found_error(ConfigError("not TOML", source="./topology.toml", line=3))
    assert str(error) == (
        "./topology.toml:3: not TOML (the topology.toml found in the current directory; "
        "--no-topology to go without it)"
    )
    assert error.exit_code is ExitCode.CONFIG
