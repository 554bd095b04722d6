"""The management port's contract scenarios (tests/contract/test_management_api.py) on a real
RabbitMQ 3.10.8 with its management API: the local cluster's first node, in a vhost of its
own. The shared 3.10.8 has no management plugin, so this is where the emulator's twin at 3.10
is held against the server (docs/reference/testing.md, "A cluster"); a scenario names each
node by its place in ``/api/nodes``, and a quorum queue's members are the cluster's three."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import pytest

from tests.backends import Backend, RabbitBackend, VhostPool
from tests.broker.test_doctor_deprecated_on_servers import MANAGEMENT_URLS
from tests.cluster.conftest import LocalCluster
from tests.contract import test_management_api as scenarios
from tests.shared_node import SharedBroker

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(300)]

Scenario = Callable[[Backend], Awaitable[None]]

ONE_NODE = {
    "test_a_queue_lives_on_the_one_node": "tests/cluster/test_cluster_cli.py places queues",
    "test_the_node_states_no_alarm": "tests/cluster/test_doctor_health.py reads three nodes",
}
"""Scenarios of a one-node server (the shared ones): not run on the three nodes, and where
the cluster suite checks the same reading."""

SCENARIOS: list[Any] = [
    pytest.param(getattr(scenarios, name), id=name.removeprefix("test_"))
    for name in sorted(dir(scenarios))
    if name.startswith("test_") and name not in ONE_NODE
]


@pytest.fixture(scope="module")
def node_vhosts(cluster: LocalCluster) -> Iterator[VhostPool]:
    """Fresh vhosts on the cluster's first node, as the 3.10 line (a pool of this module's
    own: the shared 3.10.8's pool stays the process's), deleted at the end."""
    broker = SharedBroker(
        version="3.10",
        release="3.10.8",
        url=cluster.url(1),
        node=cluster.node(1),
        ctl_prefix=("rabbitmqctl",),
    )
    pool = VhostPool(broker, batch=len(SCENARIOS))
    try:
        yield pool
    finally:
        pool.close()


@pytest.fixture
async def node_backend(
    cluster: LocalCluster, node_vhosts: VhostPool, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Backend]:
    """A backend on a fresh vhost of the cluster's first node, whose management API stands
    for the 3.10 line's while the scenario runs."""
    monkeypatch.setitem(MANAGEMENT_URLS, "3.10", cluster.management_url(1))
    vhost = await node_vhosts.take()
    backend = RabbitBackend(node_vhosts.broker, pool=node_vhosts, vhost=vhost, deadline_s=10.0)
    try:
        yield backend
    finally:
        await backend.close()


@pytest.mark.parametrize("scenario", SCENARIOS)
async def test_the_scenario_holds_on_3_10(node_backend: Backend, scenario: Scenario) -> None:
    await scenario(node_backend)
