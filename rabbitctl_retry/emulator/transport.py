"""The transport port on the emulated broker: :class:`EmulatedConnection`, :class:`EmulatedChannel`.

They implement :class:`~rabbitctl_retry.transport.base.Connection` and
:class:`~rabbitctl_retry.transport.base.Channel` exactly, and behave as the aiormq adapter does
against a real server, down to the wording of errors (checked side by side on RabbitMQ
3.10.8): code written against the port runs unchanged on either.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Protocol, TypeVar, assert_never

from rabbitctl_retry.emulator.broker import Broker, ConnectionFault
from rabbitctl_retry.emulator.model import ChannelState, ConnectionState
from rabbitctl_retry.emulator.publish import PublishOutcome
from rabbitctl_retry.emulator.values import (
    client_table,
    name_problem,
    routing_key_problem,
    with_headers,
)
from rabbitctl_retry.errors import (
    AccessRefused,
    BrokerUnreachable,
    ChannelClosed,
    DataError,
    NotFound,
    PreconditionFailed,
    PublishFailed,
    PublishReturned,
    ResourceLocked,
    TransportError,
)
from rabbitctl_retry.fields import FieldValue
from rabbitctl_retry.server import ServerVersion
from rabbitctl_retry.transport.base import (
    Binding,
    BlockedListener,
    Channel,
    Connection,
    Consume,
    Delivery,
    DeliveryCallback,
    ExchangeDeclare,
    Publish,
    QueueDeclare,
    QueueInfo,
)
from rabbitctl_retry.transport.reply_codes import describe_reply, error_class_for


class Host(Protocol):
    """What the port's connections and channels need of the emulator that made them
    (:class:`~rabbitctl_retry.emulator.emulator.Emulator`); a protocol, so that this module
    does not import the module that imports it."""

    broker: Broker
    server_version: ServerVersion

    def forget(self, connection: EmulatedConnection) -> None:
        """``connection`` closed: stop tracking it."""
        ...

    def spawn(self, callback: DeliveryCallback, delivery: Delivery) -> None:
        """Run a consumer's callback for ``delivery`` as a task of the emulator."""
        ...


T = TypeVar("T")


class EmulatedConnection:
    """A :class:`~rabbitctl_retry.transport.base.Connection` to an
    :class:`~rabbitctl_retry.emulator.emulator.Emulator` (made by ``Emulator.connect()``)."""

    def __init__(
        self, emulator: Host, client_properties: Mapping[str, FieldValue] | None = None
    ) -> None:
        self._emulator = emulator
        self._state: ConnectionState = emulator.broker.open_connection(client_properties)
        self._state.on_fault = self._closed_by_broker
        self._closed = asyncio.Event()
        self.close_reason: str | None = None
        """Why the broker closed the connection, in its words (``"COMMAND_INVALID - ..."``), if
        it did."""
        self._close_code: int | None = None

    @property
    def server_version(self) -> ServerVersion:
        return self._emulator.server_version

    @property
    def url(self) -> str:
        """The emulator has no address: ``emulator``."""
        return "emulator"

    @property
    def is_closed(self) -> bool:
        return self._state.closed

    def on_blocked(self, listener: BlockedListener) -> None:
        """The emulator has no resource alarms: it never blocks a connection."""

    async def channel(self, *, confirms: bool = False) -> EmulatedChannel:
        if self._state.closed:
            raise self.closed_error("open a channel", resource="connection")
        state = self._emulator.broker.open_channel(self._state, confirms=confirms)
        return EmulatedChannel(self._emulator, self, state)

    async def wait_closed(self) -> None:
        await self._closed.wait()

    async def close(self) -> None:
        self._shut(None)

    def _closed_by_broker(self, reply_code: int, reply_text: str) -> None:
        """The broker closed the connection on its own (not in answer to a method)."""
        self._shut(reply_text, reply_code)

    def _shut(
        self,
        reason: str | None,
        reply_code: int | None = None,
        *,
        failing: ChannelState | None = None,
    ) -> None:
        """Close: by the client (no ``reason``), or by the broker, for a method on channel
        ``failing`` or on its own."""
        if not self._state.closed:
            self.close_reason, self._close_code = reason, reply_code
        self._emulator.broker.close_connection(self._state, failing)
        self._closed.set()
        self._emulator.forget(self)

    def closed_error(self, what: str, *, resource: str = "channel") -> TransportError:
        """What the aiormq adapter raises for ``what`` once this connection is closed."""
        if self.close_reason is None:
            return ChannelClosed(f"{what}: the {resource} is closed")
        return BrokerUnreachable(f"{what}: connection closed by the broker: {self.described}")

    @property
    def described(self) -> str | None:
        """Why the broker closed the connection, with the code (``"... (503)"``), if it did."""
        if self.close_reason is None:
            return None
        return describe_reply(self._close_code, self.close_reason)


