"""The brokers the contract, runtime, dlq and hostile suites run on, behind one interface.

A test talks to a broker through the transport port only (``Connection`` / ``Channel``),
moves time with :meth:`Backend.elapse` and waits for a result with :meth:`Backend.until`, so
it reads the same on both (docs/reference/testing.md):

* :class:`EmulatorBackend`: the emulator set to a server version. ``elapse`` advances the
  virtual clock (no real time passes); ``until`` settles the emulator and checks, up to
  ``rounds`` times. The contract suite asks for one round: the emulator must be right as
  soon as it settled, with no help from waiting. rr's own service runs tasks of its own
  between two settles, so the runtime suites give it more.
* :class:`RabbitBackend`: the real server (tests/shared_node.py), in a vhost of its own,
  taken from a :class:`VhostPool` (by :meth:`RabbitBackend.setup`, or given by the caller)
  and given back to it by :meth:`RabbitBackend.close`. ``elapse`` sleeps for real and
  ``until`` polls, because a real broker needs a moment to move a message between queues or
  to a consumer.

``rabbitmqctl`` costs most of a second of CPU a call (it starts an Erlang VM), which made
vhosts the suite's biggest cost on a 2-core machine (three calls per test). So
:class:`VhostPool` makes vhosts a batch at a time, ahead of use, in a background thread, with
one ``rabbitmqctl eval`` per batch, and deletes the vhosts given back a batch at a time: every
test still gets a fresh, never used vhost, and no vhost outlives the session (the pools are
closed at its end, tests/conftest.py). :func:`vhost_pool` gives the process's pool of a
server.
"""

from __future__ import annotations

import asyncio
import atexit
import functools
import inspect
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import asynccontextmanager, contextmanager
from typing import Any, Literal, Protocol
from urllib.parse import quote, urlsplit, urlunsplit
from uuid import uuid4

import pytest

from rabbitctl_retry.emulator import Emulator
from rabbitctl_retry.errors import BrokerUnreachable
from rabbitctl_retry.ops.clock import Clock, WallClock
from rabbitctl_retry.runtime.handlers import Subscriber
from rabbitctl_retry.runtime.loader import HandlerSet
from rabbitctl_retry.runtime.service import RunOptions, Service
from rabbitctl_retry.server import ServerVersion
from rabbitctl_retry.topology.load import load_text
from rabbitctl_retry.transport import clients
from rabbitctl_retry.transport.base import Channel, Connection, Properties
from tests.shared_node import (
    BROKERS,
    DEFAULT_BROKERS,
    SharedBroker,
    chosen_versions,
    current,
    require_broker,
)
from tests.vhost_eval import ALL_DONE, vhost_batch

EMULATED: dict[str, ServerVersion] = {
    version: BROKERS[version].server_version
    for version in dict.fromkeys([*DEFAULT_BROKERS, *chosen_versions()])
}
"""The exact releases the emulator stands in for, per release line the suites run: the
default servers and any other ``RR_TEST_BROKERS`` names (tests/shared_node.py's table;
tests/contract/test_suite_can_fail.py checks each)."""

DEADLINE_S = 60.0
"""How long the real broker may take, by default, to make an :meth:`Backend.until` check
true."""

DELAYED_PLUGIN = "rabbitmq_delayed_message_exchange"

NODE_SETTINGS = "rabbitmq-node-settings"
"""The xdist group of the tests that change a setting of a whole shared node
(:meth:`RabbitBackend.set_dead_letter_retry`): run on one worker, one after the other."""

Check = Callable[[], bool | Awaitable[bool]]
"""What :meth:`Backend.until` waits for: a plain or an async function without arguments."""


