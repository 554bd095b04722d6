"""The aiormq adapter of the transport port: the real RabbitMQ behind Connection and Channel.

Rule: a thin shell that decides nothing. Each method is one aiormq call; values are converted
to pamqp's and back, and driver errors become rr errors in ``transport/aiormq_errors.py``. The hot
paths (``publish``, ``ack``, ``reject``, ``nack``, the consume callback) add one ``try`` and
one conversion over raw aiormq; ``ack``/``reject``/``nack`` do not wait for the socket to
drain, since AMQP never answers them.

URLs (checked by :func:`~rabbitctl_retry.transport.url.parse_broker_url` before any socket
opens; docs/reference/cli.md, "Connecting" and "Malformed input")::

    amqp://USER:PASSWORD@HOST:PORT/VHOST?QUERY      plain TCP, port 5672 by default
    amqps://USER:PASSWORD@HOST:PORT/VHOST?QUERY     TLS, port 5671 by default

The user name and password are percent-encoded (``/`` ``%2F``, ``?`` ``%3F``, ``#`` ``%23``,
``@`` ``%40``): a URL with one of them unencoded is refused, and not repeated in the message.
The vhost is the percent-encoded path: ``/%2F`` is ``/``, ``/orders`` is ``orders``, an empty
path or ``/`` is ``/``. A vhost that is missing, or that the user may not use, is refused by
RabbitMQ (530 NOT_ALLOWED) and raises :class:`~rabbitctl_retry.errors.AccessRefused`.

Query options (aiormq's; percent-encode values that hold ``&``, ``=``, ``%``, ``#``, ``+``,
spaces). Only these are accepted, each once; any other key, or a value outside the one
described, is a :class:`~rabbitctl_retry.errors.UsageError`:

``cafile=PATH``
    PEM bundle of the CA(s) that signed the broker's certificate (else the system store).
``capath=DIR`` / ``cadata=BASE64``
    CA certificates from a hashed directory, or inline (base64 of PEM or DER).
``certfile=PATH`` and ``keyfile=PATH``
    the client certificate and its private key (PEM), for brokers with
    ``ssl_options.fail_if_no_peer_cert = true``. ``keyfile`` needs ``certfile``.
``no_verify_ssl=1``
    accept any broker certificate and host name. For tests only; ``1`` is its only value,
    and each connection made with it logs a warning (``rr.transport``).
``auth=plain`` / ``auth=external``
    log in with the client certificate (``rabbitmq_auth_mechanism_ssl``) instead of PLAIN.
``heartbeat=SECONDS``
    heartbeat timeout, a whole number 0..65535 (rr's default: 10; 0 turns heartbeats off).
    A peer that sends nothing for about three timeouts is taken for dead and the connection
    is closed, so a half-open connection (a peer gone without a word) is noticed within
    ~33 s by default.
``name=TEXT``
    the connection name the management UI shows (default: ``connect(client_name=...)``).

The TLS options (all but ``auth``, ``heartbeat`` and ``name``) need ``amqps://``. The
broker's certificate is checked against the URL's host: use the name the certificate
carries (``localhost`` or the IP in its subjectAltName).

Wire notes, aiormq's or pamqp's behaviour as rr's codec corrects it (``transport/codec.py``,
in force as soon as ``transport/values.py`` is imported):

* A message published without a ``message_id`` goes without one. aiormq gives such a message
  a random id and matches a ``basic.return`` to its publish by it; the adapter lets aiormq
  keep its id for that and writes the message without it (:class:`_WithoutMessageId`), and
  matches a return of such a message by its exchange, routing key and body instead
  (``transport/message_ids.py``, :meth:`AmqpChannel._on_return_frame`).
* A returned ``mandatory`` message is reported (:class:`~rabbitctl_retry.errors.PublishFailed`)
  only on a confirm channel; without confirms aiormq logs the return and drops it.
* Field tables (arguments, headers) are rr's (``field_codec.py``): a table read keeps its
  bytes, and each value of it still as read is written again with its type tag and bytes, in
  the table's order. A new value: ``int`` goes as the smallest AMQP integer that holds it,
  ``bool`` as boolean, ``str`` as long string, ``bytes`` as byte array, ``datetime`` as
  timestamp (whole seconds; naive means UTC), ``None`` as void, lists as arrays, dicts as
  tables, and ``float`` as a 64-bit double. Read, byte arrays (and long strings that are not
  UTF-8) are ``bytes``, decimals and 32-bit floats are ``float`` and timestamps are aware UTC
  datetimes.
* A delivery whose properties, exchange, routing key or consumer tag cannot be decoded (a
  routing key that is not UTF-8) arrives with their names in ``properties.undecodable`` and
  its property bytes in ``properties.raw``; the connection stays up (docs/reference/runtime.md,
  "Malformed messages").
"""

