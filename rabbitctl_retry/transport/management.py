"""The management port: what rr asks RabbitMQ's management HTTP API, for what AMQP 0-9-1
cannot tell: which server the API answers for, which nodes form the cluster, which of them
hold each queue (docs/how-to/run-on-a-cluster.md, "Replicas"), and which deprecated features the
server permits or denies, the nodes' resource alarms, a quorum queue's members online and how fast a
queue grows (``rr doctor``, docs/reference/cli.md, which first checks with ``/api/overview`` that
the API answers for the server AMQP reached); and the vhost's policies and operator policies,
which AMQP cannot set (docs/reference/topology.md, "Policies and arguments").

Pure types and Protocols; no I/O here. Two adapters implement the port, as two implement the
AMQP one (``transport/base.py``): ``transport/management_http.py`` (the HTTP API itself) and
``emulator/management.py`` (the emulator's twin, answering for the emulated server). The
contract suite runs the same scenario on the real API and on the twin
(``tests/contract/test_management_api.py``).

rr asks only when it is given a management URL (``--management-url``,
``$RR_MANAGEMENT_URL`` or ``[broker] management_url``), with the plugin's own credentials
in it: ``http://user:password@mq1:15672/``, checked by
:func:`~rabbitctl_retry.urls.parse_management_url` (the rules of broker URLs). Methods raise
:mod:`rabbitctl_retry.errors` classes only: :class:`~rabbitctl_retry.errors.AccessRefused`
for a refused login (exit 77), :class:`~rabbitctl_retry.errors.BrokerUnreachable` for
anything else that keeps rr from an answer it can use (exit 69).
"""

from __future__ import annotations

import urllib.parse
from typing import Protocol

from rabbitctl_retry.server import (
    DeprecatedFeature,
    NodeResources,
    Placement,
    Policy,
    QueueActivity,
    QueueConsumer,
    QueueHealth,
    QueueState,
    ServerIdentity,
    Unstated,
)
from rabbitctl_retry.urls import parse_management_url


class ManagementApi(Protocol):
    """The management API of one server, for the queues of one vhost."""

    @property
    def shown(self) -> str:
        """The API's URL as messages show it (password censored)."""
        ...

    async def overview(self) -> ServerIdentity:
        """Which server the API answers for (``GET /api/overview``): its version, and, when
        told, its product and cluster name."""
        ...

    async def nodes(self) -> tuple[str, ...]:
        """The names of every node of the cluster, running or not, sorted."""
        ...

    async def node_resources(self) -> tuple[NodeResources, ...]:
        """Every node of the cluster, whether it runs and, while it does, its memory and disk
        alarms and the numbers behind them (``rr doctor``), sorted by name."""
        ...

    async def queue_health(self) -> tuple[QueueHealth, ...]:
        """Every queue of the vhost with a quorum queue's members and the ones online, and
        the rate its depth changes at (``rr doctor``), sorted by name."""
        ...

    async def placement(self, queue: str) -> Placement | None:
        """Where ``queue`` lives, or None when the API does not know it."""
        ...

    async def queues(self) -> tuple[tuple[str, str], ...]:
        """Every queue of the vhost: its name and type (``classic``, ``quorum``,
        ``stream``), sorted by name."""
        ...

    async def queue_activity(self) -> tuple[QueueActivity, ...]:
        """Every queue of the vhost with its traffic: ready and unacked messages, each
        consumer's prefetch, the publish and deliver rates (``rr status``), sorted by name."""
        ...

    async def consumers(self) -> tuple[QueueConsumer, ...]:
        """Every consumer of the vhost's queues, each with what its connection's client
        said of itself (``rr doctor``, ``rr status``: the consumers that are not rr), sorted
        by queue and tag."""
        ...

    async def vhost_default_queue_type(self) -> str | None:
        """The vhost's default queue type (``classic``, ``quorum``): what a queue declared
        without ``x-queue-type`` becomes; None when the API states none."""
        ...

    async def queue_state(self, queue: str) -> QueueState | None:
        """``queue``'s type, arguments and the policies that apply to it, or None when the
        API does not know it."""
        ...

    async def deprecated_features(self) -> tuple[DeprecatedFeature, ...] | Unstated | None:
        """Every deprecated feature the server knows and whether it permits it, sorted by
        name; None when the API has no such table (RabbitMQ 3.10.8's); :class:`Unstated`
        when it lists the features without their state (RabbitMQ 4.0.5's)."""
        ...

    async def policies(self, *, operator: bool = False) -> tuple[Policy, ...]:
        """The policies of the vhost (``operator``: its operator policies), sorted by name."""
        ...

    async def put_policy(self, policy: Policy, *, operator: bool = False) -> None:
        """Set ``policy`` in the vhost (``operator``: as an operator policy), replacing one of
        its name: it applies to the existing queues at once (docs/reference/topology.md, "Policies
        and arguments"). A definition the server refuses raises
        :class:`~rabbitctl_retry.errors.BrokerRefused` with its reason."""
        ...

    async def delete_policy(self, name: str, *, operator: bool = False) -> None:
        """Delete the policy ``name`` of the vhost (``operator``: the operator policy);
        :class:`~rabbitctl_retry.errors.NotFound` when there is none."""
        ...

    async def publish_rate(self, exchange: str) -> float | None:
        """Messages per second published into ``exchange`` (``""``: the default exchange) as
        the server's statistics last sampled them (every 5 s: a rate lags by up to 10 s);
        None when it states none (nothing published since its statistics began, or the
        exchange does not exist)."""
        ...


class ManagementConnector(Protocol):
    """How a command reaches a management API, given its URL and the vhost of the queues it
    asks about: the HTTP adapter's ``HttpManagementApi`` for rr itself, an emulator's
    ``management`` for tests. The CLI picks one and hands it to every command, as it does
    the AMQP ``Connector`` (docs/architecture.md, "Layers")."""

    def __call__(self, url: str, *, vhost: str) -> ManagementApi: ...


def check_management_url(url: str) -> str:
    """``url`` if rr can use it as a management API base, else :class:`UsageError`
    (:func:`~rabbitctl_retry.urls.parse_management_url`)."""
    parse_management_url(url)
    return url


def vhost_of(amqp_url: str) -> str:
    """The virtual host an AMQP URL names: its path without the leading ``/``, decoded;
    ``/`` when the URL has no path."""
    path = urllib.parse.urlsplit(amqp_url).path
    return urllib.parse.unquote(path[1:]) if len(path) > 1 else "/"


__all__ = ["ManagementApi", "ManagementConnector", "check_management_url", "vhost_of"]