class Backend(Protocol):
    name: str
    """``"emulator"`` or ``"rabbitmq"``."""
    version: str
    """The server release line: ``3.10``, ``4.0``, ``4.3`` (the real server's, or the one the
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
    (see the module doc). ``default_queue_type``: its vhost's (None: made without one)."""

    name = "emulator"
    vhost = "/"

    def __init__(
        self, version: str = "3.10", *, rounds: int = 100, default_queue_type: str | None = None
    ) -> None:
        self.version = version
        kind: Literal["classic", "quorum"] | None
        match default_queue_type:
            case "classic" | "quorum" | None:
                kind = default_queue_type
            case _:
                raise ValueError(f"the emulator has no queue type {default_queue_type!r}")
        self.emulator = Emulator(
            server_version=BROKERS[version].server_version, default_queue_type=kind
        )
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
    Without ``pool``, :meth:`setup` takes a fresh vhost from the server's :func:`vhost_pool`;
    with ``pool``, ``vhost`` is one :meth:`VhostPool.take` gave. :meth:`close` gives it back
    (the pool deletes it). ``deadline_s``: how long :meth:`until` polls.
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
        self._base_url = broker if isinstance(broker, str) else broker.url
        if (pool is None) != (vhost is None):
            raise ValueError("a pooled vhost needs both pool= and vhost=")
        self.vhost = vhost or ""
        """The vhost (empty until :meth:`setup` when the backend takes its own)."""
        self.url = vhost_url(self._base_url, self.vhost) if vhost else ""
        self.user = urlsplit(self._base_url).username or "guest"
        self.clock: Clock = WallClock()
        self.deadline_s = deadline_s
        self._pool = pool
        self._dead_letter_retry_before: str | None = None
        self._connections = _Connections()

    def setup(self, *, default_queue_type: str | None = None) -> None:
        """Take a fresh vhost (full permissions for the URL's user) from the server's pool;
        with ``default_queue_type``, one made now with that default queue type
        (:meth:`VhostPool.take_typed`)."""
        if self._pool is not None:
            raise RuntimeError(f"{self.vhost} comes from a pool, made already")
        pool = vhost_pool(self.broker)
        self.vhost = (
            pool.take_now() if default_queue_type is None else pool.take_typed(default_queue_type)
        )
        self.url = vhost_url(self._base_url, self.vhost)
        self._pool = pool

    async def connect(self) -> Connection:
        # A RabbitMQ in a chroot without the machine's host name in its /etc/hosts gave about
        # one in 55 rapid back-to-back TCP connections its connection.start 5 s late (docs/
        # testing.md, "Three servers": scripts/rabbitmq-chroot.sh adds the name now); a test
        # that opens one connection per publish still retries such a stalled handshake
        # instead of failing on a server's quirk; the last try waits long, for a server
        # slowed by a busy machine.
        for attempt in range(3):
            try:
                connection = await clients.connect(self.url, timeout_s=3.0 if attempt < 2 else 20.0)
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
        await self.within(check, what, self.deadline_s)

    async def within(
        self, check: Check, what: str, deadline_s: float, *, poll_s: float = 0.01
    ) -> None:
        """:meth:`until`, with a deadline and a pace of its own."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + deadline_s
        while not await _holds(check):
            if loop.time() > deadline:
                raise AssertionError(f"RabbitMQ did not get to {what} in {deadline_s:g} s")
            await asyncio.sleep(poll_s)

    def set_dead_letter_retry(self, seconds: float) -> None:
        # A node-wide setting, read by each worker when its queue starts; put back in close().
        # Tests that call this must not run at the same time as each other on one node (two
        # of them would put back each other's value): they share the xdist_group
        # NODE_SETTINGS, so pytest-xdist runs them on one worker, one after the other.
        if self._dead_letter_retry_before is None:
            self._dead_letter_retry_before = _eval(
                self.broker, f"application:get_env(rabbit, {_RETRY_KEY})."
            )
        _eval(self.broker, f"application:set_env(rabbit, {_RETRY_KEY}, {int(seconds * 1000)}).")

    async def close(self) -> None:
        """Close the connections, put back the node setting, delete (or give back) the vhost:
        each step runs even when an earlier one fails (then the first failure is raised)."""
        try:
            await self._connections.close_all()
        finally:
            try:
                self._restore_dead_letter_retry()
            finally:
                if self._pool is not None:
                    self._pool.give_back(self.vhost)

    def _restore_dead_letter_retry(self) -> None:
        before = self._dead_letter_retry_before
        if before is None:
            return
        self._dead_letter_retry_before = None
        value = before.removeprefix("{ok,").removesuffix("}")
        restore = (
            f"application:set_env(rabbit, {_RETRY_KEY}, {value})."
            if before.startswith("{ok,")
            else f"application:unset_env(rabbit, {_RETRY_KEY})."
        )
        _eval(self.broker, restore)

    def close_all_connections(self) -> None:
        """Force-close every client connection of this vhost (as an operator would)."""
        self.ctl("close_all_connections", "-p", self.vhost, "rr test: forced close")

    def ctl(self, *args: str) -> str:
        """``rabbitmqctl -q ARGS`` on this backend's node; what it printed."""
        return ctl(self.broker, *args)


async def until_within(backend: Backend, check: Check, what: str, *, real_s: float) -> None:
    """``backend.until``, but a real server gets ``real_s`` (polled four times a second) in
    place of its deadline: for what RabbitMQ does on a timer of its own (statistics sampled
    every 5 s, a quorum queue's expiry tick), which a busy machine delays further."""
    if isinstance(backend, RabbitBackend):
        await backend.within(check, what, real_s, poll_s=0.25)
    else:
        await backend.until(check, what)


