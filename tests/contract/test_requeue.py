"""Requeues: where a message goes back, and in which order, on classic and quorum queues.

Measured on RabbitMQ 3.10.8: a classic queue puts a requeued message back in its old place.
A quorum queue appends a message rejected with requeue, but serves the messages a closing
channel held first, ahead of those never delivered.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from rabbitctl_retry.transport.base import Delivery, FieldValue
from tests.contract.backends import Backend
from tests.contract.support import Recorder, delivery_count, depth, drain

QUEUE_ARGUMENTS: dict[str, dict[str, FieldValue]] = {
    "classic": {},
    "quorum": {"x-queue-type": "quorum"},
}

Seen = list[tuple[str, bool, FieldValue]]
"""(body, redelivered, x-delivery-count or "absent") of each delivery."""

ABSENT = "absent"
"""No ``x-delivery-count`` header."""


def seen(deliveries: Sequence[Delivery | None]) -> Seen:
    out: Seen = []
    for delivery in deliveries:
        assert delivery is not None
        out.append((delivery.body.decode(), delivery.redelivered, delivery_count(delivery)))
    return out


async def four_messages(backend: Backend, kind: str) -> None:
    channel = await backend.channel()
    await channel.queue_declare("q", arguments=QUEUE_ARGUMENTS[kind])
    for body in ("m1", "m2", "m3", "m4"):
        await channel.publish(body.encode(), routing_key="q")


async def ready_again(backend: Backend, count: int) -> Seen:
    """Wait until 'q' holds ``count`` ready messages; take them all, head first."""
    channel = await backend.channel()

    async def back() -> bool:
        return await depth(channel, "q") == count

    await backend.until(back, f"{count} messages ready in 'q'")
    return seen(await drain(channel, "q"))


# m1..m4; a consumer with prefetch 2 holds m1, m2; its channel closes
AFTER_CONSUMER_CLOSE: dict[str, Seen] = {
    "classic": [
        ("m1", True, ABSENT),
        ("m2", True, ABSENT),
        ("m3", False, ABSENT),
        ("m4", False, ABSENT),
    ],
    # returned first, and counted; basic.get shows 0 on a message never returned (3.x)
    "quorum": [("m1", True, 1), ("m2", True, 1), ("m3", False, 0), ("m4", False, 0)],
}


@pytest.mark.parametrize("kind", ["classic", "quorum"])
async def test_a_closing_channel_requeues_its_consumers_deliveries(
    backend: Backend, kind: str
) -> None:
    await four_messages(backend, kind)
    consuming = await backend.channel(confirms=False)
    await consuming.qos(2)
    recorder = Recorder(consuming, "hold")
    await consuming.consume("q", recorder)

    async def holding_two() -> bool:
        return len(recorder.deliveries) == 2

    await backend.until(holding_two, "two deliveries held")
    assert seen(recorder.deliveries) == [("m1", False, ABSENT), ("m2", False, ABSENT)]
    await consuming.close()
    assert await ready_again(backend, 4) == AFTER_CONSUMER_CLOSE[kind]
    assert len(recorder.deliveries) == 2


# m1..m4; basic.get takes m1, m2, m3, acks m2; the channel closes
GOT: dict[str, Seen] = {
    "classic": [("m1", False, ABSENT), ("m2", False, ABSENT), ("m3", False, ABSENT)],
    "quorum": [("m1", False, 0), ("m2", False, 0), ("m3", False, 0)],
}
AFTER_GET_CLOSE: dict[str, Seen] = {
    "classic": [("m1", True, ABSENT), ("m3", True, ABSENT), ("m4", False, ABSENT)],
    "quorum": [("m1", True, 1), ("m3", True, 1), ("m4", False, 0)],
}


@pytest.mark.parametrize("kind", ["classic", "quorum"])
async def test_order_after_basic_get_and_channel_close(backend: Backend, kind: str) -> None:
    await four_messages(backend, kind)
    getting = await backend.channel(confirms=False)
    got = [await getting.get("q") for _ in range(3)]
    assert seen(got) == GOT[kind]
    assert got[1] is not None
    await getting.ack(got[1].delivery_tag)
    await getting.close()
    assert await ready_again(backend, 3) == AFTER_GET_CLOSE[kind]


# m1..m4; a consumer with prefetch 1 rejects m1 with requeue twice, acks everything else
AFTER_REJECTS: dict[str, Seen] = {
    "classic": [
        ("m1", False, ABSENT),
        ("m1", True, ABSENT),
        ("m1", True, ABSENT),
        ("m2", False, ABSENT),
        ("m3", False, ABSENT),
        ("m4", False, ABSENT),
    ],
    "quorum": [
        ("m1", False, ABSENT),
        ("m2", False, ABSENT),
        ("m3", False, ABSENT),
        ("m4", False, ABSENT),
        ("m1", True, 1),
        ("m1", True, 2),
    ],
}


@pytest.mark.parametrize("kind", ["classic", "quorum"])
async def test_reject_with_requeue(backend: Backend, kind: str) -> None:
    await four_messages(backend, kind)
    consuming = await backend.channel(confirms=False)
    await consuming.qos(1)
    deliveries: list[Delivery] = []

    async def reject_m1_twice(delivery: Delivery) -> None:
        deliveries.append(delivery)
        rejected = sum(d.body == b"m1" for d in deliveries) <= 2
        if delivery.body == b"m1" and rejected:
            await consuming.reject(delivery.delivery_tag, requeue=True)
        else:
            await consuming.ack(delivery.delivery_tag)

    await consuming.consume("q", reject_m1_twice)

    async def all_done() -> bool:
        return len(deliveries) == 6

    await backend.until(all_done, "six deliveries")
    assert seen(deliveries) == AFTER_REJECTS[kind]
    assert await ready_again(backend, 0) == []


# m1..m5; basic.get takes m1, m2, m3; m2 is rejected with requeue; one more get; close
GOT_AFTER_REJECT: dict[str, Seen] = {
    "classic": [("m2", True, ABSENT)],  # back in its place, at the head
    "quorum": [("m4", False, 0)],  # at the back
}
AFTER_REJECT_AND_CLOSE: dict[str, Seen] = {
    "classic": [
        ("m1", True, ABSENT),
        ("m2", True, ABSENT),
        ("m3", True, ABSENT),
        ("m4", False, ABSENT),
        ("m5", False, ABSENT),
    ],
    # what the closing channel held comes first, in delivery order; then the rest, the
    # rejected m2 last
    "quorum": [
        ("m1", True, 1),
        ("m3", True, 1),
        ("m4", True, 1),
        ("m5", False, 0),
        ("m2", True, 1),
    ],
}


@pytest.mark.parametrize("kind", ["classic", "quorum"])
async def test_requeued_by_reject_and_by_closing_together(backend: Backend, kind: str) -> None:
    channel = await backend.channel()
    await channel.queue_declare("q", arguments=QUEUE_ARGUMENTS[kind])
    for body in ("m1", "m2", "m3", "m4", "m5"):
        await channel.publish(body.encode(), routing_key="q")
    getting = await backend.channel(confirms=False)
    got = [await getting.get("q") for _ in range(3)]
    assert got[1] is not None
    await getting.reject(got[1].delivery_tag, requeue=True)
    assert seen([await getting.get("q")]) == GOT_AFTER_REJECT[kind]
    await getting.close()
    assert await ready_again(backend, 5) == AFTER_REJECT_AND_CLOSE[kind]
