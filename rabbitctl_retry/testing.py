"""The public test harness: an in-memory RabbitMQ with a virtual clock.

::

    from rabbitctl_retry.testing import TestBroker

    async def test_a_busy_processor_retries_after_30_seconds():
        async with TestBroker("topology.toml") as broker:
            await broker.run(service)                 # the module with @subscriber handlers
            await broker.publish("refunds", {"id": 1, "card": "4111"})
            await broker.advance(29)                  # nothing yet
            await broker.advance(1)                   # the copy comes back from refunds.retry
            assert broker.messages("refunds.dead") == []

``TestBroker`` is the emulator of ``rabbitctl_retry.emulator`` (exchanges, classic and quorum
queues, TTL expiring from the head, dead-lettering with ``x-death``, quorum delivery limits,
the delayed-message exchange) with the topology declared exactly as ``rr declare`` would, and
the ``rr run`` runtime running your handlers on it, unchanged. Time moves only when the test
calls :meth:`TestBroker.advance`, so a 30 s backoff takes no real time.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar, overload

from rabbitctl_retry import releases
from rabbitctl_retry.emulator import Emulator
from rabbitctl_retry.emulator.events import Event
from rabbitctl_retry.errors import ConflictError
from rabbitctl_retry.fields import FieldValue
from rabbitctl_retry.ops.declare import provision
from rabbitctl_retry.published_outputs import PublishedOutput, decoded, recorded
from rabbitctl_retry.queued_messages import WaitingMessage, waiting
from rabbitctl_retry.retry.headers import DEFAULT_RETRY_HEADER
from rabbitctl_retry.runtime.consumer import EventListener, OutputListener
from rabbitctl_retry.runtime.handlers import subscriber_options
from rabbitctl_retry.runtime.loader import (
    HandlerSet,
    handlers_of_module,
    instance_hooks,
    load_target,
    subscriber_of,
)
from rabbitctl_retry.runtime.outgoing import Outgoing
from rabbitctl_retry.runtime.service import RunOptions, Service
from rabbitctl_retry.server import ServerVersion
from rabbitctl_retry.topology.expand import expand
from rabbitctl_retry.topology.load import load_file, load_text
from rabbitctl_retry.topology.model import Topology
from rabbitctl_retry.topology.plan import Plan
from rabbitctl_retry.transport.base import Connection, Delivery, Properties

__all__ = ["PublishedOutput", "TestBroker", "WaitingMessage", "as_topology"]

E = TypeVar("E", bound=Event)
T = TypeVar("T")


def as_topology(topology: Topology | str | Path) -> Topology:
    """A :class:`Topology` from itself, a path to a TOML file, or TOML text."""
    if isinstance(topology, Topology):
        return topology
    if isinstance(topology, Path) or (
        "\n" not in topology and "=" not in topology and topology.endswith(".toml")
    ):
        return load_file(topology)
    return load_text(topology)


DEFAULT_SERVER_VERSION = releases.DEFAULT_SERVER_VERSION
"""What :class:`TestBroker` emulates unless told otherwise, 4.0.5: the emulator's one default
(``releases.py``; docs/reference/testing.md). Pass ``server_version="3.10.8"`` for the 3.x line."""

EMULATED_RELEASES = releases.MEASURED_RELEASES
"""The releases the emulator is proven against, one per line (docs/reference/testing.md): the values
``rr simulate --server-version`` takes."""


def release_for(topology: Topology) -> str:
    """The release a run of ``topology`` is emulated on unless told otherwise: 4.3.6 when a
    queue waits on the server (``delay = "server"``, RabbitMQ 4.3 and later), else
    :data:`DEFAULT_SERVER_VERSION`."""
    if any(queue.server_delay is not None for queue in topology.queues):
        delayed = releases.first_release("delayed_retries").measured_on
        assert delayed is not None  # a row the contract suite measures
        return delayed
    return DEFAULT_SERVER_VERSION


class TestBroker:
    """An emulated RabbitMQ for one test; use it as ``async with TestBroker(...) as broker``."""

    __test__ = False  # not a pytest test class

    def __init__(
        self,
        topology: Topology | str | Path | None = None,
        *,
        server_version: ServerVersion | str = DEFAULT_SERVER_VERSION,
        delayed_message_exchange: bool = True,
        tracer_provider: object | None = None,
    ) -> None:
        """``tracer_provider``: an OpenTelemetry tracer provider the services it runs trace
        with (a test's SDK provider with an in-memory exporter: docs/reference/runtime.md, "Tracing
        and metrics"); else the process-wide one if set."""
        self.tracer_provider = tracer_provider
        self.emulator = Emulator(
            server_version=server_version, delayed_message_exchange=delayed_message_exchange
        )
        self.topology: Topology | None = as_topology(topology) if topology is not None else None
        self._services: list[tuple[Service, asyncio.Future[None]]] = []
        self._connection: Connection | None = None
        self._outputs: list[PublishedOutput] = []

    async def __aenter__(self) -> TestBroker:
        if self.topology is not None:
            await self.declare(self.topology)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()
        if self._connection is not None:
            await self._connection.close()
            self._connection = None

    @property
    def clock(self) -> Any:
        """The virtual clock (``now()``, ``now_s``)."""
        return self.emulator.clock

    async def connect(self) -> Connection:
        """A new connection to the emulated broker (the transport port)."""
        return self.emulator.connect()

    async def _shared(self) -> Connection:
        if self._connection is None or self._connection.is_closed:
            self._connection = self.emulator.connect()
        return self._connection

    async def declare(self, topology: Topology | str | Path) -> Plan:
        """Declare ``topology`` as ``rr declare`` does; raise if it conflicts."""
        declared = as_topology(topology)
        if self.topology is None:
            self.topology = declared
        # settings = "policy": rr's policies go through the emulator's management twin, as
        # rr declare puts them through the management API (docs/reference/topology.md)
        api = self.emulator.management("http://guest:guest@emulator:15672/", vhost="/")
        policies = await api.policies() if declared.uses_policies else None
        connection = await self._shared()
        result = await provision(
            connection,
            expand(declared, connection.server_version.release),
            dry_run=False,
            connect=self.connect,
            api=api,
            policies=policies,
        )
        if result.conflicts:
            details = "; ".join(f"{op.name}: {op.detail}" for op in result.conflicts)
            raise ConflictError(f"the emulated broker conflicts with the topology: {details}")
        await self.settle()
        return result

    async def publish(
        self,
        routing_key: str,
        body: bytes | str | dict[str, Any] | list[Any],
        *,
        exchange: str = "",
        headers: dict[str, FieldValue] | None = None,
        message_id: str | None = None,
        properties: Properties | None = None,
    ) -> None:
        """Publish (with a confirm, mandatory) to ``exchange`` with ``routing_key``: by
        default the default exchange, so ``routing_key`` is a queue name. A dict or list body
        is sent as JSON, a str as UTF-8."""
        if isinstance(body, dict | list):
            payload = json.dumps(body).encode()
            content_type: str | None = "application/json"
        elif isinstance(body, str):
            payload, content_type = body.encode(), "text/plain"
        else:
            payload, content_type = body, None
        if properties is None:
            properties = Properties(
                content_type=content_type,
                headers=headers,
                message_id=message_id,
                delivery_mode=2,
            )
        channel = await (await self._shared()).channel(confirms=True)
        try:
            await channel.publish(
                payload,
                exchange=exchange,
                routing_key=routing_key,
                properties=properties,
                mandatory=True,
            )
        finally:
            await channel.close()
        await self.settle()

    async def settle(self) -> None:
        """Run until nothing moves: every delivery handled, every copy published."""
        await self.emulator.settle()

    async def advance(self, seconds: float) -> None:
        """Move the virtual clock by ``seconds``, firing every expiry, delayed message and
        in-memory retry that falls due, in time order, settling after each."""
        await self.emulator.advance(seconds)

    def messages(self, queue: str) -> list[WaitingMessage]:
        """The messages ready in ``queue``, head first (non-destructive), each with the names
        of a handler's ``Message`` (``.message_id``, ``.headers``, ``.body``, ``.json()``,
        ``.retry_count``, ``.deaths``; docs/reference/testing.md, "Messages in a queue")."""
        topology = self.topology
        header = topology.broker.retry_header if topology is not None else DEFAULT_RETRY_HEADER
        return [waiting(queued, queue, header) for queued in self.emulator.messages(queue)]

    def bodies(self, queue: str) -> list[Any]:
        """The ready messages' bodies: JSON decoded, ``text/*`` as str, anything else bytes."""
        result: list[Any] = []
        for message in self.messages(queue):
            content_type = message.properties.content_type or ""
            if content_type.startswith("text/"):
                result.append(message.body.decode(message.properties.content_encoding or "utf-8"))
                continue
            try:
                result.append(json.loads(message.body))
            except ValueError:
                result.append(message.body)
        return result

    @property
    def outputs(self) -> list[PublishedOutput]:
        """Every output the handlers published and the broker confirmed, in order, wherever
        it went (docs/how-to/test-a-service.md, "Outputs")."""
        return list(self._outputs)

    @overload
    def published(self, target: str) -> list[PublishedOutput]: ...

    @overload
    def published(self, target: str, as_type: type[T]) -> list[T]: ...

    @overload
    def published(self, target: str, as_type: Any) -> list[Any]: ...

    def published(self, target: str, as_type: Any = None) -> list[Any]:
        """The outputs the handlers published to queue ``target`` (through the default
        exchange) or to exchange ``target``, confirmed, in order: each with its ``body``,
        ``properties``, ``message_id``, ``exchange``, ``routing_key``, the ``from_queue`` and
        ``from_message_id`` of the delivery that published it, and ``.json()``. With
        ``as_type``, their bodies decoded into that type as a handler's parameter would be
        (docs/reference/handlers.md, "Typed messages")."""
        matching = [output for output in self._outputs if output.goes_to(target)]
        return matching if as_type is None else decoded(matching, as_type)

    def clear_outputs(self) -> None:
        """Forget the outputs recorded so far (:attr:`outputs` is empty after)."""
        self._outputs.clear()

    def _recorder(self, also: OutputListener | None) -> OutputListener:
        """The ``on_outputs`` hook of a service: record, then tell ``also``."""

        def record(queue: str, delivery: Delivery, outputs: tuple[Outgoing, ...]) -> None:
            self._outputs.extend(recorded(queue, delivery, outputs))
            if also is not None:
                also(queue, delivery, outputs)

        return record

    @property
    def history(self) -> list[Event]:
        """Everything that happened, in order, with virtual times (``at_s``)."""
        return self.emulator.events

    def events_of(self, kind: type[E]) -> list[E]:
        return self.emulator.events_of(kind)

    async def run(
        self,
        target: ModuleType | HandlerSet | str | Any | Iterable[Any],
        *,
        prefetch: int = 100,
        concurrency: int | None = None,
        listener: EventListener | None = None,
        shutdown_timeout_s: float = RunOptions().shutdown_timeout_s,
        state: object | None = None,
        on_outputs: OutputListener | None = None,
    ) -> Service:
        """Run handlers on the emulated broker with the ``rr run`` runtime, until the test
        ends: a module, a ``@subscriber`` function, class or instance (or several), or a
        target string as ``rr run`` takes it. The topology (if any) gives the retry policies.

        ``state``: the service's state to hand the handlers' ``State[T]`` parameters (a fake
        processor); then the module's ``@on_startup`` and ``@on_shutdown`` hooks (and handler
        classes' ``on_startup``/``on_shutdown``) do not run (docs/how-to/test-a-service.md, "Testing
        handlers"). None: the startup hooks build it, as ``rr run`` does."""
        handlers = _handler_set(target)
        service = Service(
            handlers,
            topology=self.topology,
            connect=self.connect,
            options=RunOptions(
                prefetch=prefetch,
                concurrency=concurrency,
                reconnect=False,
                shutdown_timeout_s=shutdown_timeout_s,
            ),
            clock=self.clock,
            listener=listener,
            state=state,
            on_outputs=self._recorder(on_outputs),
            tracer_provider=self.tracer_provider,
        )
        task = await service.start()
        self._services.append((service, task))
        await self.settle()
        return service

    async def stop(self) -> None:
        """Stop every running service gracefully (pending in-memory copies are published)."""
        services, self._services = self._services, []
        for service, _ in services:
            service.stop()
        for _, task in services:
            await task
        await self.settle()


def _handler_set(target: ModuleType | HandlerSet | str | Any | Iterable[Any]) -> HandlerSet:
    if isinstance(target, HandlerSet):
        return target
    if isinstance(target, str):
        return load_target(target)
    if isinstance(target, ModuleType):
        return handlers_of_module(target)
    single = callable(target) or subscriber_options(target) is not None
    handlers = [target] if single else list(target)
    subscribers = []
    for handler in handlers:
        name = getattr(handler, "__name__", None) or type(handler).__name__
        found = subscriber_of(handler, name)
        if found is None:
            raise TypeError(f"{handler!r} is not decorated with @subscriber('QUEUE')")
        subscribers.append(found)
    found_all = tuple(subscribers)
    return HandlerSet(
        module="test",
        subscribers=found_all,
        startup=instance_hooks(found_all, "startup"),
        shutdown=instance_hooks(found_all, "shutdown"),
    )
