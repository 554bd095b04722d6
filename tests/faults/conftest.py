"""Fixtures of the fault suite: a private RabbitMQ node, a fault proxy, a vhost per test.

``fault_node`` (session)
    A :class:`~tests.faults.node.PrivateNode` of the suite's own, never the shared broker.
    Skipped when RabbitMQ is not installed, but failed when ``CI=true``: CI must never pass
    by skipping the fault tests.
``proxy`` (function)
    A :class:`~tests.faults.proxy.FaultProxy` to the node's AMQP port, closed after the test.
``fault_vhost`` (function)
    A fresh vhost on the node (guest has full permissions), deleted after the test, with
    its URL direct and through ``proxy``.

Before and after every test here the node is healed (restarted after a kill, app started,
memory alarm cleared), so one test's fault does not leak into the next.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from urllib.parse import quote

import pytest

from tests.faults import FAULT_ROWS
from tests.faults.node import NodeError, PrivateNode, tools_missing
from tests.faults.proxy import FaultProxy


@dataclass(frozen=True, slots=True)
class FaultVhost:
    """A vhost of one test on the private node."""

    name: str
    url: str
    """Straight to the node: ``amqp://guest:guest@127.0.0.1:<node port>/<vhost>``."""
    proxy_url: str
    """Through the test's proxy: ``amqp://guest:guest@127.0.0.1:<proxy port>/<vhost>``."""


def _unavailable(message: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"{message} (CI=true: the fault suite must run in CI)", pytrace=False)
    pytest.skip(message)


ADVANCED_CONFIG = "[{rabbit, [{dead_letter_worker_publisher_confirm_timeout, 5000}]}].\n"
"""A quorum queue's at-least-once dead-lettering tries a refused dead letter again after this
many ms (3 minutes by default): 5 s keeps the full dead-letter queue test short."""


@pytest.fixture(scope="session")
def fault_node() -> Iterator[PrivateNode]:
    """The suite's own RabbitMQ node, started once per session and stopped at its end."""
    problem = tools_missing()
    if problem is not None:
        _unavailable(f"no private RabbitMQ node for the fault tests: {problem}")
    node = PrivateNode(advanced_config=ADVANCED_CONFIG)
    try:
        node.start()
    except NodeError:
        node.stop(graceful=False)
        raise
    try:
        yield node
    finally:
        node.stop(graceful=False)  # the data folder goes too: no need to flush it first


@pytest.fixture(autouse=True)
def _healthy_fault_node(fault_node: PrivateNode) -> Iterator[None]:
    fault_node.heal()
    yield
    fault_node.heal()


@pytest.fixture
def proxy(fault_node: PrivateNode) -> Iterator[FaultProxy]:
    """A fault proxy in front of the private node's AMQP port."""
    with FaultProxy(fault_node.port) as fault_proxy:
        yield fault_proxy


@pytest.fixture
def fault_vhost(fault_node: PrivateNode, proxy: FaultProxy) -> Iterator[FaultVhost]:
    """A fresh vhost (``fault/<hex>``: the slash checks the percent-encoding) for one test."""
    name = f"fault/{secrets.token_hex(4)}"
    fault_node.add_vhost(name)
    try:
        yield FaultVhost(
            name=name,
            url=fault_node.url_for(name),
            proxy_url=proxy.url_for(quote(name, safe="")),
        )
    finally:
        fault_node.heal()
        fault_node.delete_vhost(name)


_reported = 0
"""How many of :data:`tests.faults.harness.REPORT`'s results went into a test report."""


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Put the rows of the fault runs a test made into its report (``user_properties``), which
    pytest-xdist sends from the worker to the process that prints the summary: every fault
    run's numbers, as docs/runtime.md quotes them (tests/conftest.py prints them at the end)."""
    global _reported
    if call.when == "call":
        from tests.faults.harness import REPORT

        rows = [result.row() for result in REPORT[_reported:]]
        _reported = len(REPORT)
        if rows:
            item.user_properties.append((FAULT_ROWS, rows))
    return (yield)
