"""The brokers the contract, runtime, dlq and hostile suites run on, behind one interface.

A test talks to a broker through the transport port only (``Connection`` / ``Channel``),
moves time with :meth:`Backend.elapse` and waits for a result with :meth:`Backend.until`, so
it reads the same on both (docs/testing.md):

* :class:`EmulatorBackend`: the emulator set to a server version. ``elapse`` advances the
  virtual clock (no real time passes); ``until`` settles the emulator and checks, up to
  ``rounds`` times. The contract suite asks for one round: the emulator must be right as
  soon as it settled, with no help from waiting. rr's own service runs tasks of its own
  between two settles, so the runtime suites give it more.
* :class:`RabbitBackend`: the real server (tests/shared_node.py), in a vhost of its own:
  made by :meth:`RabbitBackend.setup` and deleted by :meth:`RabbitBackend.close`, or taken
  from a :class:`VhostPool` and given back to it. ``elapse`` sleeps for real and ``until``
  polls, because a real broker needs a moment to move a message between queues or to a
  consumer.

``rabbitmqctl`` costs about 0.4 s a call, so :class:`VhostPool` creates vhosts a few tests
ahead in worker threads and deletes them in the background: every test still gets a fresh,
never used vhost, but does not wait for ``rabbitmqctl``.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import shutil
import subprocess
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import asynccontextmanager
from typing import Any, Protocol
from urllib.parse import quote, urlsplit, urlunsplit
from uuid import uuid4

from rabbitctl_retry.emulator import Emulator
from rabbitctl_retry.errors import BrokerUnreachable
from rabbitctl_retry.ops.clock import Clock, WallClock
from rabbitctl_retry.runtime.handlers import Subscriber
from rabbitctl_retry.runtime.loader import HandlerSet
from rabbitctl_retry.runtime.service import RunOptions, Service
from rabbitctl_retry.topology.load import load_text
from rabbitctl_retry.transport import amqp
from rabbitctl_retry.transport.base import Channel, Connection, Properties, ServerVersion
from tests.shared_node import SharedBroker, current

EMULATED = {"3.10": ServerVersion(3, 10, 8), "4.0": ServerVersion(4, 0, 5)}
"""The exact releases the emulator stands in for, per release line the suites run."""

DEADLINE_S = 60.0
"""How long the real broker may take, by default, to make an :meth:`Backend.until` check
true."""

DELAYED_PLUGIN = "rabbitmq_delayed_message_exchange"

Check = Callable[[], bool | Awaitable[bool]]
"""What :meth:`Backend.until` waits for: a plain or an async function without arguments."""


class Backend(Protocol):
    name: str
    """``"emulator"`` or ``"rabbitmq"``."""
    version: str
    """The server release line: ``3.10`` or ``4.0`` (the real server's, or the one the
    emulator is set to); see tests/contract/versions.py."""
    vhost: str
    """The vhost the test runs in (the server names it in error texts)."""
    clock: Clock
    """The clock rr's service runs on: the wall clock, or the emulator's virtual one."""

    async def connect(self) -> Connection:
        """A new connection; closed by :meth:`close` if the test does not close it."""
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


async def _holds(check: Check) -> bool:
    result = check()
    return bool(await result) if inspect.isawaitable(result) else bool(result)


class _Connections:
    """Connections a backend opened, closed at the end of the test."""

    def __init__(self) -> None:
        self.opened: list[Connection] = []
        self.shared: Connection | None = None

    async def channel(
        self, connect: Callable[[], Awaitable[Connection]], confirms: bool
    ) -> Channel:
        if self.shared is None or self.shared.is_closed:
            self.shared = await connect()
        return await self.shared.channel(confirms=confirms)

    async def close_all(self) -> None:
        for connection in self.opened:
            await connection.close()
        self.opened.clear()
        self.shared = None


class EmulatorBackend:
    """The emulator set to a server version (the delayed-message exchange enabled).

    ``rounds``: how many times :meth:`until` settles the emulator and checks before it fails
    (see the module doc)."""

    name = "emulator"
    vhost = "/"

    def __init__(self, version: str = "3.10", *, rounds: int = 100) -> None:
        self.version = version
        self.emulator = Emulator(server_version=EMULATED[version])
        self.clock: Clock = self.emulator.clock
        self.rounds = rounds
        self._connections = _Connections()

    async def connect(self) -> Connection:
        connection = self.emulator.connect()
        self._connections.opened.append(connection)
        return connection

    async def channel(self, *, confirms: bool = True) -> Channel:
        return await self._connections.channel(self.connect, confirms)

    async def elapse(self, seconds: float) -> None:
        await self.emulator.advance(seconds)

    async def until(self, check: Check, what: str) -> None:
        for _ in range(self.rounds):
            await self.emulator.settle()
            if await _holds(check):
                return
            await asyncio.sleep(0)
        raise AssertionError(f"the emulator settled without {what}")

    def set_dead_letter_retry(self, seconds: float) -> None:
        self.emulator.broker.dead_letter_retry_s = seconds

    async def close(self) -> None:
        await self._connections.close_all()
        self.emulator.drop_connections()  # those opened on the emulator itself
        assert self.emulator.callback_errors == [], "a consumer callback failed"


class RabbitBackend:
    """The real RabbitMQ, in a vhost of its own.

    ``broker``: a shared server, or the URL of the current one (the ``amqp_url`` fixture).
    Without ``pool`` the backend names a fresh vhost, :meth:`setup` makes it and
    :meth:`close` deletes it; with ``pool``, ``vhost`` is one :meth:`VhostPool.take` gave and
    :meth:`close` gives it back. ``deadline_s``: how long :meth:`until` polls.
    """

    name = "rabbitmq"

    def __init__(
        self,
        broker: SharedBroker | str,
        *,
        pool: VhostPool | None = None,
        vhost: str | None = None,
        deadline_s: float = DEADLINE_S,
    ) -> None:
        self.broker = broker if isinstance(broker, SharedBroker) else current()
        self.version = self.broker.version
        base_url = broker if isinstance(broker, str) else broker.url
        if (pool is None) != (vhost is None):
            raise ValueError("a pooled vhost needs both pool= and vhost=")
        self.vhost = vhost or f"rr-test-{uuid4().hex[:12]}"
        self.url = vhost_url(base_url, self.vhost)
        self.user = urlsplit(base_url).username or "guest"
        self.clock: Clock = WallClock()
        self.deadline_s = deadline_s
        self._pool = pool
        self._dead_letter_retry_before: str | None = None
        self._connections = _Connections()

    def setup(self) -> None:
        """Make the backend's own vhost, with full permissions for the URL's user."""
        if self._pool is not None:
            raise RuntimeError(f"{self.vhost} comes from a pool, made already")
        self.ctl("add_vhost", self.vhost)
        self.ctl("set_permissions", "-p", self.vhost, self.user, ".*", ".*", ".*")

    async def connect(self) -> Connection:
        # RabbitMQ 4.0.5 as built here (scripts/rabbitmq4.sh) leaves about one in 55 rapid
        # back-to-back TCP connections without its connection.start (measured: none with 50 ms
        # between them, none on 3.10); a test that opens one connection per publish retries
        # such a stalled handshake instead of failing on the server's quirk.
        for attempt in range(3):
            try:
                connection = await amqp.connect(self.url, timeout_s=2.0 if attempt < 2 else 5.0)
            except BrokerUnreachable:
                if attempt == 2:
                    raise
            else:
                self._connections.opened.append(connection)
                return connection
        raise AssertionError("unreachable")

    async def channel(self, *, confirms: bool = True) -> Channel:
        return await self._connections.channel(self.connect, confirms)

    async def elapse(self, seconds: float) -> None:
        await asyncio.sleep(seconds)

    async def until(self, check: Check, what: str) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.deadline_s
        while not await _holds(check):
            if loop.time() > deadline:
                raise AssertionError(f"RabbitMQ did not get to {what} in {self.deadline_s:g} s")
            await asyncio.sleep(0.01)

    def set_dead_letter_retry(self, seconds: float) -> None:
        # a node-wide setting, read by each worker when its queue starts; put back in close()
        if self._dead_letter_retry_before is None:
            self._dead_letter_retry_before = _eval(
                self.broker, f"application:get_env(rabbit, {_RETRY_KEY})."
            )
        _eval(self.broker, f"application:set_env(rabbit, {_RETRY_KEY}, {int(seconds * 1000)}).")

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
            _eval(self.broker, restore)
        if self._pool is not None:
            self._pool.give_back(self.vhost)
        else:
            self.ctl("delete_vhost", self.vhost)

    def close_all_connections(self) -> None:
        """Force-close every client connection of this vhost (as an operator would)."""
        self.ctl("close_all_connections", "-p", self.vhost, "rr test: forced close")

    def ctl(self, *args: str) -> str:
        """``rabbitmqctl -q ARGS`` on this backend's node; what it printed."""
        return ctl(self.broker, *args)


