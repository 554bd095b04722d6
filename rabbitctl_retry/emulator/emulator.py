"""The emulator: one broker, its virtual clock, and the asyncio glue around them.

:class:`Emulator` owns the broker. ``connect()`` gives an
:class:`~rabbitctl_retry.emulator.transport.EmulatedConnection` (the transport port). Consumer
callbacks run as asyncio tasks (as aiormq runs them), so a callback can ack from inside;
:meth:`Emulator.settle` waits until no callback is pending and nothing moves,
:meth:`Emulator.advance` moves the clock and settles after every timer that fires (TTL expiry,
the delayed-message exchange, and whatever else was put on the clock).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Mapping
from typing import Any, TypeVar

from rabbitctl_retry import releases
from rabbitctl_retry.emulator.args import QueueKind
from rabbitctl_retry.emulator.broker import Broker
from rabbitctl_retry.emulator.clock import DEFAULT_START_S, VirtualClock, on_grid
from rabbitctl_retry.emulator.events import Event
from rabbitctl_retry.emulator.management import EmulatedCluster, EmulatedManagementApi
from rabbitctl_retry.emulator.model import EmulatedQueue, Entry
from rabbitctl_retry.emulator.snapshots import QueuedMessage, QueueSnapshot
from rabbitctl_retry.emulator.state import BrokerState
from rabbitctl_retry.emulator.transport import EmulatedConnection
from rabbitctl_retry.emulator.values import copy_headers, copy_table, with_headers
from rabbitctl_retry.errors import NotFound
from rabbitctl_retry.fields import FieldValue
from rabbitctl_retry.server import Policy, QueueConsumer, ServerVersion
from rabbitctl_retry.transport.base import Delivery, DeliveryCallback
from rabbitctl_retry.transport.management import ManagementConnector

log = logging.getLogger("rabbitctl_retry.emulator")

E = TypeVar("E", bound=Event)

DEFAULT_SERVER_VERSION = ServerVersion.parse(releases.DEFAULT_SERVER_VERSION)
"""The server the emulator plays unless told otherwise: 4.0.5, the one default of
``releases.py`` (``TestBroker``'s too; until #43 the emulator's was 3.10.8)."""

_FORCED_CLOSE = "CONNECTION_FORCED - broker forced connection closure with reason 'shutdown'"


def emulated_version(text: str) -> ServerVersion:
    """The RabbitMQ release ``text`` names, to emulate (``releases.emulated_release``)."""
    return ServerVersion(*releases.emulated_release(text))


class Emulator:
    """An in-memory RabbitMQ on a virtual clock.

    ``server_version`` (default 4.0.5, :data:`DEFAULT_SERVER_VERSION`) selects
    version-dependent behaviour: the row of ``releases.py`` for its release line, each
    difference measured on 3.10.8, 4.0.5 and 4.3.6 and listed in docs/reference/testing.md ("What
    differs between releases").
    ``delayed_message_exchange`` enables the ``x-delayed-message`` exchange type (the plugin).
    ``record_events`` keeps the event history (:attr:`events`).

    The port's channels also do what rr's AMQP clients do on the wire: a publish without
    properties goes with ``delivery_mode = 1`` (and no ``message_id``: the clients add none),
    and its headers are written by rr's codec (``field_codec.py``; docs/reference/testing.md,
    "Headers").

    ``idle_rounds``: how many event-loop turns without any broker activity :meth:`settle`
    waits, after the last consumer callback finished, before it calls things quiet.

    ``default_queue_type``: the vhost's default queue type (``rabbitmqctl add_vhost
    --default-queue-type quorum``), None for a vhost made without one: a queue declared
    without ``x-queue-type`` is of that type, and a redeclaration without one means it
    (measured on 3.10.8, 4.0.5 and 4.3.6; docs/reference/testing.md).
    """

    def __init__(
        self,
        *,
        server_version: ServerVersion | str = DEFAULT_SERVER_VERSION,
        start_s: float = DEFAULT_START_S,
        delayed_message_exchange: bool = True,
        record_events: bool = True,
        idle_rounds: int = 3,
        default_queue_type: QueueKind | None = None,
    ) -> None:
        version = (
            emulated_version(server_version) if isinstance(server_version, str) else server_version
        )
        self.clock = VirtualClock(start_s)
        self.server_version = version
        self.broker = Broker(
            BrokerState(
                clock=self.clock,
                server_version=version,
                behaviour=version.behaviour,
                delayed_message_exchange=delayed_message_exchange,
                record_events=record_events,
                default_queue_type=default_queue_type,
            )
        )
        self.cluster = EmulatedCluster()
        """What the management twin states of the cluster: more nodes, stopped ones, resource
        alarms (``emulator.cluster.raise_alarm("memory")``; emulator/management.py)."""
        self.callback_errors: list[BaseException] = []
        """Exceptions raised by consumer callbacks (logged, as aiormq does, and kept here)."""
        self._tasks: set[asyncio.Future[Any]] = set()
        self._idle_rounds = idle_rounds
        self._connections: list[EmulatedConnection] = []
        self._finished = 0

    # -- the port ----------------------------------------------------------------------------

    def connect(
        self, *, client_properties: Mapping[str, FieldValue] | None = None
    ) -> EmulatedConnection:
        """A new connection (the port's ``Connection``); ``client_properties``: what its client
        says of itself (the management twin states them), by default rr's own client's."""
        connection = EmulatedConnection(self, client_properties)
        self._connections.append(connection)
        return connection

    def management(
        self, url: str = "http://emulator:15672/", *, vhost: str = "/"
    ) -> EmulatedManagementApi:
        """The emulated server's management API (a
        :class:`~rabbitctl_retry.transport.management.ManagementConnector`: hand
        ``emulator.management`` where rr takes one); ``url`` is only shown."""
        return EmulatedManagementApi(self, url, vhost=vhost)

    def drop_connections(self) -> None:
        """Close every open connection as a broker shutdown does (unacked messages return)."""
        for connection in list(self._connections):
            connection._shut(_FORCED_CLOSE, 320)

    def forget(self, connection: EmulatedConnection) -> None:
        if connection in self._connections:
            self._connections.remove(connection)

    # -- running -----------------------------------------------------------------------------

    def spawn(self, callback: DeliveryCallback, delivery: Delivery) -> None:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            raise RuntimeError(
                "the emulator delivers to consumers on a running event loop: move time with "
                "`await emulator.advance(...)`, not clock.advance()"
            ) from None
        task: asyncio.Future[Any] = asyncio.ensure_future(callback(delivery))
        self._tasks.add(task)
        task.add_done_callback(self._on_task_done)

    def _on_task_done(self, task: asyncio.Future[Any]) -> None:
        self._tasks.discard(task)
        self._finished += 1
        if task.cancelled():
            return
        error = task.exception()
        if error is not None:
            log.error("Consumer callback failed", exc_info=error)
            self.callback_errors.append(error)

    def track(self, awaitable: Awaitable[object]) -> None:
        """Make :meth:`settle` also wait for ``awaitable`` (work a consumer handed off)."""
        future: asyncio.Future[Any] = asyncio.ensure_future(awaitable)
        self._tasks.add(future)
        future.add_done_callback(self._on_task_done)

    @property
    def pending_callbacks(self) -> int:
        return len(self._tasks)

    def cancel_callbacks(self) -> None:
        """Cancel every consumer callback still running (a handler that never returns would
        keep :meth:`settle` waiting for good)."""
        for task in list(self._tasks):
            task.cancel()

    async def settle(self) -> None:
        """Run until nothing moves: no broker activity and no callback finishing for a few
        event-loop turns, and every pending callback (or tracked task) either done or asleep
        on the virtual clock (:meth:`VirtualClock.sleep`).

        A callback still busy otherwise (a handler in a worker thread, say) is waited for, in
        real time. One that waits for something only a clock timer will cause, other than
        ``clock.sleep``, keeps this waiting: move time with :meth:`advance` from outside.
        """
        quiet = 0
        while quiet < self._idle_rounds:
            before = (self.broker.activity, self._finished, len(self._tasks))
            await asyncio.sleep(0)
            if (self.broker.activity, self._finished, len(self._tasks)) != before:
                quiet = 0
            elif len(self._tasks) > self.clock.sleepers:
                # Busy for real (a worker thread), or between two sleeps on the clock (a
                # callback whose timer task just ended and whose next one has not started):
                # look again soon rather than wait for a task to end.
                await asyncio.wait(
                    list(self._tasks), return_when=asyncio.FIRST_COMPLETED, timeout=0.01
                )
                quiet = 0
            else:
                quiet += 1

    async def advance(self, seconds: float) -> None:
        """Move the clock by ``seconds``: fire due timers in time order, settling after each."""
        if seconds < 0:
            raise ValueError(f"cannot advance by a negative amount ({seconds} s)")
        target_s = on_grid(self.clock.now_s + seconds)
        await self.settle()
        while self.clock.fire_next(target_s):
            await self.settle()
        self.clock.set(max(self.clock.now_s, target_s))
        await self.settle()

    # -- inspection --------------------------------------------------------------------------

    @property
    def events(self) -> list[Event]:
        """Everything that happened, in order (the live list: copy it to keep a view)."""
        return self.broker.events

    def events_of(self, kind: type[E]) -> list[E]:
        return [event for event in self.broker.events if isinstance(event, kind)]

    def queue_names(self) -> list[str]:
        return sorted(self.broker.queues)

    def has_queue(self, name: str) -> bool:
        return name in self.broker.queues

    def exchange_names(self) -> list[str]:
        return sorted(self.broker.exchanges)

    def put_policy(self, policy: Policy, *, operator: bool = False) -> None:
        """Set a policy (``operator``: an operator policy) as ``rabbitmqctl set_policy`` does:
        it applies to every queue at once (emulator/policies.py; docs/reference/topology.md,
        "Policies and arguments"). A definition the server refuses raises ``BrokerRefused``."""
        self.broker.put_policy(policy, operator=operator)

    def delete_policy(self, name: str, *, operator: bool = False) -> None:
        """Delete a policy; the queues it applied to go back to their arguments at once."""
        self.broker.delete_policy(name, operator=operator)

    def policies(self, *, operator: bool = False) -> tuple[Policy, ...]:
        """The policies (``operator``: the operator policies), sorted by name."""
        found = self.broker.policies[operator]
        return tuple(found[name] for name in sorted(found))

    def publish_rate(self, exchange: str) -> float | None:
        """Messages per second published into ``exchange`` lately (the management API's
        rate); None when nothing ever was."""
        return self.broker.publish_rate(exchange)

    def _queue(self, name: str) -> EmulatedQueue:
        q = self.broker.queues.get(name)
        if q is None:
            raise NotFound(f"NOT_FOUND - no queue '{name}' in vhost '/'")
        return q

    def queue(self, name: str) -> QueueSnapshot:
        q = self._queue(name)
        return QueueSnapshot(
            name=q.name,
            kind=q.settings.kind,
            durable=q.durable,
            exclusive=q.exclusive_owner is not None,
            auto_delete=q.auto_delete,
            arguments=copy_table(q.arguments),
            ready=len(q.ready),
            unacked=q.unacked,
            consumers=len(q.consumers),
        )

    @property
    def default_queue_type(self) -> QueueKind | None:
        """The vhost's default queue type (``default_queue_type=``), None without one."""
        return self.broker.default_queue_type

    def queue_consumers(self) -> tuple[QueueConsumer, ...]:
        """Every consumer of every queue, as the management API states it: its queue, tag,
        its connection (``emulator connection N``), whether it acknowledges, and what its
        client said of itself when it connected."""
        found = []
        for connection in self.broker.connections:
            properties = connection.client_properties
            texts = {
                key: value
                for key in ("product", "version", "connection_name")
                if isinstance(value := properties.get(key), str)
            }
            for channel in connection.channels.values():
                for consumer in channel.consumers.values():
                    found.append(
                        QueueConsumer(
                            queue=consumer.queue.name,
                            tag=consumer.tag,
                            connection=f"emulator connection {connection.number}",
                            ack_required=not consumer.no_ack,
                            product=texts.get("product"),
                            version=texts.get("version"),
                            connection_name=texts.get("connection_name"),
                        )
                    )
        return tuple(found)

    def consumer_prefetches(self, queue: str) -> tuple[int, ...]:
        """The prefetch count of each consumer of ``queue`` (0: unlimited), sorted."""
        return tuple(sorted(consumer.prefetch_count for consumer in self._queue(queue).consumers))

    def messages(self, queue: str) -> list[QueuedMessage]:
        """The ready messages of ``queue``, head first; looking changes nothing."""
        return [_snapshot(entry) for entry in self._queue(queue).ready]

    def unacked_messages(self, queue: str) -> list[QueuedMessage]:
        """Messages of ``queue`` delivered and not yet settled, by connection and tag."""
        return [_snapshot(entry) for entry in self._unacked_entries(self._queue(queue))]

    def message_bytes(self, queue: str) -> int:
        """What ``queue``'s messages, ready and unacknowledged, weigh in bytes, as the
        management API states ``message_bytes``: what the queue counts toward
        ``x-max-length-bytes``, the bodies, with their properties in a RabbitMQ 4.3 quorum
        queue (``ServerRelease.quorum_message_bytes``; measured on 3.10.8, 4.0.5 and 4.3.6,
        docs/measurements.md)."""
        q = self._queue(queue)
        return sum(entry.size_bytes for entry in (*q.ready, *self._unacked_entries(q)))

    def _unacked_entries(self, q: EmulatedQueue) -> list[Entry]:
        return [
            item.entry
            for connection in self.broker.connections
            for channel in connection.channels.values()
            for item in channel.unacked.values()
            if item.queue is q
        ]

    def bindings(self, exchange: str) -> list[tuple[str, str, dict[str, FieldValue]]]:
        """``(queue, routing_key, arguments)`` of every binding of ``exchange``."""
        x = self.broker.exchanges.get(exchange)
        if x is None:
            raise NotFound(f"NOT_FOUND - no exchange '{exchange}' in vhost '/'")
        return [(b.queue, b.routing_key, copy_table(b.arguments)) for b in x.bindings]


def _snapshot(entry: Entry) -> QueuedMessage:
    message = entry.message
    properties = message.properties
    if properties.headers is not None:
        properties = with_headers(properties, copy_headers(properties.headers))
    return QueuedMessage(
        message=message.number,
        body=message.body,
        properties=properties,
        exchange=message.exchange,
        routing_key=message.routing_keys[0],
        redelivered=entry.redelivered,
        delivery_count=entry.shown_delivery_count,
        enqueued_at_s=entry.enqueued_at_s,
        expires_at_s=entry.expires_at_s,
    )


def _implements_the_management_port(emulator: Emulator) -> ManagementConnector:
    """Never called: mypy checks here that the twin satisfies the management port."""
    return emulator.management
