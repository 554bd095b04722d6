"""The transport port: the small set of AMQP 0-9-1 operations rr needs.

Pure types, Protocols and one abstract class; no I/O here. Three adapters implement the
port: rr's own client (``transport/native.py``), aiormq's (``transport/amqp.py``) and
``emulator/`` (the in-memory broker on a virtual clock). Code written against
:class:`Connection` and :class:`Channel` runs unchanged on each. :class:`Channel` is the
abstract class every adapter's channel is: the methods with many arguments are written in it
once, each making its request value (:class:`QueueDeclare`, :class:`Publish`, ...: the
arguments, and what an error calls the operation) for the adapter's hook.

Rules every adapter keeps (they are what RabbitMQ does):

* A channel-level error (404, 405, 406, 403 on a resource) closes the channel it happened
  on; the adapter raises the mapped :mod:`rabbitctl_retry.errors` class and the channel is
  unusable afterwards (``is_closed`` is true). Open a new channel to go on.
* Unacknowledged deliveries go back to their queue when their channel or connection closes.
* ``publish`` on a confirm channel returns only once the broker confirmed the message; a
  ``mandatory`` message that could not be routed raises
  :class:`~rabbitctl_retry.errors.PublishFailed` (returned), as does a negative confirm.
  Returns are reported on confirm channels only.
* Values in argument and header tables are plain Python: ``str``, ``int``, ``bool``,
  ``float``, ``bytes``, ``datetime``, ``None``, lists and dicts of those.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol, TypeAlias, runtime_checkable

from rabbitctl_retry.fields import FieldTable, FieldValue

# Plain values the pure core shares (server.py), handed out by the port's Connection.
from rabbitctl_retry.server import ServerIdentity as ServerIdentity
from rabbitctl_retry.server import ServerVersion


@dataclass(frozen=True, slots=True, kw_only=True)
class Properties:
    """The basic.properties of a message (content header), all optional."""

    content_type: str | None = None
    content_encoding: str | None = None
    headers: FieldTable | None = None
    delivery_mode: int | None = None
    priority: int | None = None
    correlation_id: str | None = None
    reply_to: str | None = None
    expiration: str | None = None
    message_id: str | None = None
    timestamp: datetime | None = None
    type: str | None = None
    user_id: str | None = None
    app_id: str | None = None
    undecodable: tuple[str, ...] = ()
    """Properties the codec could not decode (then ``None`` above), e.g. ``("timestamp",)``:
    such a message is set aside, never handled (docs/reference/runtime.md, "Malformed messages")."""
    raw: bytes | None = None
    """The property flags and values exactly as received, kept only when ``undecodable``;
    publishing properties with ``raw`` set writes these bytes verbatim."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Delivery:
    """One message handed out by basic.deliver or basic.get."""

    body: bytes
    properties: Properties = field(default_factory=Properties)
    exchange: str = ""
    routing_key: str = ""
    redelivered: bool = False
    delivery_tag: int = 0
    consumer_tag: str | None = None
    message_count: int | None = None
    """Messages left in the queue (basic.get-ok only)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class QueueInfo:
    """What queue.declare-ok says about a queue."""

    name: str
    message_count: int
    consumer_count: int


DeliveryCallback: TypeAlias = Callable[[Delivery], Awaitable[None]]

CancelCallback: TypeAlias = Callable[[str], None]
"""Told the consumer tag when the broker cancels a consumer (its queue was deleted, ...)."""

BlockedListener: TypeAlias = Callable[["str | None"], None]
"""Told the reason when the broker blocks the connection (a resource alarm: it stops reading
what the client publishes), and ``None`` when it unblocks it."""


@runtime_checkable
class Identifies(Protocol):
    """A connection that tells :class:`ServerIdentity` beyond the version (the aiormq
    adapter's; the emulator's tells only its version)."""

    @property
    def server_identity(self) -> ServerIdentity: ...


TRANSIENT = Properties(delivery_mode=1)
"""What a publish without properties sends, as the clients do (and no ``message_id``)."""


@dataclass(frozen=True, slots=True)
class QueueDeclare:
    """A queue.declare (:meth:`Channel.queue_declare`; the defaults are its)."""

    queue: str
    passive: bool = False
    durable: bool = True
    exclusive: bool = False
    auto_delete: bool = False
    arguments: Mapping[str, FieldValue] | None = None

    @property
    def what(self) -> str:
        return f"declare queue {self.queue!r}"


@dataclass(frozen=True, slots=True)
class ExchangeDeclare:
    """An exchange.declare (:meth:`Channel.exchange_declare`; the defaults are its)."""

    exchange: str
    type: str = "direct"
    passive: bool = False
    durable: bool = True
    auto_delete: bool = False
    internal: bool = False
    arguments: Mapping[str, FieldValue] | None = None

    @property
    def what(self) -> str:
        return f"declare exchange {self.exchange!r}"


@dataclass(frozen=True, slots=True)
class Binding:
    """A queue.bind, or with ``unbind`` a queue.unbind (:meth:`Channel.queue_bind`,
    :meth:`Channel.queue_unbind`)."""

    queue: str
    exchange: str
    routing_key: str
    arguments: Mapping[str, FieldValue] | None
    unbind: bool

    @property
    def what(self) -> str:
        queue, exchange, key = self.queue, self.exchange, self.routing_key
        if self.unbind:
            return f"unbind queue {queue!r} from exchange {exchange!r} ({key!r})"
        return f"bind queue {queue!r} to exchange {exchange!r} ({key!r})"


@dataclass(frozen=True, slots=True)
class Publish:
    """A basic.publish (:meth:`Channel.publish`); ``properties`` are :data:`TRANSIENT` when
    the caller gave none."""

    body: bytes
    exchange: str
    routing_key: str
    properties: Properties
    mandatory: bool

    @property
    def what(self) -> str:
        where = f"exchange {self.exchange!r}" if self.exchange else "the default exchange"
        return f"publish to {where} with routing key {self.routing_key!r}"


@dataclass(frozen=True, slots=True)
class Consume:
    """A basic.consume (:meth:`Channel.consume`)."""

    queue: str
    callback: DeliveryCallback
    no_ack: bool
    exclusive: bool
    consumer_tag: str | None
    on_cancel: CancelCallback | None
    arguments: Mapping[str, FieldValue] | None = None
    """The consumer's arguments (``x-priority``)."""

    @property
    def what(self) -> str:
        return f"consume from queue {self.queue!r}"


