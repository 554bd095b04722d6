"""Quorum queues: ``x-delivery-limit``, ``x-delivery-count``, dead-lettering ``delivery_limit``."""

from __future__ import annotations

import pytest

from rabbitctl_retry.transport.base import Properties
from tests.contract.backends import Backend
from tests.contract.support import Recorder, death, delivery_count, depth, drain, first_death, view


async def always_requeued(backend: Backend, queue: str, dead: str, limit: int) -> Recorder:
    """Declare quorum ``queue`` (limit, DLX "" -> ``dead``), publish one message to it, and
    reject it with requeue from a consumer until the server dead-letters it."""
    channel = await backend.channel()
    await channel.queue_declare(dead)
    await channel.queue_declare(
        queue,
        arguments={
            "x-queue-type": "quorum",
            "x-delivery-limit": limit,
            "x-dead-letter-exchange": "",
            "x-dead-letter-routing-key": dead,
        },
    )
    consuming = await backend.channel(confirms=False)
    await consuming.qos(1)
    recorder = Recorder(consuming, "requeue")
    await consuming.consume(queue, recorder)
    await channel.publish(
        b"p", routing_key=queue, properties=Properties(message_id="m-1", headers={"k": "v"})
    )

    async def dead_lettered() -> bool:
        return await depth(channel, dead) == 1

    await backend.until(dead_lettered, f"the message in {dead!r}")
    assert [view(d) for d in await drain(channel, dead)] == [
        {
            "body": "p",
            "exchange": "",
            "routing_key": dead,
            "redelivered": False,
            "headers": {
                "k": "v",
                "x-death": [death("delivery_limit", queue, exchange="", routing_keys=[queue])],
                **first_death("delivery_limit", queue, ""),
            },
            "expiration": None,
        }
    ]
    assert await depth(channel, queue) == 0
    return recorder


@pytest.mark.parametrize("limit", [0, 4])
async def test_delivery_limit(backend: Backend, limit: int) -> None:
    recorder = await always_requeued(backend, "jobs", "jobs.dead", limit)
    assert len(recorder.deliveries) == limit + 1
    assert [delivery_count(d) for d in recorder.deliveries] == ["absent", *range(1, limit + 1)]
    assert [d.redelivered for d in recorder.deliveries] == [False] + [True] * limit
    assert {d.properties.message_id for d in recorder.deliveries} == {"m-1"}


async def test_the_guides_payouts_topology(backend: Backend) -> None:
    """docs/topology.md: payouts (quorum, x-delivery-limit 4, DLX "" -> payouts.dead)."""
    recorder = await always_requeued(backend, "payouts", "payouts.dead", 4)
    assert recorder.bodies == ["p"] * 5
    assert [delivery_count(d) for d in recorder.deliveries] == ["absent", 1, 2, 3, 4]
