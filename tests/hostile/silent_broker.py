"""An AMQP 0-9-1 server that lets a client in and then never answers a ``queue.declare``.

A client reading a queue through it stays in the middle of that read for as long as the test
wants (with ``?heartbeat=0`` in its URL nothing times out): :attr:`SilentBroker.declared` is
set once the first ``queue.declare`` arrived, so a test knows, without guessing a delay,
that ``rr status`` is inside its reading. It answers the handshake (``Connection.Start``,
``Tune``, ``Open``), opens channels, and closes them and the connection when asked; frames are
pamqp's. Each connection is served by a thread of its own.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from types import TracebackType

from pamqp import commands, constants, frame
from pamqp.base import Frame
from pamqp.heartbeat import Heartbeat

__all__ = ["SilentBroker"]

_SERVER_PROPERTIES = {
    "product": "RabbitMQ",
    "version": "3.10.8",
    "platform": "Erlang/OTP",
    "capabilities": {
        "publisher_confirms": True,
        "exchange_exchange_bindings": True,
        "basic.nack": True,
        "consumer_cancel_notify": True,
        "connection.blocked": True,
        "authentication_failure_close": True,
        "per_consumer_qos": True,
    },
}


class SilentBroker:
    """Listens on 127.0.0.1 (:attr:`url`); a context manager that stops it on exit."""

    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self.declared = threading.Event()
        """Set when a client asked for a queue (and got no answer)."""
        self._connections: list[socket.socket] = []
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"amqp://guest:guest@127.0.0.1:{self.port}/?heartbeat=0"

    def __enter__(self) -> SilentBroker:
        threading.Thread(target=self._accept, daemon=True).start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._listener.close()
        with self._lock:
            for connection in self._connections:
                with contextlib.suppress(OSError):
                    connection.close()

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self._listener.accept()
            except OSError:  # closed by __exit__
                return
            with self._lock:
                self._connections.append(connection)
            threading.Thread(target=self._serve, args=(connection,), daemon=True).start()

    def _serve(self, connection: socket.socket) -> None:
        with contextlib.suppress(OSError, ConnectionError):
            _read_exactly(connection, 8)  # AMQP\x00\x00\x09\x01
            _send(
                connection,
                commands.Connection.Start(
                    server_properties=_SERVER_PROPERTIES, mechanisms="PLAIN", locales="en_US"
                ),
                0,
            )
            while True:
                channel, method = _read_frame(connection)
                if not self._answer(connection, channel, method):
                    return

    def _answer(self, connection: socket.socket, channel: int, method: object) -> bool:
        """Answer ``method``; False once the connection is closed."""
        if isinstance(method, commands.Connection.StartOk):
            _send(connection, commands.Connection.Tune(2047, 131072, 0), 0)
        elif isinstance(method, commands.Connection.Open):
            _send(connection, commands.Connection.OpenOk(), 0)
        elif isinstance(method, commands.Channel.Open):
            _send(connection, commands.Channel.OpenOk(), channel)
        elif isinstance(method, commands.Channel.Close):
            _send(connection, commands.Channel.CloseOk(), channel)
        elif isinstance(method, commands.Connection.Close):
            _send(connection, commands.Connection.CloseOk(), 0)
            connection.close()
            return False
        elif isinstance(method, commands.Queue.Declare):
            self.declared.set()  # and no answer, ever
        return True


def _read_exactly(connection: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = connection.recv(size - len(data))
        if not chunk:
            raise ConnectionError("the client closed the connection")
        data += chunk
    return data


def _read_frame(connection: socket.socket) -> tuple[int, object]:
    """The next frame: its channel and what pamqp makes of it (heartbeats included)."""
    head = _read_exactly(connection, 7)
    _, channel, size = struct.unpack(">BHI", head)
    rest = _read_exactly(connection, size + 1)
    _, _, decoded = frame.unmarshal(head + rest)
    return channel, decoded


def _send(connection: socket.socket, method: Frame | Heartbeat, channel: int) -> None:
    connection.sendall(frame.marshal(method, channel))


assert constants.FRAME_END == 206  # the frame layout _read_frame reads