@contextmanager
def own_vhost(amqp_url: str, default_queue_type: str | None = None) -> Iterator[RabbitBackend]:
    """For a test that runs the CLI (its own event loop): the current shared server, in a
    fresh vhost of the test's own (the URL's is shared by every test; ``default_queue_type``:
    the vhost's, see :meth:`RabbitBackend.setup`), closed after."""
    rabbit = RabbitBackend(amqp_url)
    rabbit.setup(default_queue_type=default_queue_type)
    try:
        yield rabbit
    finally:
        asyncio.run(rabbit.close())


@asynccontextmanager
async def backend_of(kind: str, version: str) -> AsyncIterator[Backend]:
    """The shared RabbitMQ of release line ``version`` in a fresh vhost (``kind``
    ``rabbitmq``: skipped without it, failed in CI), or the emulator set to that release
    (``emulator``); closed after."""
    backend: Backend
    if kind == "rabbitmq":
        rabbit = RabbitBackend(require_broker(version))
        rabbit.setup()
        backend = rabbit
    else:
        backend = EmulatorBackend(version)
    try:
        yield backend
    finally:
        await backend.close()


def backend_params(emulated: Iterable[str] | None = None) -> list[Any]:
    """The parameters ``(kind, version)`` of a fixture that opens :func:`backend_of`: each
    chosen server release (marked ``broker``), then the emulator set to each release of
    ``emulated`` (the chosen ones unless told); ids ``rabbitmq-4.3``, ``emulator-4.3``."""
    return [
        *(
            pytest.param(("rabbitmq", version), id=f"rabbitmq-{version}", marks=pytest.mark.broker)
            for version in chosen_versions()
        ),
        *(
            pytest.param(("emulator", version), id=f"emulator-{version}")
            for version in (chosen_versions() if emulated is None else emulated)
        ),
    ]


class VhostPool:
    """Fresh vhosts on a shared server, made ahead of use and deleted once given back, a
    batch at a time (see the module doc): one ``rabbitmqctl eval`` in a background thread
    deletes the vhosts given back so far and, when ``low`` or fewer are left, makes the next
    ``batch``; it runs when those are needed, or when ``delete_after`` wait to be deleted.

    Not thread-safe: take and give back from one thread (the tests'); only the
    ``rabbitmqctl`` calls run in the background.
    """

    def __init__(
        self, broker: SharedBroker, *, batch: int = 12, low: int = 3, delete_after: int = 12
    ) -> None:
        self.broker = broker
        self.user = urlsplit(broker.url).username or "guest"
        self._batch = batch
        self._low = low
        self._delete_after = delete_after
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="rr-vhost")
        self._ready: deque[str] = deque()
        self._given_back: list[str] = []
        self._job: Future[list[str]] | None = None
        self._failures: list[BaseException] = []
        self._closed = False

    async def take(self) -> str:
        """A vhost no test has used, with full permissions for the URL's user."""
        while not self._collect():
            self._kick(make=True)
            assert self._job is not None
            await asyncio.wrap_future(self._job)
        return self._pop()

    def take_now(self) -> str:
        """:meth:`take`, for code outside an event loop (waits for a batch if none is left)."""
        while not self._collect():
            self._kick(make=True)
            assert self._job is not None
            self._job.result()
        return self._pop()

    @contextmanager
    def lent(self) -> Iterator[str]:
        """:meth:`take_now`'s vhost for a block of code outside an event loop, given back
        after."""
        name = self.take_now()
        try:
            yield name
        finally:
            self.give_back(name)

    def take_typed(self, default_queue_type: str) -> str:
        """A fresh vhost whose default queue type is ``default_queue_type`` (``rabbitmqctl
        add_vhost --default-queue-type``, which 3.10.8, 4.0.5 and 4.3.6 take: measured), with
        full permissions for the URL's user; made now, on its own (the batches make vhosts
        without one), and deleted with the next batch once given back, as any other."""
        name = f"rr-test-{uuid4().hex[:12]}"
        ctl(self.broker, "add_vhost", name, "--default-queue-type", default_queue_type)
        try:
            ctl(self.broker, "set_permissions", "-p", name, self.user, ".*", ".*", ".*")
        except BaseException:
            _delete_each(self.broker, [name], missing_ok=True)
            raise
        return name

    def give_back(self, vhost: str) -> None:
        """Have ``vhost`` deleted (with the next batch)."""
        self._given_back.append(vhost)
        self._collect()
        self._kick()

    def close(self) -> None:
        """Delete every vhost made, wait for it; raise the first failure once all were
        tried. Closing again does nothing."""
        if self._closed:
            return
        self._closed = True
        if self._job is not None:
            try:
                self._job.result()
            except Exception as error:
                self._failures.append(error)
            self._collect()
        leftover, self._given_back = [*self._given_back, *self._ready], []
        self._ready.clear()
        try:
            _, error = maintain_vhosts(self.broker, self.user, delete=leftover, make=[])
            if error is not None:
                self._failures.append(error)
        except Exception as error:
            self._failures.append(error)
        self._worker.shutdown()
        if self._failures:
            raise self._failures[0]

    def _collect(self) -> int:
        """Take in the finished background job's vhosts; how many are ready."""
        if self._job is not None and self._job.done():
            job, self._job = self._job, None
            self._ready.extend(job.result())  # raises when its vhosts could not be made
        return len(self._ready)

    def _pop(self) -> str:
        vhost = self._ready.popleft()
        self._kick()
        return vhost

    def _kick(self, *, make: bool = False) -> None:
        """Start a background job when none runs and there is work for one."""
        if self._closed:
            raise RuntimeError("the vhost pool is closed")
        if self._job is not None:
            return
        make = make or len(self._ready) <= self._low
        if not make and len(self._given_back) < self._delete_after:
            return
        names = [f"rr-test-{uuid4().hex[:12]}" for _ in range(self._batch if make else 0)]
        delete, self._given_back = self._given_back, []
        self._job = self._worker.submit(self._maintain, delete, names)

    def _maintain(self, delete: list[str], make: list[str]) -> list[str]:
        made, error = maintain_vhosts(self.broker, self.user, delete=delete, make=make)
        if error is not None:
            self._failures.append(error)  # raised by close(): a test's teardown must not fail
        return made


