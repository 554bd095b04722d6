"""docs/reference/configuration.md's defaults are the code's: each row of its tables is compared
with the constant or parameter default rr uses, and no other page states another default for
the same setting (docs/reference/configuration.md)."""

from __future__ import annotations

import importlib.util
import inspect
import os
import re
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

from rabbitctl_retry.cli import (
    _common,
    broker_choice,
    console,
    run,
    simulate,
    status,
    topology_found,
)
from rabbitctl_retry.cli.dlq import inspect as dlq_inspect
from rabbitctl_retry.event_loop import choose as choose_loop
from rabbitctl_retry.telemetry.switch import forced_off
from rabbitctl_retry.topology.model import Broker, Queue
from rabbitctl_retry.transport.clients import choose as choose_client
from tests.docs.structure import prose_lines
from tests.shared_node import DEFAULT_BROKERS

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "reference" / "configuration.md"


def table_rows(markdown: str) -> dict[str, str]:
    """``setting -> default`` of every table whose header starts ``| setting | default |``
    (code marks taken off)."""
    rows: dict[str, str] = {}
    in_table = False
    for _, line in prose_lines(markdown):
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if not line.startswith("|"):
            in_table = False
        elif cells[:2] == ["setting", "default"]:
            in_table = True
        elif in_table and not set(cells[0]) <= {"-", ":"}:
            rows[cells[0].replace("`", "")] = cells[1].replace("`", "")
    return rows


def _default(function: Callable[..., object], name: str) -> object:
    return inspect.signature(function).parameters[name].default


def _field(cls: type, name: str) -> object:
    return cls.__dataclass_fields__[name].default  # type: ignore[attr-defined]


def _suite_constant(name: str) -> object:
    """A constant of tests/contract/test_random.py, loaded afresh without its variables set."""
    saved = {key: os.environ.pop(key) for key in list(os.environ) if key.startswith("RR_RANDOM")}
    try:
        path = REPO / "tests" / "contract" / "test_random.py"
        spec = importlib.util.spec_from_file_location("rr_random_defaults", path)
        assert spec is not None
        assert spec.loader is not None
        module: ModuleType = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return getattr(module, name)
    finally:
        os.environ.update(saved)


def _config_path() -> str:
    saved = {
        key: os.environ.pop(key) for key in ("RR_CONFIG", "XDG_CONFIG_HOME") if key in os.environ
    }
    try:
        return str(broker_choice.config_path()).replace(str(Path.home()), "~", 1)
    finally:
        os.environ.update(saved)


def _same_loop() -> str:
    both = [
        choose_loop(None, uvloop_installed=x) == choose_loop("auto", uvloop_installed=x)
        for x in (True, False)
    ]
    return "auto" if all(both) else "not auto"


CODE: dict[str, Callable[[], object]] = {
    "RR_URL": lambda: _common.DEFAULT_URL,
    "RR_MANAGEMENT_URL": lambda: None,
    "RR_BROKER": lambda: None,
    "RR_CONFIG": _config_path,
    "RR_SERVICE_URLS": lambda: None,
    "RR_AMQP_CLIENT": lambda: choose_client(None),
    "RR_EVENT_LOOP": _same_loop,
    "RR_OTEL": lambda: "off" if forced_off() else "on",
    "RR_TRACEBACK": lambda: "off",
    "RR_TEST_BROKERS": lambda: ",".join(DEFAULT_BROKERS),
    "RR_RANDOM_SEEDS": lambda: _suite_constant("SEEDS"),
    "RR_RANDOM_FIRST_SEED": lambda: _suite_constant("FIRST_SEED"),
    "RR_RANDOM_SHRINK_S": lambda: _suite_constant("SHRINK_S"),
    "rr run --prefetch": lambda: _default(run.run_command, "prefetch"),
    "rr run --concurrency": lambda: (
        "--prefetch" if _default(run.run_command, "concurrency") is None else "a number"
    ),
    "rr run --shutdown-timeout": lambda: _default(run.run_command, "shutdown_timeout"),
    "rr run --wait-for-broker": lambda: _default(run.run_command, "wait_for_broker"),
    "rr run --handler-timeout": lambda: _default(run.run_command, "handler_timeout"),
    "rr run --pending-dir": lambda: _default(run.run_command, "pending_dir"),
    "rr run --reload-interval": lambda: _default(run.run_command, "reload_interval"),
    "rr run --metrics-port": lambda: _default(run.run_command, "metrics_port"),
    "rr run --metrics-bind": lambda: _default(run.run_command, "metrics_bind"),
    "rr run --log-format": lambda: _default(run.run_command, "log_format"),
    "rr run --log-level": lambda: _default(run.run_command, "log_level"),
    "rr run --workers": lambda: _default(run.run_command, "workers"),
    "rr simulate --for": lambda: _default(simulate.simulate_command, "horizon"),
    "rr simulate --handler-timeout": lambda: _default(simulate.simulate_command, "handler_timeout"),
    "rr console --bind": lambda: _default(console.console_command, "bind"),
    "rr console --port": lambda: _default(console.console_command, "port"),
    "rr dlq inspect --limit": lambda: dlq_inspect.DEFAULT_INSPECT_LIMIT,
    "rr status --watch": lambda: _default(status.status_command, "watch"),
    "--topology": lambda: topology_found.DEFAULT_TOPOLOGY,
    "[broker] retry_header": lambda: _field(Broker, "retry_header"),
    "[broker] settings": lambda: _field(Broker, "settings"),
    "[queues.NAME] type": lambda: _field(Queue, "type"),
    "[queues.NAME] durable": lambda: _field(Queue, "durable"),
    "[queues.NAME] max_attempts": lambda: _field(Queue, "max_attempts"),
    "[queues.NAME] delay": lambda: _field(Queue, "delay"),
    "[queues.NAME] publish": lambda: _field(Queue, "publish"),
}
"""How the code says each documented default: a row without an entry here fails."""


