"""The package as a pip user gets it: the wheel built from this checkout, installed into a
fresh venv outside it, with nothing but its own dependencies (docs/reference/testing.md, "The
package").

One venv (tests/packaging/conftest.py: building and installing take most of a minute) that
the tests below read: what the wheel holds, what it installed, and that the commands work from
there.
"""

from __future__ import annotations

import json
import zipfile

import pytest

from tests.packaging.conftest import Installed

pytestmark = pytest.mark.xdist_group("packaging")
"""One worker builds the wheel once (tests/packaging/conftest.py)."""
RUNTIME_ONLY = {"typer", "rich", "pamqp", "prometheus-client"}
"""The runtime dependencies (pyproject.toml); each pulls a few of its own."""
NOT_AT_RUN_TIME = {
    "aiormq",
    "uvloop",
    "tomli-w",
    "pytest",
    "aiohttp",
    "msgspec",
    "opentelemetry-api",
    "opentelemetry-sdk",
    "jsonschema",
    "pyyaml",
    "grafana-foundation-sdk",
}
"""Optional parts (extras) and test tools: not in a plain install (pydantic may be: typer
needs it)."""


def test_the_wheel_holds_the_package_and_its_license(installed: Installed) -> None:
    names = zipfile.ZipFile(installed.wheel).namelist()
    assert "rabbitctl_retry/py.typed" in names
    assert any(name.endswith(".dist-info/licenses/LICENSE") for name in names)
    assert not [name for name in names if name.startswith(("tests/", "examples/", "benchmarks/"))]
    metadata = next(name for name in names if name.endswith(".dist-info/METADATA"))
    text = zipfile.ZipFile(installed.wheel).read(metadata).decode()
    assert "License-Expression: MIT" in text
    assert "Classifier: Typing :: Typed" in text


def test_a_plain_install_holds_only_what_rr_runs_on(installed: Installed) -> None:
    listed = installed.run("python", "-m", "pip", "list", "--format", "json")
    names = {entry["name"].lower().replace("_", "-") for entry in json.loads(listed.stdout)}
    assert names >= RUNTIME_ONLY
    assert not names & NOT_AT_RUN_TIME, names & NOT_AT_RUN_TIME
    size_mib = sum(f.stat().st_size for f in installed.venv.rglob("*") if f.is_file()) / 2**20
    print(f"the venv with rr installed: {size_mib:.1f} MiB")  # quoted in docs/reference/testing.md


def test_the_commands_work_from_the_wheel(installed: Installed) -> None:
    helped = installed.run("rr", "--help")
    assert helped.returncode == 0, helped.stderr
    for command in ("declare", "run", "simulate", "dlq", "publish", "completion"):
        assert command in helped.stdout
    version = installed.run("rr", "--version")
    assert version.returncode == 0, version.stderr
    assert "rr 0.1.0" in version.stdout
    completion = installed.run("rr", "completion", "zsh")
    assert completion.returncode == 0
    assert completion.stdout.startswith("#compdef rr")


def test_a_service_simulates_from_the_wheel(installed: Installed) -> None:
    """A topology and a handler written in an empty folder, run by ``rr simulate``: the
    runtime and the emulator work with the plain install (no aiormq, no uvloop)."""
    (installed.home / "topology.toml").write_text(
        '[queues.orders]\ntype = "classic"\nmax_attempts = 3\ndead_letter = "orders.dead"\n'
    )
    (installed.home / "orders_service.py").write_text(
        "from rabbitctl_retry import Outcome, subscriber\n\n\n"
        '@subscriber("orders")\n'
        "def handle(order: dict) -> Outcome:\n"
        '    return Outcome.retry("not yet")\n'
    )
    simulated = installed.run(
        "rr",
        "simulate",
        "topology.toml",
        "orders_service.py",
        "--publish",
        'orders={"id": 1}',
        "--output",
        "json",
    )
    assert simulated.returncode == 0, simulated.stderr
    document = json.loads(simulated.stdout)
    assert document["finished"] is True
    text = json.dumps(document)
    assert text.count('"retried"') == 2
    assert '"dead-lettered"' in text


def test_the_contract_from_the_wheel(installed: Installed) -> None:
    """``rr asyncapi`` writes its YAML with the plain install (no PyYAML: rr's own writer),
    and the YAML reads back as its JSON."""
    import yaml

    (installed.home / "topology.toml").write_text(
        '[queues.orders]\nmax_attempts = 3\ndead_letter = "orders.dead"\n'
    )
    (installed.home / "orders_contract.py").write_text(
        "from dataclasses import dataclass\n\n"
        "from rabbitctl_retry import subscriber\n\n\n"
        "@dataclass\nclass Order:\n    id: int\n\n\n"
        '@subscriber("orders")\n'
        "def handle(order: Order) -> None: ...\n"
    )
    as_yaml = installed.run("rr", "asyncapi", "orders_contract.py", "-t", "topology.toml")
    assert as_yaml.returncode == 0, as_yaml.stderr
    as_json = installed.run(
        "rr", "asyncapi", "orders_contract.py", "-t", "topology.toml", "-o", "json"
    )
    assert as_json.returncode == 0, as_json.stderr
    document = json.loads(as_json.stdout)
    assert yaml.safe_load(as_yaml.stdout) == document
    assert document["operations"]["receive_orders"]["x-ruststream-retry"] == {
        "maxAttempts": 3,
        "deadLetter": "orders.dead",
    }


def test_the_wheel_carries_the_docs(installed: Installed) -> None:
    """The docs' Markdown pages are package data (setup.py), the images are not; ``rr docs``
    reads them from the installed package, outside any checkout (docs/reference/cli.md,
    "rr docs")."""
    names = zipfile.ZipFile(installed.wheel).namelist()
    pages = [name for name in names if name.startswith("rabbitctl_retry/_docs/")]
    assert "rabbitctl_retry/_docs/README.md" in pages
    assert any(name.endswith("/dlq.md") for name in pages)
    assert all(name.endswith(".md") for name in pages), pages
    index = installed.run("rr", "docs")
    assert index.returncode == 0, index.stderr
    assert "dlq" in index.stdout
    assert "getting-started" in index.stdout
    page = installed.run("rr", "docs", "dlq")
    assert page.returncode == 0, page.stderr
    assert "rr dlq" in page.stdout
    raw = installed.run("rr", "docs", "dlq", "--raw")
    assert raw.returncode == 0, raw.stderr
    assert raw.stdout.startswith("# ")
    unknown = installed.run("rr", "docs", "dql")
    assert unknown.returncode == 2
    assert "Did you mean 'dlq'?" in unknown.stderr
