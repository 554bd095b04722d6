"""Topologies of thousands of queues: ``rr topology show`` prints tables past 2,000 rows as
plain lines (rich took a minute and a gigabyte for 10,000 queues), and ``rr declare
--dry-run`` looks the entities up on several connections at once, each entity once."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rabbitctl_retry.cli import app
from rabbitctl_retry.cli.plain_table import LARGE_TABLE_ROWS, Rows, plain_lines
from rabbitctl_retry.ops.declare import LOOKS_PER_OBSERVER, OBSERVERS
from tests.backends import RabbitBackend

runner = CliRunner(env={"COLUMNS": "120"})


def many_queues(path: Path, count: int) -> Path:
    path.write_text(
        "".join(
            f'[queues."q{n}"]\nmax_attempts = 3\ndead_letter = "q{n}.dead"\ndelay = "dlx-ttl"\n'
            for n in range(count)
        )
    )
    return path


def test_plain_lines_keep_the_columns_and_a_cells_lines() -> None:
    rows = Rows("t", ("a", "bb"), [("x", "1\n22"), ("yyy", "")])
    assert list(plain_lines(rows)) == [
        "t",
        "a   │ bb",
        "────┼───",
        "x   │ 1",
        "    │ 22",
        "yyy │",
    ]


def test_a_big_topology_shows_as_plain_lines_and_a_small_one_as_a_table(
    tmp_path: Path,
) -> None:
    big = runner.invoke(app, ["topology", "show", str(many_queues(tmp_path / "big.toml", 700))])
    assert big.exit_code == 0, big.output
    lines = big.stdout.splitlines()
    # 700 policies stay a rich table; 2,100 entities (> LARGE_TABLE_ROWS) are plain lines
    assert 700 < LARGE_TABLE_ROWS < 2100
    entities = lines.index("entities")
    header = [name.strip() for name in lines[entities + 1].split(" │ ")]
    assert header == ["kind", "name", "durable", "arguments", "role"]
    assert set(lines[entities + 2]) == {"─", "┼"}
    assert lines[entities + 3].startswith("queue │ q0.dead ")
    assert len([line for line in lines[entities:] if line.startswith("queue │ ")]) == 2100
    small = runner.invoke(app, ["topology", "show", str(many_queues(tmp_path / "s.toml", 2))])
    assert "━" in small.stdout  # rich's table


@pytest.mark.broker
async def test_a_dry_run_of_thousands_of_queues_looks_each_up_once(
    amqp_url: str, tmp_path: Path
) -> None:
    backend = RabbitBackend(amqp_url)
    backend.setup()
    try:
        count = LOOKS_PER_OBSERVER * OBSERVERS // 3 + 1  # 3 queues each: every observer works
        path = many_queues(tmp_path / "many.toml", count)
        arguments = ["declare", str(path), "--dry-run", "--url", backend.url, "-o", "json"]
        result = await asyncio.to_thread(runner.invoke, app, arguments)
    finally:
        await backend.close()
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    names = [operation["name"] for operation in document["operations"]]
    assert len(names) == len(set(names)) == 3 * count
    assert {operation["status"] for operation in document["operations"]} == {"planned"}