class EmulatedChannel(Channel):
    """A :class:`~rabbitctl_retry.transport.base.Channel` on an :class:`EmulatedConnection`.

    Errors read as the aiormq adapter's do (``declare queue 'q': NOT_FOUND - no queue 'q' in
    vhost '/' (404)``). A channel error closes the channel (its unacked deliveries go back); a
    connection error closes the connection. basic.ack, basic.reject and basic.nack get no
    answer in AMQP, and neither does a publish without confirms: their errors close the
    channel and surface on the channel's next operation, as they do over the wire. A name the
    client library would refuse to encode is a :class:`DataError` before anything else, and
    leaves the channel open.
    """

    def __init__(self, emulator: Host, connection: EmulatedConnection, state: ChannelState) -> None:
        self._emulator = emulator
        self._broker = emulator.broker
        self._connection = connection
        self._state = state
        self._close_reason: str | None = None
        self._closed = asyncio.Event()
        state.close_listeners.append(self._closed.set)

    @property
    def is_closed(self) -> bool:
        return self._state.closed

    @property
    def close_reason(self) -> str | None:
        if not self._state.closed:
            return None
        if self._state.connection.closed and self._connection.close_reason is not None:
            return f"connection closed by the broker: {self._connection.described}"
        return self._close_reason or self._closed_by_broker() or "closed"

    def _closed_by_broker(self) -> str | None:
        """The broker's channel.close, when it closed the channel on its own (a consumer
        timeout), worded as rr's client words it (``"PRECONDITION_FAILED - ... (406)"``)."""
        closed_by = self._state.closed_by
        return None if closed_by is None else describe_reply(*closed_by)

    async def wait_closed(self) -> None:
        if not self._state.closed:
            await self._closed.wait()

    @property
    def confirms(self) -> bool:
        return self._state.confirms

    @property
    def number(self) -> int:
        return self._state.number

    def _closed_error(self, what: str) -> TransportError:
        if self._state.connection.closed:
            return self._connection.closed_error(what)
        reason = self._close_reason or self._closed_by_broker()
        if reason is None:
            return ChannelClosed(f"{what}: the channel is closed")
        return ChannelClosed(f"{what}: the channel was closed earlier: {reason}")

    def _run(self, what: str, operation: Callable[[], T]) -> T:
        """Run a method the broker answers: its error is raised at once."""
        if self._state.closed:
            raise self._closed_error(what)
        try:
            return operation()
        except ConnectionFault as fault:
            reason = describe_reply(fault.reply_code, fault.reply_text)
            self._connection._shut(fault.reply_text, fault.reply_code, failing=self._state)
            cls = error_class_for(fault.reply_code, connection=True)
            raise cls(f"{what}: connection closed by the broker: {reason}") from None
        except TransportError as error:
            reason = describe_reply(_REPLY_CODES.get(type(error)), error.message)
            self._close_reason = reason
            self._broker.close_channel(self._state)
            raise type(error)(f"{what}: {reason}") from None

    def _send(self, what: str, operation: Callable[[], object]) -> None:
        """Run a method the broker does not answer: an error closes the channel, silently."""
        if self._state.closed:
            raise self._closed_error(what)
        try:
            operation()
        except TransportError as error:
            self._close_reason = describe_reply(_REPLY_CODES.get(type(error)), error.message)
            self._broker.close_channel(self._state)

    async def _queue_declare(self, request: QueueDeclare) -> QueueInfo:
        what = request.what
        _encodable(what, queue=request.queue)
        return self._run(what, lambda: self._broker.queue_declare(self._state, request))

    async def _exchange_declare(self, request: ExchangeDeclare) -> None:
        what = request.what
        _encodable(what, exchange=request.exchange)
        self._run(what, lambda: self._broker.exchange_declare(request))

    async def _bind(self, request: Binding) -> None:
        what = request.what
        _encodable(what, queue=request.queue, exchange=request.exchange)
        act = self._broker.queue_unbind if request.unbind else self._broker.queue_bind
        self._run(what, lambda: act(self._state, request))

    async def queue_purge(self, name: str) -> int:
        what = f"purge queue {name!r}"
        _encodable(what, queue=name)
        return self._run(what, lambda: self._broker.queue_purge(self._state, name))

    async def queue_delete(
        self, name: str, *, if_unused: bool = False, if_empty: bool = False
    ) -> int:
        what = f"delete queue {name!r}"
        _encodable(what, queue=name)
        return self._run(
            what,
            lambda: self._broker.queue_delete(
                self._state, name, if_unused=if_unused, if_empty=if_empty
            ),
        )

    async def exchange_delete(self, name: str, *, if_unused: bool = False) -> None:
        what = f"delete exchange {name!r}"
        _encodable(what, exchange=name)
        self._run(what, lambda: self._broker.exchange_delete(name, if_unused=if_unused))

    async def _publish(self, request: Publish) -> None:
        what = request.what
        exchange, routing_key = request.exchange, request.routing_key
        _encodable(what, routing_key=routing_key, exchange=exchange)
        # what the client sends for us: headers written by rr's codec (the default properties
        # are the port's: transport/base.py, Channel.publish)
        sent = request.properties
        if sent.headers is not None and sent.raw is None:
            try:
                sent = with_headers(sent, client_table(sent.headers))
            except (TypeError, ValueError, OverflowError) as error:
                raise DataError(f"{what}: cannot encode: {error}") from error

        def publish() -> PublishOutcome:
            return self._broker.publish(
                exchange, routing_key, request.body, sent, request.mandatory, publisher=self._state
            )

        if not self._state.confirms:
            self._send(what, publish)
            return
        outcome = self._run(what, publish)
        match outcome:
            case "ack":
                return
            case "returned":
                raise PublishReturned(
                    f"{what}: the broker returned the message "
                    "(312 NO_ROUTE: no queue is bound for it)"
                )
            case "nack":
                raise PublishFailed(f"{what}: the broker refused the message (basic.nack)")
            case _:
                assert_never(outcome)

    async def get(self, queue: str, *, no_ack: bool = False) -> Delivery | None:
        what = f"get from queue {queue!r}"
        _encodable(what, queue=queue)
        return self._run(
            what,
            lambda: self._broker.get_from(self._state, queue, no_ack=no_ack),
        )

    async def qos(self, prefetch_count: int) -> None:
        self._run(
            f"set prefetch to {prefetch_count}",
            lambda: self._broker.qos(self._state, prefetch_count),
        )

    async def _consume(self, request: Consume) -> str:
        what, consumer_tag, callback = request.what, request.consumer_tag, request.callback
        if consumer_tag is not None and consumer_tag in self._state.consumers:
            # aiormq refuses this itself, before anything is sent
            raise TransportError(f"{what}: that consumer tag is already in use")
        _encodable(what, queue=request.queue)
        emulator = self._emulator

        def sink(delivery: Delivery) -> None:
            emulator.spawn(callback, delivery)

        return self._run(
            what,
            lambda: self._broker.consume(
                self._state,
                request.queue,
                sink,
                no_ack=request.no_ack,
                exclusive=request.exclusive,
                consumer_tag=consumer_tag,
                on_cancel=request.on_cancel,
                arguments=request.arguments,
            ),
        )

    async def cancel(self, consumer_tag: str) -> None:
        self._run(
            f"cancel consumer {consumer_tag!r}",
            lambda: self._broker.cancel(self._state, consumer_tag),
        )

    async def ack(self, delivery_tag: int, *, multiple: bool = False) -> None:
        self._send(
            f"ack delivery {delivery_tag}",
            lambda: self._broker.ack(self._state, delivery_tag, multiple),
        )

    async def reject(self, delivery_tag: int, *, requeue: bool) -> None:
        self._send(
            f"reject delivery {delivery_tag}",
            lambda: self._broker.reject(self._state, delivery_tag, False, requeue, "reject"),
        )

    async def nack(
        self, delivery_tag: int, *, multiple: bool = False, requeue: bool = True
    ) -> None:
        self._send(
            f"nack delivery {delivery_tag}",
            lambda: self._broker.reject(self._state, delivery_tag, multiple, requeue, "nack"),
        )

    async def close(self) -> None:
        self._broker.close_channel(self._state)


_REPLY_CODES: dict[type[TransportError], int] = {
    AccessRefused: 403,
    NotFound: 404,
    ResourceLocked: 405,
    PreconditionFailed: 406,
}


def _encodable(
    what: str,
    *,
    queue: str | None = None,
    exchange: str | None = None,
    routing_key: str | None = None,
) -> None:
    """Refuse what the client library refuses to put in a frame, in its order and words."""
    problem = None
    if routing_key is not None:
        problem = routing_key_problem(routing_key)
    if problem is None and queue is not None:
        problem = name_problem("queue", queue)
    if problem is None and exchange is not None:
        problem = name_problem("exchange", exchange)
    if problem is not None:
        raise DataError(f"{what}: cannot encode: {problem}")


def _implements_the_port(
    connection: EmulatedConnection, channel: EmulatedChannel
) -> tuple[Connection, Channel]:
    """Never called: mypy checks here that the emulator's classes satisfy the port."""
    return connection, channel
