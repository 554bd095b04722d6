"""Queue names with non-ASCII characters (docs/reference/topology.md, "Queue and exchange names":
``café``,
``日本`` are fine), through ``rr`` as a subprocess.

rr widens pamqp's name rule to non-ASCII characters (``transport/codec.py``). That correction
used to be installed only when the AMQP adapter was imported, which ``topology validate``,
``show`` and ``export`` no longer do (each command loads only what it runs): they refused
``bi.def.é`` with exit 78 while ``rr run`` declared it. In-process tests hide this (the test
process has imported the adapter long before), so these run ``python -m rabbitctl_retry``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

TOPOLOGY = """
[queues."bi.def.é"]
max_attempts = 3
dead_letter = 'd.é'

[queues."d.é"]

[queues."café.日本.🐇"]
"""
NAMES = ("bi.def.é", "d.é", "café.日本.🐇")

DEAD_URL = "amqp://guest:guest@127.0.0.1:1/"
"""Nothing listens there: the offline commands must not need a broker."""


def rr(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "RR_URL": DEAD_URL, "COLUMNS": "200", "PYTHONIOENCODING": "utf-8"}
    return subprocess.run(
        [sys.executable, "-m", "rabbitctl_retry", *args],
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=120,
        cwd=cwd,
        env=env,
    )


@pytest.fixture
def topology(tmp_path: Path) -> Path:
    path = tmp_path / "topology.toml"
    path.write_text(TOPOLOGY, encoding="utf-8")
    return path


@pytest.mark.parametrize("command", ["validate", "show", "export"])
def test_topology_commands_take_non_ascii_names(topology: Path, command: str) -> None:
    done = rr("topology", command, str(topology), cwd=topology.parent)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    if command != "validate":
        for name in NAMES:
            assert name in done.stdout, (name, done.stdout)


def test_topology_show_json_names_them_whole(topology: Path) -> None:
    done = rr("topology", "show", str(topology), "-o", "json", cwd=topology.parent)
    assert done.returncode == 0, done.stderr
    assert set(NAMES) <= {queue["name"] for queue in json.loads(done.stdout)["queues"]}


def test_declare_dry_run_then_declare_then_inspect_non_ascii_names(
    topology: Path, vhost_url: str
) -> None:
    cwd = topology.parent
    dry = rr("declare", str(topology), "--dry-run", "--url", vhost_url, "-o", "json", cwd=cwd)
    assert dry.returncode == 0, dry.stderr
    planned = {op["name"] for op in json.loads(dry.stdout)["operations"]}
    assert set(NAMES) <= planned

    declared = rr("declare", str(topology), "--url", vhost_url, cwd=cwd)
    assert declared.returncode == 0, declared.stderr

    inspected = rr("dlq", "inspect", "d.é", "--url", vhost_url, "-o", "json", cwd=cwd)
    assert inspected.returncode == 0, inspected.stderr
    assert json.loads(inspected.stdout)["queue"] == "d.é"
