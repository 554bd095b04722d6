"""rr's own AMQP 0-9-1 client: the transport port over one ``asyncio.Protocol``.

rr's default adapter of the port (aiormq's, ``transport/amqp.py``, is the other), for speed:
a delivery goes from the socket to its consumer's callback in one pass over the bytes read
(``transport/frames.py`` splits them; ``basic.deliver`` is read without a general codec),
and acks, rejects and nacks are written as they are decided, with no queue or task between.
Every other frame is encoded and decoded by pamqp through rr's codec (``transport/codec.py``),
so tables, lenient decoding of malformed messages and raw properties are the same as with
aiormq. ``RR_AMQP_CLIENT=aiormq`` chooses aiormq's instead (``transport/clients.py``;
docs/runtime.md, "Running it" and "Speed").

Same URLs (``transport/url.py``; TLS, ``auth=external``, ``heartbeat``, ``name``), same
errors (``transport/errors.py``, ``transport/reply_codes.py``), same rules as the port
(``transport/base.py``). Differences from the aiormq adapter, none visible to the port:

* A ``basic.return`` is matched to the oldest unconfirmed ``mandatory`` publish with its
  exchange, routing key and message id, or without an id its body (RabbitMQ sends the return
  before the confirm of the same message; ``transport/message_ids.py``). A message published
  without a ``message_id`` goes without one, with either adapter.
* A consumer callback's exception is logged (``rr.transport``); the delivery stays
  unacknowledged, and the callbacks still running when their channel closes are cancelled,
  as with aiormq.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import importlib.metadata
import logging
import platform
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import unquote, urlsplit

import pamqp.frame
from pamqp import commands as spec
from pamqp.base import Frame as PamqpFrame
from pamqp.header import ContentHeader

from rabbitctl_retry.errors import (
    AccessRefused,
    BrokerRefused,
    BrokerUnreachable,
    ChannelClosed,
    DataError,
    PublishFailed,
    RrError,
    TransportError,
    UsageError,
    censor_url,
)
from rabbitctl_retry.fields import FieldValue
from rabbitctl_retry.server import ServerIdentity, ServerVersion
from rabbitctl_retry.transport import codec, values
from rabbitctl_retry.transport.base import (
    BlockedListener,
    CancelCallback,
    Delivery,
    DeliveryCallback,
    Properties,
    QueueInfo,
)
from rabbitctl_retry.transport.content_header import read_content_header
from rabbitctl_retry.transport.errors import (
    connection_close_error,
    network_error,
    returned_error,
)
from rabbitctl_retry.transport.frames import (
    BODY,
    CONTENT_HEADER,
    FRAME_OVERHEAD_BYTES,
    HEARTBEAT_FRAME,
    METHOD,
    PROTOCOL_HEADER,
    Frame,
    FrameError,
    FrameSplitter,
    ack_frame,
    frame_bytes,
    is_deliver,
    nack_frame,
    read_confirm,
    read_deliver,
    reject_frame,
)
from rabbitctl_retry.transport.message_ids import MessageIdGuard, return_key
from rabbitctl_retry.transport.reply_codes import describe_reply, error_class_for
from rabbitctl_retry.transport.server_info import (
    HEARTBEAT_LOST,
    TLS_NOT_VERIFIED,
    identity_of_properties,
    without_password,
)
from rabbitctl_retry.transport.tls_files import check_tls_files
from rabbitctl_retry.transport.url import BrokerUrl, parse_broker_url

if TYPE_CHECKING:
    from rabbitctl_retry.transport.base import Channel, Connection

__all__ = ["NativeChannel", "NativeConnection", "connect"]

log = logging.getLogger("rr.transport")

FRAME_MAX_BYTES = 131_072
"""The frame size rr asks for (RabbitMQ's default); the server's own limit wins if smaller."""
CHANNEL_MAX = 2047
"""Channels rr asks for at most (RabbitMQ's default)."""
CLOSE_TIMEOUT_S = 5.0
"""How long a channel's or the connection's close waits for the broker's answer."""
READ_PAUSE_DELIVERIES = 256
"""Deliveries one read of the socket handed to callbacks at which rr reads no more until the
event loop has started every one of them. uvloop reads up to 32 times in a row before it
runs a task: a consumer without a prefetch limit (a read of a whole queue, ``ops/dlq.py``)
would otherwise pile up the queue in memory, one task per message."""
MISSED_HEARTBEATS = 3
"""Heartbeat timeouts without a frame from the broker before the connection is taken for dead."""

_CONTENT_METHODS = (spec.Basic.GetOk, spec.Basic.Return)
"""The methods other than basic.deliver that a message's header and body follow."""
_FAILED = "the connection to the broker failed"
_TRANSIENT = Properties(delivery_mode=1)
"""What a publish without properties sends, as aiormq does."""


class _Closed(Exception):
    """Internal: the channel or connection closed under an operation."""


async def connect(url: str, *, timeout_s: float = 5.0, client_name: str = "rr") -> NativeConnection:
    """Open a connection to ``url``, handshake included, within ``timeout_s``: the same
    errors as ``transport/amqp.py``'s ``connect`` (no message holds the password)."""
    target = parse_broker_url(url)
    shown = target.shown
    if timeout_s <= 0:
        raise UsageError(f"timeout_s must be positive, not {timeout_s!r}")
    if target.tls:
        check_tls_files(target.options, shown)
    if not target.verify_tls:
        log.warning(TLS_NOT_VERIFIED, extra={"rr": {"url": shown}})
    login = _Login.of(target, client_name)
    loop = asyncio.get_running_loop()
    protocol = _Protocol(loop, shown)
    try:
        async with asyncio.timeout(timeout_s):
            tls = _tls_context(login.options) if target.tls else None
            await loop.create_connection(
                lambda: protocol,
                target.host,
                target.port,
                ssl=tls,
                server_hostname=target.host if tls is not None else None,
            )
            await protocol.handshake(login)
    except asyncio.CancelledError:
        protocol.abort()
        raise
    except TimeoutError as exc:
        protocol.abort()
        raise BrokerUnreachable(
            f"no answer from {shown} within {timeout_s:g} s "
            "(wrong host or port, a firewall, or amqp:// to a TLS port?)"
        ) from exc
    except RrError as refused:
        protocol.abort()
        raise without_password(refused) from None
    except Exception as exc:
        protocol.abort()
        raise without_password(network_error(exc, url=shown)) from exc
    return NativeConnection(protocol, shown)


@dataclass(frozen=True, slots=True)
class _Login:
    user: str
    password: str
    vhost: str
    external: bool
    heartbeat_s: int
    options: Mapping[str, str]
    client_properties: dict[str, Any]

    @staticmethod
    def of(target: BrokerUrl, client_name: str) -> _Login:
        parts = urlsplit(target.url)
        options = target.options
        path = parts.path[1:] if parts.path.startswith("/") else parts.path
        name = options.get("name") or client_name
        return _Login(
            user=unquote(parts.username) if parts.username is not None else "guest",
            password=unquote(parts.password) if parts.password is not None else "guest",
            vhost=unquote(path) if path else "/",
            external=options.get("auth", "plain").lower() == "external",
            heartbeat_s=target.heartbeat_s,
            options=options,
            client_properties={
                "product": "rr",
                "version": _rr_version(),
                "platform": f"Python {platform.python_version()}",
                "connection_name": name,
                "capabilities": {
                    "authentication_failure_close": True,
                    "basic.nack": True,
                    "connection.blocked": True,
                    "consumer_cancel_notify": True,
                    "publisher_confirms": True,
                },
            },
        )


def _rr_version() -> str:
    try:
        return importlib.metadata.version("rabbitctl-retry")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _tls_context(options: Mapping[str, str]) -> ssl.SSLContext:
    """The TLS context of an ``amqps://`` URL's options (docs/cli.md, "Connecting")."""
    cadata = options.get("cadata")
    try:
        ca_bytes = base64.b64decode(cadata) if cadata else None
    except binascii.Error:
        raise UsageError("broker URL cannot be read: cadata is not base64 (docs/cli.md)") from None
    ca: str | bytes | None = ca_bytes
    if ca_bytes is not None and ca_bytes.lstrip().startswith(b"-----"):
        ca = ca_bytes.decode("ascii", "replace")  # PEM text; DER stays bytes
    context = ssl.create_default_context(
        ssl.Purpose.SERVER_AUTH,
        cafile=options.get("cafile"),
        capath=options.get("capath"),
        cadata=ca,
    )
    if options.get("certfile"):
        context.load_cert_chain(options["certfile"], options.get("keyfile"))
    if "no_verify_ssl" in options:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


class _Protocol(asyncio.Protocol):
    """The socket's side of one connection: frames in, routed to channel 0 or a channel."""

    def __init__(self, loop: asyncio.AbstractEventLoop, shown: str) -> None:
        self.loop = loop
        self.shown = shown
        self.transport: asyncio.Transport | None = None
        self.splitter = FrameSplitter()
        self.channels: dict[int, NativeChannel] = {}
        self.frame_max = FRAME_MAX_BYTES
        self.channel_max = CHANNEL_MAX
        self.heartbeat_s = 0
        self.server_properties: dict[str, Any] = {}
        self.opened = False
        self.closed = loop.create_future()
        """Done once the connection is closed (by rr, the broker or the network)."""
        self.close_error: RrError | None = None
        """Why the broker or the network closed it (``None``: open, or closed by rr)."""
        self.close_reason: str | None = None
        """What the port's ``close_reason`` says: the broker's reply text when it closed the
        connection (as aiormq's adapter gives it), else the error's message."""
        self.by_client = False
        self._handshake: asyncio.Queue[object] = asyncio.Queue()
        self._close_ok: asyncio.Future[None] | None = None
        self._writable = asyncio.Event()
        self._writable.set()
        self._last_read_s = loop.time()
        self._heartbeat_task: asyncio.Task[None] | None = None
        self.blocked_listeners: list[BlockedListener] = []
        self.deliveries = 0
        """Deliveries handed to consumer callbacks so far."""
        self._unsent: list[bytes] = []
        """Frames written during this turn of the event loop (:meth:`write`)."""
        self._reading_paused = False

    # -- asyncio.Protocol ---------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's TCP transport is not an asyncio.Transport subclass, and has its methods
        self.transport = cast(asyncio.Transport, transport)
        self.transport.write(PROTOCOL_HEADER)

    def data_received(self, data: bytes) -> None:
        self._last_read_s = self.loop.time()
        try:
            frames = self.splitter.feed(data)
        except FrameError as error:
            self.lost(BrokerUnreachable(f"{_FAILED}: {error}"))
            return
        channels = self.channels
        before = self.deliveries
        for frame in frames:
            number = frame.channel
            try:
                if number == 0:
                    self._on_connection_frame(frame)
                else:
                    channel = channels.get(number)
                    if channel is not None:
                        channel.on_frame(frame)
            except Exception as error:  # a frame rr cannot read: the stream is not trusted
                log.exception("cannot read a frame from the broker; the connection is closed")
                self.lost(BrokerUnreachable(f"{_FAILED}: cannot read a frame: {error}"))
                return
            if self.closed.done():
                return
        if self.deliveries - before >= READ_PAUSE_DELIVERIES:
            self._pause_reading()

    def connection_lost(self, exc: Exception | None) -> None:
        # The words of the aiormq adapter's (transport/errors.py): a close without a word
        # reads as an end of stream, and during the handshake names the broker.
        cause = exc if exc is not None else asyncio.IncompleteReadError(b"", None)
        self._finish(network_error(cause, url=None if self.opened else self.shown), abort=True)

    def pause_writing(self) -> None:
        self._writable.clear()

    def resume_writing(self) -> None:
        self._writable.set()

    # -- one read at a time -------------------------------------------------------------------

    def _pause_reading(self) -> None:
        """Read no more until the callbacks of this read have started: their tasks' first
        steps are scheduled already, and run before :meth:`_resume_reading`."""
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        self._reading_paused = True
        transport.pause_reading()
        self.loop.call_soon(self._resume_reading)

    def _resume_reading(self) -> None:
        self._reading_paused = False
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        self._last_read_s = self.loop.time()  # heartbeats may have waited in the socket
        transport.resume_reading()

    # -- writing ------------------------------------------------------------------------------

    def write(self, data: bytes) -> None:
        """Queue ``data`` behind what was written before; everything written during one turn
        of the event loop goes to the socket together, in order, at the end of the turn (one
        system call for a window's acks or copies instead of one each)."""
        if self.transport is None or self.closed.done():
            raise _Closed
        unsent = self._unsent
        unsent.append(data)
        if len(unsent) == 1:
            self.loop.call_soon(self._flush)

    def _flush(self) -> None:
        unsent = self._unsent
        if not unsent:
            return
        data = unsent[0] if len(unsent) == 1 else b"".join(unsent)
        unsent.clear()
        transport = self.transport
        if transport is not None and not transport.is_closing():
            transport.write(data)

    def send(self, channel: int, frame: PamqpFrame | ContentHeader) -> None:
        self.write(pamqp.frame.marshal(frame, channel))

    async def drain(self) -> None:
        if not self._writable.is_set():
            await self._writable.wait()

    # -- the handshake ------------------------------------------------------------------------

    async def handshake(self, login: _Login) -> None:
        start = await self._expect(spec.Connection.Start)
        offered = start.mechanisms
        if isinstance(offered, bytes | bytearray):
            offered = offered.decode("utf-8", "replace")
        mechanisms = str(offered).split()
        mechanism = "EXTERNAL" if login.external else "PLAIN"
        if mechanism not in mechanisms:
            raise AccessRefused(
                f"{self.shown} offers no authentication mechanism rr can use: it offers "
                f"{' '.join(mechanisms)}, rr logs in with {mechanism}"
            )
        self.server_properties = dict(start.server_properties or {})
        response = "" if login.external else f"\0{login.user}\0{login.password}"
        self.send(
            0,
            spec.Connection.StartOk(
                client_properties=login.client_properties,
                mechanism=mechanism,
                response=response,
                locale="en_US",
            ),
        )
        tune = await self._expect(spec.Connection.Tune)
        self.frame_max = min(tune.frame_max or FRAME_MAX_BYTES, FRAME_MAX_BYTES)
        self.channel_max = min(tune.channel_max or CHANNEL_MAX, CHANNEL_MAX)
        wanted_s = login.heartbeat_s
        self.heartbeat_s = 0 if wanted_s == 0 else min(tune.heartbeat or wanted_s, wanted_s)
        self.send(
            0,
            spec.Connection.TuneOk(
                channel_max=self.channel_max, frame_max=self.frame_max, heartbeat=self.heartbeat_s
            ),
        )
        self.splitter.limit(self.frame_max)
        self.send(0, spec.Connection.Open(virtual_host=login.vhost))
        await self._expect(spec.Connection.OpenOk)
        self.opened = True
        if self.heartbeat_s:
            self._heartbeat_task = self.loop.create_task(self._heartbeat())

    async def _expect(self, kind: type[Any]) -> Any:
        while True:
            get = asyncio.ensure_future(self._handshake.get())
            await asyncio.wait({get, self.closed}, return_when=asyncio.FIRST_COMPLETED)
            if not get.done():
                get.cancel()
                raise self.close_error or BrokerUnreachable("the connection closed")
            frame = get.result()
            if isinstance(frame, spec.Connection.Close):
                raise self._handshake_refusal(frame)
            if isinstance(frame, kind):
                return frame
            raise BrokerUnreachable(
                f"{self.shown} does not speak AMQP 0-9-1 as expected: "
                f"{frame!r} during the handshake"
            )

    def _handshake_refusal(self, frame: spec.Connection.Close) -> RrError:
        text = frame.reply_text or ""
        if frame.reply_code == 403:
            return AccessRefused(
                f"{self.shown} refused the login (wrong user name or password?): {text}"
            )
        return connection_close_error(frame.reply_code, text, where=self.shown)

    # -- channel 0 ----------------------------------------------------------------------------

    def _on_connection_frame(self, frame: Frame) -> None:
        if frame.kind != METHOD:
            return  # heartbeats: _last_read_s says it is alive
        method = _decode(frame)
        if not self.opened:
            self._handshake.put_nowait(method)
            return
        if isinstance(method, spec.Connection.Close):
            with contextlib.suppress(_Closed):
                self.send(0, spec.Connection.CloseOk())
            text = method.reply_text or ""
            self._finish(connection_close_error(method.reply_code, text), reason=text)
        elif isinstance(method, spec.Connection.CloseOk):
            if self._close_ok is not None and not self._close_ok.done():
                self._close_ok.set_result(None)
        elif isinstance(method, spec.Connection.Blocked):
            self._tell_blocked(method.reason or "blocked")
        elif isinstance(method, spec.Connection.Unblocked):
            self._tell_blocked(None)

    def _tell_blocked(self, reason: str | None) -> None:
        for listener in list(self.blocked_listeners):
            try:
                listener(reason)
            except Exception:
                log.exception("a blocked listener failed")

    async def _heartbeat(self) -> None:
        interval_s = max(1.0, self.heartbeat_s / 2)
        dead_after_s = self.heartbeat_s * MISSED_HEARTBEATS
        while not self.closed.done():
            await asyncio.sleep(interval_s)
            if self.closed.done():
                return
            if not self._reading_paused and self.loop.time() - self._last_read_s > dead_after_s:
                self.lost(BrokerUnreachable(HEARTBEAT_LOST.format(seconds=self.heartbeat_s)))
                return
            with contextlib.suppress(_Closed):
                self.write(HEARTBEAT_FRAME)

    # -- closing ------------------------------------------------------------------------------

    async def close(self, timeout_s: float) -> None:
        if self.closed.done():
            return
        self.by_client = True
        self._close_ok = self.loop.create_future()
        try:
            self.send(
                0,
                spec.Connection.Close(
                    reply_code=200, reply_text="closed by the client", class_id=0, method_id=0
                ),
            )
            async with asyncio.timeout(timeout_s):
                await asyncio.wait(
                    {self._close_ok, self.closed}, return_when=asyncio.FIRST_COMPLETED
                )
        except (_Closed, TimeoutError):
            pass
        self._finish(None)

    def lost(self, error: RrError) -> None:
        """The connection is unusable: close the socket at once, with ``error`` as the reason."""
        self._finish(error, abort=True)

    def abort(self) -> None:
        self._finish(None, abort=True)

    def _finish(
        self, error: RrError | None, *, abort: bool = False, reason: str | None = None
    ) -> None:
        if self.closed.done():
            return
        if not self.by_client:
            self.close_error = error
            if reason is None and error is not None:
                reason = error.message
            self.close_reason = reason
        self.closed.set_result(None)
        if self.transport is not None:
            if abort:
                self._unsent.clear()
                self.transport.abort()
            else:
                self._flush()
                self.transport.close()  # what is written (a close-ok) goes out first
        if self._heartbeat_task is not None:
            self._heartbeat_task.cancel()
        cause = None if self.by_client else error
        for channel in list(self.channels.values()):
            channel.connection_gone(cause)
        self.channels.clear()
        self._writable.set()

    # -- channels -----------------------------------------------------------------------------

    def free_number(self) -> int:
        for number in range(1, self.channel_max + 1):
            if number not in self.channels:
                return number
        raise TransportError(f"open a channel: all {self.channel_max} channels are in use")


def _decode(frame: Frame) -> Any:
    """pamqp's frame for a method or content header, through rr's lenient codec."""
    return codec.unmarshal_frame(frame_bytes(frame.kind, frame.channel, frame.payload))[2]


class NativeConnection:
    """One AMQP connection (implements the port's ``Connection``)."""

    __slots__ = ("_identity", "_protocol", "_url")

    def __init__(self, protocol: _Protocol, url: str) -> None:
        self._protocol = protocol
        self._url = censor_url(url)
        self._identity = identity_of_properties(protocol.server_properties)

    @property
    def url(self) -> str:
        return self._url

    @property
    def server_version(self) -> ServerVersion:
        return self._identity.version

    @property
    def server_identity(self) -> ServerIdentity:
        return self._identity

    @property
    def is_closed(self) -> bool:
        return self._protocol.closed.done()

    @property
    def close_reason(self) -> str | None:
        return self._protocol.close_reason

    @property
    def frame_max(self) -> int:
        return self._protocol.frame_max

    async def channel(self, *, confirms: bool = False) -> NativeChannel:
        what = "open a channel"
        protocol = self._protocol
        if protocol.closed.done():
            raise _closed_error(what, protocol.close_error, resource="connection")
        channel = NativeChannel(protocol, protocol.free_number(), confirms=confirms)
        protocol.channels[channel.number] = channel
        try:
            await channel.rpc(spec.Channel.Open(), (spec.Channel.OpenOk,), what)
            if confirms:
                await channel.rpc(spec.Confirm.Select(), (spec.Confirm.SelectOk,), what)
        except BaseException:
            channel.connection_gone(None)
            protocol.channels.pop(channel.number, None)
            raise
        return channel

    def on_blocked(self, listener: BlockedListener) -> None:
        self._protocol.blocked_listeners.append(listener)

    async def wait_closed(self) -> None:
        closed = self._protocol.closed
        if not closed.done():
            await asyncio.wait([closed])

    async def close(self, *, timeout_s: float = CLOSE_TIMEOUT_S) -> None:
        """Close the connection and its channels; idempotent, never raises, bounded."""
        await self._protocol.close(timeout_s)

    def __repr__(self) -> str:
        state = "closed" if self.is_closed else "open"
        return f"<NativeConnection {self._url} {state}>"


@dataclass(slots=True)
class _Content:
    """A message whose method frame came and whose header or body is still coming."""

    method: Any
    properties: Properties | None = None
    parts: list[bytes] | None = None
    left: int = 0


@dataclass(slots=True)
class _Publish:
    future: asyncio.Future[None]
    what: str
    message_id: str | None
    exchange: str
    routing_key: str
    mandatory: bool
    body: bytes | None
    """Without a message id, what a return is matched by (``transport/message_ids.py``)."""
    returned: spec.Basic.Return | None = None


class NativeChannel:
    """One AMQP channel (implements the port's ``Channel``)."""

    __slots__ = (
        "_cancel_callbacks",
        "_close_error",
        "_closed",
        "_confirms",
        "_consumers",
        "_content",
        "_lock",
        "_message_ids",
        "_pending_consumer",
        "_protocol",
        "_publish_tag",
        "_publishes",
        "_rpc",
        "_tasks",
        "number",
    )

    def __init__(self, protocol: _Protocol, number: int, *, confirms: bool) -> None:
        self._protocol = protocol
        self.number = number
        self._confirms = confirms
        self._lock = asyncio.Lock()
        self._rpc: tuple[tuple[type[Any], ...], asyncio.Future[Any]] | None = None
        self._closed = protocol.loop.create_future()
        self._close_error: RrError | None = None
        """Why the broker or the connection closed it (``None``: open, or closed by rr)."""
        self._consumers: dict[str, DeliveryCallback] = {}
        self._cancel_callbacks: dict[str, CancelCallback] = {}
        self._pending_consumer: DeliveryCallback | None = None
        self._content: _Content | None = None
        self._tasks: set[asyncio.Future[None]] = set()
        self._publish_tag = 0
        self._publishes: dict[int, _Publish] = {}
        self._message_ids = MessageIdGuard()

    # -- the port -----------------------------------------------------------------------------

    @property
    def is_closed(self) -> bool:
        return self._closed.done()

    @property
    def close_reason(self) -> str | None:
        if not self._closed.done():
            return None
        return "closed" if self._close_error is None else self._close_error.message

    @property
    def confirms(self) -> bool:
        return self._confirms

    async def wait_closed(self) -> None:
        if not self._closed.done():
            await asyncio.wait([self._closed])

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
        what = f"declare queue {name!r}"
        ok = await self._ask(
            what,
            (spec.Queue.DeclareOk,),
            spec.Queue.Declare,
            queue=name,
            passive=passive,
            durable=durable,
            exclusive=exclusive,
            auto_delete=auto_delete,
            arguments=values.wire_arguments(arguments),
        )
        return QueueInfo(
            name=ok.queue or name,
            message_count=ok.message_count or 0,
            consumer_count=ok.consumer_count or 0,
        )

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
        what = f"declare exchange {name!r}"
        await self._ask(
            what,
            (spec.Exchange.DeclareOk,),
            spec.Exchange.Declare,
            exchange=name,
            exchange_type=type,
            passive=passive,
            durable=durable,
            auto_delete=auto_delete,
            internal=internal,
            arguments=values.wire_arguments(arguments),
        )

    async def queue_bind(
        self,
        queue: str,
        exchange: str,
        routing_key: str = "",
        arguments: Mapping[str, FieldValue] | None = None,
    ) -> None:
        what = f"bind queue {queue!r} to exchange {exchange!r} ({routing_key!r})"
        await self._ask(
            what,
            (spec.Queue.BindOk,),
            spec.Queue.Bind,
            queue=queue,
            exchange=exchange,
            routing_key=routing_key,
            arguments=values.wire_arguments(arguments),
        )

    async def queue_unbind(
        self,
        queue: str,
        exchange: str,
        routing_key: str = "",
        arguments: Mapping[str, FieldValue] | None = None,
    ) -> None:
        what = f"unbind queue {queue!r} from exchange {exchange!r} ({routing_key!r})"
        await self._ask(
            what,
            (spec.Queue.UnbindOk,),
            spec.Queue.Unbind,
            queue=queue,
            exchange=exchange,
            routing_key=routing_key,
            arguments=values.wire_arguments(arguments),
        )

    async def queue_purge(self, name: str) -> int:
        what = f"purge queue {name!r}"
        ok = await self._ask(what, (spec.Queue.PurgeOk,), spec.Queue.Purge, queue=name)
        return int(ok.message_count or 0)

    async def queue_delete(
        self, name: str, *, if_unused: bool = False, if_empty: bool = False
    ) -> int:
        what = f"delete queue {name!r}"
        ok = await self._ask(
            what,
            (spec.Queue.DeleteOk,),
            spec.Queue.Delete,
            queue=name,
            if_unused=if_unused,
            if_empty=if_empty,
        )
        return int(ok.message_count or 0)

    async def exchange_delete(self, name: str, *, if_unused: bool = False) -> None:
        what = f"delete exchange {name!r}"
        await self._ask(
            what,
            (spec.Exchange.DeleteOk,),
            spec.Exchange.Delete,
            exchange=name,
            if_unused=if_unused,
        )

    async def publish(
        self,
        body: bytes,
        *,
        exchange: str = "",
        routing_key: str = "",
        properties: Properties | None = None,
        mandatory: bool = False,
    ) -> None:
        """Publish; on a confirm channel return once the broker confirmed (or raise), else
        once the frames are handed to the socket (waiting while its buffer is full)."""
        where = f"exchange {exchange!r}" if exchange else "the default exchange"
        what = f"publish to {where} with routing key {routing_key!r}"
        if properties is None:
            properties = _TRANSIENT
        data = self._publish_bytes(what, body, exchange, routing_key, properties, mandatory)
        if not self._confirms:
            self._write(what, data)
            await self._protocol.drain()
            return
        message_id = properties.message_id
        # one publish a return could be matched to in flight at once (transport/message_ids.py)
        key = (
            return_key(message_id, exchange, routing_key, body)
            if mandatory or message_id is not None
            else None
        )
        if key is not None and not self._message_ids.try_acquire(key):
            await self._message_ids.acquire(key)
        try:
            self._write(what, data)
            self._publish_tag += 1
            future = self._protocol.loop.create_future()
            self._publishes[self._publish_tag] = _Publish(
                future,
                what,
                message_id,
                exchange,
                routing_key,
                mandatory,
                body if message_id is None else None,
            )
            await future
        finally:
            if key is not None:
                self._message_ids.release(key)

    async def get(self, queue: str, *, no_ack: bool = False) -> Delivery | None:
        what = f"get from queue {queue!r}"
        answer = await self._ask(
            what,
            (spec.Basic.GetOk, spec.Basic.GetEmpty),
            spec.Basic.Get,
            queue=queue,
            no_ack=no_ack,
        )
        return answer if isinstance(answer, Delivery) else None

    async def qos(self, prefetch_count: int) -> None:
        what = f"set prefetch to {prefetch_count}"
        await self._ask(what, (spec.Basic.QosOk,), spec.Basic.Qos, prefetch_count=prefetch_count)

    async def consume(
        self,
        queue: str,
        callback: DeliveryCallback,
        *,
        no_ack: bool = False,
        exclusive: bool = False,
        consumer_tag: str | None = None,
        on_cancel: CancelCallback | None = None,
    ) -> str:
        """Start a consumer; ``callback`` runs in a task per delivery, in delivery order."""
        what = f"consume from queue {queue!r}"
        request = _method(
            what,
            spec.Basic.Consume,
            queue=queue,
            consumer_tag=consumer_tag or "",
            no_ack=no_ack,
            exclusive=exclusive,
        )
        async with self._lock:
            self._pending_consumer = callback  # registered as ConsumeOk is read
            try:
                ok = await self._call(request, (spec.Basic.ConsumeOk,), what)
            finally:
                self._pending_consumer = None
        tag = str(ok.consumer_tag or "")
        if on_cancel is not None:
            self._cancel_callbacks[tag] = on_cancel
        return tag

    async def cancel(self, consumer_tag: str) -> None:
        self._cancel_callbacks.pop(consumer_tag, None)
        what = f"cancel consumer {consumer_tag!r}"
        await self._ask(what, (spec.Basic.CancelOk,), spec.Basic.Cancel, consumer_tag=consumer_tag)
        self._consumers.pop(consumer_tag, None)

    async def ack(self, delivery_tag: int, *, multiple: bool = False) -> None:
        self._write(
            f"ack delivery {delivery_tag}", ack_frame(self.number, delivery_tag, multiple=multiple)
        )

    async def reject(self, delivery_tag: int, *, requeue: bool) -> None:
        self._write(
            f"reject delivery {delivery_tag}",
            reject_frame(self.number, delivery_tag, requeue=requeue),
        )

    async def nack(
        self, delivery_tag: int, *, multiple: bool = False, requeue: bool = True
    ) -> None:
        self._write(
            f"nack delivery {delivery_tag}",
            nack_frame(self.number, delivery_tag, multiple=multiple, requeue=requeue),
        )

    async def close(self) -> None:
        """Close the channel; idempotent, never raises. Unacked deliveries go back."""
        if self._closed.done():
            return
        with contextlib.suppress(Exception):
            async with asyncio.timeout(CLOSE_TIMEOUT_S):
                await self.rpc(
                    spec.Channel.Close(
                        reply_code=200, reply_text="closed by the client", class_id=0, method_id=0
                    ),
                    (spec.Channel.CloseOk,),
                    "close the channel",
                )
        self._gone(None)

    # -- requests -----------------------------------------------------------------------------

    async def _ask(
        self, what: str, answers: tuple[type[Any], ...], kind: type[Any], **fields: Any
    ) -> Any:
        """Send the method ``kind`` with ``fields`` and return its answer (one of ``answers``)."""
        return await self.rpc(_method(what, kind, **fields), answers, what)

    async def rpc(self, request: PamqpFrame, answers: tuple[type[Any], ...], what: str) -> Any:
        """Send a synchronous method and return its answer (one at a time per channel)."""
        async with self._lock:
            return await self._call(request, answers, what)

    async def _call(self, request: PamqpFrame, answers: tuple[type[Any], ...], what: str) -> Any:
        if self._closed.done():
            raise _closed_error(what, self._close_error)
        try:  # pamqp checks some lengths only as it writes (a queue name of 256 bytes)
            data = pamqp.frame.marshal(request, self.number)
        except (TypeError, ValueError, OverflowError) as error:
            raise DataError(f"{what}: cannot encode: {error}") from error
        future: asyncio.Future[Any] = self._protocol.loop.create_future()
        self._rpc = (answers, future)
        try:
            self._protocol.write(data)
            return await future
        except _Closed:
            raise self._failed(what) from None
        finally:
            self._rpc = None

    def _failed(self, what: str) -> TransportError:
        """The error of ``what``, in flight when the channel closed."""
        error = self._close_error
        if isinstance(error, TransportError):
            return type(error)(f"{what}: {error.message}")
        return _closed_error(what, error)

    def _write(self, what: str, data: bytes) -> None:
        if self._closed.done():
            raise _closed_error(what, self._close_error)
        try:
            self._protocol.write(data)
        except _Closed:
            raise _closed_error(what, self._protocol.close_error) from None

    def _publish_bytes(
        self,
        what: str,
        body: bytes,
        exchange: str,
        routing_key: str,
        properties: Properties | None,
        mandatory: bool,
    ) -> bytes:
        number = self.number
        if len(routing_key) > 255:  # aiormq's check and words (the contract suite's)
            raise DataError(f"{what}: cannot encode: Routing key too long (max 255 bytes)")
        try:
            method = spec.Basic.Publish(
                exchange=exchange, routing_key=routing_key, mandatory=mandatory
            )
            header = ContentHeader(
                0,
                len(body),
                spec.Basic.Properties()
                if properties is None
                else values.basic_properties(properties),
            )
            parts = [pamqp.frame.marshal(method, number), pamqp.frame.marshal(header, number)]
        except RrError:
            raise
        except (TypeError, ValueError, OverflowError) as error:
            raise DataError(f"{what}: cannot encode: {error}") from error
        step = self._protocol.frame_max - FRAME_OVERHEAD_BYTES
        for start in range(0, len(body), step):
            parts.append(frame_bytes(BODY, number, body[start : start + step]))
        return b"".join(parts)

    # -- frames in ----------------------------------------------------------------------------

    def on_frame(self, frame: Frame) -> None:
        kind = frame.kind
        if kind == METHOD:
            payload = frame.payload
            if is_deliver(payload):
                deliver = read_deliver(payload)
                self._content = _Content(deliver if deliver is not None else _decode(frame))
                return
            confirm = read_confirm(payload)
            if confirm is not None:
                self._confirmed(confirm.nack, confirm.delivery_tag, confirm.multiple)
                return
            self._on_method(_decode(frame))
        elif kind == CONTENT_HEADER:
            self._on_header(frame)
        elif kind == BODY:
            content = self._content
            if content is None or content.parts is None:
                raise FrameError("a body frame without its content header")
            content.parts.append(frame.payload)
            content.left -= len(frame.payload)
            if content.left <= 0:
                self._content = None
                parts = content.parts
                self._on_message(content, parts[0] if len(parts) == 1 else b"".join(parts))

    def _on_header(self, frame: Frame) -> None:
        content = self._content
        if content is None or content.properties is not None:
            raise FrameError("a content header without its method")
        method = content.method
        lenient = codec.undecodable_fields(method)
        read = None if lenient else read_content_header(frame.payload)
        if read is None:  # the general, lenient codec (transport/content_header.py)
            header = _decode(frame)
            if lenient and not isinstance(header, codec.LenientContentHeader):
                header = codec.with_raw(header, frame.payload[12:])
            read = header.body_size, values.properties_from_header(header, method)
        body_size, content.properties = read
        if body_size:
            content.parts, content.left = [], body_size
        else:
            self._content = None
            self._on_message(content, b"")

    def _on_message(self, content: _Content, body: bytes) -> None:
        method = content.method
        properties = content.properties
        assert properties is not None
        if isinstance(method, spec.Basic.Return):
            self._on_return(method, properties, body)
            return
        delivery = Delivery(
            body=body,
            properties=properties,
            exchange=method.exchange or "",
            routing_key=method.routing_key or "",
            redelivered=bool(method.redelivered),
            delivery_tag=int(method.delivery_tag or 0),
            consumer_tag=getattr(method, "consumer_tag", None),
            message_count=getattr(method, "message_count", None),
        )
        if isinstance(method, spec.Basic.GetOk):
            self._answer(method, delivery)
            return
        callback = self._consumers.get(delivery.consumer_tag or "")
        if callback is None:
            log.warning(
                "a delivery for a consumer that is gone stays unacknowledged",
                extra={"rr": {"consumer_tag": delivery.consumer_tag, "tag": delivery.delivery_tag}},
            )
            return
        task = asyncio.ensure_future(callback(delivery))
        self._tasks.add(task)
        task.add_done_callback(self._delivered)
        self._protocol.deliveries += 1

    def _delivered(self, task: asyncio.Future[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("a consumer callback failed", exc_info=task.exception())

    def _on_method(self, method: Any) -> None:
        if isinstance(method, spec.Basic.Ack | spec.Basic.Nack):
            nack = isinstance(method, spec.Basic.Nack)
            self._confirmed(nack, int(method.delivery_tag or 0), bool(method.multiple))
        elif isinstance(method, _CONTENT_METHODS):
            self._content = _Content(method)
        elif isinstance(method, spec.Basic.Cancel):
            self._server_cancel(method)
        elif isinstance(method, spec.Channel.Close):
            with contextlib.suppress(_Closed):
                self._protocol.send(self.number, spec.Channel.CloseOk())
            code = method.reply_code
            self._gone(error_class_for(code)(describe_reply(code, method.reply_text or "")))
        elif isinstance(method, spec.Channel.Flow):
            with contextlib.suppress(_Closed):
                self._protocol.send(self.number, spec.Channel.FlowOk(active=method.active))
        else:
            if isinstance(method, spec.Basic.ConsumeOk) and self._pending_consumer is not None:
                self._consumers[str(method.consumer_tag)] = self._pending_consumer
            self._answer(method, method)

    def _answer(self, method: Any, result: Any) -> None:
        waiting = self._rpc
        if waiting is None or not isinstance(method, waiting[0]) or waiting[1].done():
            log.warning("an answer nobody asked for", extra={"rr": {"frame": repr(method)[:200]}})
            return
        waiting[1].set_result(result)
        if isinstance(method, spec.Channel.CloseOk):
            self._gone(None)

    def _server_cancel(self, method: spec.Basic.Cancel) -> None:
        tag = str(method.consumer_tag or "")
        if not method.nowait:
            with contextlib.suppress(_Closed):
                self._protocol.send(self.number, spec.Basic.CancelOk(consumer_tag=tag))
        callback = self._cancel_callbacks.pop(tag, None)
        if callback is None:
            self._consumers.pop(tag, None)
            return
        # Kept: RabbitMQ 4.3 may still hand it deliveries, which the callback settles
        # (transport/base.py, Channel.consume).
        try:
            callback(tag)
        except Exception:
            log.exception("a consumer cancel callback failed")

    def _on_return(self, method: spec.Basic.Return, properties: Properties, body: bytes) -> None:
        for publish in self._publishes.values():
            if (
                publish.mandatory
                and publish.returned is None
                and publish.message_id == properties.message_id
                and publish.exchange == (method.exchange or "")
                and publish.routing_key == (method.routing_key or "")
                and (publish.body is None or publish.body == body)
            ):
                publish.returned = method
                return
        log.warning(
            "a returned message matches no publish waiting for its confirm",
            extra={"rr": {"message_id": properties.message_id, "routing_key": method.routing_key}},
        )

    def _confirmed(self, nack: bool, tag: int, multiple: bool) -> None:
        """The broker confirmed (or refused: ``nack``) publish ``tag``, with ``multiple``
        every earlier one too. Publishes wait in the order of their tags."""
        publishes = self._publishes
        if multiple:
            settled = []
            for each in publishes:
                if each > tag:
                    break
                settled.append(each)
        else:
            settled = [tag]
        for each in settled:
            publish = publishes.pop(each, None)
            if publish is None or publish.future.done():
                continue
            if nack:
                publish.future.set_exception(
                    PublishFailed(f"{publish.what}: the broker refused the message (basic.nack)")
                )
            elif publish.returned is not None:
                publish.future.set_exception(returned_error(publish.returned, publish.what))
            else:
                publish.future.set_result(None)

    # -- closing ------------------------------------------------------------------------------

    def connection_gone(self, cause: RrError | None) -> None:
        """The connection closed (``cause``: why, ``None`` when rr closed it)."""
        self._gone(cause, connection=True)

    def _gone(self, cause: RrError | None, *, connection: bool = False) -> None:
        if self._closed.done():
            return
        self._close_error = cause
        self._closed.set_result(None)
        if not connection:
            self._protocol.channels.pop(self.number, None)
        waiting = self._rpc
        if waiting is not None and not waiting[1].done():
            waiting[1].set_exception(_Closed())
        for publish in self._publishes.values():
            if not publish.future.done():  # as aiormq raises the close for a publish in flight
                publish.future.set_exception(self._failed(publish.what))
        self._publishes.clear()
        self._content = None
        # As aiormq does: the consumer callbacks still running are cancelled with their
        # channel (their deliveries went back to the queue with it).
        for task in list(self._tasks):
            task.cancel()

    def __repr__(self) -> str:
        state = "closed" if self.is_closed else "open"
        kind = "confirm " if self._confirms else ""
        return f"<NativeChannel {kind}{self.number} {state}>"


def _method(what: str, kind: type[Any], **fields: Any) -> Any:
    """pamqp's method ``kind`` with ``fields``; a value it refuses is a :class:`DataError`."""
    try:
        return kind(**fields)
    except (TypeError, ValueError) as error:
        raise DataError(f"{what}: cannot encode: {error}") from error


def _closed_error(what: str, cause: RrError | None, *, resource: str = "channel") -> TransportError:
    """The error for ``what`` on a channel (or connection) ``cause`` closed earlier
    (``None``: rr closed it), worded as ``transport/errors.py`` words aiormq's."""
    if cause is None:
        return ChannelClosed(f"{what}: the {resource} is closed")
    if isinstance(cause, BrokerUnreachable | BrokerRefused):
        return BrokerUnreachable(f"{what}: {cause.message}")
    return ChannelClosed(f"{what}: the {resource} was closed earlier: {cause.message}")


if TYPE_CHECKING:

    def _implements_the_port(connection: NativeConnection, channel: NativeChannel) -> Any:
        port: tuple[Connection, Channel] = (connection, channel)
        return port
