"""Sans-I/O. The protocol state of rr's own AMQP 0-9-1 client: frames in, events and frames out.

``transport/native.py`` is the asyncio shell around it: it reads bytes, splits them into frames
(``transport/frames.py``), hands each frame to :meth:`ConnectionState.receive` (channel 0) or
to its channel's :meth:`ChannelState.receive`, writes the frames the events ask for, and
resolves its futures from the events. This module holds what the protocol says, and nothing of
how bytes travel: no asyncio, no socket, no clock (``tests/unit/test_native_state.py`` checks
its imports, and drives it through random orders of frames against a model of RabbitMQ).

Per channel (:class:`ChannelState`):

* **Its lifecycle**: opening (``channel.open`` sent) -> open -> closing (``channel.close``
  sent) -> closed, by the broker's ``channel.close-ok`` or ``channel.close``, or the
  connection's end (:meth:`ChannelState.gone`). A closed channel reads no more frames.
* **One request at a time** (:meth:`ChannelState.ask`): the synchronous method sent and the
  answers it waits for. The answer is :class:`Answered`; a method nobody waits for is
  :class:`Unasked`.
* **Messages assembled**: a ``basic.deliver``, ``basic.get-ok`` or ``basic.return``, its
  content header and its body in any number of frames become one message: a
  :class:`Delivered` (to a consumer of the channel), an :class:`Orphaned` delivery (for a
  consumer that is gone), the answer to a ``basic.get``, or a return.
* **Publish sequence numbers and confirms**: on a confirm channel each publish takes the next
  number (:meth:`ChannelState.published`); a ``basic.ack`` or ``basic.nack``, ``multiple`` or
  not, settles the pending ones it names, each once, in order: :class:`Confirmed`. A
  ``basic.return`` marks the oldest pending ``mandatory`` publish of its exchange, routing key
  and message id (without an id: its body; RabbitMQ sends the return before the confirm of
  the same message, ``transport/message_ids.py``), and that publish's confirm says returned.
* **Consumers**: registered by their ``basic.consume-ok``, dropped by their
  ``basic.cancel-ok``; a ``basic.cancel`` from the broker drops one, unless the shell watches
  it for cancels (:meth:`ChannelState.watch`): then it is kept (RabbitMQ 4.3 may still hand it
  deliveries) and :class:`ConsumerCancelled` says so once.
* **The broker's** ``channel.close`` (answered with ``channel.close-ok``) and
  ``channel.flow`` (answered with ``channel.flow-ok``).

:class:`ChannelGone` ends a channel and names its publishes still pending: each of them fails,
exactly once. The connection's channel 0 (:class:`ConnectionState`): the handshake's
methods, tuning, the broker's ``connection.close``, ``connection.blocked`` and ``unblocked``.
"""

from __future__ import annotations

from collections.abc import Container
from dataclasses import dataclass
from enum import Enum
from typing import Any, Generic, TypeVar

import pamqp.frame
from pamqp import commands as spec
from pamqp.base import Frame as PamqpFrame
from pamqp.header import ContentHeader

from rabbitctl_retry.errors import DataError, RrError
from rabbitctl_retry.transport import codec, values
from rabbitctl_retry.transport.base import Delivery, Properties
from rabbitctl_retry.transport.content_header import read_content_header
from rabbitctl_retry.transport.frames import (
    BODY,
    CONTENT_HEADER,
    FRAME_OVERHEAD_BYTES,
    METHOD,
    Frame,
    FrameError,
    frame_bytes,
    is_deliver,
    read_confirm,
    read_deliver,
)

__all__ = [
    "Answered",
    "Blocked",
    "ChannelEvent",
    "ChannelGone",
    "ChannelState",
    "CloseAnswered",
    "Confirmed",
    "ConnectionClosed",
    "ConnectionEvent",
    "ConnectionState",
    "ConsumerCancelled",
    "Delivered",
    "HandshakeMethod",
    "Orphaned",
    "Phase",
    "ReturnUnmatched",
    "Send",
    "Unasked",
    "decode",
    "free_number",
    "publish_frames",
]

FRAME_MAX_BYTES = 131_072
"""The frame size rr asks for (RabbitMQ's default); the server's own limit wins if smaller."""
CHANNEL_MAX = 2047
"""Channels rr asks for at most (RabbitMQ's default)."""

