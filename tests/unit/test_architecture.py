"""The dependency direction of docs/architecture.md, checked on the source: a wrong arrow fails.

Each rule is a function of one module (its dotted name, what it imports, whether its docstring
says it is pure) that returns what the module does wrong. The package must break none
(:func:`test_the_package_keeps_the_rule`), and each rule is shown to catch a module written
to break it (:func:`test_the_rule_catches_a_violation`): a rule that catches nothing fails
the suite as surely as a wrong import does.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE = Path(__file__).parents[2] / "rabbitctl_retry"
ROOT = "rabbitctl_retry"
DOCS = Path(__file__).parents[2] / "docs" / "architecture.md"

CORE = ("topology", "retry", "dlq", "doctor")
"""The pure core (docs/architecture.md, "Layers"): packages and modules that take time, run
ids and what the broker said as arguments."""
SHARED = (
    "errors",
    "fields",
    "field_codec",
    "server",
    "releases",
    "urls",
    "json_text",
    "suggestions",
)
"""Pure modules beside the core, shared by it and by the layers around it."""
READS_FILES = ("user_files",)
"""The one module beside the core that reads files (every file the user names; the topology
loader reads through it): not pure, but held to the core's imports, and the core may import
it (docs/architecture.md, "Layers")."""
DRIVERS = ("aiormq", "pamqp")
"""The AMQP client and its codec: only ``transport/`` talks to them."""
ADAPTERS = ("rabbitctl_retry.transport.amqp", "rabbitctl_retry.transport.management_http")
"""The adapters of the two ports: only ``cli/_common.py`` picks them."""
PICKS_THE_ADAPTERS = "rabbitctl_retry.cli._common"
RUNS_AND_EXITS = "rabbitctl_retry.cli._common"
"""The one CLI module that runs the event loop, opens connections and raises ``typer.Exit``
(docs/architecture.md, "How a command reads")."""
EVENT_LOOPS = ("asyncio.run", "asyncio.Runner", "asyncio.new_event_loop")
CONNECTS = (
    "rabbitctl_retry.transport.failover.connect_any",
    "rabbitctl_retry.transport.amqp.connect",
    "rabbitctl_retry.cli._common.amqp_connector",
    "rabbitctl_retry.cli._common.http_management",
    "aiormq.connect",
)
"""What opens a connection (besides calling a connector: :data:`CALLS_A_CONNECTOR`)."""
OPENS = ("connect_any", "open_connection")
"""Functions that open a connection, whatever module they come from."""
CONNECTOR_MAKERS = ("connector_of", "management_connector_of", "connect_to")
"""What hands out a connector (a URL in, a connection out) or ``connect_to``'s ``Connect``."""
CONNECTOR_TYPES = ("Connector", "ManagementConnector", "Connect")
CALLS_A_CONNECTOR = "<a connector>"
"""What :attr:`Module.calls` holds for a call of a connector: ``connector_of(ctx)(url)``, a
name bound to ``connector_of(...)`` or ``connect_to(...)``, a parameter typed ``Connector``
or ``Connect``."""
TRANSPORT_DEPENDENCIES = (*DRIVERS, "yarl")
"""What ``transport/`` may import beside the standard library, the shared modules and itself."""


@dataclass(frozen=True)
class Module:
    name: str
    """``rabbitctl_retry.cli._common``; a package by its own name."""
    imports: frozenset[str]
    """Every module it names, relative imports resolved; ``from a import b`` names ``a`` and
    ``a.b``; ``importlib.import_module("x")`` and ``__import__("x")`` name ``x``."""
    says_pure: bool
    """Its docstring starts with ``Pure.``."""
    calls: frozenset[str] = frozenset()
    """Every function it calls, by its dotted name through the imports (``from asyncio
    import run`` then ``run(...)``: ``asyncio.run``), and :data:`CALLS_A_CONNECTOR` for a
    call of a connector."""
    raises: frozenset[str] = frozenset()
    """What its ``raise`` statements raise, by dotted name (``typer.Exit``)."""

    def within(self, *parts: str) -> bool:
        """Whether this module is ``rabbitctl_retry.<part>`` or inside it, for any part."""
        return any(_under(self.name, f"{ROOT}.{part}") for part in parts)


