"""rr topology validate / show / export, and the exit codes of bad input (no broker)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rabbitctl_retry.cli import app

EXAMPLE = Path(__file__).parents[2] / "examples" / "refunds" / "topology.toml"

runner = CliRunner(env={"COLUMNS": "200"})


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "topology.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_validate_accepts_the_guide_example() -> None:
    result = runner.invoke(app, ["topology", "validate", str(EXAMPLE)])
    assert result.exit_code == 0, result.output
    assert "ok (5 queues in the file; 6 queues, 0 exchanges and 0 bindings" in result.output


@pytest.mark.parametrize(
    ("text", "line", "fragment"),
    [
        ("[queues.payouts]\ntype = 'quorum'\nmax_attempts = 5\n", 3, "queues.payouts.max_attempts"),
        ("[queues.a]\n\n\nmax_attemps = 5\n", 4, "did you mean 'max_attempts'"),
        ("[queues.a]\ntype = 'quorum'\ndurable = false\n", 3, "queues.a.durable"),
        ("[queues.a]\nmax_attempts = 0\n", 2, "must be at least 1"),
        ("[queues.a]\ndead_letter = 'a'\n", 2, "names the queue itself"),
        ("[queues.a]\nmax_attempts = = 5\n", 2, "not valid TOML"),
    ],
)
def test_bad_topology_exits_78_with_key_path_and_line(
    tmp_path: Path, text: str, line: int, fragment: str
) -> None:
    path = write(tmp_path, text)
    result = runner.invoke(app, ["topology", "validate", str(path)])
    assert result.exit_code == 78
    assert f"{path}:{line}:" in result.stderr
    assert fragment in result.stderr
    assert result.stdout == ""


def test_missing_file_exits_78() -> None:
    result = runner.invoke(app, ["topology", "validate", "/nonexistent/topology.toml"])
    assert result.exit_code == 78
    assert "/nonexistent/topology.toml: no such file" in result.stderr


def test_show_json_lists_every_entity_with_exact_arguments() -> None:
    result = runner.invoke(app, ["topology", "show", str(EXAMPLE), "--output", "json"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    queues = {queue["name"]: queue["arguments"] for queue in document["queues"]}
    assert queues == {
        "refunds": {"x-queue-type": "classic"},
        "refunds.retry": {
            "x-dead-letter-exchange": "",
            "x-dead-letter-routing-key": "refunds",
            "x-queue-type": "classic",
        },
        "refunds.dead": {"x-queue-type": "classic"},
        "payouts": {
            "x-queue-type": "quorum",
            "x-delivery-limit": 4,
            "x-dead-letter-exchange": "",
            "x-dead-letter-routing-key": "payouts.dead",
            "x-dead-letter-strategy": "at-least-once",
            "x-overflow": "reject-publish",
        },
        "payouts.dead": {"x-queue-type": "classic"},
        "refunds.receipts": {"x-queue-type": "classic"},
    }
    policies = {policy["queue"]: policy for policy in document["policies"]}
    assert policies["refunds"]["attempts_counted_by"] == "rr"
    assert policies["payouts"]["attempts_counted_by"] == "server"
    assert policies["refunds"]["wait_queues"] == ["refunds.retry"]
    assert policies["refunds"]["dead_letter_strategy"] is None  # rr copies, with confirms
    assert policies["payouts"]["dead_letter_strategy"] == "at-least-once"
    assert document["retry_header"] == "x-ruststream-retry-count"


def test_show_says_how_a_queue_waits_on_the_server(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        '[queues.jobs]\ntype = "quorum"\nmax_attempts = 3\ndead_letter = "jobs.dead"\n'
        'delay = "server"\ndelay_min = "500ms"\ndelay_max = "1m"\ndelay_returns = "all"\n',
    )
    document = json.loads(runner.invoke(app, ["topology", "show", str(path), "-o", "json"]).stdout)
    (jobs,) = [policy for policy in document["policies"] if policy["queue"] == "jobs"]
    assert (jobs["delay"], jobs["wait_queues"], jobs["server_delay"]) == (
        "server",
        [],
        {"min": "500ms", "max": "1m", "returns": "all"},
    )
    table = runner.invoke(app, ["topology", "show", str(path)])
    assert "server 500ms..1m" in table.stdout
    assert "x-delayed-retry-type='all'" in table.stdout


def test_show_table_names_each_queue_and_its_role() -> None:
    result = runner.invoke(app, ["topology", "show", str(EXAMPLE)])
    assert result.exit_code == 0, result.output
    assert "wait queue of refunds" in result.stdout
    assert "x-delivery-limit=4" in result.stdout
    assert "dead letters of payouts" in result.stdout


def test_show_refuses_control_characters_in_names_and_prints_them_escaped(
    tmp_path: Path,
) -> None:
    path = write(tmp_path, '[queues."evil\\u001b[31m"]\n')
    result = runner.invoke(app, ["topology", "show", str(path)])
    assert result.exit_code == 78
    assert "\x1b" not in result.stderr
    assert result.stderr == (
        f"rr: error: {path}:1: queues.\"evil\\u001B[31m\": queue name 'evil\\x1b[31m' holds "
        "U+001B; a name may only hold letters, digits, - _ . : @ # , / + or space, and printable "
        "non-ASCII characters\n"
    )
    assert result.stdout == ""


def test_export_definitions_document() -> None:
    result = runner.invoke(app, ["topology", "export", str(EXAMPLE), "--vhost", "shop"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    payouts = next(q for q in document["queues"] if q["name"] == "payouts")
    assert payouts == {
        "name": "payouts",
        "vhost": "shop",
        "durable": True,
        "auto_delete": False,
        "arguments": {
            "x-queue-type": "quorum",
            "x-delivery-limit": 4,
            "x-dead-letter-exchange": "",
            "x-dead-letter-routing-key": "payouts.dead",
            "x-dead-letter-strategy": "at-least-once",
            "x-overflow": "reject-publish",
        },
    }
    # each queue after the queue it dead-letters to
    assert [q["name"] for q in document["queues"]] == [
        "refunds.dead",
        "refunds",
        "refunds.retry",
        "payouts.dead",
        "payouts",
        "refunds.receipts",
    ]
    assert document["exchanges"] == []
    assert document["bindings"] == []


def test_unknown_command_is_a_usage_error() -> None:
    result = runner.invoke(app, ["topology", "frobnicate"])
    assert result.exit_code == 2
