"""``rr doctor`` on each real server: the version it reports and what that version means for
the topology (docs/reference/cli.md, "rr doctor")."""

from __future__ import annotations

import asyncio
import json
import shlex
import time
from pathlib import Path

from typer.testing import CliRunner

from rabbitctl_retry.cli import app
from rabbitctl_retry.transport import clients
from tests.backends import own_vhost
from tests.broker.test_doctor_deprecated_on_servers import MANAGEMENT_URLS
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
    """RabbitMQ 4.0 and later give a quorum queue declared without x-delivery-limit a limit of
    20: a quorum dead-letter queue without a route of its own then drops what is returned to
    it 20 times. 3.10 gives none."""
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


def test_a_quorum_dlq_held_with_the_servers_limit_is_unsafe_on_4(
    amqp_url: str, tmp_path: Path
) -> None:
    """payouts.dead as an earlier rr declared it (no x-delivery-limit): unsafe on 4.x, named
    with the policy that lifts its limit; once that policy is put (as the finding says), safe
    where a management API shows it (AMQP cannot see policies)."""
    topology = tmp_path / "topology.toml"
    topology.write_text(QUORUM_DLQ_WITHOUT_ROUTE)
    with own_vhost(amqp_url) as rabbit:
        asyncio.run(declare_by_hand(rabbit.url, "payouts.dead"))
        code, document = doctor(rabbit.url, "--topology", str(topology))
        unsafe_here = unsafe_on(current())
        assert code == (1 if unsafe_here else 0)
        assert document["safe"] is not unsafe_here
        unsafe = [f for f in document["findings"] if f["level"] == "unsafe"]  # type: ignore[attr-defined]
        assert [(f["code"], f["queue"]) for f in unsafe] == (
            [("quorum-default-limit-drops", "payouts.dead")] if unsafe_here else []
        )
        if not unsafe_here:
            return
        message = str(unsafe[0]["message"])
        assert "gives it a limit of 20" in message
        assert "a policy that applies to it is not seen without --management-url" in message
        # the fix the finding names, as an operator would type it (in the test's vhost)
        command = message[message.index("rabbitmqctl set_policy ") :].split(" (only")[0]
        arguments = shlex.split(command)[1:]
        put = current().run_ctl(*arguments[:1], "-p", rabbit.vhost, *arguments[1:])
        assert put.returncode == 0, put.stderr
        management_url = MANAGEMENT_URLS.get(current().version)
        if management_url is None:
            return  # AMQP cannot see the policy: only a management API shows it applies
        until_safe(rabbit.url, topology, "--management-url", management_url)


def test_a_quorum_dlq_rr_declares_is_safe_on_every_server(amqp_url: str, tmp_path: Path) -> None:
    topology = tmp_path / "topology.toml"
    topology.write_text(QUORUM_DLQ_WITHOUT_ROUTE)
    with own_vhost(amqp_url) as rabbit:
        declared = runner.invoke(app, ["declare", str(topology), "--url", rabbit.url])
        assert declared.exit_code == 0, declared.output
        code, document = doctor(rabbit.url, "--topology", str(topology))
        assert (code, document["safe"]) == (0, True), document["findings"]


async def declare_by_hand(url: str, queue: str) -> None:
    """``queue`` as a quorum queue without x-delivery-limit, as an earlier rr declared it."""
    connection = await clients.connect(url)
    try:
        channel = await connection.channel()
        await channel.queue_declare(queue, durable=True, arguments={"x-queue-type": "quorum"})
    finally:
        await connection.close()


def until_safe(url: str, topology: Path, *args: str) -> None:
    """rr doctor says the file is safe once the policy applies (the broker applies a policy
    to its queues shortly after it is put)."""
    for _ in range(100):
        code, document = doctor(url, "--topology", str(topology), *args)
        if code == 0:
            assert document["safe"] is True
            return
        time.sleep(0.1)
    raise AssertionError(f"still unsafe after the policy: {document['findings']}")