from __future__ import annotations

import asyncio
import binascii
import itertools
import logging
from collections.abc import Callable, Coroutine, Hashable
from contextlib import suppress
from typing import TYPE_CHECKING, Any, NoReturn, cast

import aiormq
import pamqp.frame
from aiormq import exceptions as amqp_exc
from aiormq.abc import DeliveredMessage
from aiormq.channel import Returning
from aiormq.connection import FrameReceiver, TransportFactory
from pamqp import commands as spec
from pamqp import common as wire
from pamqp.base import Frame
from yarl import URL

from rabbitctl_retry.errors import (
    BrokerUnreachable,
    DataError,
    UsageError,
    censor_urls,
)
from rabbitctl_retry.transport import values
from rabbitctl_retry.transport.aiormq_errors import closed_error, map_amqp_errors, to_rr_error
from rabbitctl_retry.transport.base import (
    Binding,
    BlockedListener,
    CancelCallback,
    Channel,
    Consume,
    Delivery,
    ExchangeDeclare,
    Publish,
    QueueDeclare,
    QueueInfo,
)
from rabbitctl_retry.transport.declare_frames import exchange_declare_frame, queue_declare_frame
from rabbitctl_retry.transport.message_ids import MessageIdGuard, return_key
from rabbitctl_retry.transport.server_info import (
    HEARTBEAT_LOST,
    TLS_NOT_VERIFIED,
    Reached,
    without_password,
)
from rabbitctl_retry.transport.tls_files import check_tls_files
from rabbitctl_retry.transport.url import DEFAULT_HEARTBEAT_S, BrokerUrl, parse_broker_url

if TYPE_CHECKING:
    from rabbitctl_retry.transport.base import Connection

__all__ = ["DEFAULT_HEARTBEAT_S", "TLS_NOT_VERIFIED", "AmqpChannel", "AmqpConnection", "connect"]

log = logging.getLogger("rr.transport")


async def connect(url: str, *, timeout_s: float = 5.0, client_name: str = "rr") -> AmqpConnection:
    """Open a connection to the broker at ``url``, handshake included, within ``timeout_s``.

    Raises :class:`UsageError` (a URL rr refuses, see ``transport/url.py``; the message
    does not repeat it), :class:`BrokerUnreachable` (no TCP/TLS connection, no AMQP answer in
    time) or :class:`~rabbitctl_retry.errors.AccessRefused` (login or vhost refused). No
    message contains the password.
    """
    target = parse_broker_url(url)
    shown = target.shown
    if timeout_s <= 0:
        raise UsageError(f"timeout_s must be positive, not {timeout_s!r}")
    client_properties: wire.FieldTable = (
        {} if target.connection_name is not None else {"connection_name": client_name}
    )
    if target.tls:
        check_tls_files(target.options, shown)
    if not target.verify_tls:
        log.warning(TLS_NOT_VERIFIED, extra={"rr": {"url": shown}})
    connection = _new_connection(target, client_properties)
    try:
        async with asyncio.timeout(timeout_s):
            await connection.connect()
    except asyncio.CancelledError:
        await _abandon(connection)
        raise
    except TimeoutError as exc:
        await _abandon(connection)
        raise BrokerUnreachable(
            f"no answer from {shown} within {timeout_s:g} s "
            "(wrong host or port, a firewall, or amqp:// to a TLS port?)"
        ) from exc
    except Exception as exc:
        await _abandon(connection)
        error = to_rr_error(exc, url=shown) or BrokerUnreachable(
            f"cannot connect to {shown}: {exc}"
        )
        raise without_password(error) from exc
    return AmqpConnection(connection, shown)


