"""``rr run``: connect, declare (or check) the topology, consume, stop gracefully, reconnect.

Lifecycle::

    startup hooks
    loop:  connect -> declare topology (or, with declare off, check it) -> start consumers
           wait until stop is requested or the connection drops
           dropped:   log, wait (backoff 0.5 s doubling to 30 s), reconnect
           stop:      publish every in-memory delayed copy now (pipelined), basic.cancel
                      every consumer, let in-flight handlers finish, send pending acks,
                      close — all within shutdown_timeout_s; past it, unsettled deliveries
                      go back to their queue and the connection is closed regardless
    a stop while there is no connection (rr waits to reconnect): connect again, within
    shutdown_timeout_s, only to publish the delayed copies
    whatever ends the run: the delayed copies the broker has not confirmed are saved to a
    file (runtime/pending.py), or logged one by one as lost if even that fails
    shutdown hooks

Meanwhile each consumer watches its own channel and consumer and starts again (re-declaring
what it needs) when the broker closes the one or cancels the other; connection.blocked and
unblocked (resource alarms) are logged. Started with a topology file, the service also
reloads it when it changes (SIGHUP, or a change of the file seen every
``reload_interval_s``): what a running consumer can take (``topology/reload.py``: a new
``max_attempts``, ...) applies from the next delivery, the rest is logged as not applied, and a
file that does not load leaves the running settings as they are (docs/reference/runtime.md,
"Changing max_attempts while it runs").

Nothing rr counts lives in the process: attempts are in the message (the retry header) or on
the server (x-delivery-count), so any number of ``rr run`` processes can share a queue, and a
reconnect loses nothing — deliveries in flight when the connection dropped go back to their
queue and come again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from rabbitctl_retry.errors import AccessRefused, BrokerUnreachable, RrError, TransportError
from rabbitctl_retry.ops.clock import Clock, WallClock
from rabbitctl_retry.ops.copies.publisher import CopyPublisher
from rabbitctl_retry.retry.headers import DEFAULT_RETRY_HEADER
from rabbitctl_retry.retry.policy import RetryPolicy
from rabbitctl_retry.runtime.backoff import Backoff
from rabbitctl_retry.runtime.consumer import (
    HOLD_MAX_S,
    EventListener,
    OutputListener,
    QueueConsumer,
)
from rabbitctl_retry.runtime.delays import InMemoryDelays
from rabbitctl_retry.runtime.delivery_metrics import (
    DeliveryObserver,
    MessagingRecorder,
    listener_with,
    observer_of,
)
from rabbitctl_retry.runtime.handlers import HookFailed, ThreadCalls, call_hooks
from rabbitctl_retry.runtime.invocation import Invocation, invocation_for
from rabbitctl_retry.runtime.loader import HandlerSet
from rabbitctl_retry.runtime.pending import keep_pending, tell_saved_files
from rabbitctl_retry.runtime.preparation import Preparation
from rabbitctl_retry.runtime.reloader import TopologyReloader
from rabbitctl_retry.runtime.shutdown import Shutdown
from rabbitctl_retry.runtime.state import NO_STATE, Lifespan, StateFailed
from rabbitctl_retry.runtime.stats import RuntimeStats
from rabbitctl_retry.telemetry.switch import tracing_for
from rabbitctl_retry.topology.model import PublishMode, Topology
from rabbitctl_retry.topology.reload import DEFAULT_RELOAD_INTERVAL_S, Reload
from rabbitctl_retry.transport.base import Connection

if TYPE_CHECKING:
    from rabbitctl_retry.telemetry.tracing import Tracing

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
    wait_for_broker_s: float = 0.0
    """How long the first connection may keep failing (the broker not up yet: a service
    started before it) before the run gives up; 0: it gives up at once (docs/reference/runtime.md,
    "Running it")."""
    copy_hold_max_s: float = HOLD_MAX_S
    """How long a delivery is held while the broker refuses its copy (then it is requeued)."""
    handler_timeout_s: float | None = None
    """How long one handler call may take, unless its ``@subscriber(timeout=...)`` says;
    None: as long as it likes."""
    pending_dir: Path = Path()
    """Where a stop saves the in-memory delayed copies it could not publish
    (``runtime/pending.py``); default: the current directory."""
    topology_file: Path | None = None
    """The file the service's topology was read from: the service reloads it when it changes
    (docs/reference/runtime.md, "Changing max_attempts while it runs"); None: never."""
    reload_interval_s: float = DEFAULT_RELOAD_INTERVAL_S
    """How often ``topology_file`` is checked for a change (its size, time and inode, then its
    content); 0: only when asked (:meth:`Service.request_reload`, SIGHUP)."""


def policy_for(queue: str, topology: Topology | None, *, handler: str | None = None) -> RetryPolicy:
    """The retry policy of ``queue`` in ``topology``, or a bare one (no cap, no delay), for
    the handler named ``handler``."""
    header = topology.broker.retry_header if topology else DEFAULT_RETRY_HEADER
    listed = topology.queue(queue) if topology else None
    if listed is None or topology is None:
        return RetryPolicy(queue=queue, retry_header=header, handler=handler)
    target = topology.queue(listed.dead_letter) if listed.dead_letter else None
    hands_off = target is not None and target.max_attempts is not None
    policy = RetryPolicy.of(listed, retry_header=header, hands_off=hands_off)
    return replace(policy, handler=handler)


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
        state: object | None = None,
        on_outputs: OutputListener | None = None,
        meter_provider: object | None = None,
        recorders: Sequence[MessagingRecorder] = (),
        tracer_provider: object | None = None,
    ) -> None:
        """``state``: the service's state, given (a test's fake); then no startup or shutdown
        hook runs (docs/how-to/test-a-service.md, "Testing handlers"). None: the startup hooks build
        it.

        ``meter_provider``: an OpenTelemetry ``MeterProvider`` the metrics of
        docs/reference/metrics.md, "Metrics", are recorded through (else the global one, when the
        process set it);
        ``recorders``: more places they go (``rr run --metrics-port``'s page).
        ``tracer_provider``: an OpenTelemetry tracer provider to trace with; else the
        process-wide one if set (docs/reference/runtime.md, "Tracing and metrics")."""
        self.handlers = handlers
        self._injected = state
        self.state: object = NO_STATE if state is None else state
        """The service's state (``runtime/state.py``), once the run has started."""
        self._invocations: tuple[Invocation, ...] = ()
        """How each subscriber is called, built once per run from the state."""
        self.topology = topology
        self._connect = connect
        self.options = options or RunOptions()
        self.clock = clock or WallClock()
        self._listener = listener
        self._on_outputs = on_outputs
        self._meter_provider = meter_provider
        self._recorders = tuple(recorders)
        self._observer: DeliveryObserver | None = None
        self._observer_built = False
        self._tracer_provider = tracer_provider
        self.tracing: Tracing | None = None
        """rr's tracing, decided once when the run starts (``telemetry/switch.py``)."""
        self._stop = asyncio.Event()
        self._ready = asyncio.Event()
        self.delays = InMemoryDelays(self.clock)
        self._consumers: list[QueueConsumer] = []
        self._publisher: CopyPublisher | None = None
        self._executor: ThreadPoolExecutor | None = None
        self.thread_calls = ThreadCalls()
        """Synchronous handler calls still running (after a stop: those that never return)."""
        self.stats = RuntimeStats()
        self._preparation = Preparation(
            handlers.queues, declare=self.options.declare, connect=connect
        )
        self._reloader: TopologyReloader | None = None
        """Reloads the topology file (docs/reference/runtime.md, "Changing max_attempts while it
        runs"); None: started without one."""
        if self.options.topology_file is not None and topology is not None:
            self._reloader = TopologyReloader(
                self.options.topology_file,
                declared=topology,
                current=self._current_topology,
                apply=self._apply,
                interval_s=self.options.reload_interval_s,
                stats=self.stats,
            )

    @property
    def connections(self) -> int:
        """How many connections the service has made (1 + reconnects)."""
        return self.stats.connections

    @property
    def consumers(self) -> tuple[QueueConsumer, ...]:
        """The consumers of the current connection."""
        return tuple(self._consumers)

    def stop(self) -> None:
        """Ask for a graceful stop (safe from a signal handler)."""
        self._stop.set()

    def request_reload(self) -> None:
        """Ask for the topology file to be reloaded now (SIGHUP; safe from a signal handler)."""
        if self._reloader is None:
            log.info("nothing to reload: rr run was started without a topology file")
            return
        self._reloader.ask()

    def reload(self, *, asked: bool = True) -> Reload | None:
        """Read the topology file again and apply what the running consumers can take
        (``topology/reload.py``): their next deliveries use the new retry policies, a delivery
        being handled finishes with its own. Logs one line with each change applied (``old ->
        new``) and one warning per change not applied; returns what was decided
        (``runtime/reloader.py``).

        ``None``, with the running settings left as they are: no topology file, a file that
        does not load (logged as an error, never raised), or (``asked`` false: the watcher's
        own look) a file whose text did not change.
        """
        if self._reloader is None:
            return None
        return self._reloader.reload(asked=asked)

    def _current_topology(self) -> Topology:
        assert self.topology is not None  # a service with a reloader has a topology
        return self.topology

    def _apply(self, topology: Topology) -> None:
        """Run ``topology`` from now on: the consumers' next deliveries, and the consumers
        (and declares) of a reconnect."""
        self.topology = topology
        for consumer in self._consumers:
            consumer.policy = policy_for(
                consumer.policy.queue, topology, handler=consumer.policy.handler
            )

    async def wait_ready(self) -> None:
        """Return once every consumer is consuming."""
        await self._ready.wait()

    async def start(self) -> asyncio.Future[None]:
        """Run in the background; return the running task once every consumer consumes, or
        raise what ended the run before that (a conflict, an unreachable broker, ...)."""
        task = asyncio.ensure_future(self.run())
        ready = asyncio.ensure_future(self.wait_ready())
        await asyncio.wait({task, ready}, return_when=asyncio.FIRST_COMPLETED)
        if task.done():
            ready.cancel()
            task.result()
        return task

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[Service]:
        """``async with service.running():`` consumes inside the block, stops gracefully after."""
        task = await self.start()
        try:
            yield self
        finally:
            self.stop()
            await task

    @property
    def consuming(self) -> bool:
        """Connected, with every consumer started, and not stopping (``/healthz``)."""
        return bool(self._consumers) and not self._stop.is_set()

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
        tell_saved_files(self.options.pending_dir)
        self.tracing = self.delays.tracing = tracing_for(self._tracer_provider)
        try:
            await self._run_hooked(concurrency)
        finally:
            if self._executor is not None:
                self._executor.shutdown(wait=False, cancel_futures=True)

    async def _run_hooked(self, concurrency: int) -> None:
        """The startup hooks (which build the state), the run, the shutdown hooks, and last
        the state's context manager left; with a state given, no hook runs and nothing is
        entered or left (docs/reference/handlers.md, "The service's state", "Testing handlers")."""
        hooked = self._injected is None
        lifespan = Lifespan()
        try:
            if hooked:
                await call_hooks(self.handlers.startup, "startup", lifespan=lifespan)
                self.state = lifespan.state
        except BaseException:
            with contextlib.suppress(StateFailed):  # logged; the hook's failure is the story
                await lifespan.close()
            raise
        try:
            # each State[T] is resolved here, once per run (runtime/invocation.py)
            self._invocations = tuple(
                invocation_for(item.written, state=self.state, name=item.name)
                for item in self.handlers.subscribers
            )
            await self._run_started(concurrency)
        except BaseException:
            if hooked:
                with contextlib.suppress(HookFailed):  # logged; the first error is the story
                    await call_hooks(self.handlers.shutdown, "shutdown")
            with contextlib.suppress(StateFailed):
                await lifespan.close()
            raise
        try:
            if hooked:
                await call_hooks(self.handlers.shutdown, "shutdown")
        finally:
            await lifespan.close()

    async def _run_started(self, concurrency: int) -> None:
        watcher = None
        if self._reloader is not None:
            watcher = asyncio.ensure_future(self._reloader.watch())
        try:
            await self._run_connected(concurrency)
        finally:
            if watcher is not None:
                watcher.cancel()
                await asyncio.gather(watcher, return_exceptions=True)
            keep_pending(self.delays.take_all(), self.options.pending_dir, now=self.clock.now())

    async def _run_connected(self, concurrency: int) -> None:
        """Connect, prepare, consume; reconnect (and prepare again) whenever the connection
        drops. Only the first connection's failures are fatal, and refused credentials."""
        backoff = Backoff(initial_s=0.5, max_s=self.options.reconnect_max_s)
        first = True
        failures = 0
        loop = asyncio.get_running_loop()
        give_up_at = loop.time() + self.options.wait_for_broker_s
        while not self._stop.is_set():
            try:
                connection = await self._connect()
            except TransportError as error:
                if isinstance(error, AccessRefused):
                    raise
                failures += 1
                if first:
                    delay_s = min(backoff.delay_s(failures), give_up_at - loop.time())
                    if not isinstance(error, BrokerUnreachable) or delay_s <= 0:
                        raise
                    await self._back_off("the broker does not answer yet; waiting", error, delay_s)
                    continue
                if not self.options.reconnect:
                    raise
                await self._back_off("reconnect failed", error, backoff.delay_s(failures))
                continue
            self.stats.connections += 1
            log.info(
                "connected" if first else "reconnected",
                extra={"rr": {"url": connection.url, "server": str(connection.server_version)}},
            )
            connection.on_blocked(self._on_blocked)
            try:
                await self._preparation.prepare(connection, self.topology)
                await self._start(connection, concurrency)
            except BaseException as error:
                self._drop_consumers()
                await connection.close()
                retry = (
                    not first
                    and self.options.reconnect
                    and isinstance(error, RrError)
                    and not isinstance(error, AccessRefused)
                )
                if not retry:
                    raise
                failures += 1
                await self._back_off(
                    "could not resume after reconnecting", error, backoff.delay_s(failures)
                )
                continue
            first = False
            failures = 0
            self._ready.set()
            try:
                stopped = await self._wait(connection)
                if stopped:
                    await self._shutdown().of_connection(connection, self._drop_consumers)
                    return
            except BaseException:
                self._drop_consumers()
                await connection.close()
                raise
            given_back = self._drop_consumers()
            log.warning(
                "connection lost; deliveries in flight return to their queues",
                extra={
                    "rr": {
                        "url": connection.url,
                        "reason": connection.close_reason or "closed",
                        "in_flight": given_back,
                        "delayed": len(self.delays),
                    }
                },
            )
            await connection.close()
            if not self.options.reconnect:
                raise BrokerUnreachable("the connection to the broker was lost")
            failures += 1
            await self._sleep(backoff.delay_s(failures))
        # Stopped while there was no connection (waiting to reconnect): the delayed copies
        # still need the broker.
        await self._shutdown().disconnected()

    async def _back_off(self, what: str, error: BaseException, delay_s: float) -> None:
        """Log ``what`` failed and wait ``delay_s`` (cut short by a stop)."""
        log.warning(what, extra={"rr": {"error": str(error), "retry_in_s": delay_s}})
        await self._sleep(delay_s)

    def _on_blocked(self, reason: str | None) -> None:
        if reason is None:
            log.info("the broker unblocked the connection")
            return
        self.stats.blocked += 1
        log.warning(
            "the broker blocked the connection: publishing waits until it unblocks",
            extra={"rr": {"reason": reason}},
        )

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

    def _delivery_observer(self) -> DeliveryObserver | None:
        """The metrics' observer, built at the first connection (after the startup hooks,
        which may set the global meter provider); None: no metrics."""
        if not self._observer_built:
            self._observer_built = True
            self._observer = observer_of(self._recorders, self._meter_provider, self.clock)
        return self._observer

    async def _start(self, connection: Connection, concurrency: int) -> None:
        observer = self._delivery_observer()
        publisher = CopyPublisher(
            connection, on_sent=observer.sent if observer else None, tracing=self.tracing
        )
        listener = listener_with(observer, self._listener)
        self.delays.attach(publisher)
        self._publisher = publisher
        consumers = []
        for item, invocation in zip(self.handlers.subscribers, self._invocations, strict=True):
            listed = self.topology.queue(item.queue) if self.topology else None
            if not item.is_async:
                item = replace(item, handler=self.thread_calls.counted(item.handler))
            if observer is not None:
                item = observer.panicking(item)
            consumer = QueueConsumer(
                subscriber=item,
                policy=policy_for(item.queue, self.topology, handler=item.name),
                connection=connection,
                publisher=publisher,
                delays=self.delays,
                clock=self.clock,
                prefetch=self.options.prefetch,
                concurrency=concurrency,
                executor=self._executor,
                publish_mode=listed.publish if listed else PublishMode.CONFIRM,
                listener=listener,
                recover=self._preparation.recover_for(connection, item.queue, self._topology_now),
                stats=self.stats,
                hold_max_s=self.options.copy_hold_max_s,
                handler_timeout_s=self.options.handler_timeout_s,
                invocation=invocation,
                on_outputs=self._on_outputs,
                observer=observer,
                tracing=self.tracing,
            )
            consumers.append(consumer)
            await consumer.start()
        self._consumers = consumers
        log.info(
            "consuming",
            extra={"rr": {"queues": list(self.handlers.queues), "prefetch": self.options.prefetch}},
        )

    def _drop_consumers(self) -> int:
        """Forget the consumers of a connection that is gone or closing; return how many
        deliveries they had not settled (the broker gives those back to their queues)."""
        self.delays.attach(None)
        given_back = 0
        for consumer in self._consumers:
            consumer.abandon()
            given_back += consumer.given_back
        self._consumers = []
        self._publisher = None
        return given_back

    def _topology_now(self) -> Topology | None:
        return self.topology

    def _shutdown(self) -> Shutdown:
        """The stop of the consumers of now (none while rr waits to reconnect)."""
        return Shutdown(
            consumers=tuple(self._consumers),
            publisher=self._publisher,
            delays=self.delays,
            connect=self._connect,
            stats=self.stats,
            timeout_s=self.options.shutdown_timeout_s,
        )
