"""The ``backend`` fixture: each runtime test runs on the real RabbitMQ and on the emulator."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.runtime.backends import Backend, EmulatorBackend, RabbitBackend


@pytest.fixture(params=["rabbitmq", "emulator"])
async def backend(request: pytest.FixtureRequest) -> AsyncIterator[Backend]:
    if request.param == "rabbitmq":
        url = request.getfixturevalue("amqp_url")
        rabbit = RabbitBackend(url)
        rabbit.setup()
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
