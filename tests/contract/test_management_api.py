"""The management port (``transport/management.py``): the same scenario on RabbitMQ's
management API and on the emulator's twin (``emulator/management.py``), for everything rr
reads of it: the overview, the nodes, where a queue lives, the deprecated-features table; and
the policies it sets (what they do: tests/contract/test_policies.py).

Of the shared servers only 4.3.6 has a management API (tests/broker/
test_doctor_deprecated_on_servers.py): the scenario runs on it and on the twin set to every
line; the real 3.10.8 and 4.0.5 are skipped. Node names differ by nature between the two (the
twin's node is ``rabbit@emulator``): the scenario names each node by its place in
``/api/nodes``.
"""

from __future__ import annotations

from typing import Any

import pytest

from rabbitctl_retry.doctor import identity_differences
from rabbitctl_retry.errors import BrokerRefused, NotFound
from rabbitctl_retry.server import DeprecatedFeature, Policy, Unstated
from rabbitctl_retry.transport.base import identity_of
from rabbitctl_retry.transport.management import ManagementApi
from rabbitctl_retry.transport.management_http import HttpManagementApi
from tests.backends import Backend, EmulatorBackend
from tests.broker.test_doctor_deprecated_on_servers import MANAGEMENT_URLS
from tests.contract.versions import expected

TWIN_URL = "http://guest:guest@emulator:15672/"


def management_api(backend: Backend) -> ManagementApi:
    """The management API of ``backend``'s server, for the queues of its vhost."""
    if isinstance(backend, EmulatorBackend):
        return backend.emulator.management(TWIN_URL, vhost=backend.vhost)
    url = MANAGEMENT_URLS.get(backend.version)
    if url is None:
        pytest.skip(f"the shared RabbitMQ {backend.version} has no management API")
    return HttpManagementApi(url, vhost=backend.vhost)


def features_view(table: tuple[DeprecatedFeature, ...] | Unstated | None) -> Any:
    """The deprecated-features table as tests/contract/versions.py states it."""
    if table is None:
        return None
    if isinstance(table, Unstated):
        return ("unstated", list(table.names))
    return [(feature.name, feature.permitted, feature.phase) for feature in table]


async def test_the_api_answers_for_the_server_amqp_reached(backend: Backend) -> None:
    api = management_api(backend)
    connection = await backend.connect()
    overview = await api.overview()
    amqp = identity_of(connection)

    assert overview.version == connection.server_version
    assert overview.product == "RabbitMQ"
    assert overview.cluster_name  # a text: the cluster's name
    assert identity_differences(amqp, overview) is None
    assert ":guest@" not in api.shown  # the password censored


async def test_a_queue_lives_on_the_one_node(backend: Backend) -> None:
    api = management_api(backend)
    channel = await backend.channel()
    await channel.queue_declare("mq.classic")
    await channel.queue_declare("mq.quorum", arguments={"x-queue-type": "quorum"})
    nodes = await api.nodes()
    named = {node: f"node {index}" for index, node in enumerate(nodes)}

    async def where(queue: str) -> tuple[str | None, list[str | None]] | None:
        placement = await api.placement(queue)
        if placement is None:
            return None
        return named.get(placement.leader or ""), [named.get(m) for m in placement.members]

    assert list(named.values()) == ["node 0"]
    assert await where("mq.classic") == ("node 0", ["node 0"])
    assert await where("mq.quorum") == ("node 0", ["node 0"])
    assert await where("mq.absent") is None
    await channel.queue_delete("mq.quorum")
    assert await where("mq.quorum") is None


async def test_the_deprecated_features_table(backend: Backend) -> None:
    api = management_api(backend)

    assert features_view(await api.deprecated_features()) == expected(
        backend.version, "deprecated-features"
    )


async def test_policies_are_set_listed_and_deleted(backend: Backend) -> None:
    api = management_api(backend)
    policy = Policy.of("rr-limit", "^work$", {"max-length": 2}, priority=3)
    operator = Policy.of("rr-ttl", "^work$", {"message-ttl": 60000}, apply_to="queues")

    await api.put_policy(policy)
    await api.put_policy(operator, operator=True)
    assert await api.policies() == (policy,)
    assert await api.policies(operator=True) == (operator,)
    with pytest.raises(BrokerRefused):  # an operator policy takes no dead-letter key
        await api.put_policy(
            Policy.of("rr-dlx", "^work$", {"dead-letter-exchange": "x"}), operator=True
        )
    await api.delete_policy("rr-limit")
    await api.delete_policy("rr-ttl", operator=True)
    assert await api.policies() == ()
    assert await api.policies(operator=True) == ()
    with pytest.raises(NotFound):
        await api.delete_policy("rr-limit")


async def test_a_queue_states_its_arguments_and_policies(backend: Backend) -> None:
    """What ``rr topology show --live`` reads (docs/topology.md, "Changing a topology"): the
    queue's type and arguments, and the one policy and operator policy that apply to it (of
    two matching policies, the higher)."""
    api = management_api(backend)
    channel = await backend.channel()
    await channel.queue_declare("mq.state", arguments={"x-queue-type": "quorum", "x-max-length": 5})
    assert await api.queue_state("mq.absent") is None
    await api.put_policy(Policy.of("p.low", "^mq\\.state$", {"max-length": 3}, priority=1))
    await api.put_policy(Policy.of("p.high", "^mq\\.", {"message-ttl": 60000}, priority=2))
    await api.put_policy(Policy.of("o", "^mq\\.state$", {"max-length": 4}), operator=True)

    async def both_apply() -> bool:
        state = await api.queue_state("mq.state")
        return state is not None and (state.policy, state.operator_policy) == ("p.high", "o")

    await backend.until(both_apply, "the policies applied to mq.state")
    state = await api.queue_state("mq.state")
    assert state is not None
    assert (state.kind, dict(state.arguments)) == (
        "quorum",
        {"x-queue-type": "quorum", "x-max-length": 5},
    )
    for name in ("p.low", "p.high"):
        await api.delete_policy(name)
    await api.delete_policy("o", operator=True)
