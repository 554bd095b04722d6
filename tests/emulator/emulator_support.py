"""Helpers for the emulator tests: a recording consumer and the usual settlements."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from rabbitctl_retry.emulator import EmulatedChannel
from rabbitctl_retry.transport.base import Delivery


@dataclass
class Recorder:
    """A consumer callback that records deliveries and settles each with ``action``."""

    channel: EmulatedChannel
    action: Callable[[EmulatedChannel, Delivery], Awaitable[None]] | None = None
    deliveries: list[Delivery] = field(default_factory=list)

    async def __call__(self, delivery: Delivery) -> None:
        self.deliveries.append(delivery)
        if self.action is not None:
            await self.action(self.channel, delivery)

    @property
    def bodies(self) -> list[bytes]:
        return [d.body for d in self.deliveries]


async def ack(channel: EmulatedChannel, delivery: Delivery) -> None:
    await channel.ack(delivery.delivery_tag)


async def retry(channel: EmulatedChannel, delivery: Delivery) -> None:
    await channel.reject(delivery.delivery_tag, requeue=True)


async def drop(channel: EmulatedChannel, delivery: Delivery) -> None:
    await channel.reject(delivery.delivery_tag, requeue=False)
