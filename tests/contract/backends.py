"""The two brokers of the contract suite, behind one small interface.

A scenario talks to a broker through the transport port only (``Connection`` / ``Channel``)
and moves time with :meth:`Backend.elapse`; it reads results with :meth:`Backend.until`:

* :class:`EmulatorBackend`: ``elapse`` advances the virtual clock (no real time passes) and
  ``until`` settles the emulator and checks *once*: the emulator must be right at that
  instant, with no help from waiting.
* :class:`RabbitBackend`: the real server, in a vhost of its own (``rabbitmqctl add_vhost`` /
  ``set_permissions`` / ``delete_vhost``). ``elapse`` sleeps for real and ``until`` polls,
  because a real broker needs a moment to move a message between queues or to a consumer.

``rabbitmqctl`` costs about 0.4 s a call, so :class:`VhostPool` creates vhosts a few tests
ahead in worker threads and deletes them in the background: every test still gets a fresh,
never used vhost, but does not wait for ``rabbitmqctl``.
"""

from __future__ import annotations

import asyncio
import functools
import shutil
import subprocess
from collections import deque
from collections.abc import Awaitable, Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Protocol
from urllib.parse import quote, urlsplit, urlunsplit
from uuid import uuid4

from rabbitctl_retry.emulator import Emulator
from rabbitctl_retry.transport import amqp
from rabbitctl_retry.transport.base import Channel, Connection
from tests.shared_node import ctl_command

POLL_DEADLINE_S = 10.0
"""How long the real broker may take to make an :meth:`Backend.until` check true."""

DELAYED_PLUGIN = "rabbitmq_delayed_message_exchange"

Check = Callable[[], Awaitable[bool]]


class Backend(Protocol):
    name: str
    """``"emulator"`` or ``"rabbitmq"``."""
    vhost: str
    """The vhost the scenario runs in (the server names it in error texts)."""

    async def connect(self) -> Connection:
        """A new connection; closed by :meth:`close` if the scenario does not close it."""
        ...

    async def channel(self, *, confirms: bool = True) -> Channel:
        """A new channel on the backend's shared connection."""
        ...

    async def elapse(self, seconds: float) -> None:
        """Let ``seconds`` of time pass: real seconds, or the virtual clock."""
        ...

    async def until(self, check: Check, what: str) -> None:
        """Return once ``check()`` is true; fail otherwise (see the module doc)."""
        ...

    async def close(self) -> None: ...


class _Connections:
    """Connections a backend opened, closed at the end of the test."""

    def __init__(self) -> None:
        self.opened: list[Connection] = []
        self.shared: Connection | None = None

    async def close_all(self) -> None:
        for connection in self.opened:
            await connection.close()
        self.opened.clear()
        self.shared = None


class EmulatorBackend:
    """The emulator (as RabbitMQ 3.10.8, the delayed-message exchange enabled)."""

    name = "emulator"
    vhost = "/"

    def __init__(self) -> None:
        self.emulator = Emulator()
        self._connections = _Connections()

    async def connect(self) -> Connection:
        connection = self.emulator.connect()
        self._connections.opened.append(connection)
        return connection

    async def channel(self, *, confirms: bool = True) -> Channel:
        if self._connections.shared is None or self._connections.shared.is_closed:
            self._connections.shared = await self.connect()
        return await self._connections.shared.channel(confirms=confirms)

    async def elapse(self, seconds: float) -> None:
        await self.emulator.advance(seconds)

    async def until(self, check: Check, what: str) -> None:
        await self.emulator.settle()
        if not await check():
            raise AssertionError(f"the emulator settled without {what}")

    async def close(self) -> None:
        await self._connections.close_all()
        assert self.emulator.callback_errors == [], "a consumer callback failed"


class RabbitBackend:
    """The real RabbitMQ, in a fresh vhost from a :class:`VhostPool`."""

    name = "rabbitmq"

    def __init__(self, pool: VhostPool, vhost: str) -> None:
        self.vhost = vhost
        self.url = pool.url_for(vhost)
        self._pool = pool
        self._connections = _Connections()

    async def connect(self) -> Connection:
        connection = await amqp.connect(self.url)
        self._connections.opened.append(connection)
        return connection

    async def channel(self, *, confirms: bool = True) -> Channel:
        if self._connections.shared is None or self._connections.shared.is_closed:
            self._connections.shared = await self.connect()
        return await self._connections.shared.channel(confirms=confirms)

    async def elapse(self, seconds: float) -> None:
        await asyncio.sleep(seconds)

    async def until(self, check: Check, what: str) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + POLL_DEADLINE_S
        while not await check():
            if loop.time() > deadline:
                raise AssertionError(f"RabbitMQ did not get to {what} in {POLL_DEADLINE_S:g} s")
            await asyncio.sleep(0.01)

    async def close(self) -> None:
        await self._connections.close_all()
        self._pool.give_back(self.vhost)


class VhostPool:
    """Fresh vhosts on the real broker, made ahead of use and deleted in the background."""

    def __init__(self, base_url: str, *, ahead: int = 2) -> None:
        parts = urlsplit(base_url)
        self._scheme, self._netloc = parts.scheme, parts.netloc
        self._query = parts.query
        self.user = parts.username or "guest"
        self._ahead = ahead
        self._workers = ThreadPoolExecutor(max_workers=ahead + 1, thread_name_prefix="rr-vhost")
        self._ready: deque[Future[str]] = deque()
        self._deleting: list[Future[None]] = []

    def url_for(self, vhost: str) -> str:
        path = "/" + quote(vhost, safe="")
        return urlunsplit((self._scheme, self._netloc, path, self._query, ""))

    async def take(self) -> str:
        """A vhost no test has used, with full permissions for the URL's user."""
        self._fill()
        vhost = await asyncio.wrap_future(self._ready.popleft())
        self._fill()
        return vhost

    def give_back(self, vhost: str) -> None:
        self._deleting.append(self._workers.submit(ctl, "delete_vhost", vhost))

    def close(self) -> None:
        """Delete every vhost made (wait for it); raise if a deletion failed."""
        for made in self._ready:
            self.give_back(made.result())
        self._ready.clear()
        for deletion in self._deleting:
            deletion.result()
        self._workers.shutdown()

    def _fill(self) -> None:
        while len(self._ready) < self._ahead:
            self._ready.append(self._workers.submit(self._make))

    def _make(self) -> str:
        vhost = f"rr-contract-{uuid4().hex[:12]}"
        ctl("add_vhost", vhost)
        ctl("set_permissions", "-p", vhost, self.user, ".*", ".*", ".*")
        return vhost


def ctl(*args: str) -> None:
    """Run ``rabbitmqctl -q ARGS``; raise with its stderr when it fails."""
    done = subprocess.run(
        ctl_command("-q", *args), capture_output=True, text=True, timeout=60, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"rabbitmqctl {' '.join(args)} failed: {done.stderr.strip()}")


@functools.cache
def delayed_plugin_enabled() -> bool:
    """Whether the local server runs the delayed-message exchange plugin."""
    if shutil.which("rabbitmq-plugins") is None:
        return False
    done = subprocess.run(
        ["rabbitmq-plugins", "list", "-e", "-m"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return done.returncode == 0 and DELAYED_PLUGIN in done.stdout.split()
