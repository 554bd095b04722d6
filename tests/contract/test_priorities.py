"""Message priorities: classic queues with ``x-max-priority`` on every server, and quorum
queues as each release orders them (docs/reference/testing.md, "What the emulator models").

Measured on 3.10.8, 4.0.5 and 4.3.6: a classic priority queue serves the highest priority
first (a priority above ``x-max-priority`` as that one, none as 0), first in first out within
one; a message given back returns to its place; ``drop-head`` drops the message it would
serve next. A quorum queue ignores priorities on 3.10, serves two of priority above 4 for one
of the others on 4.0 (tests/contract/rabbitmq_suite), and on 4.3 serves 32 priorities
strictly (above 31 as 31, none as 4), what was given back first.
"""

from __future__ import annotations

import pytest

from rabbitctl_retry.errors import PreconditionFailed
from rabbitctl_retry.fields import FieldValue
from rabbitctl_retry.transport.base import Channel, Properties
from tests.backends import Backend
from tests.contract.support import bodies, settle
from tests.contract.versions import expected

PUBLISHED: list[tuple[str, int | None]] = [
    ("n1", None),
    ("p4", 4),
    ("n2", None),
    ("p3", 3),
    ("p5", 5),
    ("p0", 0),
    ("p9", 9),
    ("p200", 200),
]
"""Published in this order, each body naming its priority (n: none)."""


async def published(backend: Backend, queue: str, arguments: dict[str, FieldValue]) -> Channel:
    channel = await backend.channel(confirms=True)
    await channel.queue_declare(queue, durable=True, arguments=arguments)
    for body, priority in PUBLISHED:
        await channel.publish(
            body.encode(), routing_key=queue, properties=Properties(priority=priority)
        )
    await settle(backend, channel, queue, len(PUBLISHED))
    return channel


@pytest.mark.parametrize(
    ("max_priority", "order"),
    [
        (1, ["p4", "p3", "p5", "p9", "p200", "n1", "n2", "p0"]),
        (5, ["p5", "p9", "p200", "p4", "p3", "n1", "n2", "p0"]),
        (10, ["p200", "p9", "p5", "p4", "p3", "n1", "n2", "p0"]),
        (255, ["p200", "p9", "p5", "p4", "p3", "n1", "n2", "p0"]),
    ],
    ids=lambda value: str(value) if isinstance(value, int) else None,
)
async def test_a_classic_priority_queue_serves_the_highest_first(
    backend: Backend, max_priority: int, order: list[str]
) -> None:
    channel = await published(backend, "prio", {"x-max-priority": max_priority})
    assert await bodies(channel, "prio") == order


async def test_x_max_priority_0(backend: Backend) -> None:
    channel = await published(backend, "prio", {"x-max-priority": 0})
    if expected(backend.version, "classic-max-priority-0") == "no priorities":
        order = [body for body, _ in PUBLISHED]
    else:
        order = ["p4", "p3", "p5", "p9", "p200", "n1", "n2", "p0"]  # as x-max-priority = 1
    assert await bodies(channel, "prio") == order


async def test_a_classic_priority_queue_puts_what_comes_back_in_its_place(
    backend: Backend,
) -> None:
    channel = await published(backend, "prio", {"x-max-priority": 5})
    taken = [await channel.get("prio") for _ in range(3)]
    assert [d.body for d in taken if d is not None] == [b"p5", b"p9", b"p200"]
    for delivery in reversed(taken):
        assert delivery is not None
        await channel.reject(delivery.delivery_tag, requeue=True)
    await settle(backend, channel, "prio", 8)
    assert await bodies(channel, "prio") == ["p5", "p9", "p200", "p4", "p3", "n1", "n2", "p0"]


async def test_drop_head_drops_what_a_priority_queue_would_serve_next(backend: Backend) -> None:
    channel = await backend.channel(confirms=True)
    await channel.queue_declare("dead")
    await channel.queue_declare(
        "prio",
        arguments={
            "x-max-priority": 5,
            "x-max-length": 2,
            "x-dead-letter-exchange": "",
            "x-dead-letter-routing-key": "dead",
        },
    )
    for body, priority in [("a1", 1), ("b5", 5), ("c3", 3), ("d1", 1), ("e5", 5)]:
        await channel.publish(
            body.encode(), routing_key="prio", properties=Properties(priority=priority)
        )
    await settle(backend, channel, "dead", 3)
    assert await bodies(channel, "prio") == ["a1", "d1"]
    assert await bodies(channel, "dead") == ["b5", "c3", "e5"]


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (256, "{max_value_exceeded,256}"),
        (-1, "{value_negative,-1}"),
        ("x", '"expected integer, got longstr"'),
        (2.5, '"expected integer, got double"'),
    ],
    ids=["256", "negative", "string", "float"],
)
async def test_an_x_max_priority_out_of_range_is_refused(
    backend: Backend, value: FieldValue, reason: str
) -> None:
    channel = await backend.channel()
    with pytest.raises(PreconditionFailed) as refused:
        await channel.queue_declare("prio", arguments={"x-max-priority": value})
    assert str(refused.value).startswith(
        f"declare queue 'prio': PRECONDITION_FAILED - invalid arg 'x-max-priority' for queue "
        f"'prio' in vhost '{backend.vhost}': {reason}"
    )


async def test_a_quorum_queue_orders_priorities_as_its_release_does(backend: Backend) -> None:
    channel = await published(backend, "prio", {"x-queue-type": "quorum"})
    assert await bodies(channel, "prio") == expected(backend.version, "quorum-priorities")


async def test_a_quorum_queue_serves_what_came_back_first(backend: Backend) -> None:
    channel = await published(backend, "prio", {"x-queue-type": "quorum"})
    order = expected(backend.version, "quorum-priorities")
    taken = [await channel.get("prio") for _ in range(3)]
    assert [d.body.decode() for d in taken if d is not None] == order[:3]
    for delivery in reversed(taken):
        assert delivery is not None
        await channel.reject(delivery.delivery_tag, requeue=True)
    await settle(backend, channel, "prio", 8)
    assert await bodies(channel, "prio") == expected(
        backend.version, "quorum-priorities-after-returns"
    )
