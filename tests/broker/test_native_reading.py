"""rr's own client reads the socket one read at a time: after a read that handed
READ_PAUSE_DELIVERIES or more deliveries to their callbacks, it reads again only once the
event loop has started every one. uvloop reads up to 32 times in a row before it runs a task;
without this, reading a whole queue without a prefetch limit (rr dlq inspect, export, groups)
would pile up the queue in memory, one task per message."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from rabbitctl_retry.transport import native
from rabbitctl_retry.transport.base import Delivery, Properties

MESSAGES = 6_000
BODY = b"x" * 200
WIRE_BYTES = 300
"""At least what one 200-byte delivery takes on the wire (its three frames)."""
READ_BYTES = 256 * 1024
"""The most asyncio's and uvloop's transports read at once."""


async def read_a_queue(url: str) -> tuple[int, list[str]]:
    """(the most deliveries waiting for their callback to start, the ids read) of one queue
    of MESSAGES read without a prefetch limit."""
    queue = f"rr-native-reading-{uuid.uuid4().hex[:8]}"
    connection = await native.connect(url, client_name=queue)
    try:
        channel = await connection.channel()
        await channel.queue_declare(queue, auto_delete=False)
        publisher = await connection.channel(confirms=True)
        ids = [f"m{i}" for i in range(MESSAGES)]
        await asyncio.gather(
            *(
                publisher.publish(BODY, routing_key=queue, properties=Properties(message_id=m))
                for m in ids
            )
        )
        protocol = connection._protocol
        started: list[str] = []
        waiting = [0]
        done = asyncio.Event()

        async def on_delivery(delivery: Delivery) -> None:
            # handed out so far, minus those whose callback started before this one
            waiting[0] = max(waiting[0], protocol.deliveries - len(started))
            started.append(delivery.properties.message_id or "")
            if len(started) == MESSAGES:
                done.set()

        await channel.consume(queue, on_delivery, no_ack=True)  # no qos: all at once
        await asyncio.wait_for(done.wait(), timeout=120)
        await channel.queue_delete(queue)
        return waiting[0], started
    finally:
        await connection.close()


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_a_whole_queue_is_read_one_read_at_a_time(amqp_url: str, loop: str) -> None:
    if loop == "uvloop":
        uvloop = pytest.importorskip("uvloop")
        factory = uvloop.new_event_loop
    else:
        factory = asyncio.new_event_loop
    with asyncio.Runner(loop_factory=factory) as runner:
        most_waiting, ids = runner.run(read_a_queue(amqp_url))
    assert sorted(ids) == sorted(f"m{i}" for i in range(MESSAGES))
    assert most_waiting <= max(native.READ_PAUSE_DELIVERIES, READ_BYTES // WIRE_BYTES)
