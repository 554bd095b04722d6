"""Fixtures of the fault suite: private RabbitMQ nodes, a fault proxy, a vhost per test.

``fault_node`` (session)
    A :class:`~tests.faults.node.PrivateNode` of the suite's own (RabbitMQ 3.10, the machine's
    package), never the shared broker. Skipped when RabbitMQ is not installed, but failed
    when ``CI=true``: CI must never pass by skipping the fault tests.
``proxy`` (function)
    A :class:`~tests.faults.proxy.FaultProxy` to the node's AMQP port, closed after the test.
``fault_vhost`` (function)
    A fresh vhost on the node (guest has full permissions), deleted after the test, with
    its URL direct and through ``proxy``.
``any_fault_node``, ``any_proxy``, ``any_fault_vhost`` (function)
    The same on the private node of each server the run tests on (``RR_TEST_BROKERS``,
    tests/shared_node.py): parametrized with the ids ``3.10`` (the ``fault_node`` itself),
    ``4.0`` and ``4.3`` (a node from that line's chroot, scripts/rabbitmq-chroot.sh; skipped
    without it, failed when ``CI=true``). ``@pytest.mark.parametrize("any_fault_node",
    ["4.0"], indirect=True)`` runs a test on one of them only.
``fault_nodes`` (session)
    The registry behind them: a node per server, started on first use, stopped at the end.

Before and after every test here every node started so far is healed (restarted after a
kill, app started, memory alarm cleared), so one test's fault does not leak into the next.
Healing never starts a node. The variants of each chroot line go into an ``xdist_group`` of
that line, ``faults-4.0`` and ``faults-4.3`` (see :func:`pytest_collection_modifyitems`): one
worker starts a node of that line.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Generator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import NoReturn
from urllib.parse import quote

import pytest

from tests.conftest import FAULT_GROUPS
from tests.faults import FAULT_ROWS
from tests.faults.node import SERVERS, NodeError, PrivateNode, chroot_of, tools_missing
from tests.faults.proxy import FaultProxy
from tests.shared_node import chosen_versions


def fault_group_of(server: str) -> str:
    """The ``xdist_group`` of every test on the private node of a chroot line ``server``:
    ``faults-4.0``, ``faults-4.3``."""
    return f"faults-{server}"


@dataclass(frozen=True, slots=True)
class FaultVhost:
    """A vhost of one test on the private node."""

    name: str
    url: str
    """Straight to the node: ``amqp://guest:guest@127.0.0.1:<node port>/<vhost>``."""
    proxy_url: str
    """Through the test's proxy: ``amqp://guest:guest@127.0.0.1:<proxy port>/<vhost>``."""


def _unavailable(message: str) -> NoReturn:
    if os.environ.get("CI") == "true":
        pytest.fail(f"{message} (CI=true: the fault suite must run in CI)", pytrace=False)
    pytest.skip(message)


ADVANCED_CONFIG = "[{rabbit, [{dead_letter_worker_publisher_confirm_timeout, 5000}]}].\n"
"""A quorum queue's at-least-once dead-lettering tries a refused dead letter again after this
many ms (3 minutes by default): 5 s keeps the full dead-letter queue test short."""


class FaultNodes:
    """The private nodes of this session (of this xdist worker): one per server, started
    when a test first asks for it, stopped by :meth:`stop`."""

    def __init__(self) -> None:
        self._nodes: dict[str, PrivateNode] = {}
        self._failed: dict[str, str] = {}

    def get(self, server: str) -> PrivateNode:
        """The running node of ``server`` (``"3.10"``, ``"4.0"``, ``"4.3"``), started now if it
        is the first ask. Skips (fails when ``CI=true``) when the server is not here; a start that
        failed fails every later ask at once, rather than trying again for each test."""
        node = self._nodes.get(server)
        if node is not None:
            return node
        problem = tools_missing(server)
        if problem is not None:
            _unavailable(f"no private RabbitMQ {server} node for the fault tests: {problem}")
        if server in self._failed:
            raise NodeError(
                f"the private RabbitMQ {server} node did not start earlier in "
                f"this session: {self._failed[server]}"
            )
        node = PrivateNode(server=server, advanced_config=ADVANCED_CONFIG)
        try:
            node.start()
        except NodeError as exc:
            node.stop(graceful=False)
            self._failed[server] = str(exc)
            raise
        self._nodes[server] = node
        return node

    def heal(self) -> None:
        """Heal every node started so far (:meth:`PrivateNode.heal`); start none."""
        for node in self._nodes.values():
            node.heal()

    def stop(self) -> None:
        for node in self._nodes.values():
            node.stop(graceful=False)  # the data folder goes too: no need to flush it first
        self._nodes.clear()


@pytest.fixture(scope="session")
def fault_nodes() -> Iterator[FaultNodes]:
    """The session's private nodes, stopped at its end."""
    nodes = FaultNodes()
    try:
        yield nodes
    finally:
        nodes.stop()


