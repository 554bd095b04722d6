"""``rr asyncapi``'s options and exit codes, as the other commands': a module that does not
load and a topology that does not parse exit 78 with the loader's words, a bad --url exits
2, as does a --send TYPE the handlers' module does not have; a file that cannot be written
exits 74; --out writes the document, --title and
--api-version set info."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from typer.testing import CliRunner

from rabbitctl_retry.cli import app

EXAMPLE = Path(__file__).parents[2] / "examples" / "refunds"
SERVICE = str(EXAMPLE / "service.py")
TOPOLOGY = str(EXAMPLE / "topology.toml")

runner = CliRunner()


def test_a_module_that_does_not_load() -> None:
    result = runner.invoke(app, ["asyncapi", "no_such_module_rr", "-t", TOPOLOGY])
    assert result.exit_code == 78, result.output
    assert "no module named 'no_such_module_rr'" in result.output
    result = runner.invoke(app, ["asyncapi", f"{SERVICE}:nothing", "-t", TOPOLOGY])
    assert result.exit_code == 78, result.output
    assert "has no attribute 'nothing'" in result.output


def test_a_topology_that_does_not_parse(tmp_path: Path) -> None:
    bad = tmp_path / "topology.toml"
    bad.write_text("[queues.a]\nmax_attempts = 0\n", encoding="utf-8")
    result = runner.invoke(app, ["asyncapi", SERVICE, "-t", str(bad)])
    assert result.exit_code == 78, result.output
    assert "queues.a.max_attempts" in result.output
    assert "must be at least 1" in result.output
    result = runner.invoke(app, ["asyncapi", SERVICE, "-t", str(tmp_path / "missing.toml")])
    assert result.exit_code == 78, result.output


def test_the_topology_is_required() -> None:
    result = runner.invoke(app, ["asyncapi", SERVICE])
    assert result.exit_code == 2
    assert "--topology" in result.output


def test_a_bad_url() -> None:
    result = runner.invoke(app, ["asyncapi", SERVICE, "-t", TOPOLOGY, "--url", "http://x"])
    assert result.exit_code == 2, result.output
    assert "--url: broker URL must start with amqp://" in result.output


def test_a_send_type_the_module_does_not_have() -> None:
    result = runner.invoke(
        app, ["asyncapi", SERVICE, "-t", TOPOLOGY, "--send", "refunds.receipts=Reciept"]
    )
    assert result.exit_code == 2, result.output
    assert "--send 'refunds.receipts=Reciept': service has no 'Reciept'" in result.output
    result = runner.invoke(app, ["asyncapi", SERVICE, "-t", TOPOLOGY, "--send", "=Receipt"])
    assert result.exit_code == 2, result.output
    assert "name a queue" in result.output


def test_out_title_version_and_url(tmp_path: Path) -> None:
    target = tmp_path / "contract.yaml"
    target.write_text("old", encoding="utf-8")
    result = runner.invoke(
        app,
        [
            "asyncapi",
            SERVICE,
            "-t",
            TOPOLOGY,
            "--out",
            str(target),
            "--title",
            "refunds",
            "--api-version",
            "1.4.0",
            "--url",
            "amqp://svc:pa55@rabbit.internal/payments",
        ],
    )
    assert result.exit_code == 0, result.output
    assert result.stdout == ""
    text = target.read_text(encoding="utf-8")
    assert "pa55" not in text
    document = yaml.safe_load(text)
    assert document["info"]["title"] == "refunds"
    assert document["info"]["version"] == "1.4.0"
    assert document["servers"] == {
        "rabbitmq": {
            "host": "rabbit.internal:5672",
            "protocol": "amqp",
            "protocolVersion": "0.9.1",
            "pathname": "/payments",
        }
    }
    as_json = tmp_path / "contract.json"
    result = runner.invoke(
        app, ["asyncapi", SERVICE, "-t", TOPOLOGY, "-o", "json", "--out", str(as_json)]
    )
    assert result.exit_code == 0, result.output
    assert json.loads(as_json.read_text(encoding="utf-8"))["info"]["title"] == "service"


def test_a_file_that_cannot_be_written(tmp_path: Path) -> None:
    target = tmp_path / "no" / "such" / "folder" / "contract.yaml"
    result = runner.invoke(app, ["asyncapi", SERVICE, "-t", TOPOLOGY, "--out", str(target)])
    assert result.exit_code == 74, result.output
    assert f"cannot write to {target}" in result.output
