"""``rr doctor`` on each real server: the version it reports and what that version means for
the topology (docs/cli.md, "rr doctor")."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from rabbitctl_retry.cli import app

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "refunds" / "topology.toml"
QUORUM_DLQ_WITHOUT_ROUTE = """
[queues.payouts]
type = "quorum"
max_attempts = 5
dead_letter = "payouts.dead"

[queues."payouts.dead"]
type = "quorum"
"""
EXPECTED_RELEASE = {"3.10": "3.10.", "4.0": "4.0."}
UNSAFE_ON = {"3.10": False, "4.0": True}
"""RabbitMQ 4.0 gives quorum queues a default delivery limit of 20: a quorum dead-letter queue
without a route of its own then drops what is returned to it 20 times."""

runner = CliRunner()


def doctor(amqp_url: str, *args: str) -> tuple[int, dict[str, object]]:
    result = runner.invoke(app, ["doctor", "--url", amqp_url, "-o", "json", *args])
    assert result.exit_code in (0, 1), result.output
    return result.exit_code, json.loads(result.stdout)


def test_the_refunds_topology_is_safe_and_the_version_is_reported(
    amqp_url: str, broker_version: str
) -> None:
    code, document = doctor(amqp_url, "--topology", str(EXAMPLE))
    assert code == 0
    assert document["safe"] is True
    server = document["server"]
    assert isinstance(server, dict)
    assert str(server["version"]).startswith(EXPECTED_RELEASE[broker_version])
    found = {finding["code"] for finding in document["findings"]}  # type: ignore[attr-defined]
    assert ("quorum-default-delivery-limit" in found) is (broker_version == "4.0")
    assert ("last-death-headers" in found) is (broker_version == "4.0")


def test_a_quorum_dlq_without_a_route_is_unsafe_on_4(
    amqp_url: str, broker_version: str, tmp_path: Path
) -> None:
    topology = tmp_path / "topology.toml"
    topology.write_text(QUORUM_DLQ_WITHOUT_ROUTE)
    code, document = doctor(amqp_url, "--topology", str(topology))
    assert code == (1 if UNSAFE_ON[broker_version] else 0)
    assert document["safe"] is not UNSAFE_ON[broker_version]
    unsafe = [f for f in document["findings"] if f["level"] == "unsafe"]  # type: ignore[attr-defined]
    assert [(f["code"], f["queue"]) for f in unsafe] == (
        [("quorum-default-limit-drops", "payouts.dead")] if UNSAFE_ON[broker_version] else []
    )