class VhostPool:
    """Fresh vhosts on the real broker, made ahead of use and deleted in the background."""

    def __init__(self, broker: SharedBroker, *, ahead: int = 2) -> None:
        self.broker = broker
        self.user = urlsplit(broker.url).username or "guest"
        self._ahead = ahead
        self._workers = ThreadPoolExecutor(max_workers=ahead + 1, thread_name_prefix="rr-vhost")
        self._ready: deque[Future[str]] = deque()
        self._deleting: list[Future[str]] = []

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


def vhost_url(base_url: str, vhost: str) -> str:
    """``base_url`` with its path set to ``vhost`` (quoted), the query kept."""
    parts = urlsplit(base_url)
    path = "/" + quote(vhost, safe="")
    return urlunsplit((parts.scheme, parts.netloc, path, parts.query, ""))


_RETRY_KEY = "dead_letter_worker_publisher_confirm_timeout"


def _eval(broker: SharedBroker, expression: str) -> str:
    """``rabbitmqctl eval EXPRESSION`` on ``broker``'s node; what it printed."""
    done = broker.run_ctl("eval", expression)
    if done.returncode != 0:
        raise RuntimeError(f"rabbitmqctl eval failed: {done.stderr.strip()}")
    return done.stdout.strip()


def ctl(broker: SharedBroker, *args: str) -> str:
    """Run ``rabbitmqctl -q ARGS`` on ``broker``'s node; what it printed. Raises with its
    stderr when it fails."""
    done = broker.run_ctl("-q", *args)
    if done.returncode != 0:
        raise RuntimeError(f"rabbitmqctl {' '.join(args)} failed: {done.stderr.strip()}")
    return done.stdout


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


async def publish(
    backend: Backend, queue: str, body: bytes, properties: Properties | None = None
) -> None:
    """Publish one message to ``queue`` (default exchange, mandatory, confirmed) on a
    connection of its own."""
    connection = await backend.connect()
    try:
        channel = await connection.channel(confirms=True)
        await channel.publish(body, routing_key=queue, properties=properties, mandatory=True)
    finally:
        await connection.close()


@asynccontextmanager
async def running_work(backend: Backend, topology: str, handler: Any) -> AsyncIterator[Service]:
    """``rr run``'s service consuming queue ``work`` of ``topology`` (TOML text) with
    ``handler`` (prefetch 10); stopped gracefully after the block."""
    service = Service(
        HandlerSet(module="test", subscribers=(Subscriber("work", handler, "test:work"),)),
        topology=load_text(topology),
        connect=backend.connect,
        options=RunOptions(prefetch=10, shutdown_timeout_s=5),
        clock=backend.clock,
    )
    async with service.running():
        yield service
