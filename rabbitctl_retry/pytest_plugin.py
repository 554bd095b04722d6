"""pytest plugin (loaded automatically once rr is installed): the ``rr_broker`` fixture.

::

    @pytest.mark.rr_topology("topology.toml")
    async def test_refund(rr_broker):
        await rr_broker.run(service)
        await rr_broker.publish("refunds", {"id": 1})
        await rr_broker.advance(30)

``rr_broker`` is a :class:`rabbitctl_retry.testing.TestBroker`, entered and, after the test,
stopped. The optional ``rr_topology`` mark names a topology file (or holds TOML text) to
declare first; the ini option ``rr_server_version`` (e.g. ``3.10.8``) the RabbitMQ version it
emulates. Async fixtures need pytest-asyncio.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from rabbitctl_retry.testing import DEFAULT_SERVER_VERSION, TestBroker


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini(
        "rr_server_version",
        "the RabbitMQ version the rr_broker fixture emulates (default: TestBroker's, 4.0.5)",
        default=DEFAULT_SERVER_VERSION,
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "rr_topology(path_or_toml): the topology the rr_broker fixture declares"
    )


try:
    import pytest_asyncio
except ImportError:  # pragma: no cover - without pytest-asyncio there is no async fixture
    pass
else:

    @pytest_asyncio.fixture
    async def rr_broker(request: pytest.FixtureRequest) -> AsyncIterator[TestBroker]:
        """An in-memory RabbitMQ with a virtual clock (see ``rabbitctl_retry.testing``)."""
        marker = request.node.get_closest_marker("rr_topology")
        topology = marker.args[0] if marker is not None and marker.args else None
        version = str(request.config.getini("rr_server_version"))
        async with TestBroker(topology, server_version=version) as broker:
            yield broker