_POOLS: dict[str, VhostPool] = {}


def vhost_pool(broker: SharedBroker) -> VhostPool:
    """This process's pool of fresh vhosts on ``broker`` (made on first use; closed by
    :func:`close_vhost_pools` at the end of the session, or when the process exits: a script
    that uses :class:`RabbitBackend` leaves no vhost behind either)."""
    pool = _POOLS.get(broker.version)
    if pool is None or pool.broker != broker:
        if not _POOLS:
            atexit.register(close_vhost_pools)
        pool = _POOLS[broker.version] = VhostPool(broker)
    return pool


def close_vhost_pools() -> None:
    """Delete the vhosts of every pool (tests/conftest.py, at the end of the session)."""
    pools = list(_POOLS.values())
    _POOLS.clear()
    atexit.unregister(close_vhost_pools)
    failures: list[BaseException] = []
    for pool in pools:
        try:
            pool.close()
        except Exception as error:
            failures.append(error)
    if failures:
        raise failures[0]


def maintain_vhosts(
    broker: SharedBroker, user: str, *, delete: list[str], make: list[str]
) -> tuple[list[str], BaseException | None]:
    """Delete the vhosts ``delete`` and make the vhosts ``make`` on ``broker``'s node, ``user``
    with full permissions in each, with one ``rabbitmqctl eval`` (rabbit_vhost:delete,
    rabbit_vhost:add, set_permissions: what ``delete_vhost``, ``add_vhost`` and
    ``set_permissions`` call). When that fails, one ``rabbitmqctl`` command at a time.

    ``(make, why a deletion failed or None)``; raises (having deleted what it made) when the
    vhosts ``make`` cannot be made."""
    if not delete and not make:
        return make, None
    expression = vhost_batch(user, delete=delete, make=make)
    done = broker.run_ctl("-q", "eval", expression)
    if done.returncode == 0 and done.stdout.strip() == ALL_DONE:
        return make, None
    # The fast path failed (another RabbitMQ's internals, a vhost deleted already): go slowly.
    deletion_error: BaseException | None = None
    try:
        _delete_each(broker, delete, missing_ok=False)
    except Exception as error:
        deletion_error = error
    _delete_each(broker, make, missing_ok=True)
    made: list[str] = []
    try:
        for name in make:
            ctl(broker, "add_vhost", name)
            made.append(name)
            ctl(broker, "set_permissions", "-p", name, user, ".*", ".*", ".*")
    except BaseException:
        _delete_each(broker, made, missing_ok=True)
        raise
    return make, deletion_error


def _delete_each(broker: SharedBroker, names: list[str], *, missing_ok: bool) -> None:
    if not names:
        return
    present = set(ctl(broker, "list_vhosts", "name").split())
    failures: list[BaseException] = []
    for name in names:
        if name not in present:
            if not missing_ok:
                failures.append(RuntimeError(f"vhost {name} was deleted already"))
            continue
        try:
            ctl(broker, "delete_vhost", name)
        except RuntimeError as error:
            failures.append(error)
    if failures:
        raise failures[0]


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
def delayed_plugin_enabled(broker: SharedBroker) -> bool:
    """Whether ``broker``'s node runs the delayed-message exchange plugin (asked of that
    node, as ``RR_TEST_NODE`` names it, never of the machine's default one)."""
    active = _eval(broker, f"lists:member({DELAYED_PLUGIN}, rabbit_plugins:active()).")
    return active == "true"


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
