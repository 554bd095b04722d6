"""Consumers of the contract suite's queue ``q``, each on a connection of its own, holding
what they got: the single active consumer and consumer priority scenarios
(tests/contract/test_single_active_consumer.py, test_consumer_priority.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rabbitctl_retry.transport.base import Channel, Connection, Delivery
from tests.contract.support import delivery_count
from tests.observe import Recorder

if TYPE_CHECKING:
    from tests.backends import Backend


class Taker:
    """One consumer of 'q' on a connection of its own, holding what it gets."""

    def __init__(self, connection: Connection, channel: Channel) -> None:
        self.connection = connection
        self.channel = channel
        self.recorder = Recorder(channel)
        self.tag = ""

    @classmethod
    async def start(
        cls,
        backend: Backend,
        *,
        prefetch: int = 10,
        priority: int | None = None,
        exclusive: bool = False,
    ) -> Taker:
        connection = await backend.connect()
        taker = cls(connection, await connection.channel())
        await taker.channel.qos(prefetch)
        consumer_arguments = None if priority is None else {"x-priority": priority}
        taker.tag = await taker.channel.consume(
            "q", taker.recorder, exclusive=exclusive, arguments=consumer_arguments
        )
        return taker

    @property
    def got(self) -> list[str]:
        """What it was given: ``m1``, ``m1*`` when redelivered, ``/N`` for an
        x-delivery-count."""
        return [_shown(delivery) for delivery in self.recorder.deliveries]

    async def ack_all(self) -> None:
        for delivery in self.recorder.deliveries:
            await self.channel.ack(delivery.delivery_tag)

    async def ack_first(self) -> None:
        await self.channel.ack(self.recorder.deliveries[0].delivery_tag)

    def has(self, count: int) -> bool:
        return len(self.recorder.deliveries) == count


def _shown(delivery: Delivery) -> str:
    text = delivery.body.decode() + ("*" if delivery.redelivered else "")
    count = delivery_count(delivery)
    return text if count == "absent" else f"{text}/{count}"


async def publish(channel: Channel, *bodies: str) -> None:
    """Publish ``bodies`` to ``q``, in order."""
    for body in bodies:
        await channel.publish(body.encode(), routing_key="q")
