"""The delayed-message exchange (``x-delayed-message``, the ``x-delay`` header).

Runs on RabbitMQ only where the plugin is enabled (``rabbitmq-plugins list -e -m``).
"""

from __future__ import annotations

import pytest

from rabbitctl_retry.transport.base import Properties
from tests.backends import Backend, RabbitBackend, delayed_plugin_enabled
from tests.contract.support import drain, view
from tests.observe import depth


async def test_delayed_message_exchange(backend: Backend) -> None:
    if isinstance(backend, RabbitBackend) and not delayed_plugin_enabled(backend.broker):
        pytest.skip("the delayed-message plugin is not installed on this server")
    channel = await backend.channel()
    await channel.exchange_declare(
        "later", type="x-delayed-message", arguments={"x-delayed-type": "direct"}
    )
    await channel.queue_declare("q")
    await channel.queue_bind("q", "later", "k")
    for body, delay in (("slow", 1000), ("fast", 200)):
        await channel.publish(
            body.encode(),
            exchange="later",
            routing_key="k",
            properties=Properties(headers={"x-delay": delay}),
        )
    await channel.publish(b"now", exchange="later", routing_key="k")
    assert [d.body for d in await drain(channel, "q")] == [b"now"]
    await backend.elapse(0.6)

    async def one() -> bool:
        return await depth(channel, "q") == 1

    await backend.until(one, "the 200 ms message in 'q'")
    await backend.elapse(0.6)

    async def two() -> bool:
        return await depth(channel, "q") == 2

    await backend.until(two, "the 1000 ms message in 'q'")
    assert [view(d) for d in await drain(channel, "q")] == [
        {
            "body": body,
            "exchange": "later",
            "routing_key": "k",
            "redelivered": False,
            "headers": {"x-delay": -delay},  # the plugin negates the delay once it is served
            "expiration": None,
        }
        for body, delay in (("fast", 200), ("slow", 1000))
    ]