def _new_connection(target: BrokerUrl, client_properties: wire.FieldTable) -> _Connection:
    """aiormq's connection for a checked URL, with the heartbeat rr checked."""
    try:
        connection = _Connection(target.url, client_properties=client_properties)
    except (ValueError, KeyError, binascii.Error):  # what rr accepted and the driver does not
        raise UsageError("broker URL cannot be read by the AMQP driver (rr docs cli)") from None
    if connection.heartbeat_timeout != target.heartbeat_s:  # aiormq reads 65535 as 0 (off)
        connection.heartbeat_timeout = target.heartbeat_s
        grace_s = (target.heartbeat_s + 1) * connection.HEARTBEAT_GRACE_MULTIPLIER
        setattr(connection, "_Connection__heartbeat_grace_timeout", grace_s)  # noqa: B010
    return connection


class AmqpConnection(Reached):
    """One AMQP connection (implements the port's ``Connection``)."""

    __slots__ = ("_connection",)

    def __init__(self, connection: _Connection, url: str) -> None:
        super().__init__(url, connection.server_properties)
        self._connection = connection

    @property
    def is_closed(self) -> bool:
        return self._connection.is_closed

    @property
    def close_reason(self) -> str | None:
        cause = _close_cause(self._connection)
        if cause is None:
            return None
        if isinstance(cause, asyncio.CancelledError):
            # aiormq stops its reader (a cancellation) when the heartbeat finds the
            # connection silent, and says so nowhere else
            if self._connection.is_connection_was_stuck:
                return HEARTBEAT_LOST.format(seconds=self._connection.heartbeat_timeout)
            return "the connection's reader stopped"
        return censor_urls(str(cause) or type(cause).__name__)

    async def channel(self, *, confirms: bool = False) -> AmqpChannel:
        """A new channel; with ``confirms`` every publish waits for the broker's confirm."""
        what = "open a channel"
        if self._connection.is_closed:
            raise closed_error(what, _close_cause(self._connection), resource="connection")
        with map_amqp_errors(what=what):
            channel = await self._connection.channel(publisher_confirms=confirms)
        # aiormq.Connection.channel() builds an aiormq.Channel; its wait= knobs are not in
        # AbstractChannel.
        return AmqpChannel(cast(aiormq.Channel, channel), confirms=confirms)

    def on_blocked(self, listener: BlockedListener) -> None:
        """Call ``listener`` on connection.blocked (the reason) and connection.unblocked
        (``None``)."""
        self._connection.blocked_listeners.append(listener)

    async def wait_closed(self) -> None:
        """Return once the connection is closed: by :meth:`close`, the broker, or the network."""
        closing = self._connection.closing
        if not closing.done():
            await asyncio.wait([closing])

    async def close(self, *, timeout_s: float = 5.0) -> None:
        """Close the connection and its channels; idempotent, never raises.

        Bounded: a broker that does not answer within ``timeout_s`` (a frozen network, or a
        connection blocked by a resource alarm) gets its socket closed without the handshake.
        """
        if self._connection.is_closed:
            return
        with suppress(Exception):
            await self._connection.close(
                amqp_exc.ConnectionClosed(200, "closed by the client"), timeout=timeout_s
            )
        if not self._connection.is_closed:
            self._connection.abort()

    def __repr__(self) -> str:
        state = "closed" if self.is_closed else "open"
        return f"<AmqpConnection {self._url} {state}>"


