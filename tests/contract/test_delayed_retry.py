"""RabbitMQ 4.3's delayed retries of quorum queues (``x-delayed-retry-type``, ``-min``,
``-max``), which ``delay = "server"`` declares (docs/reference/topology.md, "Delays";
emulator/delayed_retry.py; versions.py "delayed-retries").

Measured on 4.3.6: a return of the kind the type names waits ``min(min x max(count, 1),
max)`` ms (``count``: its x-delivery-count after the return), in the queue but not ready (a
declare does not count it, a get passes over it, a purge removes and counts it), then comes
back ahead of what was published meanwhile. 3.10 and 4.0 accept the arguments on any queue
and ignore them; 4.3 refuses them on a classic queue and compares them on a redeclare.

Times are read on the backend's clock (the emulator's virtual one, or the real one): a wait is
never shorter than the server's schedule, however busy the machine; nothing asserts an upper
bound.
"""

from __future__ import annotations

from datetime import datetime

import pytest

from rabbitctl_retry.fields import FieldValue
from rabbitctl_retry.transport.base import Channel, Delivery, Properties
from tests.backends import Backend
from tests.contract.support import (
    bodies,
    declare_refusal,
    delivery_count,
    refused_declare,
    settle,
)
from tests.contract.versions import expected

STEP_S = 0.05


def delayed(
    kind: str, min_ms: FieldValue, max_ms: FieldValue | None = None
) -> dict[str, FieldValue]:
    arguments: dict[str, FieldValue] = {
        "x-queue-type": "quorum",
        "x-delayed-retry-type": kind,
        "x-delayed-retry-min": min_ms,
    }
    if max_ms is not None:
        arguments["x-delayed-retry-max"] = max_ms
    return arguments


async def ready(channel: Channel, queue: str) -> int:
    return (await channel.queue_declare(queue, passive=True)).message_count


async def take(channel: Channel, queue: str) -> Delivery:
    delivery = await channel.get(queue)
    assert delivery is not None
    return delivery


async def test_a_waiting_message_is_not_ready_and_a_purge_counts_it(backend: Backend) -> None:
    """A wait of one minute: m1 rejected waits, m2 is the only ready message, a get takes m2
    and then nothing, and a purge removes m1 (and m3) with a count of 2. 3.10 and 4.0 give m1
    back at once."""
    channel = await backend.channel()
    await channel.queue_declare("dq", durable=True, arguments=delayed("failed", 60_000))
    for body in ("m1", "m2"):
        await channel.publish(body.encode(), routing_key="dq", properties=Properties())
    await settle(backend, channel, "dq", 2)
    first = await take(channel, "dq")
    assert first.body == b"m1"
    await channel.reject(first.delivery_tag, requeue=True)
    if not expected(backend.version, "delayed-retries"):
        await settle(backend, channel, "dq", 2)  # back at once: the arguments mean nothing
        assert sorted(await bodies(channel, "dq")) == ["m1", "m2"]
        return
    await backend.until(lambda: True, "the return")
    assert await ready(channel, "dq") == 1
    second = await take(channel, "dq")
    assert second.body == b"m2"
    assert await channel.get("dq") is None  # m1 waits: a get passes over it
    await channel.ack(second.delivery_tag)
    await channel.publish(b"m3", routing_key="dq", properties=Properties())
    await settle(backend, channel, "dq", 1)
    assert await channel.queue_purge("dq") == 2  # m3 and the waiting m1
    await backend.elapse(0.2)
    assert await ready(channel, "dq") == 0


@pytest.mark.parametrize(
    ("arguments", "waits_ms"),
    [
        (delayed("failed", 300, 700), [300, 600, 700]),
        (delayed("all", 300, 700), [300, 600, 700]),
        (delayed("failed", 300), [300, 300, 300]),  # max: the min
        (delayed("failed", 400, 200), [200, 200, 200]),  # capped at a max below the min
        (delayed("failed", 300, 0), [300, 300, 300]),  # max 0: as none
        (delayed("returned", 300, 700), [0, 0, 0]),  # rejects are counted returns
        (delayed("FAILED", 300, 700), [0, 0, 0]),
        (delayed("failed", "300", 700), [0, 0, 0]),  # a string minimum: no wait
        (delayed("failed", -300, 700), [0, 0, 0]),
    ],
    ids=[
        "failed",
        "all",
        "no-max",
        "max-below-min",
        "max-0",
        "returned",
        "upper-case",
        "string-min",
        "negative-min",
    ],
)
async def test_each_reject_waits_its_turn_and_comes_back_first(
    backend: Backend, arguments: dict[str, FieldValue], waits_ms: list[int]
) -> None:
    """m1 is rejected three times; after each reject p<n> is published while m1 waits, and
    m1 comes back ahead of every p, counted (x-delivery-count 1, 2, 3). A delivery limit of
    10 makes 3.10 give a reject back at the front too (settle.py)."""
    if not expected(backend.version, "delayed-retries"):
        waits_ms = [0, 0, 0]
    channel = await backend.channel()
    await channel.queue_declare("dq", durable=True, arguments={**arguments, "x-delivery-limit": 10})
    await channel.publish(b"m1", routing_key="dq", properties=Properties())
    await settle(backend, channel, "dq", 1)
    for count, wait_ms in enumerate(waits_ms, start=1):
        delivery = await take(channel, "dq")
        assert delivery.body == b"m1"
        if count > 1:  # (3.10 shows 0 on a first delivery, the others nothing)
            assert delivery_count(delivery) == count - 1
        since = backend.clock.now()
        await channel.reject(delivery.delivery_tag, requeue=True)
        await channel.publish(f"p{count}".encode(), routing_key="dq", properties=Properties())
        await assert_waited(backend, channel, "dq", count + 1, since, wait_ms)
    assert await bodies(channel, "dq") == ["m1", "p1", "p2", "p3"]