def normal(value: object) -> str:
    """A default as the table writes it: ``None`` as ``none``, ``True`` as ``true``, ``30.0``
    as ``30``, an enum by its value, a path as its text."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, (int, float)):
        return str(value)
    return str(getattr(value, "value", value))


ROWS = table_rows(PAGE.read_text(encoding="utf-8"))


def test_the_page_has_the_settings() -> None:
    assert len(ROWS) >= 30
    assert {"RR_URL", "RR_TEST_BROKERS", "RR_AMQP_CLIENT", "rr run --prefetch"} <= set(ROWS)


@pytest.mark.parametrize("setting", sorted(ROWS))
def test_the_documented_default_is_the_codes(setting: str) -> None:
    if setting not in CODE:
        pytest.fail(f"{setting}: no code check; add one to CODE in tests/docs/test_defaults.py")
    assert ROWS[setting] == normal(CODE[setting]()), setting


def _key(setting: str) -> str | None:
    """The name another page would use near "default": an environment variable, an option,
    or a topology key that is not a common word."""
    last = setting.split()[-1]
    if last.startswith(("RR_", "--")) or "_" in last:
        return last
    return None


def stated_defaults(markdown: str, key: str) -> list[tuple[int, str]]:
    """Each default a page states next to ``key``: a line naming ``key`` (in code marks) and
    then ``default`` followed by a number or a value in code marks (``default 20``, ``default:
    `text` ``, ``defaults to `5` ``), with the value (a number's thousands commas dropped)."""
    pattern = re.compile(
        rf"`{re.escape(key)}`[^.;]*?\bdefault(?:s to|:| is)?\s+"
        r"(?:`(?P<code>[^`]+)`|(?P<number>\d[\d,]*(?:\.\d+)?))"
    )
    found: list[tuple[int, str]] = []
    for number, line in prose_lines(markdown):
        for match in pattern.finditer(line):
            value = match["code"] or match["number"].replace(",", "")
            found.append((number, value))
    return found


def test_no_other_page_states_another_default() -> None:
    wrong: list[str] = []
    pages = [*sorted((REPO / "docs").rglob("*.md")), REPO / "README.md"]
    for page in pages:
        if page == PAGE:
            continue
        text = page.read_text(encoding="utf-8")
        for setting, default in ROWS.items():
            key = _key(setting)
            if key is None:
                continue
            for number, value in stated_defaults(text, key):
                if value not in default and default not in value:
                    name = page.relative_to(REPO)
                    wrong.append(
                        f"{name}:{number}: {key} default {value}, the table says {default}"
                    )
    assert not wrong, "\n".join(wrong)


def test_a_wrong_default_and_a_contradiction_are_seen() -> None:
    table = "| setting | default | what |\n|---|---|---|\n| `rr run --prefetch` | `50` | x |\n"
    rows = table_rows(table)
    assert rows == {"rr run --prefetch": "50"}
    assert rows["rr run --prefetch"] != normal(CODE["rr run --prefetch"]())
    line = "`--prefetch` sets the qos (default 1,000); `RR_OTEL` defaults to `off`.\n"
    assert stated_defaults(line, "--prefetch") == [(1, "1000")]
    assert stated_defaults(line, "RR_OTEL") == [(1, "off")]
