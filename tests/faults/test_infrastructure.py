"""The fault suite's own infrastructure works: the private nodes, the proxy, the fixtures.

Each test here can fail: it checks that the fault really happened, as the client sees it.
The tests of a node's faults run on the private node of each server (``any_fault_node``:
RabbitMQ 3.10, 4.0 and 4.3, as ``RR_TEST_BROKERS`` chooses); those of the proxy on the 3.10
node.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from rabbitctl_retry.transport import amqp
from rabbitctl_retry.transport.base import Properties
from tests.faults.conftest import FaultVhost
from tests.faults.node import (
    PrivateNode,
    _descendants,
    _epmd_port,
    _marked_pids,
    _pid_alive,
)
from tests.faults.proxy import FaultProxy
from tests.shared_node import BROKERS

pytestmark = pytest.mark.faults

PERSISTENT = Properties(delivery_mode=2)

ON_4_0 = pytest.mark.parametrize("any_fault_node", ["4.0"], indirect=True)
"""Run a test on the private RabbitMQ 4.0 node only."""

SHARED_PORTS = {urlsplit(broker.url).port for broker in BROKERS.values()}
"""The AMQP ports of the shared servers (tests/shared_node.py's table)."""


@asynccontextmanager
async def connected(url: str) -> AsyncIterator[amqp.AmqpConnection]:
    conn = await amqp.connect(url, client_name="rr-fault-suite")
    try:
        yield conn
    finally:
        await conn.close()


def _unmarked(pid: int, node_name: str) -> list[int]:
    """The processes under ``pid`` (the node's VM) that do not carry the node's marker (the
    disk monitor's ``df`` may exit between the two looks: only those still running count)."""
    tree = _descendants(pid)
    marked = set(_marked_pids(node_name))
    return [child for child in tree if child not in marked and _pid_alive(child)]


async def stalls(task: asyncio.Task[None], seconds: float) -> bool:
    """Whether ``task`` is still pending after ``seconds`` (it is not cancelled)."""
    done, _ = await asyncio.wait([task], timeout=seconds)
    return not done


def test_the_node_is_private(any_fault_node: PrivateNode) -> None:
    node = any_fault_node
    assert node.name.startswith("rrfault-")
    assert node.name not in {broker.node for broker in BROKERS.values()}
    assert node.port not in {*SHARED_PORTS, 0}
    # RabbitMQ's distribution port is its AMQP port + 20000 unless set (as the shared ones are)
    assert node.dist_port not in {*(port + 20000 for port in SHARED_PORTS if port), 0}
    assert node.url == f"amqp://guest:guest@127.0.0.1:{node.port}/"
    assert node.is_running()
    assert node.data_dir.is_dir()
    # Every OS process of the node carries its marker (kill() and the watchdog find them so).
    assert node.pid is not None
    assert _unmarked(node.pid, node.name) == []


@pytest.mark.parametrize("any_fault_node", ["3.10"], indirect=True)
def test_any_fault_node_on_3_10_is_the_fault_node(
    fault_node: PrivateNode, any_fault_node: PrivateNode
) -> None:
    assert any_fault_node is fault_node
    assert fault_node.server == "3.10"


async def test_the_node_answers_amqp_with_its_server_version(
    any_fault_node: PrivateNode, any_fault_vhost: FaultVhost
) -> None:
    async with connected(any_fault_vhost.proxy_url) as conn:
        version = conn.server_version
    assert f"{version.major}.{version.minor}" == any_fault_node.server


@ON_4_0
def test_the_4_0_node_keeps_its_definitions_in_mnesia(any_fault_node: PrivateNode) -> None:
    """So ``sync_metadata()`` (``mnesia:sync_log()``) applies on 4.0 as on 3.10: Khepri is a
    feature flag a new 4.0 node leaves disabled."""
    assert any_fault_node.ctl("eval", "rabbit_khepri:is_enabled().").strip() == "false"
    assert any_fault_node.ctl("eval", "mnesia:system_info(is_running).").strip() == "yes"
    assert any_fault_node.ctl("eval", "mnesia:sync_log().").strip() == "ok"


METADATA_STORE = {"3.10": "mnesia", "4.0": "mnesia", "4.3": "khepri"}
"""Where a new node of each line keeps its definitions: Khepri is the feature flag
``khepri_db``, which a new 4.0 node leaves disabled and a new 4.3 node enables."""


def test_sync_metadata_applies_to_the_store_the_node_keeps_its_definitions_in(
    any_fault_node: PrivateNode,
) -> None:
    """``sync_metadata()`` flushes Mnesia's log on a node on Mnesia, and does nothing on a
    node on Khepri (whose Raft log has a change on disk before the client is answered; Mnesia
    does not run there)."""
    store = any_fault_node.metadata_store()
    assert store == METADATA_STORE[any_fault_node.server]
    mnesia = any_fault_node.ctl("eval", "mnesia:system_info(is_running).").strip()
    assert mnesia == ("yes" if store == "mnesia" else "no")
    any_fault_node.sync_metadata()


async def test_a_client_talks_to_the_node_through_the_proxy(
    any_fault_node: PrivateNode, any_proxy: FaultProxy, any_fault_vhost: FaultVhost
) -> None:
    fault_node, proxy, fault_vhost = any_fault_node, any_proxy, any_fault_vhost
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
    any_fault_node: PrivateNode, any_fault_vhost: FaultVhost
) -> None:
    fault_node, fault_vhost = any_fault_node, any_fault_vhost
    async with connected(fault_vhost.url) as conn:
        ch = await conn.channel(confirms=True)
        await ch.queue_declare("infra.durable", durable=True)
        await ch.publish(b"survivor", routing_key="infra.durable", properties=PERSISTENT)
    # The vhost and the queue were made a moment ago: on disk only once Mnesia's log is (in
    # CI, a kill right after them once lost both; 4.0 keeps them in Mnesia too, 4.3 in
    # Khepri, where they are on disk already).
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
    any_fault_node: PrivateNode,
    any_fault_vhost: FaultVhost,
    caplog: pytest.LogCaptureFixture,
) -> None:
    fault_node, fault_vhost = any_fault_node, any_fault_vhost
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
    any_fault_node: PrivateNode, any_fault_vhost: FaultVhost
) -> None:
    fault_node, fault_vhost = any_fault_node, any_fault_vhost
    async with connected(fault_vhost.url) as conn:
        await conn.channel()
        await asyncio.to_thread(fault_node.close_all_connections, "infra test")
        async with asyncio.timeout(5):
            await conn.wait_closed()
    assert await asyncio.to_thread(fault_node.connection_count) == 0


