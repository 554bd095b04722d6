"""What consumers other than ``rr run`` reject on an rr classic queue (docs/reference/topology.md,
"rejected"; docs/how-to/other-clients.md), with real clients (pika, kombu, FastStream, Node's
amqplib) on every server.

rr counts a classic queue's attempts itself and dead-letters by copy, so the queue has no
dead-letter route of its own: what another consumer rejects (or nacks) without requeue is
dropped. ``rejected = "QUEUE"`` gives the queue one, to a queue of the file's choice, and
``dead_letter_exchange = ""`` with ``x-dead-letter-routing-key`` does the same by hand. Every
message id is counted where it ends.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from contextlib import AbstractContextManager
from pathlib import Path

from faststream.rabbit import RabbitBroker, RabbitMessage, RabbitQueue
from typer.testing import CliRunner

from rabbitctl_retry import Message, Outcome
from rabbitctl_retry.cli import app
from rabbitctl_retry.retry.outcome import AnyOutcome
from rabbitctl_retry.transport.base import Delivery, Properties
from tests.backends import RabbitBackend, own_vhost, publish, running_work
from tests.dlq.support import rr
from tests.interop.conftest import amqplib
from tests.interop.foreign import Seen, Settle, kombu_consumer, pika_consumer
from tests.observe import depth, peek

runner = CliRunner()

KEPT = """
[queues.work]
max_attempts = 2
dead_letter = "work.dead"
rejected = "work.rejected"
delay = "dlx-ttl"
"""

BY_HAND = """
[queues.work]
dead_letter_exchange = ""
arguments = { x-dead-letter-routing-key = "work.kept" }

[queues."work.kept"]
"""

PLAIN = """
[queues.work]
max_attempts = 2
dead_letter = "work.dead"
"""


def declared(rabbit: RabbitBackend, tmp_path: Path, topology: str) -> None:
    path = tmp_path / "topology.toml"
    path.write_text(topology)
    result = runner.invoke(app, ["declare", str(path), "--url", rabbit.url])
    assert result.exit_code == 0, result.output


def ids(prefix: str, count: int) -> list[str]:
    return [f"{prefix}-{number}" for number in range(count)]


async def publish_all(rabbit: RabbitBackend, message_ids: list[str]) -> None:
    for message_id in message_ids:
        await publish(rabbit, "work", message_id.encode(), Properties(message_id=message_id))


async def settled_by(
    rabbit: RabbitBackend,
    consumer: AbstractContextManager[Seen],
    message_ids: list[str],
) -> Counter[str]:
    """Publish ``message_ids`` to ``work`` while ``consumer`` consumes it; wait until it was
    delivered each of them and ``work`` is empty; what it was delivered."""
    with consumer as seen:
        await publish_all(rabbit, message_ids)

        async def all_taken() -> bool:
            return set(seen.counts()) >= set(message_ids) and await depth(rabbit, "work") == 0

        await rabbit.until(all_taken, f"the consumer settled {len(message_ids)} messages")
        return seen.counts()


def by_id(deliveries: list[Delivery]) -> Counter[str]:
    return Counter(delivery.properties.message_id or "" for delivery in deliveries)


def death(delivery: Delivery) -> tuple[object, object]:
    """The reason and queue of a delivery's newest ``x-death`` entry."""
    (entry, *_) = (delivery.properties.headers or {})["x-death"]  # type: ignore[misc]
    assert isinstance(entry, dict)
    return entry["reason"], entry["queue"]


def foreign(rabbit: RabbitBackend, settle: Settle, client: str) -> AbstractContextManager[Seen]:
    if client == "kombu":
        return kombu_consumer(rabbit.url, "work", settle)
    return pika_consumer(rabbit.url, "work", settle)