C = TypeVar("C")
"""What the shell keeps for a consumer (its callback): the state hands it back untouched."""

_CONTENT_METHODS = (spec.Basic.GetOk, spec.Basic.Return)
"""The methods other than basic.deliver that a message's header and body follow."""
_NOTHING: tuple[()] = ()


# -- events -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Send:
    """A frame (or frames) to write, in order with every other write."""

    data: bytes


@dataclass(frozen=True, slots=True)
class Answered:
    """The answer to the channel's request: a pamqp method, or the message of a ``basic.get``
    (a :class:`Delivery`)."""

    result: Any


@dataclass(frozen=True, slots=True)
class Unasked:
    """A method that answers no request of the channel (logged, and otherwise dropped)."""

    method: Any


@dataclass(slots=True)
class Delivered(Generic[C]):
    """A whole delivery for the registered consumer ``consumer``. (Not frozen, as
    :class:`Confirmed`: one is made per message, and a frozen dataclass is slower to make.)"""

    delivery: Delivery
    consumer: C


@dataclass(frozen=True, slots=True)
class Orphaned:
    """A whole delivery for a consumer that is gone: it stays unacknowledged."""

    delivery: Delivery


@dataclass(slots=True)
class Confirmed:
    """The broker settled publish ``sequence``: confirmed, refused (``nack``) or, confirmed
    after a ``basic.return`` of it (``returned``)."""

    sequence: int
    nack: bool = False
    returned: spec.Basic.Return | None = None


@dataclass(frozen=True, slots=True)
class ReturnUnmatched:
    """A ``basic.return`` that matches no publish waiting for its confirm."""

    message_id: str | None
    routing_key: str


@dataclass(frozen=True, slots=True)
class ConsumerCancelled(Generic[C]):
    """The broker cancelled consumer ``tag``, which the shell watches: it is kept."""

    tag: str
    consumer: C | None


@dataclass(frozen=True, slots=True)
class ChannelGone:
    """The channel is closed: by the broker (its ``reply_code`` and ``reply_text``), or by rr's
    close answered or with its connection (``reply_code`` ``None``). ``pending``: the publishes
    it ends unconfirmed, oldest first; ``asked``: whether a request was waiting for its answer."""

    reply_code: int | None
    reply_text: str
    pending: tuple[int, ...]
    asked: bool


ChannelEvent = (
    Send
    | Answered
    | Unasked
    | Delivered[C]
    | Orphaned
    | Confirmed
    | ReturnUnmatched
    | ConsumerCancelled[C]
    | ChannelGone
)


@dataclass(frozen=True, slots=True)
class HandshakeMethod:
    """A method on channel 0 before the connection is open (start, tune, open-ok, close)."""

    method: Any


@dataclass(frozen=True, slots=True)
class ConnectionClosed:
    """The broker closed the connection (a ``connection.close-ok`` is sent before)."""

    reply_code: int
    reply_text: str


@dataclass(frozen=True, slots=True)
class CloseAnswered:
    """The broker answered rr's ``connection.close``."""


@dataclass(frozen=True, slots=True)
class Blocked:
    """``connection.blocked`` (its reason) or ``connection.unblocked`` (``None``)."""

    reason: str | None


ConnectionEvent = Send | HandshakeMethod | ConnectionClosed | CloseAnswered | Blocked


# -- helpers ----------------------------------------------------------------------------------


def decode(frame: Frame) -> Any:
    """pamqp's frame for a method or content header, through rr's lenient codec."""
    return codec.unmarshal_frame(frame_bytes(frame.kind, frame.channel, frame.payload))[2]


def marshal(channel: int, frame: PamqpFrame | ContentHeader) -> bytes:
    return pamqp.frame.marshal(frame, channel)


def free_number(used: Container[int], channel_max: int) -> int | None:
    """The lowest channel number not in ``used``, ``None`` when all are."""
    for number in range(1, channel_max + 1):
        if number not in used:
            return number
    return None


