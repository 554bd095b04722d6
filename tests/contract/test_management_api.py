"""The management port (``transport/management.py``): the same scenario on RabbitMQ's
management API and on the emulator's twin (``emulator/management.py``), for everything rr
reads of it: the overview, the nodes and their alarms, where a queue lives, a quorum queue's
members online, the deprecated-features table; and
the policies it sets (what they do: tests/contract/test_policies.py).

Of the shared servers 4.0.5 and 4.3.6 have a management API (tests/broker/
test_doctor_deprecated_on_servers.py): the scenario runs on them and on the twin set to every
line; the shared 3.10.8 is skipped, and tests/cluster/test_management_contract.py runs the
scenarios on the 3.10.8 API of the cluster's first node. Node names differ by nature between
the two (the twin's node is ``rabbit@emulator``): the scenario names each node by its place in
``/api/nodes``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib.metadata import version as installed_version
from typing import Any

import pika
import pytest

from rabbitctl_retry.doctor import identity_differences
from rabbitctl_retry.errors import BrokerRefused, NotFound
from rabbitctl_retry.server import (
    DeprecatedFeature,
    NodeResources,
    Policy,
    QueueConsumer,
    QueueHealth,
    Unstated,
    is_rr_client,
)
from rabbitctl_retry.transport.base import Properties, identity_of
from rabbitctl_retry.transport.management import ManagementApi
from rabbitctl_retry.transport.management_http import HttpManagementApi
from tests.backends import Backend, Check, EmulatorBackend, RabbitBackend, until_within
from tests.broker.test_doctor_deprecated_on_servers import MANAGEMENT_URLS
from tests.contract.test_default_queue_type import quorum_by_default
from tests.contract.versions import expected
from tests.interop.foreign import pika_consumer

RR_VERSION = installed_version("rabbitctl-retry")
"""What rr's own client sends as its ``version`` (the twin's connections stand in for rr's
and send none: it states none)."""

TWIN_URL = "http://guest:guest@emulator:15672/"

STATISTICS_S = 60.0
"""How long a real server's management API may take to state what its statistics show: it
samples every 5 s, a rate needs two samples, and a busy machine delays both (a scenario's
10 s of ``backend.until`` is too close)."""


async def until_stated(backend: Backend, check: Check, what: str) -> None:
    await until_within(backend, check, what, real_s=STATISTICS_S)


def management_api(backend: Backend) -> ManagementApi:
    """The management API of ``backend``'s server, for the queues of its vhost."""
    if isinstance(backend, EmulatorBackend):
        return backend.emulator.management(TWIN_URL, vhost=backend.vhost)
    url = MANAGEMENT_URLS.get(backend.version)
    if url is None:
        pytest.skip(f"the shared RabbitMQ {backend.version} has no management API")
    return HttpManagementApi(url, vhost=backend.vhost)


@asynccontextmanager
async def foreign_consumer(backend: Backend, queue: str) -> AsyncIterator[tuple[str, str]]:
    """A consumer of ``queue`` that is not rr, on a connection named ``svc-a``: pika itself on
    RabbitMQ, and on the emulator a connection that says what pika says of itself; its
    ``product`` and ``version``."""
    product, version = "Pika Python Client Library", pika.__version__
    if isinstance(backend, RabbitBackend):
        consumer = pika_consumer(backend.url, queue, "ack", connection_name="svc-a")
        await asyncio.to_thread(consumer.__enter__)
        try:
            yield product, version
        finally:
            await asyncio.to_thread(consumer.__exit__, None, None, None)
        return
    assert isinstance(backend, EmulatorBackend)
    properties = {"product": product, "version": version, "connection_name": "svc-a"}
    connection = backend.emulator.connect(client_properties=properties)

    async def hold(delivery: object) -> None:
        return None

    await (await connection.channel()).consume(queue, hold)
    try:
        yield product, version
    finally:
        await connection.close()


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
    """What ``rr topology show --live`` reads (docs/how-to/migrate-to-quorum.md, "Changing a
    topology"): the queue's type and arguments, and the one policy and operator policy that apply to
    it (of two matching policies, the higher)."""
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


