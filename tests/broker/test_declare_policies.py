"""``rr declare`` with ``settings = "policy"`` on RabbitMQ 4.3.6, through its management API
(docs/how-to/migrate-to-quorum.md, "Changing a topology"): rr's policy is on the server with the
exact definition, the queue holds only what no policy can (its type, its replicas) and dead-letters
after the policy's delivery limit; raising ``max_attempts`` is a ``live`` change that the
existing queue takes at once, through the policy alone (its arguments untouched), with every
message kept. Checked on the server afterwards, by what the queue does; no sleeps (every wait
is ``RabbitBackend.until``)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from rabbitctl_retry.cli import app
from rabbitctl_retry.errors import PreconditionFailed
from rabbitctl_retry.server import Policy
from rabbitctl_retry.transport import amqp
from rabbitctl_retry.transport.base import Channel, Delivery
from rabbitctl_retry.transport.management_http import HttpManagementApi
from tests.backends import RabbitBackend, vhost_pool
from tests.broker.test_doctor_deprecated_on_servers import MANAGEMENT_URLS
from tests.shared_node import current, require_broker

pytestmark = pytest.mark.broker

runner = CliRunner(env={"COLUMNS": "200"})

JOBS = """
[broker]
settings = "policy"

[queues.jobs]
type = "quorum"
max_attempts = {attempts}
dead_letter = "jobs.dead"
delay = "dlx-ttl"
replicas = 1

