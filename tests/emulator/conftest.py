from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from rabbitctl_retry.emulator import EmulatedChannel, EmulatedConnection, Emulator


@pytest.fixture
def emulator() -> Emulator:
    """An emulated RabbitMQ 3.10.8: the server these tests were written against (the
    emulator's own default is 4.0.5 since #43, ``releases.DEFAULT_SERVER_VERSION``)."""
    return Emulator(server_version="3.10.8")


@pytest.fixture
async def connection(emulator: Emulator) -> AsyncIterator[EmulatedConnection]:
    connection = emulator.connect()
    yield connection
    await connection.close()


@pytest.fixture
async def channel(connection: EmulatedConnection) -> EmulatedChannel:
    return await connection.channel(confirms=True)
