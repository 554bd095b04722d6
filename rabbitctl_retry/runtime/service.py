"""``rr run``: connect, declare (or check) the topology, consume, stop gracefully, reconnect.

Lifecycle::

    startup hooks
    loop:  connect -> declare topology (or, with declare off, check it) -> start consumers
           wait until stop is requested or the connection drops
           dropped:   log, wait (backoff 0.5 s doubling to 30 s), reconnect
           stop:      basic.cancel every consumer, let in-flight handlers finish (up to
                      shutdown_timeout_s), send pending acks, publish pending in-memory
                      delayed copies at once, close
    shutdown hooks

Nothing rr counts lives in the process: attempts are in the message (the retry header) or on
the server (x-delivery-count), so any number of ``rr run`` processes can share a queue, and a
reconnect loses nothing — deliveries in flight when the connection dropped go back to their
queue and come again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from rabbitctl_retry.errors import (
    AccessRefused,
    BrokerUnreachable,
    ConfigError,
    ConflictError,
    TransportError,
)
from rabbitctl_retry.retry.policy import RetryPolicy
from rabbitctl_retry.runtime.clock import Clock, WallClock
from rabbitctl_retry.runtime.consumer import EventListener, QueueConsumer
from rabbitctl_retry.runtime.copies import CopyPublisher, InMemoryDelays
from rabbitctl_retry.runtime.handlers import call_hook
from rabbitctl_retry.runtime.loader import HandlerSet
from rabbitctl_retry.runtime.provision import observe, provision
from rabbitctl_retry.topology.expand import Desired, expand
from rabbitctl_retry.topology.model import PublishMode, Queue, QueueType, Topology
from rabbitctl_retry.topology.naming import DEFAULT_RETRY_HEADER
from rabbitctl_retry.topology.plan import OpKind, Status, plan
from rabbitctl_retry.transport.base import Connection

log = logging.getLogger("rr.runtime")

Connect = Callable[[], Awaitable[Connection]]


@dataclass(frozen=True, slots=True, kw_only=True)
class RunOptions:
    prefetch: int = 100
    concurrency: int | None = None
    """In-flight handlers per queue; default: the prefetch."""
    declare: bool = True
    shutdown_timeout_s: float = 30.0
    reconnect: bool = True
    reconnect_max_s: float = 30.0


def policy_for(queue: str, topology: Topology | None) -> RetryPolicy:
    """The retry policy of ``queue`` in ``topology``, or a bare one (no cap, no delay)."""
    header = topology.broker.retry_header if topology else DEFAULT_RETRY_HEADER
    listed = topology.queue(queue) if topology else None
    if listed is None:
        return RetryPolicy(queue=queue, retry_header=header)
    return RetryPolicy.of(listed, retry_header=header)


class Service:
    """Runs a :class:`HandlerSet` until :meth:`stop`."""

    def __init__(
        self,
        handlers: HandlerSet,
        *,
        topology: Topology | None,
        connect: Connect,
        options: RunOptions | None = None,
        clock: Clock | None = None,
        listener: EventListener | None = None,
    ) -> None:
        self.handlers = handlers
        self.topology = topology
        self._connect = connect
        self.options = options or RunOptions()
        self.clock = clock or WallClock()
        self._listener = listener
        self._stop = asyncio.Event()
        self._ready = asyncio.Event()
        self.delays = InMemoryDelays(self.clock)
        self._consumers: list[QueueConsumer] = []
        self._executor: ThreadPoolExecutor | None = None
        self.connections = 0
        """How many connections the service has made (1 + reconnects)."""

    def stop(self) -> None:
        """Ask for a graceful stop (safe from a signal handler)."""
        self._stop.set()

    async def wait_ready(self) -> None:
        """Return once every consumer is consuming."""
        await self._ready.wait()

    @property
    def in_flight(self) -> int:
        return sum(consumer.in_flight for consumer in self._consumers)

    async def run(self) -> None:
        concurrency = self.options.concurrency or self.options.prefetch
        if any(not s.is_async for s in self.handlers.subscribers):
            self._executor = ThreadPoolExecutor(
                max_workers=min(concurrency * len(self.handlers.subscribers), 64),
                thread_name_prefix="rr-handler",
            )
        for hook in self.handlers.startup:
            await call_hook(hook)
        try:
            await self._run_connected(concurrency)
        finally:
            for hook in self.handlers.shutdown:
                await call_hook(hook)
            if self._executor is not None:
                self._executor.shutdown(wait=False, cancel_futures=True)

    async def _run_connected(self, concurrency: int) -> None:
        first = True
        backoff_s = 0.5
        while not self._stop.is_set():
            try:
                connection = await self._connect()
            except (BrokerUnreachable, TransportError) as error:
                if first or not self.options.reconnect or isinstance(error, AccessRefused):
                    raise
                log.warning("reconnect failed", extra={"rr": {"error": str(error)}})
                await self._sleep(backoff_s)
                backoff_s = min(backoff_s * 2, self.options.reconnect_max_s)
                continue
            self.connections += 1
            try:
                if first:
                    await self._prepare(connection)
                await self._start(connection, concurrency)
                first = False
                backoff_s = 0.5
                self._ready.set()
                stopped = await self._wait(connection)
                if stopped:
                    await self._graceful_stop(connection)
                    return
                log.warning(
                    "connection lost; deliveries in flight return to their queues",
                    extra={"rr": {"in_flight": self.in_flight}},
                )
                self._drop_consumers()
                if not self.options.reconnect:
                    raise BrokerUnreachable("the connection to the broker was lost")
            except BrokerUnreachable:
                await connection.close()
                if first or not self.options.reconnect:
                    raise
                self._drop_consumers()
            except BaseException:
                await connection.close()
                raise
            await self._sleep(backoff_s)
            backoff_s = min(backoff_s * 2, self.options.reconnect_max_s)

    async def _sleep(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stop.wait(), seconds)

    async def _wait(self, connection: Connection) -> bool:
        """``True`` when stop was asked for, ``False`` when the connection dropped."""
        stop = asyncio.ensure_future(self._stop.wait())
        closed = asyncio.ensure_future(connection.wait_closed())
        try:
            await asyncio.wait({stop, closed}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in (stop, closed):
                if not waiter.done():
                    waiter.cancel()
        return self._stop.is_set() and not connection.is_closed

    async def _prepare(self, connection: Connection) -> None:
        """Declare the topology, or check that what the handlers need is there."""
        if self.topology is None:
            await self._check_queues_exist(connection)
            return
        desired = expand(self.topology)
        if self.options.declare:
            result = await provision(connection, desired, dry_run=False, connect=self._connect)
            if result.conflicts:
                details = "; ".join(f"{op.name}: {op.detail}" for op in result.conflicts)
                raise ConflictError(f"the broker conflicts with the topology: {details}")
            return
        await self._check_declared(connection, desired)

    async def _check_queues_exist(self, connection: Connection) -> None:
        channel = await connection.channel()
        try:
            for queue in self.handlers.queues:
                await channel.queue_declare(queue, passive=True)
        finally:
            await channel.close()

    async def _check_declared(self, connection: Connection, desired: Desired) -> None:
        """With declaring off: every queue and exchange exists as the file says, and quorum
        delivery limits are in force (otherwise the retry policy could not be applied)."""
        observed = await observe(connection, desired, connect=self._connect)
        result = plan(desired, observed, server_major=connection.server_version.major)
        limited = {
            queue.name
            for queue in self._consumed_queues()
            if queue.type is QueueType.QUORUM and queue.server_delivery_limit is not None
        }
        problems = []
        for operation in result.operations:
            if operation.op is OpKind.BIND or operation.status is Status.UNCHANGED:
                continue
            reason = operation.detail or "does not exist"
            if operation.name in limited:
                problems.append(
                    f"quorum queue {operation.name!r} does not carry the topology's delivery "
                    f"limit and dead-letter route ({reason}), so its retry policy cannot be "
                    "applied; run rr declare, or drop max_attempts/dead_letter from the file"
                )
            else:
                kind = operation.op.value.removeprefix("declare_")
                problems.append(f"{kind} {operation.name!r}: {reason}")
        if problems:
            raise ConfigError(
                "--no-declare: the broker lacks what the handlers need: " + "; ".join(problems)
            )

    def _consumed_queues(self) -> list[Queue]:
        if self.topology is None:
            return []
        return [q for q in self.topology.queues if q.name in self.handlers.queues]

    async def _start(self, connection: Connection, concurrency: int) -> None:
        publisher = CopyPublisher(connection)
        self.delays.attach(publisher)
        self._publisher = publisher
        consumers = []
        for item in self.handlers.subscribers:
            listed = self.topology.queue(item.queue) if self.topology else None
            consumer = QueueConsumer(
                subscriber=item,
                policy=policy_for(item.queue, self.topology),
                channel=await connection.channel(),
                publisher=publisher,
                delays=self.delays,
                clock=self.clock,
                prefetch=self.options.prefetch,
                concurrency=concurrency,
                executor=self._executor,
                publish_mode=listed.publish if listed else PublishMode.CONFIRM,
                listener=self._listener,
            )
            await consumer.start()
            consumers.append(consumer)
        self._consumers = consumers
        log.info(
            "consuming",
            extra={"rr": {"queues": list(self.handlers.queues), "prefetch": self.options.prefetch}},
        )

    def _drop_consumers(self) -> None:
        self.delays.attach(None)
        self._consumers = []

    async def _graceful_stop(self, connection: Connection) -> None:
        for consumer in self._consumers:
            await consumer.stop_consuming()
        deadline = asyncio.get_running_loop().time() + self.options.shutdown_timeout_s
        for consumer in self._consumers:
            remaining = max(0.0, deadline - asyncio.get_running_loop().time())
            if not await consumer.wait_idle(remaining):
                log.warning(
                    "shutdown timeout: unfinished deliveries go back to their queue",
                    extra={"rr": {"queue": consumer.policy.queue, "in_flight": consumer.in_flight}},
                )
        flushed = await self.delays.flush()
        if flushed:
            log.info("published pending delayed copies", extra={"rr": {"count": flushed}})
        for consumer in self._consumers:
            await consumer.close()
        await self._publisher.close()
        await connection.close()
        self._consumers = []
