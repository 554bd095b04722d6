"""Quorum queues: ``x-delivery-limit``, ``x-delivery-count``, dead-lettering ``delivery_limit``.

Measured on RabbitMQ 3.10.8 and 4.0.5: a message rejected with requeue is dead-lettered at its
return number ``limit + 1``; the first delivery has no ``x-delivery-count``, the n-th return
shows n. What differs by version (the default limit, a negative limit, x-last-death-*) is in
tests/contract/versions.py.
"""

from __future__ import annotations

import pytest

from rabbitctl_retry.fields import FieldValue
from rabbitctl_retry.transport.base import Delivery, Properties
from tests.backends import Backend
from tests.contract.support import death, delivery_count, drain, first_death, view
from tests.contract.versions import dead_letter_redelivered, expected, last_death
from tests.observe import Recorder, depth


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
    # its limit + 1 rejections travel with the dead letter on 4.3 (versions.py
    # "dead-letter-carried-count"): the classic ``dead`` hands it out redelivered
    carried = limit + 1
    if expected(backend.version, "dead-letter-carried-count") != "basic.reject in any queue":
        carried = 0
    assert [view(d) for d in await drain(channel, dead)] == [
        {
            "body": "p",
            "exchange": "",
            "routing_key": dead,
            "redelivered": dead_letter_redelivered(backend.version, carried, quorum=False),
            "headers": {
                "k": "v",
                "x-death": [death("delivery_limit", queue, exchange="", routing_keys=[queue])],
                **first_death("delivery_limit", queue, ""),
                **last_death(backend.version, "delivery_limit", queue, ""),
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
    """docs/reference/topology.md: payouts (quorum, x-delivery-limit 4, DLX "" -> payouts.dead)."""
    recorder = await always_requeued(backend, "payouts", "payouts.dead", 4)
    assert recorder.bodies == [b"p"] * 5
    assert [delivery_count(d) for d in recorder.deliveries] == ["absent", 1, 2, 3, 4]


CAP = 25
"""How many times :func:`requeued_up_to_cap` delivers before it acks instead."""

NO_LIMIT = object()
"""Declare the queue without ``x-delivery-limit``."""


async def requeued_up_to_cap(backend: Backend, limit: object) -> tuple[list[FieldValue], int]:
    """Declare quorum 'q' (``limit``, DLX "" -> 'q.dead'), publish one message, reject it with
    requeue until it is dead-lettered or delivered :data:`CAP` times (then ack it): the
    x-delivery-count of each delivery and how many messages 'q.dead' holds."""
    channel = await backend.channel()
    await channel.queue_declare("q.dead")
    arguments: dict[str, FieldValue] = {
        "x-queue-type": "quorum",
        "x-dead-letter-exchange": "",
        "x-dead-letter-routing-key": "q.dead",
    }
    if limit is not NO_LIMIT:
        assert isinstance(limit, int | float | str)
        arguments["x-delivery-limit"] = limit
    await channel.queue_declare("q", arguments=arguments)
    consuming = await backend.channel(confirms=False)
    await consuming.qos(1)
    counts: list[FieldValue] = []
    acked = False

    async def requeue_until_cap(delivery: Delivery) -> None:
        nonlocal acked
        counts.append(delivery_count(delivery))
        if len(counts) < CAP:
            await consuming.reject(delivery.delivery_tag, requeue=True)
        else:
            await consuming.ack(delivery.delivery_tag)
            acked = True

    await consuming.consume("q", requeue_until_cap)
    await channel.publish(b"p", routing_key="q")

    async def settled() -> bool:
        return acked or await depth(channel, "q.dead") == 1

    await backend.until(settled, "the message dead-lettered or acked")
    await consuming.close()
    assert await depth(channel, "q") == 0
    return counts, await depth(channel, "q.dead")


def deliveries_until(limit: float | None) -> tuple[list[FieldValue], int]:
    """What :func:`requeued_up_to_cap` sees when the server's limit is ``limit`` (None: none)."""
    if limit is None:
        return ["absent", *range(1, CAP)], 0
    returns = int(limit) + 1  # dead-lettered at the first return above the limit
    return ["absent", *range(1, returns)], 1


async def test_default_delivery_limit(backend: Backend) -> None:
    """versions.py "quorum-default-delivery-limit": none on 3.10, 20 on 4.0."""
    default = expected(backend.version, "quorum-default-delivery-limit")
    assert await requeued_up_to_cap(backend, NO_LIMIT) == deliveries_until(default)


async def test_negative_delivery_limit(backend: Backend) -> None:
    """versions.py "quorum-negative-delivery-limit": 3.10 dead-letters at once, 4.0 never."""
    meaning = expected(backend.version, "quorum-negative-delivery-limit")
    reached = 0 if meaning == "dead-letters at the first return" else None
    assert meaning in ("dead-letters at the first return", "no limit")
    assert await requeued_up_to_cap(backend, -1) == deliveries_until(reached)


@pytest.mark.parametrize(
    ("limit", "reached"),
    [(2.5, 2), (0.5, 0), ("3", None)],
    ids=["float", "float-below-one", "string"],
)
async def test_delivery_limit_of_another_type(
    backend: Backend, limit: object, reached: int | None
) -> None:
    """3.10 and 4.0 compare the count with a float as a number (3 returns > 2.5) and never
    reach a string (Erlang term order: every number sorts below a binary); 4.3 ignores a limit
    that is not an integer (versions.py "non-integer-delivery-limit")."""
    if expected(backend.version, "non-integer-delivery-limit") == "ignored":
        reached = expected(backend.version, "quorum-default-delivery-limit")
    assert await requeued_up_to_cap(backend, limit) == deliveries_until(reached)