def publish_frames(
    channel: int,
    what: str,
    body: bytes,
    exchange: str,
    routing_key: str,
    properties: Properties | None,
    mandatory: bool,
    frame_max: int,
) -> bytes:
    """A publish's frames (method, header, body in frames of at most ``frame_max``); a value
    that cannot be encoded is a :class:`DataError`, in aiormq's words."""
    if len(routing_key) > 255:  # aiormq's check and words (the contract suite's)
        raise DataError(f"{what}: cannot encode: Routing key too long (max 255 bytes)")
    try:
        method = spec.Basic.Publish(exchange=exchange, routing_key=routing_key, mandatory=mandatory)
        header = ContentHeader(
            0,
            len(body),
            spec.Basic.Properties() if properties is None else values.basic_properties(properties),
        )
        parts = [marshal(channel, method), marshal(channel, header)]
    except RrError:
        raise
    except (TypeError, ValueError, OverflowError) as error:
        raise DataError(f"{what}: cannot encode: {error}") from error
    step = frame_max - FRAME_OVERHEAD_BYTES
    for start in range(0, len(body), step):
        parts.append(frame_bytes(BODY, channel, body[start : start + step]))
    return b"".join(parts)


# -- a channel --------------------------------------------------------------------------------


class Phase(Enum):
    OPENING = "opening"
    OPEN = "open"
    CLOSING = "closing"
    CLOSED = "closed"


@dataclass(slots=True)
class _Content:
    """A message whose method frame came and whose header or body is still coming."""

    method: Any
    properties: Properties | None = None
    parts: list[bytes] | None = None
    left: int = 0


@dataclass(slots=True)
class _Pending:
    """A publish waiting for its confirm."""

    message_id: str | None
    exchange: str
    routing_key: str
    mandatory: bool
    body: bytes | None
    """Without a message id, what a return is matched by (``transport/message_ids.py``)."""
    returned: spec.Basic.Return | None = None


