"""Which way of giving a delivery back is not counted as an attempt, measured on each server
(RabbitMQ 3.10.8, 4.0.5, 4.3.6) and on the emulator set to each, classic and quorum queues
(docs/reference/handlers.md, "Pausing a queue": the table there is this test's).

A consumer takes the message, is cancelled (as a pause cancels it), and gives the delivery
back with ``basic.nack(requeue=true)``, ``basic.reject(requeue=true)`` or by closing its
channel; a new consumer takes it again and reads ``x-delivery-count``, ``x-acquired-count``
and rr's attempt (``Message.attempt``: a classic queue counts rr's retry header, which a
plain requeue leaves alone). A release that changes any cell fails here.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from rabbitctl_retry.retry.headers import attempt_of
from rabbitctl_retry.transport.base import Channel, Delivery, Properties
from tests.backends import Backend, backend_of, backend_params, publish

NACK, REJECT, CLOSE = "nack", "reject", "close"
WAYS = (NACK, REJECT, CLOSE)
RETRY_HEADER = "x-ruststream-retry-count"

COUNTED = (1, None, 2)
"""(x-delivery-count, x-acquired-count, attempt) of a return the server counts (3.10, 4.0)."""

MEASURED: dict[tuple[str, str, str], tuple[int | None, int | None, int]] = {
    **{("3.10", "classic", way): (None, None, 1) for way in WAYS},
    **{("4.0", "classic", way): (None, None, 1) for way in WAYS},
    **{("4.3", "classic", way): (None, None, 1) for way in WAYS},
    **{("3.10", "quorum", way): COUNTED for way in WAYS},
    **{("4.0", "quorum", way): COUNTED for way in WAYS},
    ("4.3", "quorum", NACK): (None, 1, 1),  # the one uncounted return
    ("4.3", "quorum", REJECT): (1, 1, 2),
    ("4.3", "quorum", CLOSE): (1, 1, 2),
}
"""(server line, queue type, way) -> what the next delivery says: ``x-delivery-count``,
``x-acquired-count`` (``None``: no such header) and rr's attempt."""


@pytest.fixture(params=backend_params())
async def server(request: pytest.FixtureRequest) -> AsyncIterator[Backend]:
    async with backend_of(*request.param) as opened:
        yield opened


async def _take(backend: Backend, channel: Channel, queue: str) -> Delivery:
    """One delivery to a consumer of ``channel``, that consumer cancelled after it (a pause)."""
    got: asyncio.Queue[Delivery] = asyncio.Queue()

    async def on_delivery(delivery: Delivery) -> None:
        got.put_nowait(delivery)

    await channel.qos(1)
    tag = await channel.consume(queue, on_delivery)
    await backend.until(lambda: not got.empty(), "a delivery")
    await channel.cancel(tag)
    return got.get_nowait()


def _read(delivery: Delivery, queue: str) -> tuple[int | None, int | None, int]:
    headers = delivery.properties.headers or {}
    count, acquired = headers.get("x-delivery-count"), headers.get("x-acquired-count")
    assert count is None or isinstance(count, int)
    assert acquired is None or isinstance(acquired, int)
    return count, acquired, attempt_of(headers, RETRY_HEADER, queue)


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("queue_type", ["classic", "quorum"])
async def test_which_return_is_counted(server: Backend, queue_type: str, way: str) -> None:
    queue = f"give-back.{queue_type}.{way}"
    setup = await server.channel()
    await setup.queue_declare(queue, durable=True, arguments={"x-queue-type": queue_type})
    await publish(server, queue, b"m", Properties(message_id="m"))

    connection = await server.connect()
    first = await connection.channel()
    delivery = await _take(server, first, queue)
    assert _read(delivery, queue)[2] == 1
    if way == NACK:
        await first.nack(delivery.delivery_tag, requeue=True)
    elif way == REJECT:
        await first.reject(delivery.delivery_tag, requeue=True)
    else:
        await first.close()
    second = await connection.channel()
    again = await _take(server, second, queue)
    assert again.properties.message_id == "m"
    assert again.redelivered
    seen = _read(again, queue)
    await second.ack(again.delivery_tag)
    await connection.close()
    assert seen == MEASURED[server.version, queue_type, way], seen
