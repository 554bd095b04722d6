"""A TCP proxy between the client under test and the private node, with network faults.

The proxy runs its own asyncio event loop in its own thread: a test whose event loop is busy
(or blocked) cannot slow the proxy down, and the control methods (:meth:`FaultProxy.freeze`,
:meth:`~FaultProxy.cut`, ...) are plain blocking calls that return once the fault is in
effect, usable from sync and async tests alike.

Faults:

``freeze()`` / ``thaw()``
    Every connection, current and new, stops moving bytes in both directions; sockets stay
    open. The proxy stops reading, so TCP back-pressure builds up as on a stalled path.
    ``thaw()`` resumes and delivers whatever was held back (nothing is lost).
``freeze_to_client()``
    The same in one direction only: the node's bytes are held back, the client's still
    reach the node (a client that acts before it has seen what the node sent it).
``half_open()``
    The connections open now stop forwarding for ever and are never closed: the client
    sees silence, as with a peer that died behind a NAT (no FIN, no RST). Whatever either
    side sends later is dropped. New connections work normally.
``cut()``
    Every current connection is closed abruptly on both sides (RST: ``SO_LINGER`` 0).

A connection accepted while the upstream (the node) refuses is closed at once (RST), like a
refused connect.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import threading
from collections.abc import Awaitable, Callable
from typing import TypeVar

__all__ = ["FaultProxy"]

_T = TypeVar("_T")
_CHUNK = 64 * 1024


async def _forever() -> None:
    """Wait until cancelled (by :meth:`FaultProxy.cut` or :meth:`FaultProxy.close`)."""
    await asyncio.Event().wait()


def _set_rst_on_close(writer: asyncio.StreamWriter) -> None:
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


class _Link:
    """One proxied connection: client <-> proxy <-> upstream."""

    def __init__(
        self,
        number: int,
        client: tuple[asyncio.StreamReader, asyncio.StreamWriter],
        upstream: tuple[asyncio.StreamReader, asyncio.StreamWriter],
    ) -> None:
        self.number = number
        self.client_reader, self.client_writer = client
        self.upstream_reader, self.upstream_writer = upstream
        self.stalled = asyncio.Event()  # set: half-open, this link never forwards again
        self.tasks: list[asyncio.Task[None]] = []

    def abort(self) -> None:
        """Close both sockets at once, with RST."""
        for writer in (self.client_writer, self.upstream_writer):
            _set_rst_on_close(writer)
            writer.transport.abort()


class FaultProxy:
    """A fault-injecting TCP proxy to ``127.0.0.1:<upstream_port>`` (see the module docs).

    ::

        with FaultProxy(node.port) as proxy:
            conn = await amqp.connect(proxy.url)
            proxy.freeze(); ...; proxy.thaw()
    """

    def __init__(self, upstream_port: int, upstream_host: str = "127.0.0.1") -> None:
        self.upstream_host = upstream_host
        self.upstream_port = upstream_port
        self.port = 0
        """The proxy's listening port on 127.0.0.1 (picked by the OS at :meth:`start`)."""
        self.bytes_to_upstream = 0
        """Bytes forwarded client -> node."""
        self.bytes_to_client = 0
        """Bytes forwarded node -> client."""
        self.connections_accepted = 0
        """Client connections accepted (including ones the upstream then refused)."""
        self._links: dict[int, _Link] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.Server | None = None
        self._flowing: asyncio.Event | None = None
        """Set while bytes move client -> node."""
        self._flowing_to_client: asyncio.Event | None = None
        """Set while bytes move node -> client."""
        self._frozen = False

    # --- public API -------------------------------------------------------------------

    @property
    def url(self) -> str:
        """``amqp://guest:guest@127.0.0.1:<proxy port>/`` (the default vhost)."""
        return self.url_for("")

    def url_for(self, path: str) -> str:
        """A URL through the proxy with ``path`` (an already percent-encoded vhost)."""
        if not self.port:
            raise RuntimeError("the proxy is not started")
        return f"amqp://guest:guest@127.0.0.1:{self.port}/{path.lstrip('/')}"

    @property
    def bytes_forwarded(self) -> int:
        """Bytes forwarded in both directions."""
        return self.bytes_to_upstream + self.bytes_to_client

    @property
    def open_connections(self) -> int:
        """Client connections the proxy holds open now (half-open ones included)."""
        return len(self._links)

    @property
    def frozen(self) -> bool:
        return self._frozen

    def start(self) -> FaultProxy:
        """Start the proxy thread and its listener; returns once it accepts connections."""
        if self._thread is not None:
            raise RuntimeError("the proxy is already started")
        loop = asyncio.new_event_loop()
        ready = threading.Event()
        self._loop = loop

        def run() -> None:
            asyncio.set_event_loop(loop)
            loop.call_soon(ready.set)
            loop.run_forever()
            # Shutdown: whatever close() left, then the loop itself.
            pending = asyncio.all_tasks(loop)
            for task in pending:
                task.cancel()
            if pending:
                loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.run_until_complete(loop.shutdown_default_executor())
            loop.close()

        self._thread = threading.Thread(target=run, name="fault-proxy", daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("the proxy thread did not start")
        self._call(self._listen())
        return self

    def close(self) -> None:
        """Stop listening, abort every connection (half-open ones too), stop the thread.
        Idempotent."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        if not loop.is_closed() and thread.is_alive():
            with contextlib.suppress(RuntimeError, TimeoutError):
                self._call(self._shutdown())
            loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        self._loop = None
        self._thread = None

    def freeze(self) -> None:
        """Stop forwarding in both directions on every connection; sockets stay open."""
        self._call(self._set_flowing(False))

    def freeze_to_client(self) -> None:
        """Stop forwarding node -> client on every connection; client -> node goes on."""
        self._call(self._set_flowing(False, to_client_only=True))

    def thaw(self) -> None:
        """Resume forwarding after :meth:`freeze` or :meth:`freeze_to_client` (held-back
        bytes are delivered)."""
        self._call(self._set_flowing(True))

    def half_open(self) -> int:
        """Make the current connections silent for ever (never closed); returns how many."""
        return self._call(self._half_open())

    def upstream_ports(self) -> list[int]:
        """The local ports of the proxy's connections to the broker now: the broker names
        each ``127.0.0.1:<port> -> ...`` (so a test can have just these closed)."""
        return self._call(self._upstream_ports())

    def cut(self) -> int:
        """Close every current connection abruptly (RST to both sides); returns how many."""
        return self._call(self._cut())

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"<FaultProxy :{self.port} -> {self.upstream_host}:{self.upstream_port} "
            f"open={self.open_connections} frozen={self._frozen}>"
        )

    # --- the proxy thread -------------------------------------------------------------

    def _call(self, coro: Awaitable[_T], timeout_s: float = 10.0) -> _T:
        """Run ``coro`` on the proxy's loop and wait for its result (from another thread)."""
        loop = self._loop
        if loop is None or self._thread is None:
            if asyncio.iscoroutine(coro):
                coro.close()
            raise RuntimeError("the proxy is not started")

        async def wrapper() -> _T:
            return await coro

        return asyncio.run_coroutine_threadsafe(wrapper(), loop).result(timeout_s)

    async def _listen(self) -> None:
        self._flowing = asyncio.Event()
        self._flowing.set()
        self._flowing_to_client = asyncio.Event()
        self._flowing_to_client.set()
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _set_flowing(self, flowing: bool, *, to_client_only: bool = False) -> None:
        assert self._flowing is not None
        assert self._flowing_to_client is not None
        self._frozen = not flowing
        directions = [self._flowing_to_client]
        if not to_client_only:
            directions.append(self._flowing)
        for direction in directions:
            if flowing:
                direction.set()
            else:
                direction.clear()

    async def _half_open(self) -> int:
        links = list(self._links.values())
        for link in links:
            link.stalled.set()
        return len(links)

    async def _upstream_ports(self) -> list[int]:
        return [
            int(link.upstream_writer.get_extra_info("sockname")[1]) for link in self._links.values()
        ]

    async def _cut(self) -> int:
        links = list(self._links.values())
        for link in links:
            link.abort()
            for task in link.tasks:
                task.cancel()
        for link in links:
            await asyncio.gather(*link.tasks, return_exceptions=True)
            self._links.pop(link.number, None)
        return len(links)

    async def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
        await self._cut()
        if self._server is not None:
            await self._server.wait_closed()

    async def _accept(
        self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter
    ) -> None:
        self.connections_accepted += 1
        number = self.connections_accepted
        try:
            upstream = await asyncio.wait_for(
                asyncio.open_connection(self.upstream_host, self.upstream_port), 10
            )
        except (OSError, TimeoutError):
            _set_rst_on_close(client_writer)
            client_writer.transport.abort()
            return
        link = _Link(number, (client_reader, client_writer), upstream)
        self._links[number] = link
        link.tasks = [
            asyncio.create_task(self._pump(link, to_upstream=True)),
            asyncio.create_task(self._pump(link, to_upstream=False)),
        ]
        # Keep this handler (a task asyncio's server tracks) until the link is done.
        await asyncio.gather(*link.tasks, return_exceptions=True)
        if self._links.pop(number, None) is link:
            for writer in (link.client_writer, link.upstream_writer):
                writer.close()  # both directions saw EOF: an orderly close (FIN)

    async def _pump(self, link: _Link, *, to_upstream: bool) -> None:
        """Copy one direction of ``link`` until EOF (passed on as a FIN) or an error (passed
        on as an RST to both sides); when the link is half-open, hold it silently for ever."""
        assert self._flowing is not None
        assert self._flowing_to_client is not None
        flowing = self._flowing if to_upstream else self._flowing_to_client
        if to_upstream:
            reader, writer = link.client_reader, link.upstream_writer
        else:
            reader, writer = link.upstream_reader, link.client_writer
        try:
            while True:
                await self._gate(link, flowing)
                data = await reader.read(_CHUNK)
                if not data:
                    break
                await self._gate(link, flowing)
                writer.write(data)
                if to_upstream:
                    self.bytes_to_upstream += len(data)
                else:
                    self.bytes_to_client += len(data)
                await writer.drain()
        except (ConnectionError, OSError):
            if link.stalled.is_set():
                await _forever()
            link.abort()
            return
        if link.stalled.is_set():
            await _forever()
        with contextlib.suppress(OSError, RuntimeError):
            if writer.can_write_eof():
                writer.write_eof()

    @staticmethod
    async def _gate(link: _Link, flowing: asyncio.Event) -> None:
        """Return when this link may move bytes: not frozen, not half-open (never, then)."""
        while True:
            if link.stalled.is_set():
                await _forever()
            if flowing.is_set():
                return
            waiters: list[Callable[[], Awaitable[object]]] = [link.stalled.wait, flowing.wait]
            tasks = [asyncio.ensure_future(wait()) for wait in waiters]
            try:
                await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for task in tasks:
                    task.cancel()
