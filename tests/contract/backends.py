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
from rabbitctl_retry.transport.base import Channel, Connection, ServerVersion
from tests.shared_node import SharedBroker

EMULATED = {"3.10": ServerVersion(3, 10, 8), "4.0": ServerVersion(4, 0, 5)}
"""The exact releases the emulator stands in for, per release line the suite runs."""

POLL_DEADLINE_S = 10.0
"""How long the real broker may take to make an :meth:`Backend.until` check true."""

DELAYED_PLUGIN = "rabbitmq_delayed_message_exchange"

Check = Callable[[], Awaitable[bool]]


class Backend(Protocol):
    name: str
    """``"emulator"`` or ``"rabbitmq"``."""
    version: str
    """The server release line the scenario expects: ``3.10`` or ``4.0`` (the real server's,
    or the one the emulator is set to); see tests/contract/versions.py."""
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

    def set_dead_letter_retry(self, seconds: float) -> None:
        """How long an at-least-once dead-letter worker waits before it sends a refused dead
        letter again (RabbitMQ's ``dead_letter_worker_publisher_confirm_timeout``), for
        queues declared from now on."""
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
    """The emulator set to a server version (the delayed-message exchange enabled)."""

    name = "emulator"
    vhost = "/"

    def __init__(self, version: str = "3.10") -> None:
        self.version = version
        self.emulator = Emulator(server_version=EMULATED[version])
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

    def set_dead_letter_retry(self, seconds: float) -> None:
        self.emulator.broker.dead_letter_retry_s = seconds

    async def close(self) -> None:
        await self._connections.close_all()
        assert self.emulator.callback_errors == [], "a consumer callback failed"


class RabbitBackend:
    """The real RabbitMQ, in a fresh vhost from a :class:`VhostPool`."""

    name = "rabbitmq"

    def __init__(self, pool: VhostPool, vhost: str) -> None:
        self._dead_letter_retry_before: str | None = None
        self.version = pool.broker.version
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

    def set_dead_letter_retry(self, seconds: float) -> None:
        # a node-wide setting, read by each worker when its queue starts; put back in close()
        if self._dead_letter_retry_before is None:
            self._dead_letter_retry_before = _eval(
                self._pool.broker, f"application:get_env(rabbit, {_RETRY_KEY})."
            )
        _eval(
            self._pool.broker, f"application:set_env(rabbit, {_RETRY_KEY}, {int(seconds * 1000)})."
        )

    async def close(self) -> None:
        await self._connections.close_all()
        before = self._dead_letter_retry_before
        if before is not None:
            value = before.removeprefix("{ok,").removesuffix("}")
            restore = (
                f"application:set_env(rabbit, {_RETRY_KEY}, {value})."
                if before.startswith("{ok,")
                else f"application:unset_env(rabbit, {_RETRY_KEY})."
            )
            _eval(self._pool.broker, restore)
        self._pool.give_back(self.vhost)


class VhostPool:
    """Fresh vhosts on the real broker, made ahead of use and deleted in the background."""

    def __init__(self, broker: SharedBroker, *, ahead: int = 2) -> None:
        self.broker = broker
        parts = urlsplit(broker.url)
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
        self._deleting.append(self._workers.submit(ctl, self.broker, "delete_vhost", vhost))

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
        ctl(self.broker, "add_vhost", vhost)
        ctl(self.broker, "set_permissions", "-p", vhost, self.user, ".*", ".*", ".*")
        return vhost


_RETRY_KEY = "dead_letter_worker_publisher_confirm_timeout"


def _eval(broker: SharedBroker, expression: str) -> str:
    """``rabbitmqctl eval EXPRESSION`` on ``broker``'s node; what it printed."""
    done = broker.run_ctl("eval", expression)
    if done.returncode != 0:
        raise RuntimeError(f"rabbitmqctl eval failed: {done.stderr.strip()}")
    return done.stdout.strip()


def ctl(broker: SharedBroker, *args: str) -> None:
    """Run ``rabbitmqctl -q ARGS`` on ``broker``'s node; raise with its stderr when it fails."""
    done = broker.run_ctl("-q", *args)
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
