"""What the broker suites read back: a queue's depth and messages, and a recording consumer.

Through the transport port only, so the same helpers serve the emulator and RabbitMQ
(tests/backends.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from rabbitctl_retry.transport.base import Channel, Delivery
from tests.backends import Backend, EmulatorBackend, RabbitBackend


async def depth(where: Backend | Channel, queue: str) -> int:
    """Ready messages in ``queue`` (passive declare): on ``where`` when it is a channel, else
    on a new connection of the backend ``where`` (closed after)."""
    if isinstance(where, EmulatorBackend | RabbitBackend):
        connection = await where.connect()
        try:
            return await depth(await connection.channel(), queue)
        finally:
            await connection.close()
    return (await where.queue_declare(queue, passive=True)).message_count


async def peek(backend: Backend, queue: str) -> list[Delivery]:
    """Every message in ``queue``, in order, without removing any (get, then close)."""
    connection = await backend.connect()
    try:
        channel = await connection.channel()
        found = []
        while (delivery := await channel.get(queue)) is not None:
            found.append(delivery)
        await channel.close()
        return found
    finally:
        await connection.close()


Settle = Literal["ack", "requeue", "drop", "hold"]


@dataclass
class Recorder:
    """A consumer callback: records each delivery, then settles it as ``action`` says
    (``hold``: not at all)."""

    channel: Channel
    action: Settle = "hold"
    deliveries: list[Delivery] = field(default_factory=list)

    async def __call__(self, delivery: Delivery) -> None:
        self.deliveries.append(delivery)
        tag = delivery.delivery_tag
        match self.action:
            case "ack":
                await self.channel.ack(tag)
            case "requeue":
                await self.channel.reject(tag, requeue=True)
            case "drop":
                await self.channel.reject(tag, requeue=False)
            case "hold":
                pass

    @property
    def bodies(self) -> list[bytes]:
        return [delivery.body for delivery in self.deliveries]