async def test_a_queue_states_what_its_messages_weigh(backend: Backend) -> None:
    """What ``rr migrate`` weighs against a rebuilt queue's ``x-max-length-bytes``
    (docs/how-to/migrate-to-quorum.md, "Migrating a queue"): what each queue counts toward
    that limit, ready and unacknowledged alike. A classic queue states the bodies; a quorum
    queue too before 4.3, and on 4.3 adds each message's properties as published
    (``m1`` with ``message_id = "m1"``: 2 + 5 bytes; measured on 3.10.8, 4.0.5 and 4.3.6,
    docs/measurements.md). The server samples every 5 s: the test waits for the numbers."""
    api = management_api(backend)
    channel = await backend.channel()
    bodies = (b"abc", b"hello", b"seven b")
    for queue, arguments in (("mq.bytes.c", {}), ("mq.bytes.q", {"x-queue-type": "quorum"})):
        await channel.queue_declare(queue, arguments=arguments)
        for body in bodies:
            await channel.publish(body, routing_key=queue, properties=Properties(message_id="m1"))
    holder = await backend.channel(confirms=False)
    for queue in ("mq.bytes.c", "mq.bytes.q"):  # one of each unacknowledged
        assert await holder.get(queue) is not None
    properties_bytes = 5 if expected(backend.version, "quorum-bytes-count-properties") else 0
    weights = {"mq.bytes.c": 15, "mq.bytes.q": 15 + len(bodies) * properties_bytes}
    stated: dict[str, int | None] = {}

    async def weighed() -> bool:
        for queue in weights:
            state = await api.queue_state(queue)
            stated[queue] = None if state is None else state.message_bytes
        return stated == weights

    await until_stated(backend, weighed, f"the queues' weights {weights}")
    await holder.close()


async def test_the_vhost_lists_its_queues_with_their_types(backend: Backend) -> None:
    """What ``rr doctor`` reads to check every queue of the vhost for classic queue mirroring
    (docs/reference/cli.md, "rr doctor"): each queue's name and type, sorted by name."""
    api = management_api(backend)
    channel = await backend.channel()
    await channel.queue_declare("mq.list.c")
    await channel.queue_declare("mq.list.q", arguments={"x-queue-type": "quorum"})

    async def both_listed() -> bool:
        listed = await api.queues()
        return {("mq.list.c", "classic"), ("mq.list.q", "quorum")} <= set(listed)

    await backend.until(both_listed, "both queues listed")
    listed = await api.queues()
    assert list(listed) == sorted(listed)


async def test_publishing_by_name_shows_in_the_default_exchange_rate(backend: Backend) -> None:
    """What ``rr migrate`` asks before it rebuilds a queue (docs/how-to/migrate-to-quorum.md,
    "Migrating a queue"): the rate of messages published to the default exchange, above 0 while
    something publishes by name (the server samples every 5 s: it shows within seconds)."""
    api = management_api(backend)
    channel = await backend.channel()
    await channel.queue_declare("mq.rate")
    assert await api.publish_rate("no-such-exchange") is None

    async def publishing() -> bool:
        for _ in range(20):
            await channel.publish(b"x", routing_key="mq.rate")
        rate = await api.publish_rate("")
        return rate is not None and rate > 0

    await until_stated(backend, publishing, "a publish rate above 0 on the default exchange")


async def test_each_queue_states_its_traffic(backend: Backend) -> None:
    """What ``rr status`` reads with a management URL (docs/reference/cli.md, "rr status"): per
    queue its type, ready and unacked messages and each consumer's prefetch; the server's
    statistics lag by up to 5 s, so the test waits for them."""
    api = management_api(backend)
    channel = await backend.channel()
    await channel.queue_declare("mq.traffic.c")
    await channel.queue_declare("mq.traffic.q", arguments={"x-queue-type": "quorum"})
    for queue, count in (("mq.traffic.c", 3), ("mq.traffic.q", 1)):
        for number in range(count):
            await channel.publish(b"m%d" % number, routing_key=queue)
    holder = await backend.channel(confirms=False)

    async def hold(delivery: object) -> None:  # never acks
        return None

    await holder.qos(2)
    await holder.consume("mq.traffic.c", hold)
    await holder.qos(5)
    await holder.consume("mq.traffic.q", hold)

    def view(activities: tuple[Any, ...]) -> dict[str, Any]:
        return {
            a.name: (a.kind, a.ready, a.unacked, a.prefetches)
            for a in activities
            if a.name.startswith("mq.traffic.")
        }

    wanted = {
        "mq.traffic.c": ("classic", 1, 2, (2,)),
        "mq.traffic.q": ("quorum", 0, 1, (5,)),
    }

    async def stated() -> bool:
        return view(await api.queue_activity()) == wanted

    await until_stated(backend, stated, "the queues' traffic stated")
    for activity in await api.queue_activity():
        for rate in (activity.publish_per_s, activity.deliver_per_s):
            assert rate is None or rate >= 0.0
        if isinstance(
            backend, EmulatorBackend
        ):  # the twin keeps no rates (docs/reference/testing.md)
            assert (activity.publish_per_s, activity.deliver_per_s) == (0.0, 0.0)


