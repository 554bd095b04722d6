"""rr's own AMQP 0-9-1 client: the transport port over one ``asyncio.Protocol``.

This module is the asyncio shell: it reads bytes, splits them into frames, hands each to the
sans-I/O protocol state (``transport/native_state.py``: message assembly, publish sequence
numbers, confirms and returns, consumers, channel lifecycle, channel 0), writes the frames
the state's events ask for, and resolves the futures and runs the callbacks they name. The
handshake's order, heartbeats, flow control of the socket and timeouts stay here.

rr's default adapter of the port (aiormq's, ``transport/amqp.py``, is the other), for speed:
a delivery goes from the socket to its consumer's callback in one pass over the bytes read
(``transport/frames.py`` splits them; ``basic.deliver`` is read without a general codec),
and acks, rejects and nacks are written as they are decided, with no queue or task between.
Every other frame is encoded and decoded by pamqp through rr's codec (``transport/codec.py``),
so tables, lenient decoding of malformed messages and raw properties are the same as with
aiormq. ``RR_AMQP_CLIENT=aiormq`` chooses aiormq's instead (``transport/clients.py``;
docs/reference/runtime.md, "Running it" and "Speed").

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
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar, cast

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
)
from rabbitctl_retry.transport import values
from rabbitctl_retry.transport.base import (
    Binding,
    BlockedListener,
    CancelCallback,
    Channel,
    Consume,
    Delivery,
    DeliveryCallback,
    ExchangeDeclare,
    Publish,
    QueueDeclare,
    QueueInfo,
)
from rabbitctl_retry.transport.declare_frames import (
    binding_frame,
    exchange_declare_frame,
    queue_declare_frame,
)
from rabbitctl_retry.transport.errors import (
    connection_close_error,
    network_error,
    returned_error,
)
from rabbitctl_retry.transport.frames import (
    HEARTBEAT_FRAME,
    PROTOCOL_HEADER,
    Frame,
    FrameError,
    FrameSplitter,
    ack_frame,
    nack_frame,
    reject_frame,
)
from rabbitctl_retry.transport.message_ids import MessageIdGuard, return_key
from rabbitctl_retry.transport.native_login import Login, tls_context
from rabbitctl_retry.transport.native_state import (
    Answered,
    ChannelEvent,
    ChannelGone,
    ChannelState,
    CloseAnswered,
    Confirmed,
    ConnectionClosed,
    ConnectionState,
    ConsumerCancelled,
    Delivered,
    HandshakeMethod,
    Orphaned,
    ReturnUnmatched,
    Send,
    Unasked,
    free_number,
    publish_frames,
)
from rabbitctl_retry.transport.reply_codes import describe_reply, error_class_for
from rabbitctl_retry.transport.server_info import (
    HEARTBEAT_LOST,
    TLS_NOT_VERIFIED,
    Reached,
    without_password,
)
from rabbitctl_retry.transport.tls_files import check_tls_files
from rabbitctl_retry.transport.url import parse_broker_url

if TYPE_CHECKING:
    from rabbitctl_retry.transport.base import Connection

__all__ = ["NativeChannel", "NativeConnection", "connect"]

log = logging.getLogger("rr.transport")

CLOSE_TIMEOUT_S = 5.0
"""How long a channel's or the connection's close waits for the broker's answer."""
READ_PAUSE_DELIVERIES = 256
"""Deliveries one read of the socket handed to callbacks at which rr reads no more until the
event loop has started every one of them. uvloop reads up to 32 times in a row before it
runs a task: a consumer without a prefetch limit (a read of a whole queue, ``ops/dlq.py``)
would otherwise pile up the queue in memory, one task per message."""
MISSED_HEARTBEATS = 3
"""Heartbeat timeouts without a frame from the broker before the connection is taken for dead."""

_FAILED = "the connection to the broker failed"


_Request = TypeVar("_Request", QueueDeclare, ExchangeDeclare, Binding)


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
    login = Login.of(target, client_name)
    loop = asyncio.get_running_loop()
    protocol = _Protocol(loop, shown)
    try:
        async with asyncio.timeout(timeout_s):
            tls = tls_context(login.options) if target.tls else None
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