class AmqpChannel(Channel):
    """One AMQP channel (implements the port's ``Channel``)."""

    __slots__ = (
        "_cancel_callbacks",
        "_channel",
        "_confirms",
        "_deliver_callbacks",
        "_message_ids",
        "_returnable",
        "_tokens",
    )

    def __init__(self, channel: aiormq.Channel, *, confirms: bool) -> None:
        self._channel = channel
        self._confirms = confirms
        self._returnable: dict[Hashable, str] = {}
        """The key of each mandatory publish in flight without a message id
        (``transport/message_ids.py``) -> the id aiormq knows it by."""
        self._tokens = itertools.count(1)
        if confirms:
            # aiormq's reader calls this method by attribute for every basic.return
            channel._on_return_frame = self._on_return_frame  # type: ignore[method-assign]
        self._cancel_callbacks: dict[str, CancelCallback] = {}
        self._deliver_callbacks: dict[
            str, Callable[[DeliveredMessage], Coroutine[Any, Any, None]]
        ] = {}
        """Consumers with an ``on_cancel``, by tag: what aiormq calls for their deliveries
        (kept to route deliveries that come after the broker's cancel, see :meth:`consume`)."""
        self._message_ids = MessageIdGuard()

    @property
    def is_closed(self) -> bool:
        # aiormq closes a closed connection's channels a turn of the loop or more later (in a
        # task, slower on a busy machine); until then the channel is as closed as its
        # connection, and closed by the same cause
        return self._channel.is_closed or self._channel.connection.is_closed

    @property
    def close_reason(self) -> str | None:
        closed = self._channel if self._channel.is_closed else self._channel.connection
        cause = _close_cause(cast(aiormq.Channel | aiormq.Connection, closed))
        if cause is None:
            return "closed" if self.is_closed else None
        return str(cause) or type(cause).__name__

    async def wait_closed(self) -> None:
        closing = self._channel.closing
        if not closing.done():
            await asyncio.wait([closing])

    @property
    def confirms(self) -> bool:
        """Whether publishes on this channel wait for the broker's confirm."""
        return self._confirms

    async def _queue_declare(self, request: QueueDeclare) -> QueueInfo:
        # the frame aiormq's queue_declare() sends, built as rr's own client builds it
        try:
            ok = await self._channel.rpc(queue_declare_frame(request))
        except BaseException as exc:
            self._fail(exc, request.what)
        return values.queue_info(ok, request.queue)

    async def _exchange_declare(self, request: ExchangeDeclare) -> None:
        try:
            await self._channel.rpc(exchange_declare_frame(request))
        except BaseException as exc:
            self._fail(exc, request.what)

    async def _bind(self, request: Binding) -> None:
        channel = self._channel
        method = channel.queue_unbind if request.unbind else channel.queue_bind
        try:
            await method(
                request.queue,
                request.exchange,
                request.routing_key,
                arguments=values.wire_arguments(request.arguments),
            )
        except BaseException as exc:
            self._fail(exc, request.what)

    async def queue_purge(self, name: str) -> int:
        try:
            ok = await self._channel.queue_purge(name)
        except BaseException as exc:
            self._fail(exc, f"purge queue {name!r}")
        return ok.message_count or 0

    async def queue_delete(
        self, name: str, *, if_unused: bool = False, if_empty: bool = False
    ) -> int:
        try:
            ok = await self._channel.queue_delete(name, if_unused=if_unused, if_empty=if_empty)
        except BaseException as exc:
            self._fail(exc, f"delete queue {name!r}")
        return ok.message_count or 0

    async def exchange_delete(self, name: str, *, if_unused: bool = False) -> None:
        try:
            await self._channel.exchange_delete(name, if_unused=if_unused)
        except BaseException as exc:
            self._fail(exc, f"delete exchange {name!r}")

    async def _publish(self, request: Publish) -> None:
        """On a confirm channel return once the broker confirmed (or raise).

        Without confirms it returns once the frames are written to the socket. A confirm
        makes the socket drain redundant, so a confirm channel does not wait for it.

        A ``basic.return`` is matched to its publish by ``message_id``, or without one by
        exchange, routing key and body (``transport/message_ids.py``): on a confirm channel a
        second publish of such a key waits until the first one is confirmed, returned or
        refused, so a returned message's failure never lands on another one's publish (and its
        original is never settled as if it had arrived). A message without a ``message_id``
        goes without one (module doc).
        """
        body, exchange, routing_key = request.body, request.exchange, request.routing_key
        sent, mandatory = request.properties, request.mandatory
        message_id = sent.message_id
        key: Hashable | None = None
        if self._confirms and (mandatory or message_id is not None):
            key = return_key(message_id, exchange, routing_key, body)
            if not self._message_ids.try_acquire(key):
                await self._message_ids.acquire(key)
        if message_id:
            wire_properties = values.basic_properties(sent)
        else:
            wire_properties = values.basic_properties(sent, _WithoutMessageId)
            if isinstance(wire_properties, _WithoutMessageId):
                wire_properties.sent_message_id = message_id
            # the id aiormq knows it by, never written (_WithoutMessageId)
            wire_properties.message_id = token = f"rr-unnamed-{next(self._tokens)}"
            if key is not None and mandatory:
                self._returnable[key] = token
        try:
            await self._channel.basic_publish(
                body,
                exchange=exchange,
                routing_key=routing_key,
                properties=wire_properties,
                mandatory=mandatory,
                wait=not self._confirms,
            )
        except Exception as exc:
            self._fail(exc, request.what)
        finally:
            if key is not None:
                self._returnable.pop(key, None)
                self._message_ids.release(key)

    async def _on_return_frame(self, frame: spec.Basic.Return) -> None:
        """aiormq's handling of a ``basic.return`` (aiormq 7.2), matching a message without a
        message id to its publish by its exchange, routing key and body (module doc)."""
        channel = self._channel
        header = await channel._Channel__get_content_header()  # type: ignore[attr-defined]
        message = await channel._read_content(frame, header)
        sent = message.header.properties
        token = self._returnable.get(
            return_key(sent.message_id, frame.exchange or "", frame.routing_key or "", message.body)
        )
        message_id = token if token is not None else sent.message_id
        tags = channel.message_id_delivery_tag
        delivery_tag = None if message_id is None else tags.get(message_id)
        if delivery_tag is None:
            log.warning(
                "a returned message matches no publish waiting for its confirm",
                extra={"rr": {"message_id": sent.message_id, "routing_key": frame.routing_key}},
            )
            return
        confirmation = channel.confirmations.pop(delivery_tag, None)
        if confirmation is None:
            return
        channel.confirmations[delivery_tag] = Returning()
        confirmation.set_exception(amqp_exc.PublishError(message, frame))

    async def get(self, queue: str, *, no_ack: bool = False) -> Delivery | None:
        try:
            message = await self._channel.basic_get(queue, no_ack=no_ack)
        except BaseException as exc:
            self._fail(exc, f"get from queue {queue!r}")
        frame = message.delivery
        if not isinstance(frame, spec.Basic.GetOk):
            return None
        return Delivery(
            body=message.body,
            properties=values.properties_from_header(message.header, frame),
            exchange=frame.exchange,
            routing_key=frame.routing_key or "",
            redelivered=frame.redelivered,
            delivery_tag=frame.delivery_tag or 0,
            message_count=frame.message_count,
        )

    async def qos(self, prefetch_count: int) -> None:
        try:
            await self._channel.basic_qos(prefetch_count=prefetch_count)
        except BaseException as exc:
            self._fail(exc, f"set prefetch to {prefetch_count}")

    async def _consume(self, request: Consume) -> str:
        """aiormq runs ``callback`` in a task per delivery.

        An exception in ``callback`` is logged by aiormq (``aiormq.channel``) and otherwise
        ignored: the delivery stays unacknowledged. ``on_cancel`` is told when the broker
        cancels the consumer (basic.cancel from the server: its queue was deleted, ...).
        """
        callback, on_cancel = request.callback, request.on_cancel

        async def on_message(message: DeliveredMessage) -> None:
            await callback(_delivery(message))

        try:
            ok = await self._channel.basic_consume(
                request.queue,
                on_message,
                no_ack=request.no_ack,
                exclusive=request.exclusive,
                consumer_tag=request.consumer_tag,
                arguments=values.wire_arguments(request.arguments),
            )
        except BaseException as exc:
            self._fail(exc, request.what)
        tag = ok.consumer_tag or ""
        if on_cancel is not None:
            if not self._cancel_callbacks:
                self._channel.on_consumer_cancel_callbacks.add(self._on_server_cancel)
            self._cancel_callbacks[tag] = on_cancel
            self._deliver_callbacks[tag] = on_message
        return tag

    def _on_server_cancel(self, frame: spec.Basic.Cancel) -> None:
        tag = frame.consumer_tag or ""
        callback = self._cancel_callbacks.pop(tag, None)
        if callback is not None:
            callback(tag)
        # aiormq forgot the consumer and would drop what still comes for it (RabbitMQ 4.3
        # revives a consumer cancelled for its consumer timeout when the timed-out delivery
        # is settled before the client answered the cancel): hand it to the callback, which
        # settles it (docs/reference/runtime.md, "Handlers").
        on_message = self._deliver_callbacks.pop(tag, None)
        if on_message is not None and not self._channel.is_closed:
            self._channel.consumers[tag] = on_message

    async def cancel(self, consumer_tag: str) -> None:
        self._cancel_callbacks.pop(consumer_tag, None)
        self._deliver_callbacks.pop(consumer_tag, None)
        try:
            await self._channel.basic_cancel(consumer_tag)
        except BaseException as exc:
            self._fail(exc, f"cancel consumer {consumer_tag!r}")

    async def ack(self, delivery_tag: int, *, multiple: bool = False) -> None:
        try:
            await self._channel.basic_ack(delivery_tag, multiple, False)
        except BaseException as exc:
            self._fail(exc, f"ack delivery {delivery_tag}")

    async def reject(self, delivery_tag: int, *, requeue: bool) -> None:
        try:
            await self._channel.basic_reject(delivery_tag, requeue=requeue, wait=False)
        except BaseException as exc:
            self._fail(exc, f"reject delivery {delivery_tag}")

    async def nack(
        self, delivery_tag: int, *, multiple: bool = False, requeue: bool = True
    ) -> None:
        try:
            await self._channel.basic_nack(delivery_tag, multiple, requeue, False)
        except BaseException as exc:
            self._fail(exc, f"nack delivery {delivery_tag}")

    async def close(self) -> None:
        """Close the channel; idempotent, never raises. Unacked deliveries go back."""
        if self._channel.is_closed:
            return
        with suppress(Exception):
            await self._channel.close(amqp_exc.ChannelClosed(200, "closed by the client"))

    def _fail(self, exc: BaseException, what: str) -> NoReturn:
        """Raise the rr error for ``exc``, which ``what`` (an operation) ran into.

        A ``CancelledError`` that is not a cancellation of the calling task (aiormq cancels
        the futures of a channel that closes: a confirm, an RPC) means the channel closed
        under the operation, and becomes the port's closed-channel error; the caller's own
        cancellation goes on as a cancellation.
        """
        error: Exception | None
        if isinstance(exc, asyncio.CancelledError):
            if _cancelling():
                raise exc
            error = closed_error(what, _close_cause(self._channel))
        elif not isinstance(exc, Exception):
            raise exc
        elif isinstance(exc, amqp_exc.ChannelInvalidStateError):
            error = closed_error(what, _close_cause(self._channel))
        elif isinstance(exc, TypeError | ValueError):
            error = DataError(f"{what}: cannot encode: {exc}")
        else:
            error = to_rr_error(exc, what=what)
        if error is None or error is exc:
            raise exc
        raise error from exc

    def __repr__(self) -> str:
        state = "closed" if self.is_closed else "open"
        kind = "confirm " if self._confirms else ""
        return f"<AmqpChannel {kind}{self._channel.number} {state}>"


