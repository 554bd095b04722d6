"""RabbitMQ 4.3's consumer timeout, at its narrowest: rr acks the timed-out delivery before
it has read the server's ``basic.cancel`` (docs/reference/runtime.md, "Handlers": "On RabbitMQ
4.3").

4.3 keeps a quorum consumer it cancelled until the client answers the cancel, and a settle of
the timed-out delivery in between revives it: the server hands it the next message, which
arrives behind the cancel, for a consumer tag rr's client has just forgotten. The proxy holds
the node's frames back (``freeze_to_client``) so that the ack goes out first, every time. On
the suite's private 4.3 node.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable, Callable

import pytest

from rabbitctl_retry import Message, Outcome
from rabbitctl_retry.retry.outcome import AnyOutcome
from rabbitctl_retry.runtime.service import RunOptions
from tests.faults.conftest import FaultVhost
from tests.faults.harness import direct, serving
from tests.faults.node import PrivateNode
from tests.faults.proxy import FaultProxy
from tests.ledger import publish_ids, wait_until

pytestmark = [
    pytest.mark.faults,
    pytest.mark.timeout(180),
    pytest.mark.parametrize("any_fault_node", ["4.3"], indirect=True),
]

TOPOLOGY = """
[queues.work]
type = "quorum"
arguments = { "x-consumer-timeout" = 2000 }
"""


def messages_in(node: PrivateNode, vhost: FaultVhost) -> int:
    """Every message of ``work``: ready, unacknowledged and any other."""
    out = node.ctl("list_queues", "-q", "-p", vhost.name, "--no-table-headers", "name", "messages")
    counts = dict(line.split("\t") for line in out.strip().splitlines() if "\t" in line)
    return int(counts["work"])


async def ready(vhost: FaultVhost) -> int:
    connection = await direct(vhost.url)()
    try:
        channel = await connection.channel()
        return (await channel.queue_declare("work", passive=True)).message_count
    finally:
        await connection.close()


async def test_a_message_handed_to_the_revived_consumer_is_not_stranded(
    any_fault_node: PrivateNode, any_proxy: FaultProxy, any_fault_vhost: FaultVhost
) -> None:
    """``slow`` hangs past the queue's 2 s consumer timeout; m1..m5 wait (prefetch 1). The
    node's frames are held back; the server times ``slow`` out (it is back in the queue,
    uncounted), rr acks it, and the revived consumer is handed the next message. Then the
    frames flow: the cancel, and that delivery for the cancelled tag. Every message must be
    handled and the queue end empty; the delivery for the cancelled tag goes back to the
    queue (basic.nack, uncounted on 4.3), instead of staying unacknowledged on the channel
    for as long as rr runs."""
    handled: list[str] = []
    release = asyncio.Event()

    async def handler(msg: Message) -> AnyOutcome:
        handled.append(msg.message_id or "")
        if msg.message_id == "slow" and handled.count("slow") == 1:
            await release.wait()
        return Outcome.ack()

    ids = [f"m{n}" for n in range(1, 6)]
    options = RunOptions(prefetch=1)
    async with serving(any_fault_vhost.proxy_url, TOPOLOGY, handler, options) as service:
        await publish_ids(direct(any_fault_vhost.url), "work", ["slow"])
        await wait_until(_true(lambda: handled == ["slow"]), "slow handled", timeout_s=30)
        await publish_ids(direct(any_fault_vhost.url), "work", ids)
        await wait_until(_equals(ready, any_fault_vhost, 5), "m1..m5 waiting", timeout_s=30)
        any_proxy.freeze_to_client()
        try:
            await wait_until(
                _equals(ready, any_fault_vhost, 6), "the server timed slow out", timeout_s=30
            )
            release.set()  # rr acks the timed-out delivery: it has not seen the cancel
            await wait_until(
                _equals(ready, any_fault_vhost, 5),
                "the revived consumer handed a message",
                timeout_s=30,
            )
        finally:
            any_proxy.thaw()
        await wait_until(_true(lambda: set(ids) <= set(handled)), "m1..m5 handled", timeout_s=60)

        async def empty() -> bool:
            return service.in_flight == 0 and messages_in(any_fault_node, any_fault_vhost) == 0

        await wait_until(empty, "every message settled, none stranded", timeout_s=30)
        cancels = service.stats.consumer_cancels
        strays = service.stats.stray_deliveries
    # One timeout is the scenario; on a machine slow enough to hold a later delivery past the
    # 2 s the server may time the next consumer out too: each such timeout is one more
    # uncounted return, and at most one more handling of the message it took back.
    assert cancels >= 1
    assert strays >= 1
    counts = Counter(handled)
    assert set(counts) == {"slow", *ids}, handled
    assert counts["slow"] >= 2, handled
    assert len(handled) - len(ids) - 2 <= cancels - 1, handled


def _true(check: Callable[[], bool]) -> Callable[[], Awaitable[bool]]:
    async def holds() -> bool:
        return check()

    return holds


def _equals(
    read: Callable[[FaultVhost], Awaitable[int]], vhost: FaultVhost, expected: int
) -> Callable[[], Awaitable[bool]]:
    async def holds() -> bool:
        return await read(vhost) == expected

    return holds
