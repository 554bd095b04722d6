"""The dependency direction of docs/architecture.md, checked on the source: a wrong arrow fails."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).parents[2] / "rabbitctl_retry"
CORE = ("topology", "retry", "dlq")


def imports_of(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            # ``from package import module`` imports the module too
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def modules(subpackage: str) -> list[Path]:
    return sorted((PACKAGE / subpackage).rglob("*.py"))


def allowed_for_core(name: str) -> bool:
    top = name.split(".")[0]
    if top in sys.stdlib_module_names and top != "asyncio":
        return True
    shared = (
        "rabbitctl_retry.errors",
        "rabbitctl_retry.fields",
        "rabbitctl_retry.server",
        "rabbitctl_retry.urls",
        "rabbitctl_retry.json_text",
    )
    if name in shared or name.startswith(tuple(f"{module}." for module in shared)):
        return True
    return any(name.startswith(f"rabbitctl_retry.{core}") for core in CORE)


@pytest.mark.parametrize("path", [p for core in CORE for p in modules(core)], ids=str)
def test_core_imports_only_the_standard_library_and_itself(path: Path) -> None:
    bad = sorted(name for name in imports_of(path) if not allowed_for_core(name))
    assert bad == [], f"{path.relative_to(PACKAGE)} imports {bad}"


FORBIDDEN = {
    "transport": ("rabbitctl_retry.runtime", "rabbitctl_retry.cli", "rabbitctl_retry.emulator"),
    "emulator": (
        "rabbitctl_retry.runtime",
        "rabbitctl_retry.cli",
        "rabbitctl_retry.transport.amqp",
    ),
    "runtime": ("rabbitctl_retry.cli", "rabbitctl_retry.testing", "rabbitctl_retry.simulation"),
    "ops": (
        "rabbitctl_retry.runtime",
        "rabbitctl_retry.cli",
        "rabbitctl_retry.testing",
        "rabbitctl_retry.simulation",
    ),
}


@pytest.mark.parametrize(
    ("path", "forbidden"),
    [(p, forbidden) for package, forbidden in FORBIDDEN.items() for p in modules(package)],
    ids=str,
)
def test_no_arrow_points_upwards(path: Path, forbidden: tuple[str, ...]) -> None:
    bad = sorted(n for n in imports_of(path) if n.startswith(forbidden))
    assert bad == [], f"{path.relative_to(PACKAGE)} imports {bad}"


ADAPTER = ("rabbitctl_retry.transport.amqp", "aiormq")
PICKS_THE_ADAPTER = PACKAGE / "cli" / "_common.py"


@pytest.mark.parametrize(
    "path",
    [p for p in sorted(PACKAGE.rglob("*.py")) if p.parent.name != "transport"],
    ids=str,
)
def test_one_place_picks_the_adapter(path: Path) -> None:
    """Shells, the consumer and the commands reach a broker through a Connector; only the
    CLI's ``connector_of`` names the aiormq adapter (docs/architecture.md)."""
    bad = sorted(n for n in imports_of(path) if n.startswith(ADAPTER))
    if path == PICKS_THE_ADAPTER:
        assert bad == ["rabbitctl_retry.transport.amqp"]
    else:
        assert bad == [], f"{path.relative_to(PACKAGE)} imports {bad}"


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=str)
def test_nobody_imports_click(path: Path) -> None:
    assert not any(n == "click" or n.startswith("click.") for n in imports_of(path))


def test_the_checker_catches_a_wrong_arrow(tmp_path: Path) -> None:
    module = tmp_path / "bad.py"
    module.write_text(
        "import aiormq\n"
        "from rabbitctl_retry.cli import app\n"
        "from rabbitctl_retry.transport import amqp\n",
        encoding="utf-8",
    )
    assert {"aiormq", "rabbitctl_retry.cli", "rabbitctl_retry.transport.amqp"} <= imports_of(module)
    assert not allowed_for_core("aiormq")
    assert not allowed_for_core("asyncio")
    assert allowed_for_core("rabbitctl_retry.topology.model")


def test_the_emulator_needs_no_amqp_client() -> None:
    """The emulator (and so rr's own tests of it) imports without aiormq or pamqp installed."""
    script = (
        "import sys\n"
        "sys.modules['aiormq'] = None\n"
        "sys.modules['pamqp'] = None\n"
        "import rabbitctl_retry.emulator\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle of ``graph`` (module -> modules it imports), or None."""
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for target in sorted(graph.get(node, ())):
            if state.get(target) == 1:
                return [*path[path.index(target) :], target]
            if target not in state and (found := visit(target)) is not None:
                return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)) is not None:
            return found
    return None


def test_no_import_circle_inside_the_emulator() -> None:
    prefix = "rabbitctl_retry.emulator"
    graph = {
        f"{prefix}.{path.stem}": {
            name for name in imports_of(path) if name.startswith(prefix + ".")
        }
        for path in modules("emulator")
        if path.stem != "__init__"
    }
    assert _cycle(graph) is None, _cycle(graph)
    assert _cycle({"a": {"b"}, "b": {"a"}}) == ["a", "b", "a"]  # the checker finds one


ALIASES = ("ArgumentValue", "HeaderValue")


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=str)
def test_one_name_for_a_field_value(path: Path) -> None:
    """AMQP field values have one alias, ``fields.FieldValue`` (and ``FieldTable``)."""
    text = path.read_text(encoding="utf-8")
    assert not [alias for alias in ALIASES if alias in text]
    if path.name != "fields.py":
        assert "FieldValue: TypeAlias" not in text


PROBES = PACKAGE / "ops" / "probe.py"


def passive_declares(path: Path) -> list[int]:
    """Lines of ``path`` that call ``queue_declare``/``exchange_declare`` with ``passive=True``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in {"queue_declare", "exchange_declare"}
        and any(
            keyword.arg == "passive"
            and not (isinstance(keyword.value, ast.Constant) and keyword.value.value is False)
            for keyword in node.keywords
        )
    ]


@pytest.mark.parametrize("path", [p for p in modules("ops") if p != PROBES], ids=str)
def test_only_probe_py_declares_passively(path: Path) -> None:
    """Queues and exchanges are looked up by the probes of ``ops/probe.py`` alone
    (docs/architecture.md, "ops/"): no other shell opens its own passive declare."""
    found = passive_declares(path)
    assert found == [], (
        f"{path.relative_to(PACKAGE)} declares passively on line(s) {found}: use ops/probe.py"
    )


def test_the_checker_catches_a_passive_declare(tmp_path: Path) -> None:
    module = tmp_path / "bad.py"
    module.write_text(
        "async def f(channel, name, flag):\n"
        "    await channel.queue_declare(name, durable=True)\n"
        "    await channel.queue_declare(\n"
        "        name,\n"
        "        passive=True,\n"
        "    )\n"
        "    await channel.exchange_declare(name, passive=flag)\n"
        "    await channel.exchange_declare(name, passive=False)\n",
        encoding="utf-8",
    )
    assert passive_declares(module) == [3, 7]
    assert len(passive_declares(PROBES)) >= 3  # the probes themselves are seen
