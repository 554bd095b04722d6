from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from rabbitctl_retry.emulator import EmulatedChannel, EmulatedConnection, Emulator


@pytest.fixture
def emulator() -> Emulator:
    return Emulator()


@pytest.fixture
async def connection(emulator: Emulator) -> AsyncIterator[EmulatedConnection]:
    connection = emulator.connect()
    yield connection
    await connection.close()


@pytest.fixture
async def channel(connection: EmulatedConnection) -> EmulatedChannel:
    return await connection.channel(confirms=True)