class Channel(ABC):
    """One AMQP channel. Methods raise :mod:`rabbitctl_retry.errors` classes only.

    Every adapter's channel is one of these. The methods with many arguments are written
    here once: each makes its request value and hands it to the adapter's hook
    (``_queue_declare``, ...), which talks to its broker and words its errors with the
    value's ``what``."""

    __slots__ = ()

    @property
    @abstractmethod
    def is_closed(self) -> bool: ...

    @property
    @abstractmethod
    def close_reason(self) -> str | None:
        """Why the channel closed (the broker's reply text and code), once it is closed."""

    @abstractmethod
    async def wait_closed(self) -> None:
        """Return once the channel is closed: by ``close()``, the broker, or its connection."""

    async def queue_declare(
        self,
        name: str,
        *,
        passive: bool = False,
        durable: bool = True,
        exclusive: bool = False,
        auto_delete: bool = False,
        arguments: Mapping[str, FieldValue] | None = None,
    ) -> QueueInfo:
        request = QueueDeclare(name, passive, durable, exclusive, auto_delete, arguments)
        return await self._queue_declare(request)

    async def exchange_declare(
        self,
        name: str,
        *,
        type: str = "direct",
        passive: bool = False,
        durable: bool = True,
        auto_delete: bool = False,
        internal: bool = False,
        arguments: Mapping[str, FieldValue] | None = None,
    ) -> None:
        request = ExchangeDeclare(name, type, passive, durable, auto_delete, internal, arguments)
        await self._exchange_declare(request)

    async def queue_bind(
        self,
        queue: str,
        exchange: str,
        routing_key: str = "",
        arguments: Mapping[str, FieldValue] | None = None,
    ) -> None:
        await self._bind(Binding(queue, exchange, routing_key, arguments, unbind=False))

    async def queue_unbind(
        self,
        queue: str,
        exchange: str,
        routing_key: str = "",
        arguments: Mapping[str, FieldValue] | None = None,
    ) -> None:
        """Remove the binding; one that does not exist, or whose queue or exchange does not,
        is no error (RabbitMQ 3.10.8, 4.0.5 and 4.3.6 all answer unbind-ok)."""
        await self._bind(Binding(queue, exchange, routing_key, arguments, unbind=True))

    @abstractmethod
    async def queue_purge(self, name: str) -> int: ...

    @abstractmethod
    async def queue_delete(
        self, name: str, *, if_unused: bool = False, if_empty: bool = False
    ) -> int: ...

    @abstractmethod
    async def exchange_delete(self, name: str, *, if_unused: bool = False) -> None: ...

    async def publish(
        self,
        body: bytes,
        *,
        exchange: str = "",
        routing_key: str = "",
        properties: Properties | None = None,
        mandatory: bool = False,
    ) -> None:
        sent = TRANSIENT if properties is None else properties
        await self._publish(Publish(body, exchange, routing_key, sent, mandatory))

    @abstractmethod
    async def get(self, queue: str, *, no_ack: bool = False) -> Delivery | None: ...

    @abstractmethod
    async def qos(self, prefetch_count: int) -> None: ...

    async def consume(
        self,
        queue: str,
        callback: DeliveryCallback,
        *,
        no_ack: bool = False,
        exclusive: bool = False,
        consumer_tag: str | None = None,
        on_cancel: CancelCallback | None = None,
        arguments: Mapping[str, FieldValue] | None = None,
    ) -> str:
        """Start a consumer; ``on_cancel`` is told when the broker cancels it; ``arguments``
        are the consumer's (``x-priority``).

        With ``on_cancel``, a delivery that still arrives for the consumer after the broker
        cancelled it (RabbitMQ 4.3 hands messages to a consumer it cancelled for its consumer
        timeout until the client answers the cancel) goes to ``callback`` like the others,
        after ``on_cancel`` ran: it is unacknowledged on the channel, and the caller must
        settle it (a multiple ack covers it otherwise)."""
        request = Consume(queue, callback, no_ack, exclusive, consumer_tag, on_cancel, arguments)
        return await self._consume(request)

    @abstractmethod
    async def cancel(self, consumer_tag: str) -> None: ...

    @abstractmethod
    async def ack(self, delivery_tag: int, *, multiple: bool = False) -> None: ...

    @abstractmethod
    async def reject(self, delivery_tag: int, *, requeue: bool) -> None: ...

    @abstractmethod
    async def nack(
        self, delivery_tag: int, *, multiple: bool = False, requeue: bool = True
    ) -> None: ...

    @abstractmethod
    async def close(self) -> None: ...

    # -- each adapter's hooks -------------------------------------------------------------------

    @abstractmethod
    async def _queue_declare(self, request: QueueDeclare) -> QueueInfo: ...

    @abstractmethod
    async def _exchange_declare(self, request: ExchangeDeclare) -> None: ...

    @abstractmethod
    async def _bind(self, request: Binding) -> None: ...

    @abstractmethod
    async def _publish(self, request: Publish) -> None: ...

    @abstractmethod
    async def _consume(self, request: Consume) -> str: ...


