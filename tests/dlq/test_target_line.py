"""Every command that changes something on the broker names it once on stderr before it acts
(``rr: on URL``, the password masked) and carries it as ``"broker"`` in its JSON document;
``rr dlq import --topology`` takes the file's ``[broker] url`` (docs/reference/cli.md, "Where the
broker is"). On RabbitMQ (a fresh vhost, ``--url``) and on the emulator (the CLI settings seam)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from typer.testing import Result

from rabbitctl_retry.cli import _common as common
from rabbitctl_retry.cli import app
from tests.backends import Backend, RabbitBackend
from tests.dlq.support import (
    cli_arguments,
    rr,
    runner,
    shown_broker,
    target_line,
)
from tests.observe import depth

TOPOLOGY = """
[queues.jobs]
max_attempts = 3
dead_letter = "jobs.dead"

[queues."jobs.dead"]
"""


def named_first(result: Result, backend: Backend) -> Any:
    """The JSON document of ``result``, after checking that stderr names the broker on its
    first line, once, with no password."""
    assert result.exit_code == 0, result.output
    lines = result.stderr.splitlines()
    assert lines[0] == target_line(backend), result.stderr
    assert [line for line in lines if line.startswith("rr: on ")] == [lines[0]]
    assert ":guest@" not in result.stderr
    assert "******" in lines[0]
    document = json.loads(result.stdout)
    for one in document if isinstance(document, list) else [document]:
        assert one["broker"] == shown_broker(backend)
    return document


async def test_every_changing_command_names_its_broker_once_before_its_result(
    backend: Backend, tmp_path: Path
) -> None:
    topology = tmp_path / "topology.toml"
    topology.write_text(TOPOLOGY, encoding="utf-8")
    dry = named_first(
        await rr(backend, "declare", str(topology), "--dry-run", "-o", "json"), backend
    )
    assert dry["dry_run"] is True
    named_first(await rr(backend, "declare", str(topology), "-o", "json"), backend)
    migrated = named_first(
        await rr(backend, "migrate", str(topology), "--yes", "-o", "json"), backend
    )
    assert migrated["rebuilds"] == []
    published = named_first(
        await rr(
            backend, "publish", "jobs.dead", "--body", "x", "-P", "message_id=m1", "-o", "json"
        ),
        backend,
    )
    assert published["confirmed"] == 1
    moved = named_first(
        await rr(
            backend, "dlq", "move", "jobs.dead", "--to", "parked", "--create", "--yes", "-o", "json"
        ),
        backend,
    )
    assert moved["moved"] == 1
    replayed = named_first(
        await rr(backend, "dlq", "replay", "parked", "--to", "jobs.dead", "--yes", "-o", "json"),
        backend,
    )
    assert replayed["replayed"] == 1
    keep = tmp_path / "m1.jsonl"
    edited = named_first(
        await rr(
            backend,
            *(
                "dlq",
                "edit",
                "jobs.dead",
                "--id",
                "m1",
                "--set-header",
                "fixed=yes",
                "--to",
                "parked",
            ),
            *("--keep", str(keep), "--yes", "-o", "json"),
        ),
        backend,
    )
    assert (edited["published"], edited["to"]) == (True, "parked")
    assert (await depth(backend, "jobs.dead"), await depth(backend, "parked")) == (0, 1)
    imported = named_first(
        await rr(backend, "dlq", "import", str(keep), "--to", "jobs.dead", "-o", "json"), backend
    )
    assert imported["imported"] == 1
    purged = named_first(
        await rr(backend, "dlq", "purge", "jobs.dead", "--yes", "-o", "json"), backend
    )
    assert purged["purged"] == 1
    assert (await depth(backend, "jobs.dead"), await depth(backend, "parked")) == (0, 1)


async def test_the_line_comes_first_when_the_command_fails(backend: Backend) -> None:
    result = await rr(backend, "publish", "nowhere", "--body", "x")

    assert result.exit_code == 1, result.output
    lines = result.stderr.splitlines()
    assert lines[0] == target_line(backend), result.stderr
    assert [line for line in lines if line.startswith("rr: on ")] == [lines[0]]
    assert lines[-1].startswith("rr: error: "), result.stderr


async def test_read_only_commands_name_no_target(backend: Backend) -> None:
    inspected = await rr(backend, "dlq", "inspect", "nowhere", "-o", "json")

    assert inspected.exit_code == 1
    assert inspected.stderr.startswith("rr: error: "), inspected.stderr


async def test_import_takes_the_topology_files_broker(backend: Backend, tmp_path: Path) -> None:
    """``rr dlq import --topology FILE`` without ``--url``: the file's ``[broker] url``."""
    url = (
        backend.url
        if isinstance(backend, RabbitBackend)
        else "amqp://guest:secret@127.0.0.1:5672/shop"  # the emulator answers whatever it says
    )
    topology = tmp_path / "topology.toml"
    topology.write_text(f'[broker]\nurl = "{url}"\n\n[queues.restored]\n', encoding="utf-8")
    _, extra = cli_arguments(backend)
    declared = await asyncio.to_thread(runner.invoke, app, ["declare", str(topology)], **extra)
    assert declared.exit_code == 0, declared.output
    line = json.dumps({"body": "YQ==", "body_size": 1, "properties": {}, "headers": {}})
    file = tmp_path / "one.jsonl"
    file.write_text(line + "\n", encoding="utf-8")

    imported = await asyncio.to_thread(
        runner.invoke,
        app,
        ["dlq", "import", str(file), "--to", "restored", "--topology", str(topology), "-o", "json"],
        **extra,
    )

    assert imported.exit_code == 0, imported.output
    masked = url.replace(":secret@", ":******@").replace(":guest@", ":******@")
    assert imported.stderr.splitlines()[0] == f"rr: on {masked}"
    assert json.loads(imported.stdout)["broker"] == masked
    assert await depth(backend, "restored") == 1


def test_several_urls_name_the_first_and_how_many() -> None:
    """A cluster: the line names the first URL (tried first) and how many nodes there are;
    the JSON ``"broker"`` is the first URL alone (docs/reference/cli.md, "Where the broker is")."""
    urls = [f"amqp://svc:s3cr3t@mq{n}:5672/shop" for n in (1, 2, 3)]

    assert common.target_line(urls) == (
        "rr: on amqp://svc:******@mq1:5672/shop (or the next of 3 nodes)"
    )
    assert common.target_line(urls[:1]) == "rr: on amqp://svc:******@mq1:5672/shop"
    assert common.shown_target(urls) == "amqp://svc:******@mq1:5672/shop"