class _WithoutMessageId(spec.Basic.Properties):
    """Properties of a message published without a ``message_id`` (or with an empty one):
    aiormq sets one to match a return by, and this writes the message without it."""

    sent_message_id: str | None = None
    """The ``message_id`` the message goes with: ``None``, or an empty one."""

    def marshal(self) -> bytes:
        token, self.message_id = self.message_id, self.sent_message_id
        try:
            return super().marshal()
        finally:
            self.message_id = token


class _Connection(aiormq.Connection):
    """aiormq's connection, with what rr needs beyond it.

    * A Connection.Close during the handshake is reported by its code: aiormq 7.2.4 checks a
      handshake reply against the expected frames before it looks for Connection.Close, so
      RabbitMQ's 530 NOT_ALLOWED for a missing vhost would surface as an InvalidFrameError
      without code or text. ``_rpc`` looks first.
    * connection.blocked / connection.unblocked are passed on to ``blocked_listeners``
      (aiormq only logs them).
    * :meth:`abort` closes the socket without the closing handshake, for a broker that no
      longer answers.
    """

    def __init__(self, url: str, *, client_properties: wire.FieldTable) -> None:
        super().__init__(url, client_properties=client_properties)
        self._recorder = _RecordingTransport(self._transport_factory)
        self._transport_factory = self._recorder
        self.blocked_listeners: list[BlockedListener] = []

    def abort(self) -> None:
        """Drop the TCP connection at once; aiormq then closes as on a lost connection."""
        writer = self._recorder.writer
        if writer is not None:
            writer.transport.abort()

    def _tell_blocked(self, reason: str | None) -> None:
        for listener in list(self.blocked_listeners):
            with suppress(Exception):
                listener(reason)

    # aiormq dispatches these two frames to name-mangled private methods of its Connection;
    # these names override them.
    async def _Connection__handle_connection_blocked(self, frame: spec.Connection.Blocked) -> None:
        await getattr(super(), "_Connection__handle_connection_blocked")(frame)  # noqa: B009
        self._tell_blocked(frame.reason or "blocked")

    async def _Connection__handle_connection_unblocked(
        self, frame: spec.Connection.Unblocked
    ) -> None:
        await getattr(super(), "_Connection__handle_connection_unblocked")(frame)  # noqa: B009
        self._tell_blocked(None)

    @staticmethod
    async def _rpc(
        request: Frame,
        writer: asyncio.StreamWriter,
        frame_receiver: FrameReceiver,
        wait_response: bool = True,
    ) -> pamqp.frame.FrameTypes | None:
        writer.write(pamqp.frame.marshal(request, 0))
        await writer.drain()
        if not wait_response:
            return None
        _, _, frame = await frame_receiver.get_frame()
        if isinstance(frame, spec.Connection.Close):
            if frame.reply_code == 403:
                raise amqp_exc.ProbableAuthenticationError(frame.reply_text)
            raise amqp_exc.ConnectionClosed(frame.reply_code, frame.reply_text)
        if request.synchronous and frame.name not in request.valid_responses:
            raise amqp_exc.InvalidFrameError(
                f"Expected one of {request.valid_responses!r}, got {frame!r}"
            )
        return frame