def nodes_view(nodes: tuple[NodeResources, ...]) -> list[tuple[Any, ...]]:
    """What a scenario compares of ``/api/nodes``: each node by its place, whether it runs,
    its alarms, and whether every number is stated (the numbers themselves differ)."""
    return [
        (
            f"node {index}",
            node.running,
            node.mem_alarm,
            node.disk_free_alarm,
            all(
                isinstance(count, int) and count >= 0
                for count in (
                    node.mem_used_bytes,
                    node.mem_limit_bytes,
                    node.disk_free_bytes,
                    node.disk_free_limit_bytes,
                )
            ),
        )
        for index, node in enumerate(nodes)
    ]


async def test_the_node_states_no_alarm(backend: Backend) -> None:
    """What ``rr doctor`` reads of the nodes (docs/reference/cli.md, "rr doctor"): a shared server
    runs without a resource alarm (alarms are raised only on the twin, never on a shared server:
    tests/unit/test_doctor_health.py, tests/cli/test_doctor_health_twin.py)."""
    api = management_api(backend)

    nodes = await api.node_resources()

    assert nodes_view(nodes) == [("node 0", True, False, False, True)]
    assert tuple(node.name for node in nodes) == await api.nodes()


async def test_a_quorum_queue_states_its_members_online(backend: Backend) -> None:
    """What ``rr doctor`` reads of the queues (docs/reference/cli.md, "rr doctor"): a quorum queue's
    members, all online, on the one node; a classic queue has none; a depth rate, when
    stated, is a number (0 for a queue nothing fills)."""
    api = management_api(backend)
    channel = await backend.channel()
    await channel.queue_declare("mq.health.c")
    await channel.queue_declare("mq.health.q", arguments={"x-queue-type": "quorum"})
    nodes = await api.nodes()

    def view(found: tuple[QueueHealth, ...]) -> dict[str, Any]:
        return {
            queue.name: (queue.kind, queue.members, queue.online)
            for queue in found
            if queue.name.startswith("mq.health.")
        }

    wanted = {"mq.health.c": ("classic", None, None), "mq.health.q": ("quorum", nodes, nodes)}

    async def stated() -> bool:
        return view(await api.queue_health()) == wanted

    await until_stated(backend, stated, "the queues' members stated")
    for queue in await api.queue_health():
        if queue.name.startswith("mq.health.") and queue.messages_per_s is not None:
            assert queue.messages_per_s == 0.0


async def test_the_vhost_states_its_default_queue_type(backend: Backend) -> None:
    """What ``rr declare``, ``rr status``, ``rr topology show --live`` and ``rr doctor`` say
    of the vhost (docs/reference/cli.md): its default queue type, ``classic`` for a vhost made
    without one (measured on 4.0.5 and 4.3.6; 3.10.8 states ``undefined``, read as none:
    tests/cluster/test_management_contract.py), ``quorum`` for one made with
    ``--default-queue-type quorum``."""
    api = management_api(backend)
    made_without = None if backend.version == "3.10" else "classic"
    assert await api.vhost_default_queue_type() == made_without
    async with quorum_by_default(backend) as typed:
        assert await management_api(typed).vhost_default_queue_type() == "quorum"


async def test_each_consumer_states_its_clients_properties(backend: Backend) -> None:
    """What ``rr doctor`` and ``rr status`` read to tell rr's consumers from the others
    (docs/reference/cli.md, "Consumers that are not rr"): each consumer's queue, whether it
    acknowledges, and its connection's client properties: pika's as pika sends them, rr's
    own as rr's client sends them."""
    api = management_api(backend)
    channel = await backend.channel()
    await channel.queue_declare("mq.consumed", arguments={"x-queue-type": "classic"})

    async def hold(delivery: object) -> None:
        return None

    rr_side = await (await backend.connect()).channel()
    await rr_side.consume("mq.consumed", hold)
    rr_version = None if isinstance(backend, EmulatorBackend) else RR_VERSION
    async with foreign_consumer(backend, "mq.consumed") as (product, version):

        def view(found: tuple[QueueConsumer, ...]) -> list[tuple[Any, ...]]:
            return sorted(
                (c.queue, c.ack_required, c.product, c.version, c.connection_name)
                for c in found
                if c.queue == "mq.consumed"
            )

        wanted = sorted(
            [
                ("mq.consumed", True, product, version, "svc-a"),
                ("mq.consumed", True, "rr", rr_version, "rr"),
            ]
        )

        async def stated() -> bool:
            return view(await api.consumers()) == wanted

        await until_stated(backend, stated, "both consumers stated with their clients")
        found = [c for c in await api.consumers() if c.queue == "mq.consumed"]
        assert [is_rr_client(c.product, c.connection_name) for c in found].count(True) == 1
        assert len({c.connection for c in found}) == 2  # the server's name of each connection
