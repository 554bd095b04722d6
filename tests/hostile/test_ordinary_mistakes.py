"""Ordinary mistakes end with their documented code and one line naming what was wrong, never
exit 70 (#42): a profiles file nested 5,000 levels deep, ``rr migrate`` of a queue whose
holding queue's name AMQP cannot carry, a profile's ``management_url`` with a query, a
``--vhost`` over 255 bytes on every command that takes one, ``rr dlq export Q ./-`` (a file
named ``-``), and ``h:h`` as a handler (module ``h``, function ``h``) off Windows."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import typer
from typer._click.core import Command, Context
from typer.core import TyperGroup
from typer.testing import CliRunner, Result

from rabbitctl_retry.cli import app
from rabbitctl_retry.cli._common import CliSettings
from rabbitctl_retry.emulator import Emulator
from rabbitctl_retry.runtime.loader import split_target
from rabbitctl_retry.transport.base import Connection, Properties
from tests.backends import own_vhost
from tests.hostile.output import one_error_line

runner = CliRunner(env={"COLUMNS": "200"})
EXAMPLE = Path(__file__).parents[2] / "examples" / "refunds"
NOWHERE = "amqp://guest:guest@127.0.0.1:1/"


def refused(result: Result, code: int) -> str:
    assert result.exit_code == code, (result.exit_code, result.output)
    return one_error_line(result.stderr)


def emulated(emulator: Emulator) -> CliSettings:
    async def connect(url: str) -> Connection:
        return emulator.connect()

    return CliSettings(connector=connect, management=emulator.management)


# --- a profiles file nested 5,000 levels deep --------------------------------------------------


@pytest.mark.parametrize(
    "value",
    ["[" * 5000 + "]" * 5000, "{a = " * 5000 + "1" + "}" * 5000],
    ids=["arrays", "inline-tables"],
)
def test_a_profiles_file_nested_too_deep(tmp_path: Path, value: str) -> None:
    config = tmp_path / "config.toml"
    config.write_text(f"x = {value}\n", encoding="utf-8")
    result = runner.invoke(app, ["status", "q", "-b", "a"], env={"RR_CONFIG": str(config)})
    assert refused(result, 78) == (
        f"rr: error: {config}: not valid TOML for rr: arrays or inline tables nest too deep"
    )


# --- rr migrate of a queue of 243 to 255 bytes --------------------------------------------------


def long_name_files(size_bytes: int) -> tuple[str, str, str]:
    name = "q" * size_bytes
    before = f'[queues.{name}]\ntype = "classic"\n'
    return name, before, before.replace('"classic"', '"quorum"')


def migrate_refusal(name: str) -> str:
    return (
        f"rr: error: rr migrate: queue {name[:60]!r}... ({len(name)} bytes) cannot be rebuilt: "
        "its holding queue's name ('.rr-migrating' added) would be longer than 255 bytes, the "
        'most AMQP carries; rename the queue in the file (rr docs migrate-to-quorum "Migrating a '
        'queue"); nothing was changed'
    )


@pytest.mark.parametrize("size_bytes", [243, 255])
def test_migrate_refuses_a_queue_whose_holding_queue_cannot_be_named(
    tmp_path: Path, size_bytes: int
) -> None:
    name, before, after = long_name_files(size_bytes)
    emulator = Emulator()
    old, new = tmp_path / "before.toml", tmp_path / "after.toml"
    old.write_text(before, encoding="utf-8")
    new.write_text(after, encoding="utf-8")
    declared = runner.invoke(app, ["declare", str(old)], obj=emulated(emulator))
    assert declared.exit_code == 0, declared.output
    for dry_run in (["--dry-run"], []):
        result = runner.invoke(
            app, ["migrate", str(new), "--force", "--yes", *dry_run], obj=emulated(emulator)
        )
        assert refused(result, 1) == migrate_refusal(name)
    assert emulator.queue(name).kind == "classic"


@pytest.mark.broker
def test_migrate_refuses_it_on_rabbitmq(tmp_path: Path, amqp_url: str) -> None:
    name, before, after = long_name_files(243)
    old, new = tmp_path / "before.toml", tmp_path / "after.toml"
    old.write_text(before, encoding="utf-8")
    new.write_text(after, encoding="utf-8")
    with own_vhost(amqp_url) as rabbit:
        declared = runner.invoke(app, ["declare", str(old), "--url", rabbit.url])
        assert declared.exit_code == 0, declared.output
        result = runner.invoke(
            app, ["migrate", str(new), "--dry-run", "--force", "--yes", "--url", rabbit.url]
        )
        assert refused(result, 1) == migrate_refusal(name)


# --- a profile's management_url with a query or a fragment --------------------------------------


def test_a_profile_management_url_with_a_query_is_refused_with_the_file(tmp_path: Path) -> None:
    """(A ``#fragment`` was refused already: a ``#`` in any URL rr takes.)"""
    config = tmp_path / "config.toml"
    config.write_text(
        '[brokers.a]\nurl = "amqp://guest:guest@127.0.0.1:1/"\n'
        'management_url = "http://mgr@127.0.0.1:15672/?x=1"\n',
        encoding="utf-8",
    )
    result = runner.invoke(app, ["status", "q", "-b", "a"], env={"RR_CONFIG": str(config)})
    line = refused(result, 78)
    assert line.startswith(
        f"rr: error: {config}: brokers.a.management_url: management URL has a query ('?...')"
    )


# --- a vhost of 300 characters ------------------------------------------------------------------

LONG_VHOST = "v" * 300
VHOST_PROBLEM = (
    "is 300 bytes long: a vhost name is at most 255 bytes (AMQP carries it as a short string)"
)


def commands_with_vhost() -> Iterator[list[str]]:
    """Every command (its words) that takes ``--vhost``, found on the command tree."""
    root = typer.main.get_command(app)

    def walk(command: Command, words: list[str]) -> Iterator[list[str]]:
        if isinstance(command, TyperGroup):
            for name in command.list_commands(ctx):
                child = command.get_command(ctx, name)
                if child is not None:
                    yield from walk(child, [*words, name])
        elif any(param.name == "vhost" for param in command.params):
            yield words

    with Context(root) as ctx:
        yield from walk(root, [])


VHOST_COMMANDS = list(commands_with_vhost())


@pytest.mark.parametrize("words", VHOST_COMMANDS, ids=" ".join)
def test_a_vhost_over_255_bytes_is_a_usage_error(words: list[str]) -> None:
    result = runner.invoke(app, [*words, "--vhost", LONG_VHOST])  # checked as it is parsed
    line = refused(result, 2)
    assert f"--vhost: {VHOST_PROBLEM}" in line


def test_a_vhost_over_255_bytes_in_a_profile_or_a_url(tmp_path: Path) -> None:
    """(And the commands above are those that connect, and rr topology export's.)"""
    assert {"status", "declare", "run", "migrate"} <= {" ".join(c) for c in VHOST_COMMANDS}
    assert ["topology", "export"] in VHOST_COMMANDS
    config = tmp_path / "config.toml"
    config.write_text(
        f'[brokers.a]\nurl = "amqp://guest:guest@127.0.0.1:1/"\nvhost = "{LONG_VHOST}"\n',
        encoding="utf-8",
    )
    result = runner.invoke(app, ["status", "q", "-b", "a"], env={"RR_CONFIG": str(config)})
    assert refused(result, 78) == f"rr: error: {config}: brokers.a.vhost: {VHOST_PROBLEM}"
    result = runner.invoke(app, ["status", "q", "--url", NOWHERE + LONG_VHOST])
    assert refused(result, 2) == (
        "rr: error: broker URL has a vhost of 300 bytes: a vhost name is at most 255 bytes "
        "(AMQP carries it as a short string) (given by --url)"
    )


# --- rr dlq export Q ./- ------------------------------------------------------------------------


def test_export_to_dot_slash_dash_writes_a_file_named_dash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    emulator = Emulator()

    async def one_letter() -> None:
        connection = emulator.connect()
        channel = await connection.channel(confirms=True)
        await channel.queue_declare("q.dead", durable=True)
        await channel.publish(b"{}", routing_key="q.dead", properties=Properties(message_id="m1"))
        await connection.close()

    asyncio.run(one_letter())
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["dlq", "export", "q.dead", "./-", "--yes"], obj=emulated(emulator))
    assert result.exit_code == 0, result.output
    (line,) = (tmp_path / "-").read_text(encoding="utf-8").splitlines()
    assert json.loads(line)["properties"]["message_id"] == "m1"
    assert "m1" not in result.stdout
    assert "to ./-;" in result.stdout


# --- rr run h:h ---------------------------------------------------------------------------------

HANDLER = """
from rabbitctl_retry import subscriber


@subscriber("refunds")
async def h(message):
    return None
"""


def test_a_one_letter_module_and_function(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``h:h`` is module ``h``, function ``h``: a drive letter is only Windows'
    (docs/reference/runtime.md)."""
    (tmp_path / "h.py").write_text(HANDLER, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    result = runner.invoke(
        app,
        ["simulate", str(EXAMPLE / "topology.toml"), "h:h", "-p", "refunds={}", "-o", "json"],
    )
    assert result.exit_code == 0, result.output
    events = json.loads(result.stdout)["events"]
    assert [(e["queue"], e["event"]) for e in events] == [
        ("refunds", "published"),
        ("refunds", "acked"),
    ]
    assert split_target("h:h", windows=False) == ("h", "h")
    assert split_target("C:handlers.py", windows=True) == ("C:handlers.py", None)
