"""The ``backend`` fixture: every contract scenario runs on the emulator and on RabbitMQ.

The ``rabbitmq`` side requests ``amqp_url`` (skipped without a broker, failed when
``CI=true``) and gets a fresh vhost for each test.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator, Iterator

import pytest

from tests.contract.backends import Backend, EmulatorBackend, RabbitBackend, VhostPool


@pytest.fixture(scope="session")
def vhost_pool(amqp_url: str) -> Iterator[VhostPool]:
    if shutil.which("rabbitmqctl") is None:
        message = "the contract suite makes a vhost per test with rabbitmqctl, not found"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    pool = VhostPool(amqp_url)
    yield pool
    pool.close()


@pytest.fixture(
    params=[
        pytest.param("emulator", id="emulator"),
        pytest.param("rabbitmq", id="rabbitmq", marks=pytest.mark.broker),
    ]
)
async def backend(request: pytest.FixtureRequest) -> AsyncIterator[Backend]:
    chosen: EmulatorBackend | RabbitBackend
    if request.param == "rabbitmq":
        request.getfixturevalue("amqp_url")  # skips without a broker, fails in CI
        pool: VhostPool = request.getfixturevalue("vhost_pool")
        chosen = RabbitBackend(pool, await pool.take())
    else:
        chosen = EmulatorBackend()
    try:
        yield chosen
    finally:
        await chosen.close()