class _Protocol(asyncio.Protocol):
    """The socket's side of one connection: frames in, routed to channel 0 or a channel."""

    def __init__(self, loop: asyncio.AbstractEventLoop, shown: str) -> None:
        self.loop = loop
        self.shown = shown
        self.transport: asyncio.Transport | None = None
        self.splitter = FrameSplitter()
        self.channels: dict[int, NativeChannel] = {}
        self.state = ConnectionState()
        """Channel 0's protocol state (``transport/native_state.py``)."""
        self.server_properties: dict[str, Any] = {}
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
        opened = self.state.opened
        self._finish(network_error(cause, url=None if opened else self.shown), abort=True)

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

    async def handshake(self, login: Login) -> None:
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
        self.write(self.state.tune(tune, login.heartbeat_s))
        self.splitter.limit(self.state.frame_max)
        self.send(0, spec.Connection.Open(virtual_host=login.vhost))
        await self._expect(spec.Connection.OpenOk)
        self.state.opened = True
        if self.state.heartbeat_s:
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
        # heartbeats have no event: _last_read_s says the broker is alive
        for event in self.state.receive(frame):
            if isinstance(event, HandshakeMethod):
                self._handshake.put_nowait(event.method)
            elif isinstance(event, Send):
                with contextlib.suppress(_Closed):
                    self.write(event.data)
            elif isinstance(event, ConnectionClosed):
                text = event.reply_text
                self._finish(connection_close_error(event.reply_code, text), reason=text)
            elif isinstance(event, CloseAnswered):
                if self._close_ok is not None and not self._close_ok.done():
                    self._close_ok.set_result(None)
            else:
                self._tell_blocked(event.reason)

    def _tell_blocked(self, reason: str | None) -> None:
        for listener in list(self.blocked_listeners):
            try:
                listener(reason)
            except Exception:
                log.exception("a blocked listener failed")

    async def _heartbeat(self) -> None:
        heartbeat_s = self.state.heartbeat_s
        interval_s = max(1.0, heartbeat_s / 2)
        dead_after_s = heartbeat_s * MISSED_HEARTBEATS
        while not self.closed.done():
            await asyncio.sleep(interval_s)
            if self.closed.done():
                return
            if not self._reading_paused and self.loop.time() - self._last_read_s > dead_after_s:
                self.lost(BrokerUnreachable(HEARTBEAT_LOST.format(seconds=heartbeat_s)))
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
        channel_max = self.state.channel_max
        number = free_number(self.channels, channel_max)
        if number is None:
            raise TransportError(f"open a channel: all {channel_max} channels are in use")
        return number


class NativeConnection(Reached):
    """One AMQP connection (implements the port's ``Connection``)."""

    __slots__ = ("_protocol",)

    def __init__(self, protocol: _Protocol, url: str) -> None:
        super().__init__(url, protocol.server_properties)
        self._protocol = protocol

    @property
    def is_closed(self) -> bool:
        return self._protocol.closed.done()

    @property
    def close_reason(self) -> str | None:
        return self._protocol.close_reason

    @property
    def frame_max(self) -> int:
        return self._protocol.state.frame_max

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
class _Consumer:
    """What rr keeps of a consumer: its callback, and what a cancel by the broker calls."""

    callback: DeliveryCallback
    on_cancel: CancelCallback | None = None


@dataclass(slots=True)
class _Publish:
    """A publish waiting for its confirm: what its caller awaits, and its words."""

    future: asyncio.Future[None]
    what: str


