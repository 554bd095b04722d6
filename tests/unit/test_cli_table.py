"""``rr dlq``'s subcommands are the rows of one table (cli/dlq/__init__.py ``SUBCOMMANDS``):
every command a module of cli/dlq/ defines is a row, every row names a command that exists,
and the table's order is ``rr dlq --help``'s. Each check is shown failing on a synthetic
package."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from typer.testing import CliRunner

from rabbitctl_retry.cli import app
from rabbitctl_retry.cli.dlq import SUBCOMMANDS, Subcommand

PACKAGE = Path(__file__).parents[2] / "rabbitctl_retry" / "cli" / "dlq"

HELP_ORDER = ("inspect", "export", "import", "purge", "edit", "groups", "replay", "move")
"""The order ``rr dlq --help`` has always listed the subcommands in."""


def commands_defined(source: str) -> set[str]:
    """The command functions a module defines: a public module-level function named
    ``*_command``, or one registered by a decorator ``@<group>.command(...)`` (the way the
    table replaced)."""
    found = set()
    for node in ast.parse(source).body:
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        registered = any(
            isinstance(decorator, ast.Call)
            and isinstance(decorator.func, ast.Attribute)
            and decorator.func.attr == "command"
            for decorator in node.decorator_list
        )
        public = not node.name.startswith("_")
        if registered or (public and node.name.endswith("_command")):
            found.add(node.name)
    return found


def table_problems(sources: Mapping[str, str], table: Sequence[Subcommand]) -> list[str]:
    """What is wrong between the package's modules (module name -> source) and its table: a
    command no row names, a row whose module or function does not exist, a name twice."""
    listed = {(entry.module, entry.function) for entry in table}
    problems = [
        f"{module}.{function} defines a command that SUBCOMMANDS does not list"
        for module, source in sorted(sources.items())
        for function in sorted(commands_defined(source))
        if (module, function) not in listed
    ]
    problems += [
        f"the row {entry.name!r} names {entry.module}.{entry.function}, which is no command"
        for entry in table
        if entry.function not in commands_defined(sources.get(entry.module, ""))
    ]
    names = [entry.name for entry in table]
    twice = sorted({name for name in names if names.count(name) > 1})
    problems += [f"{name!r} is listed twice" for name in twice]
    return problems


def package_sources() -> dict[str, str]:
    return {
        path.stem: path.read_text(encoding="utf-8")
        for path in sorted(PACKAGE.glob("*.py"))
        if path.stem != "__init__"
    }


def help_order(help_text: str) -> list[str]:
    """The subcommands a group's ``--help`` lists, in its order."""
    section = help_text.split("Commands:", 1)[1]
    return re.findall(r"^  (\S+)", section, re.MULTILINE)


def test_every_command_of_the_package_is_in_the_table() -> None:
    assert table_problems(package_sources(), SUBCOMMANDS) == []


def test_the_table_is_the_help_order() -> None:
    shown = CliRunner().invoke(app, ["dlq", "--help"], prog_name="rr", terminal_width=100)
    assert shown.exit_code == 0, shown.output
    assert help_order(shown.output) == [entry.name for entry in SUBCOMMANDS]
    assert tuple(entry.name for entry in SUBCOMMANDS) == HELP_ORDER


def test_a_command_missing_from_the_table_is_caught() -> None:
    sources = {
        "purge": "def purge_command(ctx):\n    pass\n\ndef _editor_command():\n    pass\n",
        "stats": "import typer\n\ndef stats_command(ctx: typer.Context) -> None:\n    pass\n",
        "old": "@app.command('old')\ndef show(ctx):\n    pass\n",
    }
    table = [Subcommand("purge", "purge", "purge_command")]
    assert table_problems(sources, table) == [
        "old.show defines a command that SUBCOMMANDS does not list",
        "stats.stats_command defines a command that SUBCOMMANDS does not list",
    ]


def test_a_row_without_its_command_or_listed_twice_is_caught() -> None:
    sources = {"purge": "def purge_command(ctx):\n    pass\n"}
    table = [
        Subcommand("purge", "purge", "purge_command"),
        Subcommand("purge", "purge", "purge_command"),
        Subcommand("gone", "gone", "gone_command"),
        Subcommand("typo", "purge", "purge_comand"),
    ]
    assert table_problems(sources, table) == [
        "the row 'gone' names gone.gone_command, which is no command",
        "the row 'typo' names purge.purge_comand, which is no command",
        "'purge' is listed twice",
    ]


def test_a_help_in_another_order_is_caught() -> None:
    shown = "Usage: rr dlq\n\nCommands:\n  export  Copy.\n  inspect  Show.\n"
    assert help_order(shown) == ["export", "inspect"]
    assert help_order(shown) != [entry.name for entry in SUBCOMMANDS][:2]


def test_importing_a_helper_of_the_package_loads_no_command() -> None:
    """cli/migrate.py and cli/console.py take cli/dlq/common.py's questions: the group and its
    commands are built only when ``rr dlq`` runs."""
    script = (
        "import sys\nimport rabbitctl_retry.cli.dlq.common\n"
        "print(sorted(m for m in sys.modules if m.startswith('rabbitctl_retry.cli.dlq')))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['rabbitctl_retry.cli.dlq', 'rabbitctl_retry.cli.dlq.common']"
