"""The shape of the package (docs/architecture.md, "Rules the suite checks"): no function
over 100 lines, no class of 500 lines or more, and the emulator built by composition (no
class of it inherits one of another emulator module: its broker is one state value and
modules of functions). Each rule is read off the source with ``ast`` and shown to catch a
synthetic module that breaks it."""

from __future__ import annotations

import ast
from collections.abc import Callable
from pathlib import Path

import pytest

PACKAGE = Path(__file__).parents[2] / "rabbitctl_retry"
ROOT = "rabbitctl_retry"

MAX_FUNCTION_LINES = 100
"""The longest a function (or method) may be, its decorators not counted."""
MAX_CLASS_LINES = 499
"""The longest a class may be: under 500 lines."""
EMULATOR = f"{ROOT}.emulator"


def _lines(node: ast.stmt) -> int:
    return (node.end_lineno or node.lineno) - node.lineno + 1


def functions_are_short(name: str, tree: ast.Module) -> list[str]:
    return [
        f"{name}:{node.lineno} {node.name} has {_lines(node)} lines (at most {MAX_FUNCTION_LINES})"
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and _lines(node) > MAX_FUNCTION_LINES
    ]


def classes_are_under_500_lines(name: str, tree: ast.Module) -> list[str]:
    return [
        f"{name}:{node.lineno} class {node.name} has {_lines(node)} lines (under 500)"
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef) and _lines(node) > MAX_CLASS_LINES
    ]


def _emulator_classes_imported(name: str, tree: ast.Module) -> dict[str, str]:
    """Each name this emulator module imports from another emulator module -> that module."""
    here = name.split(".")[:-1]
    imported: dict[str, str] = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom):
            continue
        if node.level:
            base = ".".join(here[: len(here) - node.level + 1])
            module = f"{base}.{node.module}" if node.module else base
        else:
            module = node.module or ""
        if module == EMULATOR or module.startswith(EMULATOR + "."):
            for alias in node.names:
                imported[alias.asname or alias.name] = module
    return imported


def emulator_classes_are_composed(name: str, tree: ast.Module) -> list[str]:
    """No emulator class extends a class of another emulator module (an exception type
    excepted): one object spread over files by inheritance is what the emulator left."""
    if not (name == EMULATOR or name.startswith(EMULATOR + ".")):
        return []
    imported = _emulator_classes_imported(name, tree)
    problems = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.ClassDef):
            continue
        for base in node.bases:
            base_name = base.id if isinstance(base, ast.Name) else None
            if base_name in imported and not base_name.endswith(("Error", "Exception")):
                problems.append(
                    f"{name}:{node.lineno} class {node.name} extends {base_name} of "
                    f"{imported[base_name]}"
                )
    return problems


RULES: list[Callable[[str, ast.Module], list[str]]] = [
    functions_are_short,
    classes_are_under_500_lines,
    emulator_classes_are_composed,
]


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


SOURCES = [
    (_module_name(path), ast.parse(path.read_text(encoding="utf-8")))
    for path in sorted(PACKAGE.rglob("*.py"))
]


@pytest.mark.parametrize("rule", RULES, ids=lambda rule: rule.__name__)
def test_the_package_keeps_the_rule(rule: Callable[[str, ast.Module], list[str]]) -> None:
    broken = [problem for name, tree in SOURCES for problem in rule(name, tree)]
    assert broken == [], "\n".join(broken)


def _body(lines: int, indent: int = 4) -> str:
    return "".join(f"{' ' * indent}x{number} = {number}\n" for number in range(lines))


VIOLATIONS = [
    (functions_are_short, f"{ROOT}.cli.bad", "def f():\n" + _body(100)),
    (functions_are_short, f"{ROOT}.ops.bad", "class C:\n    async def f(self):\n" + _body(100, 8)),
    (classes_are_under_500_lines, f"{ROOT}.runtime.bad", "class C:\n" + _body(499)),
    (
        emulator_classes_are_composed,
        f"{ROOT}.emulator.broker",
        "from .flow import Flow\nclass Broker(Flow):\n    pass\n",
    ),
    (
        emulator_classes_are_composed,
        f"{ROOT}.emulator.settle",
        "from rabbitctl_retry.emulator.state import BrokerState as S\nclass X(S):\n    pass\n",
    ),
]


@pytest.mark.parametrize(
    ("rule", "name", "source"),
    VIOLATIONS,
    ids=[f"{rule.__name__}-{number}" for number, (rule, _, _) in enumerate(VIOLATIONS)],
)
def test_the_rule_catches_a_violation(
    rule: Callable[[str, ast.Module], list[str]], name: str, source: str
) -> None:
    assert rule(name, ast.parse(source)) != [], f"{rule.__name__} let {name} through"


def test_every_rule_is_shown_to_catch_a_violation() -> None:
    assert {rule for rule, _, _ in VIOLATIONS} == set(RULES)


def test_modules_at_the_limits_break_none() -> None:
    sources = {
        f"{ROOT}.cli.ok": "def f():\n" + _body(99),  # 100 lines with its def
        f"{ROOT}.runtime.ok": "class C:\n" + _body(498),  # 499 lines
        f"{ROOT}.emulator.ok": (
            "from .errors import ChannelError\nfrom .model import StoredMessage\n"
            "class Refused(ChannelError):\n    pass\n"
            "class Holder:\n    message: StoredMessage\n"
        ),
        f"{ROOT}.ops.ok": "from ..emulator.flow import Flow\nclass Mine(Flow):\n    pass\n",
    }
    for name, source in sources.items():
        tree = ast.parse(source)
        assert [problem for rule in RULES for problem in rule(name, tree)] == [], name