class NativeChannel(Channel):
    """One AMQP channel (implements the port's ``Channel``): the asyncio side of its
    :class:`ChannelState` (``transport/native_state.py``)."""

    __slots__ = (
        "_close_error",
        "_closed",
        "_lock",
        "_message_ids",
        "_protocol",
        "_publishes",
        "_rpc",
        "_tasks",
        "number",
        "state",
    )

    def __init__(self, protocol: _Protocol, number: int, *, confirms: bool) -> None:
        self._protocol = protocol
        self.number = number
        self.state: ChannelState[_Consumer] = ChannelState(number, confirms=confirms)
        self._lock = asyncio.Lock()
        self._rpc: asyncio.Future[Any] | None = None
        """What the request in flight awaits (one at a time: ``_lock``)."""
        self._closed = protocol.loop.create_future()
        self._close_error: RrError | None = None
        """Why the broker or the connection closed it (``None``: open, or closed by rr)."""
        self._tasks: set[asyncio.Future[None]] = set()
        self._publishes: dict[int, _Publish] = {}
        """Publish sequence number -> its caller (``ChannelState`` keeps the rest)."""
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
        return self.state.confirms

    async def wait_closed(self) -> None:
        if not self._closed.done():
            await asyncio.wait([self._closed])

    async def _queue_declare(self, request: QueueDeclare) -> QueueInfo:
        ok = await self._send(request, queue_declare_frame, spec.Queue.DeclareOk)
        return values.queue_info(ok, request.queue)

    async def _exchange_declare(self, request: ExchangeDeclare) -> None:
        await self._send(request, exchange_declare_frame, spec.Exchange.DeclareOk)

    async def _bind(self, request: Binding) -> None:
        answer = spec.Queue.UnbindOk if request.unbind else spec.Queue.BindOk
        await self._send(request, binding_frame, answer)

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

    async def _publish(self, request: Publish) -> None:
        """On a confirm channel return once the broker confirmed (or raise), else once the
        frames are handed to the socket (waiting while its buffer is full)."""
        what = request.what
        body, exchange, routing_key = request.body, request.exchange, request.routing_key
        properties, mandatory = request.properties, request.mandatory
        frame_max = self._protocol.state.frame_max
        number = self.number
        data = publish_frames(
            number, what, body, exchange, routing_key, properties, mandatory, frame_max
        )
        if not self.state.confirms:
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
            sequence = self.state.published(
                message_id, exchange, routing_key, mandatory=mandatory, body=body
            )
            future = self._protocol.loop.create_future()
            self._publishes[sequence] = _Publish(future, what)
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

    async def _consume(self, request: Consume) -> str:
        """``callback`` runs in a task per delivery, in delivery order."""
        what = request.what
        frame = _method(
            what,
            spec.Basic.Consume,
            queue=request.queue,
            consumer_tag=request.consumer_tag or "",
            no_ack=request.no_ack,
            exclusive=request.exclusive,
            arguments=values.wire_arguments(request.arguments),
        )
        consumer = _Consumer(request.callback)  # registered as its consume-ok is read
        async with self._lock:
            ok = await self._call(frame, (spec.Basic.ConsumeOk,), what, joining=consumer)
        tag = str(ok.consumer_tag or "")
        if request.on_cancel is not None:
            consumer.on_cancel = request.on_cancel
            self.state.watch(tag)
        return tag

    async def cancel(self, consumer_tag: str) -> None:
        self.state.unwatch(consumer_tag)  # its cancel-ok drops the consumer
        what = f"cancel consumer {consumer_tag!r}"
        await self._ask(what, (spec.Basic.CancelOk,), spec.Basic.Cancel, consumer_tag=consumer_tag)

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

    async def _send(
        self, request: _Request, build: Callable[[_Request], PamqpFrame], answer: type[Any]
    ) -> Any:
        """Send the frame ``build`` makes of the port's ``request``, and return its answer."""
        what = request.what
        return await self.rpc(_method(what, build, request), (answer,), what)

    async def rpc(self, request: PamqpFrame, answers: tuple[type[Any], ...], what: str) -> Any:
        """Send a synchronous method and return its answer (one at a time per channel)."""
        async with self._lock:
            return await self._call(request, answers, what)

    async def _call(
        self,
        request: PamqpFrame,
        answers: tuple[type[Any], ...],
        what: str,
        *,
        joining: _Consumer | None = None,
    ) -> Any:
        if self._closed.done():
            raise _closed_error(what, self._close_error)
        try:  # pamqp checks some lengths only as it writes (a queue name of 256 bytes)
            data = self.state.ask(request, answers, joining)
        except (TypeError, ValueError, OverflowError) as error:
            raise DataError(f"{what}: cannot encode: {error}") from error
        future: asyncio.Future[Any] = self._protocol.loop.create_future()
        self._rpc = future
        try:
            self._protocol.write(data)
            return await future
        except _Closed:
            raise self._failed(what) from None
        finally:
            self._rpc = None
            self.state.forget()

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

    # -- frames in ----------------------------------------------------------------------------

    def on_frame(self, frame: Frame) -> None:
        """Hand one frame of this channel to its state, and carry out the events."""
        for event in self.state.receive(frame):
            if isinstance(event, Delivered):
                self._deliver(event.delivery, event.consumer)
            elif isinstance(event, Confirmed):
                self._confirmed(event)
            else:
                self._on_event(event)

    def _deliver(self, delivery: Delivery, consumer: _Consumer) -> None:
        task = asyncio.ensure_future(consumer.callback(delivery))
        self._tasks.add(task)
        task.add_done_callback(self._delivered)
        self._protocol.deliveries += 1

    def _delivered(self, task: asyncio.Future[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("a consumer callback failed", exc_info=task.exception())

    def _on_event(self, event: ChannelEvent[_Consumer]) -> None:
        if isinstance(event, Confirmed):
            self._confirmed(event)
        elif isinstance(event, Send):
            with contextlib.suppress(_Closed):
                self._protocol.write(event.data)
        elif isinstance(event, Answered):
            waiting = self._rpc
            if waiting is None or waiting.done():
                _unasked(event.result)
            else:
                waiting.set_result(event.result)
        elif isinstance(event, Unasked):
            _unasked(event.method)
        elif isinstance(event, ChannelGone):
            code = event.reply_code
            cause = None
            if code is not None:
                cause = error_class_for(code)(describe_reply(code, event.reply_text))
            self._end(cause, event.pending)
        else:
            self._on_notice(event)

    def _on_notice(self, event: ChannelEvent[_Consumer]) -> None:
        """The events that only tell: a delivery nobody takes, a return nobody sent, a
        consumer cancelled by the broker."""
        if isinstance(event, Orphaned):
            delivery = event.delivery
            log.warning(
                "a delivery for a consumer that is gone stays unacknowledged",
                extra={"rr": {"consumer_tag": delivery.consumer_tag, "tag": delivery.delivery_tag}},
            )
        elif isinstance(event, ReturnUnmatched):
            log.warning(
                "a returned message matches no publish waiting for its confirm",
                extra={"rr": {"message_id": event.message_id, "routing_key": event.routing_key}},
            )
        elif isinstance(event, ConsumerCancelled):
            # Kept: RabbitMQ 4.3 may still hand it deliveries, which the callback settles
            # (transport/base.py, Channel.consume).
            consumer = event.consumer
            if consumer is None or consumer.on_cancel is None:
                return
            try:
                consumer.on_cancel(event.tag)
            except Exception:
                log.exception("a consumer cancel callback failed")

    def _confirmed(self, event: Confirmed) -> None:
        """The broker confirmed, refused or returned one publish."""
        publish = self._publishes.pop(event.sequence, None)
        if publish is None or publish.future.done():
            return
        if event.nack:
            publish.future.set_exception(
                PublishFailed(f"{publish.what}: the broker refused the message (basic.nack)")
            )
        elif event.returned is not None:
            publish.future.set_exception(returned_error(event.returned, publish.what))
        else:
            publish.future.set_result(None)

    # -- closing ------------------------------------------------------------------------------

    def connection_gone(self, cause: RrError | None) -> None:
        """The connection closed (``cause``: why, ``None`` when rr closed it)."""
        self._gone(cause, connection=True)

    def _gone(self, cause: RrError | None, *, connection: bool = False) -> None:
        gone = self.state.gone()
        self._end(cause, () if gone is None else gone.pending, connection=connection)

    def _end(
        self, cause: RrError | None, pending: tuple[int, ...], *, connection: bool = False
    ) -> None:
        """The channel ended; its ``pending`` publishes fail, and its callbacks are cancelled."""
        if self._closed.done():
            return
        self._close_error = cause
        self._closed.set_result(None)
        if not connection:
            self._protocol.channels.pop(self.number, None)
        waiting = self._rpc
        if waiting is not None and not waiting.done():
            waiting.set_exception(_Closed())
        for sequence in pending:
            publish = self._publishes.pop(sequence, None)
            if publish is not None and not publish.future.done():
                # as aiormq raises the close for a publish in flight
                publish.future.set_exception(self._failed(publish.what))
        # As aiormq does: the consumer callbacks still running are cancelled with their
        # channel (their deliveries went back to the queue with it).
        for task in list(self._tasks):
            task.cancel()

    def __repr__(self) -> str:
        state = "closed" if self.is_closed else "open"
        kind = "confirm " if self.state.confirms else ""
        return f"<NativeChannel {kind}{self.number} {state}>"


def _unasked(method: Any) -> None:
    log.warning("an answer nobody asked for", extra={"rr": {"frame": repr(method)[:200]}})


def _method(what: str, kind: Callable[..., Any], *args: Any, **fields: Any) -> Any:
    """pamqp's method ``kind`` with ``fields`` (or what ``kind`` builds of ``args``); a value
    it refuses is a :class:`DataError`."""
    try:
        return kind(*args, **fields)
    except (TypeError, ValueError) as error:
        raise DataError(f"{what}: cannot encode: {error}") from error


def _closed_error(what: str, cause: RrError | None, *, resource: str = "channel") -> TransportError:
    """The error for ``what`` on a channel (or connection) ``cause`` closed earlier
    (``None``: rr closed it), worded as ``transport/aiormq_errors.py`` words aiormq's."""
    if cause is None:
        return ChannelClosed(f"{what}: the {resource} is closed")
    if isinstance(cause, BrokerUnreachable | BrokerRefused):
        return BrokerUnreachable(f"{what}: {cause.message}")
    return ChannelClosed(f"{what}: the {resource} was closed earlier: {cause.message}")


if TYPE_CHECKING:

    def _implements_the_port(connection: NativeConnection, channel: NativeChannel) -> Any:
        port: tuple[Connection, Channel] = (connection, channel)
        return port
