"""A stop that comes while the consumer starts again (after the broker took it away) takes no
new consumer: nothing is handled after the stop (docs/reference/runtime.md, "Running it";
runtime/consumer_state.py)."""

from __future__ import annotations

import asyncio

from rabbitctl_retry import Message
from rabbitctl_retry.ops.copies.publisher import CopyPublisher
from rabbitctl_retry.runtime.consumer import QueueConsumer
from rabbitctl_retry.runtime.consumer_state import ConsumerPhase
from rabbitctl_retry.runtime.delays import InMemoryDelays
from rabbitctl_retry.runtime.handlers import Subscriber
from rabbitctl_retry.runtime.service import policy_for
from rabbitctl_retry.transport.base import Properties
from tests.backends import Backend, publish


async def test_a_stop_while_the_consumer_recovers_takes_no_new_consumer(backend: Backend) -> None:
    """The queue is deleted under the consumer: the broker cancels it, and the consumer
    re-declares what it needs (``recover``) before it consumes again. The stop comes while
    it recovers. Before, the consumer consumed all the same once recovered, and handled
    what came after the stop."""
    connection = await backend.connect()
    admin = await backend.channel()
    await admin.queue_declare("work", durable=True)
    recovering = asyncio.Event()
    resume = asyncio.Event()
    recovered = asyncio.Event()

    async def recover() -> None:
        recovering.set()
        await resume.wait()
        channel = await connection.channel()
        await channel.queue_declare("work", durable=True)
        await channel.close()
        recovered.set()

    handled: list[str | None] = []

    async def handler(message: Message) -> None:
        handled.append(message.message_id)

    consumer = QueueConsumer(
        subscriber=Subscriber("work", handler, "test:work"),
        policy=policy_for("work", None),
        connection=connection,
        publisher=CopyPublisher(connection),
        delays=InMemoryDelays(backend.clock),
        clock=backend.clock,
        prefetch=10,
        concurrency=10,
        executor=None,
        recover=recover,
    )
    try:
        await consumer.start()
        await publish(backend, "work", b"1", Properties(message_id="before"))
        await backend.until(lambda: handled == ["before"], "the first message handled")
        await admin.queue_delete("work")  # the broker cancels the consumer
        await backend.until(recovering.is_set, "the consumer recovering")
        await consumer.stop_consuming()
        resume.set()
        await backend.until(recovered.is_set, "the queue declared again")
        await backend.until(lambda: not consumer.watching, "the watcher done")
        assert consumer.phase is ConsumerPhase.STOPPING
        assert (await admin.queue_declare("work", passive=True)).consumer_count == 0
        await publish(backend, "work", b"2", Properties(message_id="after"))
        await backend.until(
            lambda: _ready(backend, "work", 1), "the message after the stop waiting"
        )
        assert handled == ["before"]
    finally:
        await consumer.close()
        await connection.close()
    assert handled == ["before"]
    assert consumer.phase is ConsumerPhase.CLOSED


async def _ready(backend: Backend, queue: str, count: int) -> bool:
    channel = await backend.channel()
    return (await channel.queue_declare(queue, passive=True)).message_count == count
