"""``rr doctor --topology`` checks the live queues against the file, as ``rr declare`` does
and in its words (docs/reference/cli.md, "rr doctor"), and names the consumers that are not rr
("Consumers that are not rr"), on every server, with real clients (pika, kombu).

The issue's report: five queues of the file declared first by other clients with other
arguments, ``rr run`` refusing to start, ``rr declare`` listing every difference, and ``rr
doctor`` saying "safe on this server" (exit 0).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner, Result

from rabbitctl_retry.cli import app
from rabbitctl_retry.transport.base import Properties
from rabbitctl_retry.transport.management_http import HttpManagementApi
from tests.backends import RabbitBackend, own_vhost, publish
from tests.broker.test_doctor_deprecated_on_servers import MANAGEMENT_URLS
from tests.contract.versions import expected
from tests.interop.foreign import kombu_consumer, kombu_declare, pika_consumer, pika_declare
from tests.observe import depth
from tests.shared_node import current

runner = CliRunner()

FIVE = """
[queues.orders]
type = "quorum"
max_attempts = 5
dead_letter = "orders.dead"

[exchanges."emails.dropped"]
type = "fanout"

[queues.emails]
max_attempts = 3
dead_letter = "emails.dead"
dead_letter_exchange = "emails.dropped"

[queues.reports]
arguments = { x-max-length = 1000 }

[queues.payments]
type = "quorum"
max_attempts = 4
dead_letter = "payments.dead"

