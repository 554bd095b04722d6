"""docs/reference/testing.md's table of the RabbitMQ releases ("What differs between
releases") is the one scripts/release_table.py generates from rabbitctl_retry/releases.py: a
row changed without the docs, or the docs edited by hand, fails here."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

from rabbitctl_retry.releases import RELEASES, markdown_table

REPO = Path(__file__).parents[2]
SCRIPT = REPO / "scripts" / "release_table.py"


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("release_table", SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_docs_table_is_the_generated_one() -> None:
    script = _script()
    docs = script.DOCS.read_text(encoding="utf-8")
    assert docs.count(script.BEGIN) == docs.count(script.END) == 1
    assert script.with_table(docs, markdown_table()) == docs


def test_the_table_has_a_column_per_row_and_a_line_per_behaviour() -> None:
    lines = markdown_table().splitlines()
    assert all(line.count("|") == len(RELEASES) + 2 for line in lines)
    assert "`nack_requeue_counts_delivery`" in markdown_table()


def test_a_changed_row_is_caught() -> None:
    """The check fails on docs whose table is not the generated one."""
    script = _script()
    docs = script.DOCS.read_text(encoding="utf-8")
    stale = docs.replace("| yes |", "| no |", 1)
    assert script.with_table(stale, markdown_table()) != stale


def test_the_script_prints_the_table() -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT)], capture_output=True, text=True, check=True, cwd=REPO
    )
    assert done.stdout == markdown_table()
