"""``rr doctor`` on each real server: the version it reports and what that version means for
the topology (docs/cli.md, "rr doctor")."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from rabbitctl_retry.cli import app
from tests.shared_node import SharedBroker, current

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


def unsafe_on(broker: SharedBroker) -> bool:
    """RabbitMQ 4.0 and later give quorum queues a default delivery limit of 20: a quorum
    dead-letter queue without a route of its own then drops what is returned to it 20 times."""
    return broker.major >= 4


runner = CliRunner()


def doctor(amqp_url: str, *args: str) -> tuple[int, dict[str, object]]:
    result = runner.invoke(app, ["doctor", "--url", amqp_url, "-o", "json", *args])
    assert result.exit_code in (0, 1), result.output
    return result.exit_code, json.loads(result.stdout)


def test_the_refunds_topology_is_safe_and_the_version_is_reported(amqp_url: str) -> None:
    code, document = doctor(amqp_url, "--topology", str(EXAMPLE))
    assert code == 0
    assert document["safe"] is True
    server = document["server"]
    assert isinstance(server, dict)
    broker = current()  # the line's properties, from tests/shared_node.py's table
    assert str(server["version"]).startswith(f"{broker.major}.{broker.minor}.")
    found = {finding["code"] for finding in document["findings"]}  # type: ignore[attr-defined]
    assert ("quorum-default-delivery-limit" in found) is (broker.major >= 4)
    assert ("last-death-headers" in found) is ((broker.major, broker.minor) >= (3, 13))


def test_a_quorum_dlq_without_a_route_is_unsafe_on_4(amqp_url: str, tmp_path: Path) -> None:
    topology = tmp_path / "topology.toml"
    topology.write_text(QUORUM_DLQ_WITHOUT_ROUTE)
    code, document = doctor(amqp_url, "--topology", str(topology))
    unsafe_here = unsafe_on(current())
    assert code == (1 if unsafe_here else 0)
    assert document["safe"] is not unsafe_here
    unsafe = [f for f in document["findings"] if f["level"] == "unsafe"]  # type: ignore[attr-defined]
    assert [(f["code"], f["queue"]) for f in unsafe] == (
        [("quorum-default-limit-drops", "payouts.dead")] if unsafe_here else []
    )