[queues.audit]
"""


def rr(rabbit: RabbitBackend, *args: str) -> Result:
    result = runner.invoke(app, [*args, "--url", rabbit.url], env={"COLUMNS": "400"})
    assert "Traceback" not in result.output
    return result


def json_of(result: Result) -> dict[str, Any]:
    assert result.exit_code in (0, 1), result.output
    parsed: dict[str, Any] = json.loads(result.stdout)
    return parsed


def management() -> list[str]:
    url = MANAGEMENT_URLS.get(current().version)
    return [] if url is None else ["--management-url", url]


def test_queues_other_clients_declared_first_make_doctor_unsafe(
    amqp_url: str, tmp_path: Path
) -> None:
    topology = tmp_path / "topology.toml"
    topology.write_text(FIVE)
    with own_vhost(amqp_url) as rabbit:
        # as FastStream, Celery, kombu and pika services declare them, before rr
        pika_declare(rabbit.url, "orders", {"x-queue-type": "quorum"})  # no limit, no route
        kombu_declare(rabbit.url, "emails")  # without the route for what is rejected
        pika_declare(rabbit.url, "reports", {"x-max-length": 500})
        kombu_declare(rabbit.url, "payments")  # a classic queue
        pika_declare(rabbit.url, "audit", {"x-message-ttl": 60000})

        declare = rr(rabbit, "declare", str(topology), "--dry-run", "-o", "json")
        assert declare.exit_code == 1
        details = {
            op["name"]: op["detail"]
            for op in json_of(declare)["operations"]
            if op["status"] == "conflict"
        }
        assert set(details) == {"orders", "emails", "reports", "payments", "audit"}

        doctor = rr(rabbit, "doctor", "-t", str(topology), "-o", "json")
        assert doctor.exit_code == 1
        report = json_of(doctor)
        assert report["safe"] is False
        said = {f["queue"]: f for f in report["findings"] if f["code"] == "declare-conflict"}
        assert set(said) == set(details)
        for name, finding in said.items():
            assert finding["level"] == "unsafe"
            assert finding["message"].startswith(f"queue {name!r}: {details[name]}.")
        # every difference, the type, the missing limit and route
        kind = expected(current().version, "classic-queue-type-argument")  # 3.10: none
        broker_side = "(none)" if kind is None else repr(kind)
        assert f"x-queue-type: file 'quorum', broker {broker_side}" in said["payments"]["message"]
        assert "x-delivery-limit: file 4, broker (none)" in said["orders"]["message"]
        assert (
            "x-dead-letter-exchange: file 'emails.dropped', broker (none)"
            in said["emails"]["message"]
        )
        assert "x-max-length: file 1000, broker 500" in said["reports"]["message"]
        assert "x-message-ttl: file (none), broker 60000" in said["audit"]["message"]
        table = rr(rabbit, "doctor", "-t", str(topology))
        assert table.stdout.rstrip().endswith("unsafe on this server")


def test_doctor_names_the_consumers_that_are_not_rr(amqp_url: str, tmp_path: Path) -> None:
    """pika and kombu consuming an rr classic queue with max_attempts: named, with what
    becomes of what they reject and requeue and the setting that keeps it; the management
    API is needed to see who consumes (4.0.5 and 4.3.6 here; the shared 3.10.8 has none:
    doctor says it did not check)."""
    topology = tmp_path / "topology.toml"
    topology.write_text('[queues.work]\nmax_attempts = 3\ndead_letter = "work.dead"\n')
    with own_vhost(amqp_url) as rabbit:
        assert rr(rabbit, "declare", str(topology)).exit_code == 0
        with (
            pika_consumer(rabbit.url, "work", "ack", connection_name="svc-a"),
            kombu_consumer(rabbit.url, "work", "ack", connection_name="svc-b"),
        ):

            async def both_consume() -> bool:
                return await _consumers(rabbit, "work") == 2

            asyncio.run(rabbit.until(both_consume, "pika and kombu consuming work"))
            asyncio.run(listed_by_the_api(rabbit, "work", 2))
            doctor = rr(rabbit, "doctor", "-t", str(topology), "-o", "json", *management())
            status = rr(rabbit, "status", "-t", str(topology), "-o", "json", *management())
        assert doctor.exit_code == 0, doctor.output  # a warning: it holds if they behave
        findings = {f["code"]: f for f in json_of(doctor)["findings"]}
        if not management():
            unchecked = findings["foreign-consumers-not-checked"]
            assert unchecked["level"] == "info"
            assert "give --management-url" in unchecked["message"]
            assert json_of(status)["queues"][1]["consumers_not_rr"] is None
            return
        dropped = findings["foreign-consumer-rejects-dropped"]
        assert (dropped["level"], dropped["queue"]) == ("warning", "work")
        message = dropped["message"]
        assert "has 2 consumers that are not rr run: " in message
        assert "Pika Python Client Library " in message
        assert "'svc-a'" in message
        assert "py-amqp " in message
        assert "'svc-b'" in message
        assert "is dropped (the queue has no dead-letter route" in message
        assert "comes back without a cap" in message
        assert 'rejected = "work.rejected" in [queues.work]' in message
        notes = json_of(status)["consumer_notes"]
        assert [(n["queue"], n["code"], n["message"]) for n in notes] == [
            ("work", "foreign-consumer-rejects-dropped", message)
        ]


async def listed_by_the_api(rabbit: RabbitBackend, queue: str, count: int) -> None:
    """Wait until the management API lists ``count`` consumers of ``queue``, each with its
    connection (it states what its statistics last sampled: a new consumer shows within
    seconds, and for a moment without its channel); at once without an API."""
    url = MANAGEMENT_URLS.get(current().version)
    if url is None:
        return
    api = HttpManagementApi(url, vhost=rabbit.vhost)

    async def listed() -> bool:
        found = [c for c in await api.consumers() if c.queue == queue]
        return len(found) == count and all(c.connection is not None for c in found)

    await rabbit.until(listed, f"the management API listing {count} consumers of {queue}")


async def _consumers(rabbit: RabbitBackend, queue: str) -> int:
    connection = await rabbit.connect()
    try:
        channel = await connection.channel()
        return (await channel.queue_declare(queue, passive=True)).consumer_count
    finally:
        await connection.close()


def test_a_nack_is_counted_before_4_3_and_never_from_it(amqp_url: str, tmp_path: Path) -> None:
    """The measurement behind quorum-foreign-consumer-nack (docs/reference/cli.md, "Consumers that
    are not rr"): pika's basic_nack(requeue=True) of one message of a quorum queue with
    x-delivery-limit = 2. 3.10.8 and 4.0.5 count it: the message is dead-lettered after its
    3rd delivery. 4.3.6 does not: it comes back past the limit (20 deliveries are waited for,
    then the consumer stops), and is never dead-lettered; doctor names the consumer on 4.3."""
    topology = tmp_path / "topology.toml"
    topology.write_text(
        '[queues.jobs]\ntype = "quorum"\nmax_attempts = 3\ndead_letter = "jobs.dead"\n'
    )
    counted = (current().major, current().minor) < (4, 3)
    with own_vhost(amqp_url) as rabbit:
        assert rr(rabbit, "declare", str(topology)).exit_code == 0
        with pika_consumer(rabbit.url, "jobs", "nack-requeue") as seen:

            async def scenario() -> None:
                await publish(rabbit, "jobs", b"j", Properties(message_id="j-1"))
                if counted:

                    async def dead_lettered() -> bool:
                        return await depth(rabbit, "jobs.dead") == 1

                    await rabbit.until(dead_lettered, "j-1 dead-lettered after its limit")
                    assert seen.counts() == {"j-1": 3}
                    return

                async def looping() -> bool:
                    return seen.counts()["j-1"] >= 20

                await rabbit.until(looping, "j-1 delivered 20 times")
                assert await depth(rabbit, "jobs.dead") == 0

            asyncio.run(scenario())
            if counted or not management():
                return
            asyncio.run(listed_by_the_api(rabbit, "jobs", 1))
            doctor = rr(rabbit, "doctor", "-t", str(topology), "-o", "json", *management())
        [nack] = [
            f for f in json_of(doctor)["findings"] if f["code"] == "quorum-foreign-consumer-nack"
        ]
        assert nack["queue"] == "jobs"
        assert "Pika Python Client Library" in nack["message"]
        assert "cannot tell which they send" in nack["message"]
