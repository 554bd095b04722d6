"""pytest plugin (loaded automatically once rr is installed): the ``rr_broker`` fixture.

::

    @pytest.mark.rr_topology("topology.toml")
    async def test_refund(rr_broker):
        await rr_broker.run(service)
        await rr_broker.publish("refunds", {"id": 1})
        await rr_broker.advance(30)

``rr_broker`` is a :class:`rabbitctl_retry.testing.TestBroker`, entered and, after the test,
stopped. The optional ``rr_topology`` mark names a topology file (relative to the test
file) or holds TOML text to declare first; the ini option ``rr_server_version`` (e.g.
``3.10.8``) the RabbitMQ version it emulates. Async fixtures need pytest-asyncio, and async
tests its ``asyncio_mode = "auto"`` (or ``@pytest.mark.asyncio`` on each).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from rabbitctl_retry.testing import DEFAULT_SERVER_VERSION, TestBroker


def beside_the_test(topology: str | Path, test_file: Path) -> str | Path:
    """A relative topology path of the ``rr_topology`` mark is read beside the test file
    (when a file of that name is there), whatever the working directory; TOML text and other
    paths are left as they are."""
    if isinstance(topology, str) and ("\n" in topology or "=" in topology):
        return topology  # TOML text
    path = Path(topology)
    if path.is_absolute():
        return topology
    beside = test_file.parent / path
    return beside if beside.is_file() else topology


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
        if isinstance(topology, str | Path):
            topology = beside_the_test(topology, Path(request.path))
        version = str(request.config.getini("rr_server_version"))
        async with TestBroker(topology, server_version=version) as broker:
            yield broker
