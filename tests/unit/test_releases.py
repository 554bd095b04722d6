"""The table of server releases (``rabbitctl_retry/releases.py``): its lookup, its rows, and the
rule that no module but it compares a server's version with a number (docs/architecture.md,
"Layers"). The rule is checked on the source, as tests/unit/test_architecture.py checks the
imports, and shown to catch a module written to break it.
"""

from __future__ import annotations

import ast
import dataclasses
import re
from pathlib import Path

import pytest

from rabbitctl_retry import releases
from rabbitctl_retry.releases import (
    DEFAULT_SERVER_VERSION,
    MEASURED_RELEASES,
    RELEASES,
    ServerRelease,
    first_release,
    release_of,
)
from rabbitctl_retry.server import ServerVersion

PACKAGE = Path(__file__).parents[2] / "rabbitctl_retry"
TABLE_MODULE = PACKAGE / "releases.py"

_ORDERING = (ast.Lt, ast.LtE, ast.Gt, ast.GtE)
_VERSIONISH = re.compile(r"\b(major|minor)\b|version|release|\bserver\s*\[", re.IGNORECASE)
"""What an operand that holds a version looks like: ``server_version.major``, ``version``,
``release[:2]``, ``server[0]``."""


def _is_version_tuple(node: ast.expr) -> bool:
    """``(4, 3)`` or ``(4, 3, 0)``: a tuple of two or three whole numbers."""
    return (
        isinstance(node, ast.Tuple)
        and len(node.elts) in (2, 3)
        and all(isinstance(e, ast.Constant) and type(e.value) is int for e in node.elts)
    )


def version_comparisons(source: str) -> list[str]:
    """Every ``<``, ``<=``, ``>``, ``>=`` of ``source`` that compares a server's version: one
    side a version tuple (``(4, 3)``), or a side that names a version, a release or its
    major or minor number (``server_version.major >= 4``, ``release[:2] >= FROM``); as
    ``line: text``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Compare) or not any(
            isinstance(op, _ORDERING) for op in node.ops
        ):
            continue
        operands = [node.left, *node.comparators]
        if any(_is_version_tuple(operand) for operand in operands) or any(
            _VERSIONISH.search(ast.unparse(operand)) for operand in operands
        ):
            found.append(f"{node.lineno}: {ast.unparse(node)}")
    return found


def _package_sources() -> list[Path]:
    return sorted(path for path in PACKAGE.rglob("*.py") if path != TABLE_MODULE)


def test_no_module_but_the_table_compares_a_version() -> None:
    """No ``version >= (x, y)`` outside ``releases.py``: a behaviour that differs between
    releases is a field of its rows (``version.behaviour.<field>``)."""
    found = {
        str(path.relative_to(PACKAGE.parent)): comparisons
        for path in _package_sources()
        if (comparisons := version_comparisons(path.read_text(encoding="utf-8")))
    }
    assert found == {}


@pytest.mark.parametrize(
    "snippet",
    [
        "if version >= (4, 3):\n    pass\n",
        "limit = 20 if server_version.major >= 4 else None\n",
        "two = (4, 0) <= version < (4, 3)\n",
        "nack = release[:2] >= NACK_UNCOUNTED_FROM\n",
        "on_4 = server[0] >= 4\n",
        "old = version.release < (4, 3, 0)\n",
        "new = (self.major, self.minor) >= FROM\n",
        "x = some_tuple > (3, 13)\n",
    ],
)
def test_the_scan_catches_a_version_comparison(snippet: str) -> None:
    """The rule catches each way the package compared versions before #43."""
    assert version_comparisons(snippet) != []


@pytest.mark.parametrize(
    "snippet",
    [
        "if count >= 3:\n    pass\n",
        "late = delivery_count > limit\n",
        "ok = (a, b) == (4, 3)\n",
        "row = version.behaviour.delayed_retries\n",
    ],
)
def test_the_scan_leaves_other_comparisons(snippet: str) -> None:
    assert version_comparisons(snippet) == []


def test_the_table_module_is_where_versions_are_compared() -> None:
    """The scan finds the comparison the lookup itself makes: it reads real source."""
    found = version_comparisons(TABLE_MODULE.read_text(encoding="utf-8"))
    assert any("(major, minor) >= row.line" in comparison for comparison in found)


# --- the lookup -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("version", "line"),
    [
        ((3, 8, 0), (3, 10)),  # older than every row: the oldest
        ((3, 10, 8), (3, 10)),
        ((3, 12, 14), (3, 10)),
        ((3, 13, 7), (3, 13)),
        ((4, 0, 5), (4, 0)),
        ((4, 1, 0), (4, 0)),
        ((4, 2, 9), (4, 0)),
        ((4, 3, 0), (4, 3)),
        ((4, 3, 6), (4, 3)),
        ((5, 0, 0), (4, 3)),  # newer than every row: the newest
        ((4, 3), (4, 3)),
    ],
)
def test_release_of_is_the_newest_row_not_newer(
    version: tuple[int, ...], line: tuple[int, int]
) -> None:
    assert release_of(version).line == line


def test_a_server_version_reads_its_row() -> None:
    assert ServerVersion(4, 3, 6).behaviour is releases.RABBITMQ_4_3
    assert ServerVersion.parse("3.10.8").behaviour is releases.RABBITMQ_3_10


def test_the_rows_are_in_order_and_frozen() -> None:
    lines = [row.line for row in RELEASES]
    assert lines == sorted(set(lines))
    with pytest.raises(dataclasses.FrozenInstanceError):
        RELEASES[0].delayed_retries = True  # type: ignore[misc]


def test_one_default_that_the_suite_measures() -> None:
    """One default server version, a measured row's; the emulator and ``TestBroker`` take
    it."""
    from rabbitctl_retry import testing
    from rabbitctl_retry.emulator import emulator

    assert DEFAULT_SERVER_VERSION in MEASURED_RELEASES
    assert MEASURED_RELEASES == ("3.10.8", "4.0.5", "4.3.6")
    assert str(emulator.DEFAULT_SERVER_VERSION) == testing.DEFAULT_SERVER_VERSION
    assert testing.DEFAULT_SERVER_VERSION == DEFAULT_SERVER_VERSION
    assert testing.EMULATED_RELEASES == MEASURED_RELEASES


def test_each_measured_row_is_its_servers() -> None:
    for row in RELEASES:
        if row.measured_on is not None:
            assert release_of(ServerVersion.parse(row.measured_on).release) is row


def test_every_behaviour_is_documented() -> None:
    """Every field but the row's own names says what it decides (docs/reference/testing.md's
    table)."""
    undocumented = [
        item.name
        for item in dataclasses.fields(ServerRelease)
        if item.name not in ("line", "measured_on") and "doc" not in item.metadata
    ]
    assert undocumented == []


def test_first_release() -> None:
    assert first_release("delayed_retries") is releases.RABBITMQ_4_3
    assert first_release("writes_last_death_headers") is releases.RABBITMQ_3_13
