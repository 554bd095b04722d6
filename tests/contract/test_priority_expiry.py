"""A classic priority queue's message TTLs: when the server checks them (issue #49, point 2;
docs/reference/testing.md, "Priorities with message TTLs in classic queues").

A classic queue checks for expired messages at its head only, and only at some moments: when
a publish leaves the message alone in the queue (or drop-head pushed some out), after it
hands a message out, when messages come back, and when the timer armed at the last check for
the head's expiry fires. A message that jumps ahead of the head of a non-empty queue (a
higher priority) is not checked when it arrives: it expires only at the next check (measured
on 3.10.8, 4.0.5 and 4.3.6).
"""

from __future__ import annotations

from rabbitctl_retry.transport.base import Channel, Properties
from tests.backends import Backend
from tests.contract.support import bodies, settle
from tests.observe import depth

PRIORITY_QUEUE = {
    "x-max-priority": 2,
    "x-dead-letter-exchange": "",
    "x-dead-letter-routing-key": "dead",
}


async def queues(backend: Backend) -> Channel:
    channel = await backend.channel()
    await channel.queue_declare("dead")
    await channel.queue_declare("prio", arguments=PRIORITY_QUEUE)
    return channel


async def put(channel: Channel, body: str, *, priority: int, ttl_ms: int | None = None) -> None:
    expiration = None if ttl_ms is None else str(ttl_ms)
    await channel.publish(
        body.encode(),
        routing_key="prio",
        properties=Properties(priority=priority, expiration=expiration),
    )


async def test_a_message_ahead_of_the_head_of_a_non_empty_queue_never_expires(
    backend: Backend,
) -> None:
    """m1 (no TTL), then m2 of priority 2 with a 250 ms expiration: 3 s later m2 is still
    there, served first; nothing was dead-lettered."""
    channel = await queues(backend)
    await put(channel, "m1", priority=0)
    await put(channel, "m2", priority=2, ttl_ms=250)
    await backend.elapse(3.0)
    assert (await depth(channel, "prio"), await depth(channel, "dead")) == (2, 0)
    assert await bodies(channel, "prio") == ["m2", "m1"]
    assert await depth(channel, "dead") == 0


async def test_into_an_empty_queue_it_expires(backend: Backend) -> None:
    """m2 (priority 2, 250 ms) into the empty queue, then m1 (no TTL): m2 expires."""
    channel = await queues(backend)
    await put(channel, "m2", priority=2, ttl_ms=250)
    await put(channel, "m1", priority=0)
    await backend.elapse(0.5)
    await settle(backend, channel, "dead", 1)
    assert await bodies(channel, "dead") == ["m2"]
    assert await bodies(channel, "prio") == ["m1"]


async def test_it_expires_when_the_old_heads_timer_fires(backend: Backend) -> None:
    """m1 (1000 ms), then m2 (priority 2, 250 ms): at 600 ms both are there; when m1's
    timer fires at 1000 ms, m2 then m1 are dead-lettered."""
    channel = await queues(backend)
    await put(channel, "m1", priority=0, ttl_ms=1000)
    await put(channel, "m2", priority=2, ttl_ms=250)
    await backend.elapse(0.6)
    assert (await depth(channel, "prio"), await depth(channel, "dead")) == (2, 0)
    await backend.elapse(0.6)
    await settle(backend, channel, "dead", 2)
    assert await bodies(channel, "dead") == ["m2", "m1"]
    assert await depth(channel, "prio") == 0


async def test_it_expires_when_it_comes_back(backend: Backend) -> None:
    """As the first case; 1 s later basic.get takes m2 (it had not expired) and rejects it
    with requeue: back at the head, it is checked and dead-lettered."""
    channel = await queues(backend)
    await put(channel, "m1", priority=0)
    await put(channel, "m2", priority=2, ttl_ms=250)
    await backend.elapse(1.0)
    taken = await channel.get("prio", no_ack=False)
    assert taken is not None
    assert taken.body == b"m2"
    await channel.reject(taken.delivery_tag, requeue=True)
    await settle(backend, channel, "dead", 1)
    assert await bodies(channel, "dead") == ["m2"]
    assert await bodies(channel, "prio") == ["m1"]


async def test_it_expires_after_the_message_behind_it_is_handed_out(backend: Backend) -> None:
    """m1 (no TTL), m2 (priority 2, 250 ms), m3 (priority 1, 250 ms): 1 s later basic.get
    takes m2 (never checked); the check after it finds m3 at the head, expired."""
    channel = await queues(backend)
    await put(channel, "m1", priority=0)
    await put(channel, "m2", priority=2, ttl_ms=250)
    await put(channel, "m3", priority=1, ttl_ms=250)
    await backend.elapse(1.0)
    assert await bodies(channel, "prio") == ["m2", "m1"]
    await settle(backend, channel, "dead", 1)
    assert await bodies(channel, "dead") == ["m3"]
