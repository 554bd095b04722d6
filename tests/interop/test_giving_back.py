"""How another consumer gives a message back on rr's quorum queue (docs/how-to/other-clients.md,
"Give back with reject"): ``payments`` has ``x-delivery-limit = 2`` (``max_attempts = 3``), so a
message given back with ``basic.reject(requeue=true)`` is delivered 3 times and then dead-lettered
to
``payments.dead``, on every server. ``basic.nack(requeue=true)`` counts the same before
RabbitMQ 4.3; on 4.3 it is never counted, so such a consumer gets the message back forever.
Measured with pika and Node's amqplib; every message id counted."""

from __future__ import annotations

import asyncio
from typing import Any

import pika
import pytest

from rabbitctl_retry import releases
from tests.backends import RabbitBackend
from tests.interop.conftest import amqplib, publish, release_of
from tests.observe import depth, peek

ROUNDS = 6
"""Deliveries tried: twice the 3 a counted give-back allows."""


def _nack_counted(rabbit: RabbitBackend) -> bool:
    """Whether ``rabbit``'s quorum queues count a ``basic.nack(requeue=true)``: its row of
    ``rabbitctl_retry/releases.py`` (not before RabbitMQ 4.3)."""
    return releases.release_of(release_of(rabbit)).nack_requeue_counts_delivery


def counts(seen: list[Any]) -> list[int]:
    """The ``x-delivery-count`` of each delivery (a first one carries none, or 0 on 3.10)."""
    return [int(count or 0) for count in seen]


def _pika_give_back(url: str, settle: str) -> list[Any]:
    """Get from ``payments`` and give back, ``ROUNDS`` times or until it is gone; the
    ``x-delivery-count`` each delivery carried."""
    connection = pika.BlockingConnection(pika.URLParameters(url))
    try:
        channel = connection.channel()
        seen = []
        for _ in range(ROUNDS):
            method, properties, _ = _get_soon(connection, channel)
            if method is None:
                break
            seen.append((properties.headers or {}).get("x-delivery-count"))
            if settle == "reject":
                channel.basic_reject(method.delivery_tag, requeue=True)
            else:
                channel.basic_nack(method.delivery_tag, requeue=True)
        return seen
    finally:
        connection.close()


def _get_soon(connection: Any, channel: Any) -> Any:
    """A basic.get that allows the quorum queue a moment to take a message back (it does so
    on its own time after the give-back): a few tries, each after the broker answered."""
    for _ in range(50):
        method, properties, body = channel.basic_get("payments")
        if method is not None:
            return method, properties, body
        connection.process_data_events(time_limit=0.05)
    return None, None, None


@pytest.mark.parametrize("settle", ["reject", "nack"])
async def test_pika_giving_back(rabbit: RabbitBackend, settle: str) -> None:
    await publish(rabbit, "payments", ["p1"])
    seen = await asyncio.to_thread(_pika_give_back, rabbit.url, settle)
    counted = settle == "reject" or _nack_counted(rabbit)
    if counted:
        assert counts(seen) == [0, 1, 2]  # the 3rd give-back is past the limit of 2
        await rabbit.until(
            lambda: _holds(rabbit, "payments.dead", 1), "the dead letter in payments.dead"
        )
        assert [d.properties.message_id for d in await peek(rabbit, "payments.dead")] == ["p1"]
    else:  # RabbitMQ 4.3: a nack is never counted, the message never leaves
        assert counts(seen) == [0] * ROUNDS
        assert await depth(rabbit, "payments.dead") == 0
        assert [d.properties.message_id for d in await peek(rabbit, "payments")] == ["p1"]


async def _holds(rabbit: RabbitBackend, queue: str, count: int) -> bool:
    return await depth(rabbit, queue) == count


@pytest.mark.parametrize("settle", ["requeue-reject", "requeue-nack"])
async def test_amqplib_giving_back(rabbit: RabbitBackend, settle: str) -> None:
    await publish(rabbit, "payments", ["a1"])
    seen = []
    for _ in range(ROUNDS):
        answer = await amqplib(rabbit.url, "take", "payments", "1", settle)
        if not answer["taken"]:
            await rabbit.until(lambda: _any_in(rabbit), "a1 back in payments or dead")
            answer = await amqplib(rabbit.url, "take", "payments", "1", settle)
            if not answer["taken"]:
                break
        seen.extend(message["count"] for message in answer["taken"])
    counted = settle == "requeue-reject" or _nack_counted(rabbit)
    if counted:
        assert counts(seen) == [0, 1, 2]
        await rabbit.until(
            lambda: _holds(rabbit, "payments.dead", 1), "the dead letter in payments.dead"
        )
    else:
        assert counts(seen) == [0] * ROUNDS
        assert await depth(rabbit, "payments.dead") == 0


async def _any_in(rabbit: RabbitBackend) -> bool:
    return await depth(rabbit, "payments") + await depth(rabbit, "payments.dead") > 0


def _pika_reject_all(url: str, count: int) -> list[str]:
    connection = pika.BlockingConnection(pika.URLParameters(url))
    try:
        channel = connection.channel()
        rejected = []
        while len(rejected) < count:
            method, properties, _ = _get_soon(connection, channel)
            assert method is not None, f"{len(rejected)} of {count} came"
            rejected.append(properties.message_id)
            channel.basic_reject(method.delivery_tag, requeue=False)
        return rejected
    finally:
        connection.close()


async def test_what_another_consumer_rejects_on_rrs_quorum_queue_is_kept(
    rabbit: RabbitBackend,
) -> None:
    """A quorum queue's ``dead_letter`` is its dead-letter route: what pika rejects without
    requeue lands there (x-death reason rejected), every id once."""
    ids = [f"q{n}" for n in range(5)]
    await publish(rabbit, "payments", ids)
    assert await asyncio.to_thread(_pika_reject_all, rabbit.url, 5) == ids
    await rabbit.until(lambda: _holds(rabbit, "payments.dead", 5), "5 dead letters")
    letters = await peek(rabbit, "payments.dead")
    assert sorted(d.properties.message_id or "" for d in letters) == ids
    reasons = {
        (
            (d.properties.headers or {})["x-first-death-reason"],
            d.properties.headers["x-first-death-queue"],
        )  # type: ignore[index]
        for d in letters
    }
    assert reasons == {("rejected", "payments")}