def test_what_anyone_rejects_is_kept_in_rejected(amqp_url: str, tmp_path: Path) -> None:
    """pika's reject and nack, kombu's reject and rr's own drop() all end in work.rejected
    (x-death reason rejected), each message once; what rr run spends (max_attempts) it still
    copies to work.dead, which the server's route does not touch."""
    with own_vhost(amqp_url) as rabbit:
        declared(rabbit, tmp_path, KEPT)
        batches: dict[tuple[str, Settle], list[str]] = {
            ("pika", "reject"): ids("pika-reject", 10),
            ("pika", "nack"): ids("pika-nack", 10),
            ("kombu", "reject"): ids("kombu-reject", 10),
        }

        async def scenario() -> None:
            for (client, settle), message_ids in batches.items():
                seen = await settled_by(rabbit, foreign(rabbit, settle, client), message_ids)
                assert seen == Counter(message_ids)  # each delivered once: none came back
            dropped, spent = ids("rr-drop", 5), ids("rr-spent", 5)

            async def handle(msg: Message) -> AnyOutcome:
                if (msg.properties.message_id or "").startswith("rr-drop"):
                    return Outcome.drop()
                return Outcome.retry()

            async with running_work(rabbit, KEPT, handle):
                await publish_all(rabbit, [*dropped, *spent])

                async def all_placed() -> bool:
                    return (
                        await depth(rabbit, "work.rejected") == 35
                        and await depth(rabbit, "work.dead") == 5
                    )

                await rabbit.until(all_placed, "35 messages in work.rejected, 5 in work.dead")
            kept = await peek(rabbit, "work.rejected")
            every = [message_id for batch in batches.values() for message_id in batch]
            assert by_id(kept) == Counter([*every, *dropped])
            assert {death(delivery) for delivery in kept} == {("rejected", "work")}
            dead = await peek(rabbit, "work.dead")
            assert by_id(dead) == Counter(spent)
            # rr's copies: its retry header, no x-death (the server's route took none)
            assert all("x-death" not in (d.properties.headers or {}) for d in dead)
            assert await depth(rabbit, "work") == 0

        asyncio.run(scenario())


def test_the_default_exchange_with_a_routing_key_keeps_them_too(
    amqp_url: str, tmp_path: Path
) -> None:
    with own_vhost(amqp_url) as rabbit:
        declared(rabbit, tmp_path, BY_HAND)
        message_ids = ids("pika-reject", 5)

        async def scenario() -> None:
            seen = await settled_by(rabbit, foreign(rabbit, "reject", "pika"), message_ids)
            assert seen == Counter(message_ids)
            kept = await peek(rabbit, "work.kept")
            assert by_id(kept) == Counter(message_ids)
            assert {death(delivery) for delivery in kept} == {("rejected", "work")}

        asyncio.run(scenario())


def test_without_a_route_what_another_consumer_rejects_is_lost(
    amqp_url: str, tmp_path: Path
) -> None:
    """The measurement behind docs/reference/topology.md, "What other consumers reject": an rr
    classic queue as rr declares it without ``rejected`` drops what pika rejects; nothing keeps
    it."""
    with own_vhost(amqp_url) as rabbit:
        declared(rabbit, tmp_path, PLAIN)
        message_ids = ids("pika-reject", 5)

        async def scenario() -> None:
            seen = await settled_by(rabbit, foreign(rabbit, "reject", "pika"), message_ids)
            assert seen == Counter(message_ids)
            assert (await depth(rabbit, "work"), await depth(rabbit, "work.dead")) == (0, 0)

        asyncio.run(scenario())


async def test_faststream_and_amqplib_rejects_are_kept(
    rabbit: RabbitBackend, tmp_path: Path
) -> None:
    """FastStream's default (REJECT_ON_ERROR: a handler that raises rejects without requeue)
    and amqplib's reject, on a queue with ``rejected``: every message in work.rejected."""
    topology = tmp_path / "kept.toml"
    topology.write_text(KEPT)
    declared_now = await rr(rabbit, "declare", str(topology))
    assert declared_now.exit_code == 0, declared_now.output
    failing = ids("faststream", 5)
    await publish_all(rabbit, failing)
    broker = RabbitBroker(rabbit.url, logger=None)
    handled: list[str | None] = []

    @broker.subscriber(RabbitQueue("work", declare=False))
    async def handle(body: bytes, message: RabbitMessage) -> None:
        handled.append(message.message_id)
        raise ValueError("declined")

    await broker.start()
    try:
        await rabbit.until(lambda: _holds(rabbit, "work.rejected", 5), "FastStream's rejects")
    finally:
        await broker.stop()
    assert sorted(handled, key=str) == failing  # each handled once: none came back
    rejected = ids("amqplib", 5)
    await publish_all(rabbit, rejected)
    taken = await amqplib(rabbit.url, "take", "work", "5", "reject")
    assert [message["id"] for message in taken["taken"]] == rejected
    await rabbit.until(lambda: _holds(rabbit, "work.rejected", 10), "amqplib's rejects")
    assert by_id(await peek(rabbit, "work.rejected")) == Counter([*failing, *rejected])
    assert await depth(rabbit, "work") == 0


async def _holds(rabbit: RabbitBackend, queue: str, count: int) -> bool:
    return await depth(rabbit, queue) == count
