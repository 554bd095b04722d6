"""The ``backend`` fixture: every contract scenario runs on the emulator and on RabbitMQ.

Each runs six times: on RabbitMQ 3.10, 4.0 and 4.3 (each skipped without that server, failed
when ``CI=true``; a fresh vhost per test) and on the emulator set to each of those versions.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.backends import Backend, EmulatorBackend, RabbitBackend, VhostPool, vhost_pool
from tests.shared_node import chosen_versions, require_broker

UNTIL_DEADLINE_S = 10.0
"""How long the real broker may take to make a scenario's ``backend.until`` check true; the
emulator gets one settle (tests/backends.py)."""


@pytest.fixture(scope="session")
def vhost_pools() -> dict[str, VhostPool]:
    """The pool of fresh vhosts of each shared server, by version, as :func:`_pool_for` takes
    them (the process's pools, tests/backends.py: closed at the end of the session)."""
    return {}


def _pool_for(version: str, pools: dict[str, VhostPool]) -> VhostPool:
    broker = require_broker(version)  # skips without that server, fails in CI
    if shutil.which("rabbitmqctl") is None and version == "3.10":
        message = "the contract suite makes a vhost per test with rabbitmqctl, not found"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    if version not in pools:
        pools[version] = vhost_pool(broker)
    return pools[version]


def _params() -> list[Any]:
    params = []
    for version in chosen_versions():
        params.append(pytest.param(("emulator", version), id=f"emulator-{version}"))
        params.append(
            pytest.param(("rabbitmq", version), id=f"rabbitmq-{version}", marks=pytest.mark.broker)
        )
    return params


@pytest.fixture(params=_params())
async def backend(
    request: pytest.FixtureRequest, vhost_pools: dict[str, VhostPool]
) -> AsyncIterator[Backend]:
    kind, version = request.param
    chosen: EmulatorBackend | RabbitBackend
    if kind == "rabbitmq":
        pool = _pool_for(version, vhost_pools)
        vhost = await pool.take()
        chosen = RabbitBackend(pool.broker, pool=pool, vhost=vhost, deadline_s=UNTIL_DEADLINE_S)
    else:
        chosen = EmulatorBackend(version, rounds=1)
    try:
        yield chosen
    finally:
        await chosen.close()