class ChannelState(Generic[C]):
    """One channel's protocol state (module doc); ``C``: what the shell keeps per consumer."""

    __slots__ = (
        "_asked",
        "_consumers",
        "_content",
        "_ended",
        "_joining",
        "_pending",
        "_sequence",
        "_watched",
        "confirms",
        "number",
        "phase",
    )

    def __init__(self, number: int, *, confirms: bool) -> None:
        self.number = number
        self.confirms = confirms
        self.phase = Phase.OPENING
        self._ended = False
        """``phase`` is CLOSED (read on every frame)."""
        self._asked: tuple[type[Any], ...] | None = None
        self._joining: C | None = None
        self._consumers: dict[str, C] = {}
        self._watched: set[str] = set()
        self._content: _Content | None = None
        self._sequence = 0
        self._pending: dict[int, _Pending] = {}

    # -- what the shell does ------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._ended

    @property
    def pending(self) -> tuple[int, ...]:
        """The publishes waiting for their confirm, oldest first."""
        return tuple(self._pending)

    def consumer(self, tag: str) -> C | None:
        return self._consumers.get(tag)

    def ask(
        self, method: PamqpFrame, answers: tuple[type[Any], ...], joining: C | None = None
    ) -> bytes:
        """The frame of request ``method``, which waits for one of ``answers`` (one request at a
        time); ``joining``: the consumer a ``basic.consume-ok`` registers."""
        data = marshal(self.number, method)
        self._asked = answers
        self._joining = joining
        if isinstance(method, spec.Channel.Close):
            self.phase = Phase.CLOSING
        return data

    def forget(self) -> None:
        """The request's answer is no longer awaited (it came, or the wait ended)."""
        self._asked = None
        self._joining = None

    def watch(self, tag: str) -> None:
        """A cancel of consumer ``tag`` by the broker keeps it, and is told once."""
        self._watched.add(tag)

    def unwatch(self, tag: str) -> None:
        self._watched.discard(tag)

    def published(
        self,
        message_id: str | None,
        exchange: str,
        routing_key: str,
        *,
        mandatory: bool,
        body: bytes,
    ) -> int:
        """A publish's frames went out on this confirm channel: its sequence number."""
        self._sequence += 1
        self._pending[self._sequence] = _Pending(
            message_id, exchange, routing_key, mandatory, body if message_id is None else None
        )
        return self._sequence

    def gone(self) -> ChannelGone | None:
        """The connection ended: the channel's end (``None`` if it was closed already)."""
        return self._close(None, "")

    # -- frames in ----------------------------------------------------------------------------

    def receive(self, frame: Frame) -> tuple[ChannelEvent[C], ...]:
        """The events of one frame of this channel, in order; raises :class:`FrameError` on a
        frame out of place."""
        if self._ended:
            return _NOTHING
        kind = frame.kind
        if kind == METHOD:
            payload = frame.payload
            if is_deliver(payload):
                deliver = read_deliver(payload)
                self._content = _Content(deliver if deliver is not None else decode(frame))
                return _NOTHING
            confirm = read_confirm(payload)
            if confirm is not None:
                return self._confirmed(confirm.nack, confirm.delivery_tag, confirm.multiple)
            return self._on_method(decode(frame))
        if kind == CONTENT_HEADER:
            return self._on_header(frame)
        if kind == BODY:
            return self._on_body(frame.payload)
        return _NOTHING

    def _on_header(self, frame: Frame) -> tuple[ChannelEvent[C], ...]:
        content = self._content
        if content is None or content.properties is not None:
            raise FrameError("a content header without its method")
        method = content.method
        lenient = codec.undecodable_fields(method)
        read = None if lenient else read_content_header(frame.payload)
        if read is None:  # the general, lenient codec (transport/content_header.py)
            header = decode(frame)
            if lenient and not isinstance(header, codec.LenientContentHeader):
                header = codec.with_raw(header, frame.payload[12:])
            read = header.body_size, values.properties_from_header(header, method)
        body_size, content.properties = read
        if body_size:
            content.parts, content.left = [], body_size
            return _NOTHING
        self._content = None
        return self._on_message(content, b"")

    def _on_body(self, payload: bytes) -> tuple[ChannelEvent[C], ...]:
        content = self._content
        if content is None or content.parts is None:
            raise FrameError("a body frame without its content header")
        content.parts.append(payload)
        content.left -= len(payload)
        if content.left > 0:
            return _NOTHING
        self._content = None
        parts = content.parts
        return self._on_message(content, parts[0] if len(parts) == 1 else b"".join(parts))

    def _on_message(self, content: _Content, body: bytes) -> tuple[ChannelEvent[C], ...]:
        method = content.method
        properties = content.properties
        assert properties is not None
        if isinstance(method, spec.Basic.Return):
            return self._on_return(method, properties, body)
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
            return self._answer(method, delivery)
        consumer = self._consumers.get(delivery.consumer_tag or "")
        if consumer is None:
            return (Orphaned(delivery),)
        return (Delivered(delivery, consumer),)

    def _on_method(self, method: Any) -> tuple[ChannelEvent[C], ...]:
        if isinstance(method, spec.Basic.Ack | spec.Basic.Nack):
            nack = isinstance(method, spec.Basic.Nack)
            return self._confirmed(nack, int(method.delivery_tag or 0), bool(method.multiple))
        if isinstance(method, _CONTENT_METHODS):
            self._content = _Content(method)
            return _NOTHING
        if isinstance(method, spec.Basic.Cancel):
            return self._server_cancel(method)
        if isinstance(method, spec.Channel.Close):
            code = int(method.reply_code or 0)
            close_ok = Send(marshal(self.number, spec.Channel.CloseOk()))
            gone = self._close(code, method.reply_text or "")
            return (close_ok,) if gone is None else (close_ok, gone)
        if isinstance(method, spec.Channel.Flow):
            return (Send(marshal(self.number, spec.Channel.FlowOk(active=method.active))),)
        if isinstance(method, spec.Basic.ConsumeOk) and self._joining is not None:
            self._consumers[str(method.consumer_tag)] = self._joining
            self._joining = None
        elif isinstance(method, spec.Basic.CancelOk):
            self._consumers.pop(str(method.consumer_tag or ""), None)
        elif isinstance(method, spec.Channel.OpenOk) and self.phase is Phase.OPENING:
            self.phase = Phase.OPEN
        return self._answer(method, method)

    def _answer(self, method: Any, result: Any) -> tuple[ChannelEvent[C], ...]:
        asked = self._asked
        if asked is None or not isinstance(method, asked):
            return (Unasked(method),)
        self._asked = None
        answered = Answered(result)
        if isinstance(method, spec.Channel.CloseOk):
            gone = self._close(None, "")
            return (answered,) if gone is None else (answered, gone)
        return (answered,)

    def _server_cancel(self, method: spec.Basic.Cancel) -> tuple[ChannelEvent[C], ...]:
        tag = str(method.consumer_tag or "")
        sends: tuple[ChannelEvent[C], ...] = (
            _NOTHING
            if method.nowait
            else (Send(marshal(self.number, spec.Basic.CancelOk(consumer_tag=tag))),)
        )
        if tag not in self._watched:
            self._consumers.pop(tag, None)
            return sends
        self._watched.discard(tag)
        return (*sends, ConsumerCancelled(tag, self._consumers.get(tag)))

    def _on_return(
        self, method: spec.Basic.Return, properties: Properties, body: bytes
    ) -> tuple[ChannelEvent[C], ...]:
        exchange = method.exchange or ""
        routing_key = method.routing_key or ""
        for publish in self._pending.values():
            if (
                publish.mandatory
                and publish.returned is None
                and publish.message_id == properties.message_id
                and publish.exchange == exchange
                and publish.routing_key == routing_key
                and (publish.body is None or publish.body == body)
            ):
                publish.returned = method
                return _NOTHING
        return (ReturnUnmatched(properties.message_id, routing_key),)

    def _confirmed(self, nack: bool, tag: int, multiple: bool) -> tuple[ChannelEvent[C], ...]:
        """The broker confirmed (or refused: ``nack``) publish ``tag``, with ``multiple``
        every earlier one too."""
        pending = self._pending
        if not multiple:
            publish = pending.pop(tag, None)
            if publish is None:
                return _NOTHING
            return (Confirmed(tag, nack, None if nack else publish.returned),)
        settled = []
        for each in pending:
            if each > tag:
                break
            settled.append(each)
        events: list[ChannelEvent[C]] = []
        for each in settled:
            publish = pending.pop(each)
            events.append(Confirmed(each, nack, None if nack else publish.returned))
        return tuple(events)

    def _close(self, reply_code: int | None, reply_text: str) -> ChannelGone | None:
        if self._ended:
            return None
        self._ended = True
        self.phase = Phase.CLOSED
        gone = ChannelGone(reply_code, reply_text, tuple(self._pending), self._asked is not None)
        self._pending.clear()
        self._content = None
        self._asked = None
        self._joining = None
        return gone


