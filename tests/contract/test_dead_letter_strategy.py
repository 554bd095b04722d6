"""At-least-once against at-most-once dead-lettering from a quorum queue whose dead-letter
queue is full and refuses publishes (docs/reference/topology.md, ``dead_letter_strategy``).

At-most-once (RabbitMQ's default) drops the dead letter the full queue refuses. At-least-once
(``x-dead-letter-strategy = at-least-once`` with ``x-overflow = reject-publish``) keeps it
in the quorum queue (not counted in its depth, not deliverable) and sends it again after the
dead-letter worker's timeout, until the queue has room. The timeout is shortened to 1 s for
the scenario (a node-wide setting on the real servers, put back afterwards).
"""

from __future__ import annotations

import pytest

from rabbitctl_retry.fields import FieldValue
from tests.backends import NODE_SETTINGS, Backend
from tests.observe import depth

RETRY_S = 1.0


@pytest.mark.xdist_group(NODE_SETTINGS)  # the timeout is node-wide: one test at a time
@pytest.mark.parametrize("strategy", ["at-least-once", "at-most-once"])
async def test_a_full_dead_letter_queue(backend: Backend, strategy: str) -> None:
    backend.set_dead_letter_retry(RETRY_S)
    channel = await backend.channel()
    await channel.queue_declare(
        "dead", durable=True, arguments={"x-max-length": 1, "x-overflow": "reject-publish"}
    )
    arguments: dict[str, FieldValue] = {
        "x-queue-type": "quorum",
        "x-dead-letter-exchange": "",
        "x-dead-letter-routing-key": "dead",
    }
    if strategy == "at-least-once":
        arguments |= {"x-dead-letter-strategy": "at-least-once", "x-overflow": "reject-publish"}
    await channel.queue_declare("work", durable=True, arguments=arguments)
    for body in (b"first", b"second"):
        await channel.publish(body, routing_key="work", mandatory=True)
    for _ in range(2):
        delivery = await channel.get("work")
        assert delivery is not None
        await channel.reject(delivery.delivery_tag, requeue=False)

    async def first_dead() -> bool:
        return await depth(channel, "dead") == 1

    await backend.until(first_dead, "the first dead letter in 'dead'")
    await backend.elapse(0.2)
    assert await depth(channel, "dead") == 1  # full: the second was refused
    assert await depth(channel, "work") == 0  # a kept dead letter is not in the depth
    first = await channel.get("dead", no_ack=True)
    assert first is not None
    assert first.body == b"first"

    await backend.elapse(RETRY_S * 3)
    if strategy == "at-least-once":

        async def second_dead() -> bool:
            return await depth(channel, "dead") == 1

        await backend.until(second_dead, "the kept dead letter sent again")
        second = await channel.get("dead", no_ack=True)
        assert second is not None
        assert second.body == b"second"
    else:
        assert await depth(channel, "dead") == 0  # dropped: nothing comes
    assert await depth(channel, "work") == 0
