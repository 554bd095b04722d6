"""The fault suite's own infrastructure works: the private node, the proxy, the fixtures.

Each test here can fail: it checks that the fault really happened, as the client sees it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

from rabbitctl_retry.transport import amqp
from rabbitctl_retry.transport.base import Properties
from tests.faults.conftest import FaultVhost
from tests.faults.node import PrivateNode
from tests.faults.proxy import FaultProxy

pytestmark = pytest.mark.faults

PERSISTENT = Properties(delivery_mode=2)


@asynccontextmanager
async def connected(url: str) -> AsyncIterator[amqp.AmqpConnection]:
    conn = await amqp.connect(url, client_name="rr-fault-suite")
    try:
        yield conn
    finally:
        await conn.close()


async def stalls(task: asyncio.Task[None], seconds: float) -> bool:
    """Whether ``task`` is still pending after ``seconds`` (it is not cancelled)."""
    done, _ = await asyncio.wait([task], timeout=seconds)
    return not done


def test_the_node_is_private(fault_node: PrivateNode) -> None:
    assert fault_node.name.startswith("rrfault-")
    assert fault_node.name != "rabbit@localhost"
    assert fault_node.port not in (5672, 0)
    assert fault_node.dist_port not in (25672, 0)
    assert fault_node.url == f"amqp://guest:guest@127.0.0.1:{fault_node.port}/"
    assert fault_node.is_running()
    assert fault_node.data_dir.is_dir()


async def test_a_client_talks_to_the_node_through_the_proxy(
    fault_node: PrivateNode, proxy: FaultProxy, fault_vhost: FaultVhost
) -> None:
    async with connected(fault_vhost.proxy_url) as conn:
        ch = await conn.channel(confirms=True)
        await ch.queue_declare("infra.q", durable=True)
        await ch.publish(b"hello", routing_key="infra.q", mandatory=True)
        delivery = await ch.get("infra.q", no_ack=True)
        assert delivery is not None
        assert delivery.body == b"hello"
        assert proxy.connections_accepted == 1
        assert proxy.open_connections == 1
        assert proxy.bytes_to_upstream > 0
        assert proxy.bytes_to_client > 0
        # The queue is in the test's vhost only; the node sees our channel there.
        await ch.queue_declare("infra.kept", durable=True)
        assert await asyncio.to_thread(fault_node.queues, fault_vhost.name) == {
            "infra.q": (0, 0),
            "infra.kept": (0, 0),
        }
        assert await asyncio.to_thread(fault_node.queues) == {}
        channels = await asyncio.to_thread(fault_node.list_channels)
        ours = [row for row in channels if row["vhost"] == fault_vhost.name]
        assert len(ours) == 1
        assert ours[0]["confirm"] is True
        assert await asyncio.to_thread(fault_node.channel_count) >= 1
        assert await asyncio.to_thread(fault_node.connection_count) >= 1
        await asyncio.to_thread(fault_node.delete_queue, "infra.kept", fault_vhost.name)
        assert await asyncio.to_thread(fault_node.queues, fault_vhost.name) == {"infra.q": (0, 0)}
    async with asyncio.timeout(5):
        while proxy.open_connections:
            await asyncio.sleep(0.02)


async def test_freeze_stalls_a_confirmed_publish_until_thaw(
    proxy: FaultProxy, fault_vhost: FaultVhost
) -> None:
    async with connected(fault_vhost.proxy_url) as conn:
        ch = await conn.channel(confirms=True)
        await ch.queue_declare("infra.freeze", durable=True)
        proxy.freeze()
        forwarded = proxy.bytes_forwarded
        publish = asyncio.create_task(ch.publish(b"held", routing_key="infra.freeze"))
        try:
            assert await stalls(publish, 1.0), "a publish completed through a frozen proxy"
            assert proxy.bytes_forwarded == forwarded
            assert not conn.is_closed
        finally:
            proxy.thaw()
        async with asyncio.timeout(5):
            await publish
        delivery = await ch.get("infra.freeze", no_ack=True)
        assert delivery is not None
        assert delivery.body == b"held"


async def test_cut_closes_the_client_connection(proxy: FaultProxy, fault_vhost: FaultVhost) -> None:
    async with connected(fault_vhost.proxy_url) as conn:
        await conn.channel()
        assert proxy.cut() == 1
        async with asyncio.timeout(5):
            await conn.wait_closed()
        assert conn.is_closed
        assert proxy.open_connections == 0
    async with connected(fault_vhost.proxy_url) as again:  # the proxy still accepts
        await again.channel()
    assert proxy.connections_accepted == 2


async def test_half_open_silences_old_connections_but_not_new_ones(
    fault_node: PrivateNode, proxy: FaultProxy, fault_vhost: FaultVhost
) -> None:
    # heartbeat=1: aiormq gives up on a silent peer after (1 + 1) * 3 s.
    async with connected(fault_vhost.proxy_url + "?heartbeat=1") as silent:
        ch = await silent.channel(confirms=True)
        await ch.queue_declare("infra.half", durable=True)
        assert proxy.half_open() == 1
        async with connected(fault_vhost.proxy_url) as fresh:
            fresh_ch = await fresh.channel(confirms=True)
            await fresh_ch.publish(b"new path", routing_key="infra.half")
        async with asyncio.timeout(15):
            await silent.wait_closed()  # aiormq's heartbeat watchdog, not a FIN or an RST
        assert proxy.open_connections == 1  # the proxy never closed the silent one
    assert await asyncio.to_thread(fault_node.queues, fault_vhost.name) == {"infra.half": (1, 0)}


@pytest.mark.timeout(300)
async def test_kill_and_restart_keep_a_durable_queue_and_a_persistent_message(
    fault_node: PrivateNode, proxy: FaultProxy, fault_vhost: FaultVhost
) -> None:
    async with connected(fault_vhost.url) as conn:
        ch = await conn.channel(confirms=True)
        await ch.queue_declare("infra.durable", durable=True)
        await ch.publish(b"survivor", routing_key="infra.durable", properties=PERSISTENT)
    # The vhost and the queue were made a moment ago: on disk only once Mnesia's log is (in
    # CI, a kill right after them once lost both).
    await asyncio.to_thread(fault_node.sync_metadata)
    async with connected(fault_vhost.proxy_url) as watcher:
        await watcher.channel()
        old_pid = fault_node.pid
        await asyncio.to_thread(fault_node.kill)
        assert not fault_node.is_running()
        async with asyncio.timeout(5):
            await watcher.wait_closed()
    await asyncio.to_thread(fault_node.restart)
    assert fault_node.is_running()
    assert fault_node.pid != old_pid
    # The node answers before its vhosts finished recovering their queues (slowly, on a loaded
    # machine, where each rabbitmqctl call takes seconds too): look until the queue is back,
    # for up to 90 s.
    expected = {"infra.durable": (1, 0)}
    queues: dict[str, tuple[int, int]] = {}
    deadline = asyncio.get_running_loop().time() + 90
    while asyncio.get_running_loop().time() < deadline:
        queues = await asyncio.to_thread(fault_node.queues, fault_vhost.name)
        if queues == expected:
            break
        await asyncio.sleep(0.5)
    assert queues == expected
    async with connected(fault_vhost.proxy_url) as conn:
        ch = await conn.channel()
        delivery = await ch.get("infra.durable", no_ack=True)
        assert delivery is not None
        assert delivery.body == b"survivor"
        assert delivery.properties.delivery_mode == 2


async def test_a_memory_alarm_blocks_a_publisher_until_cleared(
    fault_node: PrivateNode,
    fault_vhost: FaultVhost,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="aiormq.connection")
    async with connected(fault_vhost.proxy_url) as conn:
        ch = await conn.channel(confirms=True)
        await ch.queue_declare("infra.alarm", durable=True)
        await ch.publish(b"before", routing_key="infra.alarm")
        await asyncio.to_thread(fault_node.set_memory_alarm, True)
        publish = asyncio.create_task(ch.publish(b"during", routing_key="infra.alarm"))
        try:
            assert await stalls(publish, 1.0), "a publish got through a memory alarm"
            states = [
                row["state"]
                for row in await asyncio.to_thread(fault_node.list_connections)
                if row["vhost"] == fault_vhost.name
            ]
            assert states == ["blocked"]
            assert any("was blocked by" in r.getMessage() for r in caplog.records)
        finally:
            await asyncio.to_thread(fault_node.set_memory_alarm, False)
        async with asyncio.timeout(5):
            await publish
        assert any("was unblocked" in r.getMessage() for r in caplog.records)
    assert await asyncio.to_thread(fault_node.queues, fault_vhost.name) == {"infra.alarm": (2, 0)}


async def test_close_all_connections_reaches_the_client(
    fault_node: PrivateNode, fault_vhost: FaultVhost
) -> None:
    async with connected(fault_vhost.url) as conn:
        await conn.channel()
        await asyncio.to_thread(fault_node.close_all_connections, "infra test")
        async with asyncio.timeout(5):
            await conn.wait_closed()
    assert await asyncio.to_thread(fault_node.connection_count) == 0


async def test_stop_app_and_start_app(fault_node: PrivateNode, fault_vhost: FaultVhost) -> None:
    async with connected(fault_vhost.url) as conn:
        await conn.channel()
        await asyncio.to_thread(fault_node.stop_app)
        async with asyncio.timeout(5):
            await conn.wait_closed()
    assert fault_node.is_running()  # the Erlang VM stays up
    await asyncio.to_thread(fault_node.start_app)
    async with connected(fault_vhost.url) as conn:
        await conn.channel()