def _under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def _dynamic_import(node: ast.Call) -> str | None:
    """The module a call ``importlib.import_module("x")`` or ``__import__("x")`` names."""
    func = node.func
    called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    if called not in {"import_module", "__import__"} or not node.args:
        return None
    first = node.args[0]
    if isinstance(first, ast.Constant) and isinstance(first.value, str):
        return first.value
    return None


def parse_module(name: str, source: str, *, package: bool = False) -> Module:
    """``source`` as the module ``name`` (``package``: it is a package's ``__init__``)."""
    tree = ast.parse(source)
    here = name.split(".") if package else name.split(".")[:-1]
    found: set[str] = set()
    aliases: dict[str, str] = {}
    """A local name -> the dotted name it was imported as."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
            for alias in node.names:
                if alias.asname:
                    aliases[alias.asname] = alias.name
                else:
                    top = alias.name.split(".")[0]
                    aliases[top] = top
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = ".".join(here[: len(here) - node.level + 1])
                module = f"{base}.{node.module}" if node.module else base
            else:
                module = node.module or ""
            found.add(module)
            # ``from package import module`` imports the module too
            found.update(f"{module}.{alias.name}" for alias in node.names)
            for alias in node.names:
                aliases[alias.asname or alias.name] = f"{module}.{alias.name}"
        elif isinstance(node, ast.Call) and (dynamic := _dynamic_import(node)) is not None:
            found.add(dynamic)
    docstring = ast.get_docstring(tree) or ""
    calls, raises = _calls_and_raises(tree, aliases)
    return Module(
        name,
        frozenset(found),
        says_pure=docstring.startswith("Pure."),
        calls=calls,
        raises=raises,
    )


def _dotted(node: ast.expr, aliases: dict[str, str]) -> str | None:
    """``asyncio.run`` for ``asyncio.run`` (or ``run`` imported from asyncio), resolved
    through the imports; None for anything but a name or a chain of attributes."""
    if isinstance(node, ast.Name):
        return aliases.get(node.id, node.id)
    if isinstance(node, ast.Attribute) and (base := _dotted(node.value, aliases)) is not None:
        return f"{base}.{node.attr}"
    return None


def _makes_a_connector(node: ast.expr, aliases: dict[str, str]) -> bool:
    """``node`` is a call of ``connector_of`` or ``management_connector_of``."""
    called = _dotted(node.func, aliases) if isinstance(node, ast.Call) else None
    return called is not None and called.split(".")[-1] in CONNECTOR_MAKERS


def _typed_a_connector(annotation: ast.expr | None) -> bool:
    if annotation is None:
        return False
    text = ast.unparse(annotation).strip("'\"")
    return any(re.search(rf"\b{kind}\b", text) for kind in CONNECTOR_TYPES)


def _calls_and_raises(
    tree: ast.Module, aliases: dict[str, str]
) -> tuple[frozenset[str], frozenset[str]]:
    connectors = {
        target.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign | ast.AnnAssign)
        and node.value is not None
        and _makes_a_connector(node.value, aliases)
        for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
        if isinstance(target, ast.Name)
    }
    connectors |= {
        argument.arg
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
        for argument in (*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs)
        if _typed_a_connector(argument.annotation)
    }
    calls: set[str] = set()
    raises: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            if _makes_a_connector(node.func, aliases) or (
                isinstance(node.func, ast.Name) and node.func.id in connectors
            ):
                calls.add(CALLS_A_CONNECTOR)
            elif (called := _dotted(node.func, aliases)) is not None:
                calls.add(called)
        elif isinstance(node, ast.Raise) and node.exc is not None:
            raised = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            if (dotted := _dotted(raised, aliases)) is not None:
                raises.add(dotted)
    return frozenset(calls), frozenset(raises)


def module_of(path: Path) -> Module:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    package = parts[-1] == "__init__"
    name = ".".join(parts[:-1] if package else parts)
    return parse_module(name, path.read_text(encoding="utf-8"), package=package)


def modules(subpackage: str) -> list[Path]:
    return sorted((PACKAGE / subpackage).rglob("*.py"))


MODULES = [module_of(path) for path in sorted(PACKAGE.rglob("*.py"))]


def _standard(name: str) -> bool:
    top = name.split(".")[0]
    return top in sys.stdlib_module_names and top != "asyncio"


def in_core(module: Module) -> bool:
    """Whether ``module`` is of the pure core or one of the shared pure modules beside it."""
    return module.within(*CORE, *SHARED)


CORE_PREFIXES = tuple(f"{ROOT}.{part}" for part in (*CORE, *SHARED, *READS_FILES))
PURE_ELSEWHERE = frozenset(m.name for m in MODULES if m.says_pure and not in_core(m))
"""Modules outside the core that say they are pure (a shell's sans-io state, a parser)."""


# --- the rules ---------------------------------------------------------------------------------


def core_imports_only_the_core(module: Module) -> list[str]:
    """The pure core (``doctor/`` included) and the shared modules import only the standard
    library (no asyncio: no clock, no sockets), the shared modules and the core: no
    transport module, no driver, no shell. The file reader beside them keeps the same rule."""
    if not in_core(module) and not module.within(*READS_FILES):
        return []
    return [
        f"{module.name} is of the pure core and imports {name}"
        for name in sorted(module.imports)
        if not _standard(name) and not any(_under(name, core) for core in CORE_PREFIXES)
    ]


def pure_modules_import_only_pure_ones(module: Module) -> list[str]:
    """A module outside the core whose docstring says ``Pure.`` imports only what the core
    may, and other modules that say they are pure (``ops/transfer_state.py`` takes
    ``ops/settlement.py``'s frames)."""
    if in_core(module) or not module.says_pure:
        return []
    return [
        f"{module.name} says it is pure and imports {name}"
        for name in sorted(module.imports)
        if not _standard(name)
        and not any(_under(name, core) for core in CORE_PREFIXES)
        and not any(_under(name, pure) for pure in PURE_ELSEWHERE)
    ]


def drivers_only_in_transport(module: Module) -> list[str]:
    """No module outside ``transport/`` imports aiormq or pamqp."""
    if module.within("transport"):
        return []
    return [
        f"{module.name} imports the driver {name}"
        for name in sorted(module.imports)
        if any(_under(name, driver) for driver in DRIVERS)
    ]


def one_place_picks_the_adapters(module: Module) -> list[str]:
    """Outside ``transport/``, only ``cli/_common.py`` names the aiormq adapter and the
    management API's HTTP adapter; every other module reaches a broker through the ports
    (``Connector``, ``ManagementConnector``)."""
    if module.within("transport") or module.name == PICKS_THE_ADAPTERS:
        return []
    return [
        f"{module.name} names the adapter {name}"
        for name in sorted(module.imports)
        if any(_under(name, adapter) for adapter in ADAPTERS)
    ]


def transport_imports_below_it(module: Module) -> list[str]:
    """``transport/`` imports only the standard library, its driver, the shared pure modules
    (and the file reader beside them, for a URL's TLS files) and itself: no topology, no
    core, no shell, no emulator."""
    if not module.within("transport"):
        return []
    allowed = tuple(f"{ROOT}.{part}" for part in (*SHARED, *READS_FILES, "transport"))
    return [
        f"{module.name} (transport) imports {name}"
        for name in sorted(module.imports)
        if name.split(".")[0] not in sys.stdlib_module_names
        and not any(_under(name, prefix) for prefix in (*allowed, *TRANSPORT_DEPENDENCIES))
    ]


FORBIDDEN = {
    "emulator": (
        "runtime",
        "cli",
        "ops",
        "testing",
        "simulation",
        "transport.amqp",
        "transport.management_http",
    ),
    "runtime": ("cli", "testing", "simulation"),
    "ops": ("runtime", "cli", "testing", "simulation"),
    "console": ("cli",),
}
"""What each shell must not import (``transport/`` has a rule of its own)."""


def no_arrow_points_upwards(module: Module) -> list[str]:
    """The emulator imports no shell above it and no adapter; the runtime and the operations
    nothing built on them; the console no CLI module (what both need lives below them:
    ``ops/``, ``dlq/``)."""
    return [
        f"{module.name} imports {name}"
        for layer, above in FORBIDDEN.items()
        if module.within(layer)
        for name in sorted(module.imports)
        if any(_under(name, f"{ROOT}.{part}") for part in above)
    ]


def nobody_imports_click(module: Module) -> list[str]:
    """typer ships its own click (pyproject.toml's ruff ban says so too)."""
    return [f"{module.name} imports {name}" for name in module.imports if _under(name, "click")]


def _command_module(module: Module) -> bool:
    """A module of ``cli/`` other than ``cli/_common.py``."""
    return module.within("cli") and module.name != RUNS_AND_EXITS


def only_common_runs_the_loop(module: Module) -> list[str]:
    """No CLI module but ``cli/_common.py`` runs an event loop: a command calls its one
    operation through ``run``."""
    if not _command_module(module):
        return []
    return [
        f"{module.name} runs an event loop itself ({name})"
        for name in sorted(module.calls)
        if name in EVENT_LOOPS
    ]


def only_common_connects(module: Module) -> list[str]:
    """No CLI module but ``cli/_common.py`` opens a connection (``connect_any``, an adapter's
    ``connect``, a call of a connector): the command's operation opens it, with what
    ``connect_to`` hands it."""
    if not _command_module(module):
        return []
    return [
        f"{module.name} opens a connection itself ({name})"
        for name in sorted(module.calls)
        if name in CONNECTS or name == CALLS_A_CONNECTOR or name.split(".")[-1] in OPENS
    ]


def only_common_raises_exit(module: Module) -> list[str]:
    """No CLI module but ``cli/_common.py`` raises ``typer.Exit`` (``exit_with``, ``fail``);
    others may catch it."""
    if not _command_module(module):
        return []
    return [
        f"{module.name} raises {name} (use cli/_common.py exit_with)"
        for name in sorted(module.raises)
        if name.split(".")[0] in {"typer", "click"} and name.split(".")[-1] == "Exit"
    ]


RULES: list[Callable[[Module], list[str]]] = [
    core_imports_only_the_core,
    pure_modules_import_only_pure_ones,
    drivers_only_in_transport,
    one_place_picks_the_adapters,
    transport_imports_below_it,
    no_arrow_points_upwards,
    nobody_imports_click,
    only_common_runs_the_loop,
    only_common_connects,
    only_common_raises_exit,
]


@pytest.mark.parametrize("rule", RULES, ids=lambda rule: rule.__name__)
def test_the_package_keeps_the_rule(rule: Callable[[Module], list[str]]) -> None:
    broken = [problem for module in MODULES for problem in rule(module)]
    assert broken == [], "\n".join(broken)


VIOLATIONS = [
    # (rule, module name, source): each module breaks the rule, and only that rule is asked
    (core_imports_only_the_core, "rabbitctl_retry.doctor", "from ..transport.base import X\n"),
    (core_imports_only_the_core, "rabbitctl_retry.topology.bad", "from ..transport import base"),
    (core_imports_only_the_core, "rabbitctl_retry.topology.bad", "from ..transport import url"),
    (core_imports_only_the_core, "rabbitctl_retry.dlq.bad", "import asyncio\n"),
    (core_imports_only_the_core, "rabbitctl_retry.retry.bad", "from rabbitctl_retry import ops"),
    (core_imports_only_the_core, "rabbitctl_retry.server", "import aiormq\n"),
    (core_imports_only_the_core, "rabbitctl_retry.user_files", "from rabbitctl_retry import cli"),
    (
        pure_modules_import_only_pure_ones,
        "rabbitctl_retry.runtime.bad",
        '"""Pure. Says so."""\nfrom rabbitctl_retry.runtime.consumer import QueueConsumer\n',
    ),
    (
        pure_modules_import_only_pure_ones,
        "rabbitctl_retry.ops.bad",
        '"""Pure. Says so."""\nfrom .settlement import AckFrame\nimport asyncio\n',
    ),
    (drivers_only_in_transport, "rabbitctl_retry.cli.topology", "from pamqp import commands\n"),
    (drivers_only_in_transport, "rabbitctl_retry.ops.bad", "import pamqp.frame\n"),
    (drivers_only_in_transport, "rabbitctl_retry.emulator.bad", "import aiormq\n"),
    (
        drivers_only_in_transport,
        "rabbitctl_retry.runtime.bad",
        "import importlib\nimportlib.import_module('aiormq')\n",
    ),
    (one_place_picks_the_adapters, "rabbitctl_retry.cli.bad", "from ..transport import amqp\n"),
    (
        one_place_picks_the_adapters,
        "rabbitctl_retry.ops.declare",
        "from rabbitctl_retry.transport.management_http import HttpManagementApi\n",
    ),
    (
        one_place_picks_the_adapters,
        "rabbitctl_retry.cli",
        "from .. import transport\nfrom ..transport.amqp import connect\n",
    ),
    (transport_imports_below_it, "rabbitctl_retry.transport.bad", "from ..topology import plan"),
    (
        transport_imports_below_it,
        "rabbitctl_retry.transport.management",
        "from rabbitctl_retry.topology.plan import Placement\n",
    ),
    (transport_imports_below_it, "rabbitctl_retry.transport.bad", "import rich\n"),
    (transport_imports_below_it, "rabbitctl_retry.transport.bad", "from .. import emulator\n"),
    (no_arrow_points_upwards, "rabbitctl_retry.emulator.bad", "from ..transport import amqp\n"),
    (no_arrow_points_upwards, "rabbitctl_retry.runtime.bad", "from ..cli import _common\n"),
    (no_arrow_points_upwards, "rabbitctl_retry.ops.bad", "from rabbitctl_retry import testing"),
    (
        no_arrow_points_upwards,
        "rabbitctl_retry.console.bad",
        "from rabbitctl_retry.cli.dlq.report import transfer_summary\n",
    ),
    (no_arrow_points_upwards, "rabbitctl_retry.console.app", "from ..cli import _common\n"),
    (nobody_imports_click, "rabbitctl_retry.cli.bad", "import click\n"),
    (only_common_runs_the_loop, "rabbitctl_retry.cli.status", "import asyncio\nasyncio.run(f())\n"),
    (
        only_common_runs_the_loop,
        "rabbitctl_retry.cli.bad",
        "def command():\n    from asyncio import run as go\n    go(main())\n",
    ),
    (
        only_common_runs_the_loop,
        "rabbitctl_retry.cli.dlq.transfer",
        "import asyncio\nwith asyncio.Runner() as runner:\n    runner.run(f())\n",
    ),
    (
        only_common_connects,
        "rabbitctl_retry.cli.doctor",
        "from rabbitctl_retry.transport.failover import connect_any\n"
        "async def f(c, urls):\n    return await connect_any(c, urls)\n",
    ),
    (
        only_common_connects,
        "rabbitctl_retry.cli.bad",
        "from ..transport import failover\nfailover.connect_any(c, urls)\n",
    ),
    (
        only_common_connects,
        "rabbitctl_retry.cli.bad",
        "from ._common import connector_of\nasync def f(ctx, url):\n"
        "    return await connector_of(ctx)(url)\n",
    ),
    (
        only_common_connects,
        "rabbitctl_retry.cli.bad",
        "from ._common import connector_of\nasync def f(ctx, url):\n"
        "    connector = connector_of(ctx)\n    return await connector(url)\n",
    ),
    (
        only_common_connects,
        "rabbitctl_retry.cli.bad",
        "async def f(connect: Connector, url: str):\n    return await connect(url)\n",
    ),
    (
        only_common_connects,
        "rabbitctl_retry.cli.bad",
        "async def f(management: 'ManagementConnector'):\n"
        "    return management('http://h:15672/', vhost='/')\n",
    ),
    (
        only_common_connects,
        "rabbitctl_retry.cli.bad",
        "from rabbitctl_retry.transport import amqp\nasync def f(url):\n"
        "    return await amqp.connect(url)\n",
    ),
    (
        only_common_connects,
        "rabbitctl_retry.cli.dlq",
        "from rabbitctl_retry.cli._common import open_connection\nasync def f(ctx, urls):\n"
        "    return await open_connection(ctx, urls)\n",
    ),
    (
        only_common_connects,
        "rabbitctl_retry.cli.bad",
        "from ._common import connect_to\nasync def f(ctx, urls):\n"
        "    connect = connect_to(ctx, urls)\n    return await connect()\n",
    ),
    (
        only_common_connects,
        "rabbitctl_retry.cli.bad",
        "async def f(connect: Connect):\n    return await connect()\n",
    ),
    (only_common_raises_exit, "rabbitctl_retry.cli.status", "import typer\nraise typer.Exit(1)\n"),
    (
        only_common_raises_exit,
        "rabbitctl_retry.cli",
        "from typer import Exit\ndef f():\n    raise Exit()\n",
    ),
    (
        only_common_raises_exit,
        "rabbitctl_retry.cli.bad",
        "import typer as t\ndef f():\n    raise t.Exit\n",
    ),
]


@pytest.mark.parametrize(
    ("rule", "name", "source"),
    VIOLATIONS,
    ids=[f"{rule.__name__}-{name}-{number}" for number, (rule, name, _) in enumerate(VIOLATIONS)],
)
def test_the_rule_catches_a_violation(
    rule: Callable[[Module], list[str]], name: str, source: str
) -> None:
    package = (PACKAGE.parent / name.replace(".", "/")).is_dir()
    module = parse_module(name, source, package=package)
    assert rule(module) != [], f"{rule.__name__} let {name} through:\n{source}"


def test_every_rule_is_shown_to_catch_a_violation() -> None:
    assert {rule for rule, _, _ in VIOLATIONS} == set(RULES)


def test_a_module_that_keeps_the_rules_breaks_none() -> None:
    sources = {
        "rabbitctl_retry.doctor": "from .server import ServerVersion\nfrom .topology import plan\n",
        "rabbitctl_retry.transport.bad": "import aiormq\nfrom ..server import Placement\n",
        "rabbitctl_retry.ops.bad": "from ..transport.base import Connector\nimport asyncio\n",
        "rabbitctl_retry.cli._common": (
            "from ..transport import amqp, management_http\n"
            "import asyncio, typer\nfrom rabbitctl_retry.transport.failover import connect_any\n"
            "def run(c):\n    return asyncio.run(c)\n"
            "def exit_with(code):\n    raise typer.Exit(code)\n"
            "async def connect(connector: Connector, urls):\n"
            "    return await connect_any(connector, urls)\n"
        ),
        "rabbitctl_retry.cli.run": (
            "import typer\nfrom ._common import connect_to, run\n"
            "def f(ctx, urls, service):\n    connect = connect_to(ctx, urls)\n"
            "    try:\n        run(service(connect))\n"
            "    except typer.Exit as stop:\n        raise\n"
        ),
        "rabbitctl_retry.ops.transfers": (
            "import asyncio\nasync def f(connect):\n    return await connect()\n"
        ),
    }
    for name, source in sources.items():
        module = parse_module(name, source)
        assert [problem for rule in RULES for problem in rule(module)] == [], name


def test_relative_imports_are_resolved() -> None:
    module = parse_module(
        "rabbitctl_retry.cli.bad",
        "from . import render\nfrom .. import errors\nfrom ..transport.amqp import connect\n",
    )
    assert {
        "rabbitctl_retry.cli",
        "rabbitctl_retry.cli.render",
        "rabbitctl_retry.errors",
        "rabbitctl_retry.transport.amqp",
        "rabbitctl_retry.transport.amqp.connect",
    } <= module.imports
    package = parse_module(
        "rabbitctl_retry.emulator", "from .clock import VirtualClock\n", package=True
    )
    assert "rabbitctl_retry.emulator.clock" in package.imports


def test_the_core_list_is_complete() -> None:
    """Every module docs/architecture.md's layer diagram calls pure is held to the pure rule,
    and so is every module that says so itself; the lists name only what exists."""
    diagram = DOCS.read_text(encoding="utf-8").split("```")[1]
    documented = {
        found.group(1)
        for found in re.finditer(r"^[\s│├└─]*(\w+)(?:/|\.py)\s+pure:", diagram, re.MULTILINE)
    }
    assert documented == set(CORE) | set(SHARED)
    for part in (*CORE, *SHARED):
        assert (PACKAGE / part).is_dir() or (PACKAGE / f"{part}.py").is_file(), part
    core = {module.name for module in MODULES if in_core(module)}
    assert "rabbitctl_retry.doctor" in core
    said_pure = {module.name for module in MODULES if module.says_pure}
    assert said_pure - core == PURE_ELSEWHERE  # held by pure_modules_import_only_pure_ones


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
        module.name: {name for name in module.imports if name.startswith(prefix + ".")}
        for module in MODULES
        if module.name.startswith(prefix + ".")
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