async def assert_waited(
    backend: Backend, channel: Channel, queue: str, count: int, since: datetime, wait_ms: int
) -> None:
    """``queue`` gets ``count`` ready messages ``wait_ms`` after ``since``: never earlier (the
    server, however busy the machine); on the emulator's virtual clock exactly then (to the
    step time moves by)."""
    waited_ms = await ready_after_ms(backend, channel, queue, count, since)
    assert waited_ms >= wait_ms * 0.98, (wait_ms, waited_ms)
    if backend.name == "emulator":
        assert waited_ms < wait_ms + STEP_S * 1000 + 1, (wait_ms, waited_ms)


async def ready_after_ms(
    backend: Backend, channel: Channel, queue: str, count: int, since: datetime
) -> float:
    """Let time pass until ``queue`` has ``count`` ready messages; how long after ``since``."""
    for _ in range(400):
        if await ready(channel, queue) == count:
            return (backend.clock.now() - since).total_seconds() * 1000
        await backend.elapse(STEP_S)
    raise AssertionError(f"{queue!r} did not get {count} ready in {400 * STEP_S:g} s")


@pytest.mark.parametrize(
    ("kind", "nack_wait_ms", "close_wait_ms"),
    [("failed", 0, 600), ("returned", 300, 0), ("all", 300, 600)],
)
async def test_which_returns_wait(
    backend: Backend, kind: str, nack_wait_ms: int, close_wait_ms: int
) -> None:
    """A basic.nack (uncounted on 4.3: count 0, so min x 1) waits under "returned" and
    "all"; a closing channel (counted: its second return, so min x 2) under "failed" and
    "all"."""
    if not expected(backend.version, "delayed-retries"):
        nack_wait_ms = close_wait_ms = 0
    channel = await backend.channel()
    arguments = {**delayed(kind, 300, 5_000), "x-delivery-limit": 10}
    await channel.queue_declare("dq", durable=True, arguments=arguments)
    await channel.publish(b"m1", routing_key="dq", properties=Properties())
    await settle(backend, channel, "dq", 1)
    nacked = await take(channel, "dq")
    since = backend.clock.now()
    await channel.nack(nacked.delivery_tag, requeue=True)
    await assert_waited(backend, channel, "dq", 1, since, nack_wait_ms)
    first = await take(channel, "dq")
    await channel.reject(first.delivery_tag, requeue=True)  # counted: 1 (3.10, 4.0: 2)
    await settle_when_back(backend, channel)
    held = await backend.channel()
    await take(held, "dq")
    since = backend.clock.now()
    await held.close()  # counted: 2 (3.10, 4.0: 3)
    await assert_waited(backend, channel, "dq", 1, since, close_wait_ms)
    last = await take(channel, "dq")
    assert delivery_count(last) == expected(backend.version, "delayed-retries-close-count")


async def settle_when_back(backend: Backend, channel: Channel) -> None:
    await ready_after_ms(backend, channel, "dq", 1, backend.clock.now())


async def test_a_classic_queue_refuses_them_on_4_3(backend: Backend) -> None:
    channel = await backend.channel()
    arguments: dict[str, FieldValue] = {
        "x-delayed-retry-min": 5,
        "x-delayed-retry-type": "all",
        "x-delayed-retry-max": 9,
    }
    if not expected(backend.version, "delayed-retries"):
        await channel.queue_declare("cq", durable=True, arguments=arguments)
        return
    assert await refused_declare(channel, "cq", arguments) == declare_refusal(
        "cq",
        backend.vhost,
        "invalid arg 'x-delayed-retry-max' for queue 'cq' in vhost '{vhost}' of queue type "
        "rabbit_classic_queue",
    )


@pytest.mark.parametrize(
    ("changed", "message"),
    [
        (
            {"x-delayed-retry-type": "all", "x-delayed-retry-min": 301},
            "inequivalent arg 'x-delayed-retry-type' for queue 'dq' in vhost '{vhost}': "
            "received 'all' but current is 'failed'",
        ),
        (
            {"x-delayed-retry-min": 301, "x-delayed-retry-max": 601},
            "inequivalent arg 'x-delayed-retry-min' for queue 'dq' in vhost '{vhost}': "
            "received '301' but current is '300'",
        ),
        (
            {"x-delayed-retry-max": None},
            "inequivalent arg 'x-delayed-retry-max' for queue 'dq' in vhost '{vhost}': "
            "received none but current is the value '600' of type 'short'",
        ),
        (
            {"x-delayed-retry-max": 601, "x-delivery-limit": 3},
            "inequivalent arg 'x-delivery-limit' for queue 'dq' in vhost '{vhost}': "
            "received the value '3' of type 'byte' but current is none",
        ),
    ],
    ids=["type-first", "min-before-max", "max-missing", "limit-before-them"],
)
async def test_a_redeclare_compares_them_on_4_3(
    backend: Backend, changed: dict[str, FieldValue], message: str
) -> None:
    channel = await backend.channel()
    arguments = delayed("failed", 300, 600)
    await channel.queue_declare("dq", durable=True, arguments=arguments)
    other = {key: value for key, value in {**arguments, **changed}.items() if value is not None}
    again = await backend.channel()
    if not expected(backend.version, "delayed-retries") and "x-delivery-limit" not in changed:
        await again.queue_declare("dq", durable=True, arguments=other)
        return
    assert await refused_declare(again, "dq", other) == declare_refusal(
        "dq", backend.vhost, message
    )