async def test_stop_app_and_start_app(
    any_fault_node: PrivateNode, any_fault_vhost: FaultVhost
) -> None:
    fault_node, fault_vhost = any_fault_node, any_fault_vhost
    async with connected(fault_vhost.url) as conn:
        await conn.channel()
        await asyncio.to_thread(fault_node.stop_app)
        async with asyncio.timeout(5):
            await conn.wait_closed()
    assert fault_node.is_running()  # the Erlang VM stays up
    await asyncio.to_thread(fault_node.start_app)
    async with connected(fault_vhost.url) as conn:
        await conn.channel()


def _gone(node_name: str, pids: set[int], data_dir: Path) -> bool:
    """No process of the node runs (by pid or by marker), epmd forgot it, its folder is gone."""
    return (
        not any(_pid_alive(pid) for pid in pids)
        and not _marked_pids(node_name)
        and _epmd_port(node_name.partition("@")[0]) is None
        and not data_dir.exists()
    )


@pytest.mark.timeout(180)
async def test_stop_leaves_no_process_and_no_folder(any_fault_node: PrivateNode) -> None:
    """A node of its own (of the server of ``any_fault_node``), stopped gracefully."""
    node = PrivateNode(server=any_fault_node.server)
    try:
        await asyncio.to_thread(node.start)
        assert node.pid is not None
        pids = set(_descendants(node.pid)) | set(_marked_pids(node.name))
        data_dir = node.data_dir
        assert len(pids) > 1  # the VM and its helpers (erl_child_setup, inet_gethost, ...)
    finally:
        await asyncio.to_thread(node.stop)
    assert _gone(node.name, pids, data_dir)


_ORPHAN = """
import json, sys
from tests.faults.node import PrivateNode
node = PrivateNode(server=sys.argv[1])
node.start()
print(json.dumps({"name": node.name, "pid": node.pid, "data_dir": str(node.data_dir)}))
sys.stdout.flush()
sys.stdin.read()  # until the test kills us
"""


@pytest.mark.timeout(180)
async def test_the_watchdog_cleans_up_after_a_killed_session(
    any_fault_node: PrivateNode,
) -> None:
    """The process that started a node dies by SIGKILL (no ``stop()``, no ``atexit``): its
    watchdog kills the node and removes the folder."""
    orphan = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        _ORPHAN,
        any_fault_node.server,
        cwd=Path(__file__).resolve().parents[2],
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    try:
        async with asyncio.timeout(120):
            line = await orphan.stdout.readline() if orphan.stdout else b""
        assert line, "the orphan did not start its node (its stderr is above)"
        started = json.loads(line)
        pids = set(_descendants(started["pid"]))
        assert _unmarked(started["pid"], started["name"]) == []
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(orphan.pid, signal.SIGKILL)
        await orphan.wait()
    data_dir = Path(started["data_dir"])
    async with asyncio.timeout(60):
        while not _gone(started["name"], pids, data_dir):
            await asyncio.sleep(0.1)