class Connection(Protocol):
    """One AMQP connection to a vhost."""

    @property
    def server_version(self) -> ServerVersion: ...

    @property
    def url(self) -> str:
        """Where this connection goes, password censored (with several URLs: the node that
        answered)."""
        ...

    @property
    def is_closed(self) -> bool: ...

    @property
    def close_reason(self) -> str | None:
        """Why the broker or the network closed the connection (``CONNECTION_FORCED - ...``),
        or None (open, or closed by rr)."""
        ...

    async def channel(self, *, confirms: bool = False) -> Channel: ...

    def on_blocked(self, listener: BlockedListener) -> None:
        """Call ``listener`` when the broker blocks (reason) or unblocks (``None``) this
        connection."""
        ...

    async def wait_closed(self) -> None:
        """Return once the connection is closed: by ``close()``, the broker or the network."""
        ...

    async def close(self) -> None: ...


def identity_of(connection: Connection) -> ServerIdentity:
    """Which server ``connection`` reached: all it tells (:class:`Identifies`), else its
    version alone."""
    if isinstance(connection, Identifies):
        return connection.server_identity
    return ServerIdentity(version=connection.server_version)


Connector: TypeAlias = Callable[[str], Awaitable[Connection]]
"""How a command reaches a broker, given its URL: the aiormq adapter's ``connect`` for rr
itself, an emulator's for tests. The CLI builds one and hands it to every command
(docs/architecture.md, "Layers")."""