class _RecordingTransport(TransportFactory):
    """Opens the socket as aiormq would, and keeps its writer (for :meth:`_Connection.abort`)."""

    def __init__(self, inner: TransportFactory) -> None:
        self._inner = inner
        self.writer: asyncio.StreamWriter | None = None

    async def create(
        self, url: URL, **kwargs: Any
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        reader, writer = await self._inner.create(url, **kwargs)
        self.writer = writer
        return reader, writer


async def _abandon(connection: aiormq.Connection) -> None:
    """Release what a failed or cancelled connect left behind."""
    if connection.is_closed:
        return
    with suppress(Exception):
        await connection.close(amqp_exc.AMQPConnectionError("connect abandoned"))


def _cancelling() -> bool:
    """The running task is being cancelled (``task.cancel()`` was called on it)."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


def _close_cause(resource: aiormq.Connection | aiormq.Channel) -> BaseException | None:
    """The exception a closed connection or channel was closed with, if any."""
    if not resource.is_closed:
        return None
    closing = resource.closing  # the closing future itself once it is done
    if closing.cancelled():
        return None
    return closing.exception()


def _delivery(message: DeliveredMessage) -> Delivery:
    frame = cast(spec.Basic.Deliver, message.delivery)
    return Delivery(
        body=message.body,
        properties=values.properties_from_header(message.header, frame),
        exchange=frame.exchange,
        routing_key=cast(str, frame.routing_key),
        redelivered=frame.redelivered,
        delivery_tag=cast(int, frame.delivery_tag),
        consumer_tag=frame.consumer_tag,
    )


if TYPE_CHECKING:

    def _implements_the_port(connection: AmqpConnection, channel: AmqpChannel) -> Any:
        port: tuple[Connection, Channel] = (connection, channel)
        return port