@pytest.fixture(scope="session")
def fault_node(fault_nodes: FaultNodes) -> PrivateNode:
    """The suite's own RabbitMQ 3.10 node, started once per session and stopped at its end."""
    return fault_nodes.get("3.10")


@pytest.fixture(params=[server for server in chosen_versions() if server in SERVERS])
def any_fault_node(request: pytest.FixtureRequest, fault_nodes: FaultNodes) -> PrivateNode:
    """The private node of each server the run tests on (ids ``3.10``, ``4.0``, ``4.3``),
    started on first use."""
    server: str = request.param
    return fault_nodes.get(server)


@pytest.fixture(autouse=True)
def _healthy_fault_nodes(fault_nodes: FaultNodes) -> Iterator[None]:
    fault_nodes.heal()
    yield
    fault_nodes.heal()


@pytest.fixture
def proxy(fault_node: PrivateNode) -> Iterator[FaultProxy]:
    """A fault proxy in front of the private node's AMQP port."""
    with FaultProxy(fault_node.port) as fault_proxy:
        yield fault_proxy


@pytest.fixture
def any_proxy(any_fault_node: PrivateNode) -> Iterator[FaultProxy]:
    """A fault proxy in front of ``any_fault_node``'s AMQP port."""
    with FaultProxy(any_fault_node.port) as fault_proxy:
        yield fault_proxy


@contextmanager
def _test_vhost(node: PrivateNode, fault_proxy: FaultProxy) -> Iterator[FaultVhost]:
    """A fresh vhost (``fault/<hex>``: the slash checks the percent-encoding) on ``node``,
    deleted after the test (the node healed first)."""
    name = f"fault/{secrets.token_hex(4)}"
    node.add_vhost(name)
    try:
        yield FaultVhost(
            name=name,
            url=node.url_for(name),
            proxy_url=fault_proxy.url_for(quote(name, safe="")),
        )
    finally:
        node.heal()
        node.delete_vhost(name)


@pytest.fixture
def fault_vhost(fault_node: PrivateNode, proxy: FaultProxy) -> Iterator[FaultVhost]:
    """A fresh vhost on the private 3.10 node for one test."""
    with _test_vhost(fault_node, proxy) as vhost:
        yield vhost


@pytest.fixture
def any_fault_vhost(any_fault_node: PrivateNode, any_proxy: FaultProxy) -> Iterator[FaultVhost]:
    """A fresh vhost on ``any_fault_node`` for one test, its URLs direct and through
    ``any_proxy``."""
    with _test_vhost(any_fault_node, any_proxy) as vhost:
        yield vhost


def _server_of(item: pytest.Item) -> str:
    """The server a fault test runs on: its ``any_fault_node`` parameter, else 3.10."""
    callspec = getattr(item, "callspec", None)
    return str(callspec.params.get("any_fault_node", "3.10")) if callspec else "3.10"


def _fault_group(mark: pytest.Mark) -> bool:
    """Whether ``mark`` is the ``xdist_group`` ``faults-N`` tests/conftest.py gave a test."""
    name = mark.args[0] if mark.args else mark.kwargs.get("name", "")
    return mark.name == "xdist_group" and str(name).startswith("faults-")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Put every fault test on the node of a chroot line into that line's ``xdist_group``
    (:func:`fault_group_of`) and deal the others into ``faults-1``.. again, in order (as
    tests/conftest.py dealt them all before this hook: its own runs first, ``tryfirst``). So a
    run starts one private node of each such line, on one worker, and the 3.10 tests stay as
    balanced as before; without such tests the groups come out as tests/conftest.py made
    them. (Before ``-m`` deselects and before tests/conftest.py's ``_GroupIds`` passes the
    groups to xdist, ``trylast``.)"""
    dealt = 0
    for item in items:
        if item.get_closest_marker("faults") is None:
            continue  # this hook sees the whole session's items
        item.own_markers[:] = [mark for mark in item.own_markers if not _fault_group(mark)]
        server = _server_of(item)
        if chroot_of(server) is not None:
            item.add_marker(pytest.mark.xdist_group(fault_group_of(server)))
        else:
            item.add_marker(pytest.mark.xdist_group(f"faults-{dealt % FAULT_GROUPS + 1}"))
            dealt += 1


_reported = 0
"""How many of :data:`tests.faults.harness.REPORT`'s results went into a test report."""


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Put the rows of the fault runs a test made into its report (``user_properties``), which
    pytest-xdist sends from the worker to the process that prints the summary: every fault
    run's numbers, as docs/reference/runtime.md quotes them (tests/conftest.py prints them at the
    end)."""
    global _reported
    if call.when == "call":
        from tests.faults.harness import REPORT

        rows = [result.row() for result in REPORT[_reported:]]
        _reported = len(REPORT)
        if rows:
            item.user_properties.append((FAULT_ROWS, rows))
    return (yield)
