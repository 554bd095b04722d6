"""transport/native.py writes what one turn of the event loop wrote in one go, in order; a
close sends what was written first, an abort drops it."""

from __future__ import annotations

import asyncio

import pytest

from rabbitctl_retry.transport.frames import PROTOCOL_HEADER
from rabbitctl_retry.transport.native import _Closed, _Protocol


class Transport:
    """What the protocol asks of its transport, recorded."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closing = False
        self.aborted = False

    def write(self, data: bytes) -> None:
        assert not self.closing
        self.writes.append(data)

    def is_closing(self) -> bool:
        return self.closing

    def close(self) -> None:
        self.closing = True

    def abort(self) -> None:
        self.closing = self.aborted = True

    def pause_reading(self) -> None: ...

    def resume_reading(self) -> None: ...


async def opened() -> tuple[_Protocol, Transport]:
    protocol = _Protocol(asyncio.get_running_loop(), "amqp://localhost/")
    transport = Transport()
    protocol.connection_made(transport)  # type: ignore[arg-type]
    assert transport.writes == [PROTOCOL_HEADER]
    transport.writes.clear()
    return protocol, transport


async def test_writes_of_one_turn_go_out_together_in_order() -> None:
    protocol, transport = await opened()
    for number in range(5):
        protocol.write(bytes([number]))
    assert transport.writes == []  # not before the turn ends
    await asyncio.sleep(0)
    assert transport.writes == [bytes([0, 1, 2, 3, 4])]
    protocol.write(b"next")
    await asyncio.sleep(0)
    assert transport.writes == [bytes([0, 1, 2, 3, 4]), b"next"]


async def test_a_close_sends_what_was_written_first() -> None:
    protocol, transport = await opened()
    protocol.write(b"close-ok")
    protocol._finish(None)
    assert transport.writes == [b"close-ok"]
    assert transport.closing
    with pytest.raises(_Closed):
        protocol.write(b"late")


async def test_an_abort_drops_what_was_written() -> None:
    protocol, transport = await opened()
    protocol.write(b"lost")
    protocol.abort()
    await asyncio.sleep(0)
    assert transport.writes == []
    assert transport.aborted