[queues."jobs.dead"]
"""

JOBS_POLICY = {
    "dead-letter-exchange": "",
    "dead-letter-routing-key": "jobs.dead",
    "dead-letter-strategy": "at-least-once",
    "overflow": "reject-publish",
}


@pytest.fixture
def backend() -> Iterator[RabbitBackend]:
    """RabbitMQ 4.3.6 (the shared server with a management API), in a fresh vhost."""
    broker = require_broker("4.3")
    pool = vhost_pool(broker)
    vhost = pool.take_now()
    try:
        yield RabbitBackend(broker, pool=pool, vhost=vhost)
    finally:
        pool.give_back(vhost)


def declare(backend: RabbitBackend, tmp_path: Path, attempts: int, *args: str) -> Result:
    topology = tmp_path / "topology.toml"
    topology.write_text(JOBS.format(attempts=attempts), encoding="utf-8")
    return runner.invoke(
        app,
        [
            "declare",
            str(topology),
            "--url",
            backend.url,
            "--management-url",
            MANAGEMENT_URLS["4.3"],
            *args,
        ],
    )


def api(backend: RabbitBackend) -> HttpManagementApi:
    return HttpManagementApi(MANAGEMENT_URLS["4.3"], vhost=backend.vhost)


def rr_policies(backend: RabbitBackend) -> dict[str, Policy]:
    listed = asyncio.run(api(backend).policies())
    return {policy.name: policy for policy in listed}


def queue_arguments(backend: RabbitBackend, queue: str) -> dict[str, Any]:
    done = backend.broker.run_ctl(
        "-q", "list_queues", "-p", backend.vhost, "name", "arguments", "--formatter", "json"
    )
    assert done.returncode == 0, done.stderr
    rows = {row["name"]: row["arguments"] for row in json.loads(done.stdout)}
    return {key: value for key, _kind, value in rows[queue]}


async def _depth(channel: Channel, queue: str) -> int:
    return (await channel.queue_declare(queue, passive=True)).message_count


def publish(backend: RabbitBackend, count: int) -> None:
    async def run() -> None:
        connection = await amqp.connect(backend.url)
        try:
            channel = await connection.channel(confirms=True)
            for index in range(count):
                await channel.publish(str(index).encode(), routing_key="jobs")

            async def all_in() -> bool:
                return await _depth(channel, "jobs") == count

            await backend.until(all_in, f"{count} messages in jobs")
        finally:
            await connection.close()

    asyncio.run(run())


def keep_one(backend: RabbitBackend) -> int:
    """Ack every message of ``jobs`` but one; how many there were."""

    async def run() -> int:
        connection = await amqp.connect(backend.url)
        try:
            channel = await connection.channel()
            found = await _depth(channel, "jobs")
            while await _depth(channel, "jobs") > 1:
                delivery = await channel.get("jobs")
                if delivery is not None:
                    await channel.ack(delivery.delivery_tag)
            return found
        finally:
            await connection.close()

    return asyncio.run(run())


def deliveries_until_dead(backend: RabbitBackend) -> int:
    """Take the one message of ``jobs`` and give it back (reject, requeue: counted) until the
    server dead-letters it to ``jobs.dead``; how many times it was delivered."""

    async def run() -> int:
        connection = await amqp.connect(backend.url)
        try:
            channel = await connection.channel()
            deliveries = 0
            got: list[Delivery] = []

            async def delivered_or_dead() -> bool:
                delivery = await channel.get("jobs")
                if delivery is not None:
                    got.append(delivery)
                    return True
                return await _depth(channel, "jobs.dead") == 1

            while True:
                got.clear()
                await backend.until(delivered_or_dead, "a delivery of jobs, or its dead letter")
                if not got:
                    break
                deliveries += 1
                assert deliveries <= 20
                await channel.reject(got[0].delivery_tag, requeue=True)
            assert await _depth(channel, "jobs") == 0
            return deliveries
        finally:
            await connection.close()

    return asyncio.run(run())


def operations(result: Result) -> dict[str, dict[str, Any]]:
    return {op["name"]: op for op in json.loads(result.stdout)["operations"]}


def test_declare_puts_the_policy_and_the_queue_follows_it(
    backend: RabbitBackend, tmp_path: Path
) -> None:
    result = declare(backend, tmp_path, 3, "-o", "json")

    assert result.exit_code == 0, result.output
    assert {name: op["status"] for name, op in operations(result).items()} == {
        "jobs.dead": "created",
        "jobs": "created",
        "jobs.retry": "created",
    }
    assert rr_policies(backend) == {
        "rr.jobs": Policy.of(
            "rr.jobs", "^jobs$", {**JOBS_POLICY, "delivery-limit": 2}, priority=100
        ),
        "rr.jobs.retry": Policy.of(
            "rr.jobs.retry",
            "^jobs\\.retry$",
            {**JOBS_POLICY, "dead-letter-routing-key": "jobs"},
            priority=100,
        ),
    }
    assert queue_arguments(backend, "jobs") == {
        "x-queue-type": "quorum",
        "x-quorum-initial-group-size": 1,
    }
    publish(backend, 1)
    # the policy's delivery limit of 2 (max_attempts 3), not RabbitMQ 4's default of 20
    assert deliveries_until_dead(backend) == 3

    again = declare(backend, tmp_path, 3, "-o", "json")
    assert again.exit_code == 0, again.output
    assert {op["status"] for op in operations(again).values()} == {"unchanged"}


def test_a_live_change_takes_effect_on_the_existing_queue(
    backend: RabbitBackend, tmp_path: Path
) -> None:
    assert declare(backend, tmp_path, 3).exit_code == 0
    publish(backend, 4)

    result = declare(backend, tmp_path, 6, "-o", "json")

    assert result.exit_code == 0, result.output
    jobs = operations(result)["jobs"]
    assert jobs["status"] == "changed"
    assert [
        (row["key"], row["current"], row["desired"], row["change"])
        for row in jobs["settings"]
        if row["change"] != "unchanged"
    ] == [("delivery-limit", "2", "5", "live")]
    assert rr_policies(backend)["rr.jobs"].keys["delivery-limit"] == 5
    assert queue_arguments(backend, "jobs") == {
        "x-queue-type": "quorum",
        "x-quorum-initial-group-size": 1,
    }  # the change is the policy's alone
    assert keep_one(backend) == 4  # no message lost
    assert deliveries_until_dead(backend) == 6


RUSTSTREAM_ARGUMENTS: list[dict[str, Any]] = [
    {"x-delivery-limit": 4},
    {"x-dead-letter-exchange": "", "x-dead-letter-routing-key": "jobs.dead"},
    {"x-overflow": "reject-publish"},
    {"x-dead-letter-strategy": "at-least-once"},
]


def test_a_policy_mode_queue_refuses_a_declare_with_the_arguments(amqp_url: str) -> None:
    """Why ``arguments`` stays the default (docs/how-to/migrate-to-quorum.md, "Changing a
    topology"): a service that declares the queue with rr's ``x-`` arguments (as RustStream does) is
    refused by a queue that holds them in a policy, on every server."""
    broker = current()
    pool = vhost_pool(broker)
    vhost = pool.take_now()
    backend = RabbitBackend(broker, pool=pool, vhost=vhost)

    async def run() -> list[str]:
        connection = await amqp.connect(backend.url)
        try:
            channel = await connection.channel()
            await channel.queue_declare("jobs", durable=True, arguments={"x-queue-type": "quorum"})
            refused = []
            for arguments in RUSTSTREAM_ARGUMENTS:
                attempt = await connection.channel()
                with pytest.raises(PreconditionFailed) as caught:
                    await attempt.queue_declare(
                        "jobs", durable=True, arguments={"x-queue-type": "quorum", **arguments}
                    )
                refused.append(str(caught.value).split("inequivalent arg ")[1].split(" ")[0])
            return refused
        finally:
            await connection.close()

    try:
        assert asyncio.run(run()) == [
            "'x-delivery-limit'",
            "'x-dead-letter-exchange'",
            "'x-overflow'",
            "'x-dead-letter-strategy'",
        ]
    finally:
        pool.give_back(vhost)


def test_show_live_gives_the_value_the_queue_acts_on(
    backend: RabbitBackend, tmp_path: Path
) -> None:
    """``rr topology show --live``: rr's policy says a delivery limit of 2, an operator policy
    1; the effective value shown is 1, and the queue dead-letters after two deliveries."""
    assert declare(backend, tmp_path, 3).exit_code == 0
    limits = Policy.of("limits", "^jobs$", {"delivery-limit": 1})
    asyncio.run(api(backend).put_policy(limits, operator=True))

    async def operator_applies() -> bool:
        state = await api(backend).queue_state("jobs")
        return state is not None and state.operator_policy == "limits"

    asyncio.run(backend.until(operator_applies, "the operator policy applied to jobs"))
    shown = runner.invoke(
        app,
        [
            "topology",
            "show",
            str(tmp_path / "topology.toml"),
            "--live",
            "--url",
            backend.url,
            "--management-url",
            MANAGEMENT_URLS["4.3"],
            "-o",
            "json",
        ],
    )

    assert shown.exit_code == 0, shown.output
    [jobs] = [queue for queue in json.loads(shown.stdout)["live"] if queue["queue"] == "jobs"]
    assert (jobs["policy"], jobs["operator_policy"]) == ("rr.jobs", "limits")
    [limit] = [row for row in jobs["settings"] if row["key"] == "x-delivery-limit"]
    assert limit == {
        "key": "x-delivery-limit",
        "file": 2,
        "argument": None,
        "policy": 2,
        "operator_policy": 1,
        "effective": 1,
        "state": None,
    }
    assert (jobs["type"], jobs["missing"]) == ("quorum", [])
    publish(backend, 1)
    assert deliveries_until_dead(backend) == 2
