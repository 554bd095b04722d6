"""The ``backend`` fixture: each runtime test runs on the real RabbitMQ servers (3.10 and 4.0,
tests/shared_node.py) and on the emulator. The RabbitMQ cases are marked ``broker``, the
emulator's are not (``pytest -m "not broker"`` runs them without RabbitMQ)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.backends import Backend, EmulatorBackend, RabbitBackend
from tests.shared_node import chosen_versions, require_broker


def _params() -> list[Any]:
    servers = [
        pytest.param(f"rabbitmq-{version}", id=f"rabbitmq-{version}", marks=pytest.mark.broker)
        for version in chosen_versions()
    ]
    return [*servers, pytest.param("emulator", id="emulator")]


@pytest.fixture(params=_params())
async def backend(request: pytest.FixtureRequest) -> AsyncIterator[Backend]:
    if request.param != "emulator":
        broker = require_broker(request.param.removeprefix("rabbitmq-"))
        rabbit = RabbitBackend(broker)
        rabbit.setup()  # a fresh vhost, from the server's pool (tests/backends.py)
        try:
            yield rabbit
        finally:
            await rabbit.close()
    else:
        emulated = EmulatorBackend()
        try:
            yield emulated
        finally:
            await emulated.close()