# -- the connection ---------------------------------------------------------------------------


class ConnectionState:
    """Channel 0: the handshake's methods, what was tuned, the broker's close and blocks."""

    __slots__ = ("channel_max", "frame_max", "heartbeat_s", "opened")

    def __init__(self) -> None:
        self.frame_max = FRAME_MAX_BYTES
        self.channel_max = CHANNEL_MAX
        self.heartbeat_s = 0
        self.opened = False

    def tune(self, tune: spec.Connection.Tune, wanted_heartbeat_s: int) -> bytes:
        """The ``connection.tune-ok`` for the broker's ``tune``: the smaller limits win, and
        no heartbeat if rr wants none."""
        self.frame_max = min(tune.frame_max or FRAME_MAX_BYTES, FRAME_MAX_BYTES)
        self.channel_max = min(tune.channel_max or CHANNEL_MAX, CHANNEL_MAX)
        wanted = wanted_heartbeat_s
        self.heartbeat_s = 0 if wanted == 0 else min(tune.heartbeat or wanted, wanted)
        return marshal(
            0,
            spec.Connection.TuneOk(
                channel_max=self.channel_max, frame_max=self.frame_max, heartbeat=self.heartbeat_s
            ),
        )

    def receive(self, frame: Frame) -> tuple[ConnectionEvent, ...]:
        """The events of one frame of channel 0 (heartbeats have none)."""
        if frame.kind != METHOD:
            return ()
        method = decode(frame)
        if not self.opened:
            return (HandshakeMethod(method),)
        if isinstance(method, spec.Connection.Close):
            close_ok = Send(marshal(0, spec.Connection.CloseOk()))
            return (
                close_ok,
                ConnectionClosed(int(method.reply_code or 0), method.reply_text or ""),
            )
        if isinstance(method, spec.Connection.CloseOk):
            return (CloseAnswered(),)
        if isinstance(method, spec.Connection.Blocked):
            return (Blocked(method.reason or "blocked"),)
        if isinstance(method, spec.Connection.Unblocked):
            return (Blocked(None),)
        return ()
