"""--no-declare: start only when what the handlers need is on the broker, as the file says."""

from __future__ import annotations

import asyncio

import pytest

from rabbitctl_retry import Message
from rabbitctl_retry.errors import ConfigError, NotFound
from rabbitctl_retry.ops.declare import provision
from rabbitctl_retry.runtime.handlers import Subscriber
from rabbitctl_retry.runtime.loader import HandlerSet
from rabbitctl_retry.runtime.service import RunOptions, Service
from rabbitctl_retry.topology.expand import expand
from rabbitctl_retry.topology.load import load_text
from tests.backends import Backend
from tests.topologies import GUIDE

TOPOLOGY = load_text(GUIDE)


async def noop(msg: Message) -> None:
    return None


def service(backend: Backend, queue: str) -> Service:
    return Service(
        HandlerSet(module="t", subscribers=(Subscriber(queue, noop, "t"),)),
        topology=TOPOLOGY,
        connect=backend.connect,
        options=RunOptions(declare=False, shutdown_timeout_s=1),
        clock=backend.clock,
    )


async def declare(backend: Backend, text: str) -> None:
    connection = await backend.connect()
    try:
        await provision(connection, expand(load_text(text)), dry_run=False, connect=backend.connect)
    finally:
        await connection.close()


async def test_a_missing_wait_queue_refuses_to_start(backend: Backend) -> None:
    await declare(backend, '[queues.refunds]\n[queues."refunds.dead"]\n')
    with pytest.raises(ConfigError, match=r"queue 'refunds\.retry'"):
        await service(backend, "refunds").run()


async def test_a_quorum_queue_without_its_limit_refuses_to_start(backend: Backend) -> None:
    await declare(backend, '[queues.payouts]\ntype = "quorum"\n[queues."payouts.dead"]\n')
    with pytest.raises(ConfigError) as refused:
        await service(backend, "payouts").run()
    assert "quorum queue 'payouts' does not carry the topology's delivery limit" in str(
        refused.value
    )
    assert "x-delivery-limit: file 4, broker (none)" in str(refused.value)


async def test_starts_when_everything_is_there(backend: Backend) -> None:
    await declare(
        backend,
        '[queues.refunds]\nmax_attempts = 5\ndead_letter = "refunds.dead"\ndelay = "dlx-ttl"\n'
        '[queues.payouts]\ntype = "quorum"\nmax_attempts = 5\ndead_letter = "payouts.dead"\n',
    )
    running = service(backend, "payouts")
    task = asyncio.ensure_future(running.run())
    await running.wait_ready()
    running.stop()
    await task
    assert running.connections == 1


async def test_without_a_topology_a_missing_queue_says_why_and_where(backend: Backend) -> None:
    """rr run without --topology declares nothing: a missing queue names its vhost (the
    server's words) and says what to give (docs/reference/runtime.md)."""
    running = Service(
        HandlerSet(module="t", subscribers=(Subscriber("nowhere", noop, "t"),)),
        topology=None,
        connect=backend.connect,
        options=RunOptions(shutdown_timeout_s=1),
        clock=backend.clock,
    )
    with pytest.raises(NotFound) as missing:
        await running.run()
    said = str(missing.value)
    assert "no queue 'nowhere' in vhost '" in said
    assert "rr run was given no --topology, so it declares nothing" in said
    assert "give --topology TOPOLOGY.toml" in said
