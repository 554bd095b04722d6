"""rr's own client's protocol state (``transport/native_state.py``): random orders and splits of
the frames RabbitMQ may send, checked against a model of the protocol; and each event alone.

The model: a message is its method, header and body frames, the body cut anywhere; a confirm
channel's publishes take the numbers 1, 2, 3...; a ``basic.ack`` or ``basic.nack`` with
``multiple`` settles every unconfirmed publish up to its tag, without it that one publish; a
``basic.return`` of a publish comes before its confirm; a ``channel.close`` ends every
publish not yet confirmed.
"""

from __future__ import annotations

import ast
import itertools
from dataclasses import dataclass, field
from pathlib import Path

import pamqp.frame
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pamqp import commands as spec
from pamqp.header import ContentHeader

from rabbitctl_retry.errors import DataError
from rabbitctl_retry.transport import native_state
from rabbitctl_retry.transport.base import Properties
from rabbitctl_retry.transport.frames import BODY, HEARTBEAT_FRAME, Frame, FrameError, FrameSplitter
from rabbitctl_retry.transport.frames import frame_bytes as body_bytes
from rabbitctl_retry.transport.native_state import (
    Answered,
    Blocked,
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
    Phase,
    ReturnUnmatched,
    Send,
    Unasked,
    free_number,
    publish_frames,
)

CH = 1
NO_ROUTE = spec.Basic.Return(reply_code=312, reply_text="NO_ROUTE", exchange="x", routing_key="rk")


def wire(*frames: object, channel: int = CH) -> bytes:
    return b"".join(pamqp.frame.marshal(f, channel) for f in frames)  # type: ignore[arg-type]


def split(data: bytes) -> list[Frame]:
    return FrameSplitter().feed(data)


def receive(state: ChannelState[str], data: bytes) -> list[ChannelEvent[str]]:
    return [event for frame in split(data) for event in state.receive(frame)]


def message(method: object, body: bytes, cuts: list[int], message_id: str | None = None) -> bytes:
    """A message's frames: its method, its header, its body cut at ``cuts``."""
    header = ContentHeader(0, len(body), spec.Basic.Properties(message_id=message_id))
    bounds = [0, *sorted({cut for cut in cuts if 0 < cut < len(body)}), len(body)]
    parts = [body[a:b] for a, b in itertools.pairwise(bounds) if b > a]
    return wire(method, header) + b"".join(body_bytes(BODY, CH, part) for part in parts)


def deliver(tag: int, consumer_tag: str = "ctag") -> spec.Basic.Deliver:
    return spec.Basic.Deliver(
        consumer_tag=consumer_tag, delivery_tag=tag, exchange="x", routing_key="rk"
    )


def consuming(consumer: str = "callback", tag: str = "ctag") -> ChannelState[str]:
    """An open channel with consumer ``tag`` registered by its consume-ok."""
    state: ChannelState[str] = ChannelState(CH, confirms=False)
    state.ask(spec.Channel.Open(), (spec.Channel.OpenOk,))
    (opened,) = receive(state, wire(spec.Channel.OpenOk()))
    assert isinstance(opened, Answered)
    assert isinstance(opened.result, spec.Channel.OpenOk)
    state.forget()
    state.ask(spec.Basic.Consume(queue="q"), (spec.Basic.ConsumeOk,), consumer)
    (answered,) = receive(state, wire(spec.Basic.ConsumeOk(consumer_tag=tag)))
    assert isinstance(answered, Answered)
    state.forget()
    return state


# -- the property tests -----------------------------------------------------------------------

bodies = st.binary(min_size=0, max_size=300)
cut_lists = st.lists(st.integers(0, 300), max_size=8)


@settings(max_examples=200, deadline=None)
@given(
    messages=st.lists(st.tuples(bodies, cut_lists), min_size=1, max_size=6),
    chunks=st.lists(st.integers(1, 64), min_size=1, max_size=20),
)
def test_messages_assemble_over_any_body_split_and_any_read_size(
    messages: list[tuple[bytes, list[int]]], chunks: list[int]
) -> None:
    """Deliveries whose bodies come in frames cut anywhere, read from a socket in chunks of
    any size, come out whole, once each, in order, for their consumer."""
    state = consuming()
    stream = b"".join(
        message(deliver(tag), body, cuts, message_id=f"m{tag}")
        for tag, (body, cuts) in enumerate(messages, start=1)
    )
    splitter = FrameSplitter()
    events: list[ChannelEvent[str]] = []
    offset, turn = 0, 0
    while offset < len(stream):
        size = chunks[turn % len(chunks)]
        turn += 1
        for frame in splitter.feed(stream[offset : offset + size]):
            events.extend(state.receive(frame))
        offset += size
    assert all(isinstance(event, Delivered) for event in events)
    got = [(e.delivery.delivery_tag, e.delivery.body, e.consumer) for e in events]  # type: ignore[union-attr]
    assert got == [(tag, body, "callback") for tag, (body, _) in enumerate(messages, start=1)]
    ids = [e.delivery.properties.message_id for e in events]  # type: ignore[union-attr]
    assert ids == [f"m{tag}" for tag in range(1, len(messages) + 1)]


@dataclass
class Broker:
    """RabbitMQ's side of one confirm channel: what it has taken, returned and confirmed."""

    published: list[int] = field(default_factory=list)
    ids: dict[int, str | None] = field(default_factory=dict)
    unroutable: set[int] = field(default_factory=set)
    """Mandatory publishes it cannot route: each is returned before it is confirmed."""
    returned: set[int] = field(default_factory=set)
    unconfirmed: set[int] = field(default_factory=set)
    outcomes: dict[int, str] = field(default_factory=dict)
    """What the client must conclude of each publish: ok, nack or returned."""

    def confirmable(self) -> list[int]:
        return sorted(t for t in self.unconfirmed if t not in self.unroutable - self.returned)

    def confirm(self, tag: int, *, multiple: bool, nack: bool) -> bytes:
        covered = {t for t in self.unconfirmed if t <= tag} if multiple else {tag}
        assert covered <= set(self.confirmable())
        for each in covered:
            self.unconfirmed.discard(each)
            self.outcomes[each] = "nack" if nack else "returned" if each in self.returned else "ok"
        kind = spec.Basic.Nack if nack else spec.Basic.Ack
        return wire(kind(delivery_tag=tag, multiple=multiple))


def outcome_of(event: Confirmed) -> str:
    return "nack" if event.nack else "returned" if event.returned is not None else "ok"


@settings(max_examples=150, deadline=None)
@given(data=st.data(), steps=st.integers(1, 40), close_at_end=st.booleans())
def test_confirms_returns_and_a_close_settle_each_publish_exactly_once(
    data: st.DataObject, steps: int, close_at_end: bool
) -> None:
    """Publishes, returns and confirms (acks and nacks, single and multiple) in any order
    RabbitMQ allows: each publish is settled once, as the frame that covered it says (a
    returned one as returned, its return read before its confirm); a close ends exactly the
    unconfirmed ones; a closed channel reads nothing more."""
    state: ChannelState[str] = ChannelState(CH, confirms=True)
    broker = Broker()
    seen: dict[int, str] = {}

    def read(stream: bytes) -> list[ChannelEvent[str]]:
        events = receive(state, stream)
        for event in events:
            if isinstance(event, Confirmed):
                assert event.sequence not in seen, f"publish {event.sequence} settled twice"
                seen[event.sequence] = outcome_of(event)
        return events

    for _ in range(steps):
        action = data.draw(st.sampled_from(["publish", "return", "confirm"]))
        if action == "publish":
            mandatory = data.draw(st.booleans())
            with_id = data.draw(st.booleans())
            number = len(broker.published) + 1
            body = f"body {number}".encode()
            message_id = f"id-{number}" if with_id else None
            tag = state.published(message_id, "x", "rk", mandatory=mandatory, body=body)
            assert tag == number
            broker.ids[tag] = message_id
            broker.published.append(tag)
            broker.unconfirmed.add(tag)
            if mandatory and data.draw(st.booleans()):
                broker.unroutable.add(tag)
        elif action == "return":
            waiting = sorted(broker.unroutable - broker.returned)
            if not waiting:
                continue
            tag = data.draw(st.sampled_from(waiting))
            broker.returned.add(tag)
            # the message with the id it was published with, or without one, and its body
            body, cuts = f"body {tag}".encode(), data.draw(cut_lists)
            assert read(message(NO_ROUTE, body, cuts, message_id=broker.ids[tag])) == []
        else:
            confirmable = broker.confirmable()
            if not confirmable:
                continue
            tag = data.draw(st.sampled_from(confirmable))
            multiple = data.draw(st.booleans())
            if multiple and any(t <= tag for t in set(broker.unconfirmed) - set(confirmable)):
                multiple = False  # an unroutable publish below waits for its return
            nack = data.draw(st.integers(0, 5)) == 0
            read(broker.confirm(tag, multiple=multiple, nack=nack))
        assert seen == broker.outcomes
        assert set(state.pending) == broker.unconfirmed
    if close_at_end:
        events = read(
            wire(
                spec.Channel.Close(
                    reply_code=406, reply_text="PRECONDITION_FAILED", class_id=0, method_id=0
                )
            )
        )
        assert isinstance(events[0], Send)  # the close-ok, first
        gone = events[1]
        assert isinstance(gone, ChannelGone)
        assert gone.reply_code == 406
    else:
        gone = state.gone()  # the connection ended
        assert gone is not None
        assert gone.reply_code is None
    assert set(gone.pending) == broker.unconfirmed
    assert list(gone.pending) == sorted(gone.pending)
    assert set(seen).isdisjoint(gone.pending)
    assert set(seen) | set(gone.pending) == set(broker.published)
    assert state.closed
    assert state.pending == ()
    assert read(wire(spec.Basic.Ack(delivery_tag=len(broker.published), multiple=True))) == []
    assert state.gone() is None


# -- each event -------------------------------------------------------------------------------


def test_a_delivery_for_no_consumer_is_orphaned() -> None:
    state = consuming()
    (event,) = receive(state, message(deliver(1, "other"), b"abc", []))
    assert isinstance(event, Orphaned)
    assert event.delivery.body == b"abc"


def test_an_empty_body_needs_no_body_frame() -> None:
    state = consuming()
    (event,) = receive(state, wire(deliver(7), ContentHeader(0, 0, spec.Basic.Properties())))
    assert isinstance(event, Delivered)
    assert event.delivery.body == b""
    assert event.delivery.delivery_tag == 7


def test_frames_out_of_place_are_refused() -> None:
    state = consuming()
    with pytest.raises(FrameError, match="body frame without"):
        receive(state, body_bytes(BODY, CH, b"x"))
    with pytest.raises(FrameError, match="content header without"):
        receive(state, wire(ContentHeader(0, 1, spec.Basic.Properties())))


def test_a_get_ok_answers_the_get_with_its_message() -> None:
    state: ChannelState[str] = ChannelState(CH, confirms=False)
    state.ask(spec.Basic.Get(queue="q"), (spec.Basic.GetOk, spec.Basic.GetEmpty))
    get_ok = spec.Basic.GetOk(delivery_tag=3, exchange="", routing_key="q", message_count=5)
    (event,) = receive(state, message(get_ok, b"hello", [2]))
    assert isinstance(event, Answered)
    assert event.result.body == b"hello"
    assert event.result.message_count == 5


def test_an_answer_nobody_asked_for() -> None:
    state: ChannelState[str] = ChannelState(CH, confirms=False)
    (unasked,) = receive(state, wire(spec.Queue.PurgeOk(message_count=1)))
    assert isinstance(unasked, Unasked)
    assert isinstance(unasked.method, spec.Queue.PurgeOk)
    state.ask(spec.Queue.Purge(queue="q"), (spec.Queue.PurgeOk,))
    assert isinstance(
        receive(state, wire(spec.Queue.DeclareOk(queue="q", message_count=0, consumer_count=0)))[0],
        Unasked,
    )
    (answered,) = receive(state, wire(spec.Queue.PurgeOk(message_count=2)))
    assert isinstance(answered, Answered)
    assert isinstance(receive(state, wire(spec.Queue.PurgeOk(message_count=2)))[0], Unasked)


def test_the_lifecycle_open_closing_closed_by_rr() -> None:
    state = consuming()
    assert state.phase is Phase.OPEN
    state.ask(
        spec.Channel.Close(reply_code=200, reply_text="bye", class_id=0, method_id=0),
        (spec.Channel.CloseOk,),
    )
    assert state.phase is Phase.CLOSING
    events = receive(state, wire(spec.Channel.CloseOk()))
    assert [type(event) for event in events] == [Answered, ChannelGone]
    assert isinstance(events[0].result, spec.Channel.CloseOk)  # type: ignore[union-attr]
    assert events[1] == ChannelGone(None, "", (), asked=False)
    assert state.phase is Phase.CLOSED
    assert receive(state, message(deliver(1), b"late", [])) == []


def test_a_close_by_the_broker_is_answered_and_fails_the_request_in_flight() -> None:
    state = consuming()
    state.ask(spec.Queue.Declare(queue="q", passive=True), (spec.Queue.DeclareOk,))
    close = spec.Channel.Close(
        reply_code=404, reply_text="NOT_FOUND - no queue 'q'", class_id=50, method_id=10
    )
    send, gone = receive(state, wire(close))
    assert send == Send(wire(spec.Channel.CloseOk()))
    assert gone == ChannelGone(404, "NOT_FOUND - no queue 'q'", (), asked=True)


def test_flow_is_answered() -> None:
    state = consuming()
    assert receive(state, wire(spec.Channel.Flow(active=False))) == [
        Send(wire(spec.Channel.FlowOk(active=False)))
    ]


def test_a_cancel_by_the_broker_drops_an_unwatched_consumer() -> None:
    state = consuming()
    events = receive(state, wire(spec.Basic.Cancel(consumer_tag="ctag")))
    assert events == [Send(wire(spec.Basic.CancelOk(consumer_tag="ctag")))]
    assert state.consumer("ctag") is None
    assert isinstance(receive(state, message(deliver(1), b"x", []))[0], Orphaned)


def test_a_cancel_by_the_broker_keeps_a_watched_consumer_and_is_told_once() -> None:
    state = consuming()
    state.watch("ctag")
    events = receive(state, wire(spec.Basic.Cancel(consumer_tag="ctag", nowait=True)))
    assert events == [ConsumerCancelled("ctag", "callback")]  # nowait: no cancel-ok
    assert isinstance(receive(state, message(deliver(1), b"x", []))[0], Delivered)
    events = receive(state, wire(spec.Basic.Cancel(consumer_tag="ctag", nowait=True)))
    assert events == []
    assert state.consumer("ctag") is None


def test_a_cancel_ok_drops_the_consumer() -> None:
    state = consuming()
    state.unwatch("ctag")
    state.ask(spec.Basic.Cancel(consumer_tag="ctag"), (spec.Basic.CancelOk,))
    receive(state, wire(spec.Basic.CancelOk(consumer_tag="ctag")))
    assert state.consumer("ctag") is None


def test_a_return_matching_no_publish() -> None:
    state: ChannelState[str] = ChannelState(CH, confirms=True)
    state.published("a", "x", "rk", mandatory=False, body=b"")  # not mandatory: never returned
    assert receive(state, message(NO_ROUTE, b"b", [], message_id="a")) == [
        ReturnUnmatched("a", "rk")
    ]


def test_a_return_without_id_matches_by_body() -> None:
    state: ChannelState[str] = ChannelState(CH, confirms=True)
    state.published(None, "x", "rk", mandatory=True, body=b"one")
    state.published(None, "x", "rk", mandatory=True, body=b"two")
    assert receive(state, message(NO_ROUTE, b"two", [1])) == []
    events = receive(state, wire(spec.Basic.Ack(delivery_tag=2, multiple=True)))
    assert [(e.sequence, e.returned is not None) for e in events] == [(1, False), (2, True)]  # type: ignore[union-attr]


def test_a_confirm_of_nothing_pending_is_ignored() -> None:
    state: ChannelState[str] = ChannelState(CH, confirms=True)
    assert receive(state, wire(spec.Basic.Ack(delivery_tag=5))) == []


def test_the_connection_s_channel_zero() -> None:
    state = ConnectionState()
    heartbeat = split(HEARTBEAT_FRAME)[0]
    start = spec.Connection.Start(mechanisms="PLAIN")
    (handshake,) = state.receive(split(wire(start, channel=0))[0])
    assert isinstance(handshake, HandshakeMethod)
    assert isinstance(handshake.method, spec.Connection.Start)
    tune_ok = state.tune(spec.Connection.Tune(channel_max=0, frame_max=4096, heartbeat=60), 30)
    assert (state.frame_max, state.channel_max, state.heartbeat_s) == (4096, 2047, 30)
    assert tune_ok == wire(
        spec.Connection.TuneOk(channel_max=2047, frame_max=4096, heartbeat=30), channel=0
    )
    state.tune(spec.Connection.Tune(channel_max=10, frame_max=0, heartbeat=60), 0)
    assert (state.frame_max, state.channel_max, state.heartbeat_s) == (131_072, 10, 0)
    state.opened = True
    assert state.receive(heartbeat) == ()
    blocked = wire(spec.Connection.Blocked(reason="low on memory"), channel=0)
    assert state.receive(split(blocked)[0]) == (Blocked("low on memory"),)
    assert state.receive(split(wire(spec.Connection.Unblocked(), channel=0))[0]) == (Blocked(None),)
    assert state.receive(split(wire(spec.Connection.CloseOk(), channel=0))[0]) == (CloseAnswered(),)
    close = spec.Connection.Close(
        reply_code=320, reply_text="CONNECTION_FORCED", class_id=0, method_id=0
    )
    assert state.receive(split(wire(close, channel=0))[0]) == (
        Send(wire(spec.Connection.CloseOk(), channel=0)),
        ConnectionClosed(320, "CONNECTION_FORCED"),
    )


def test_free_numbers() -> None:
    assert free_number({}, 3) == 1
    assert free_number({1: "a", 3: "c"}, 3) == 2
    assert free_number({1, 2, 3}, 3) is None


@settings(max_examples=100, deadline=None)
@given(body=st.binary(max_size=5000), frame_max=st.integers(4096 - 200, 4096))
def test_a_publish_is_cut_into_frames_within_frame_max(body: bytes, frame_max: int) -> None:
    data = publish_frames(CH, "publish", body, "x", "rk", Properties(), True, frame_max)
    frames = split(data)
    assert [f.kind for f in frames[:2]] == [1, 2]
    assert all(len(f.payload) + 8 <= frame_max for f in frames[2:])
    assert b"".join(f.payload for f in frames[2:]) == body


def test_an_unencodable_publish_is_a_data_error() -> None:
    with pytest.raises(DataError, match="Routing key too long"):
        publish_frames(CH, "publish", b"", "x", "k" * 256, None, False, 4096)


def test_the_state_does_no_io() -> None:
    """Sans-I/O: no asyncio, no socket, no clock, no thread, and not its shell."""
    tree = ast.parse(Path(native_state.__file__).read_text())
    imported = {
        name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for name in (
            [alias.name for alias in node.names]
            if isinstance(node, ast.Import)
            else [node.module or ""]
        )
    }
    io = {"asyncio", "socket", "ssl", "selectors", "time", "threading", "os", "logging"}
    assert not {name.split(".")[0] for name in imported} & io
    assert "rabbitctl_retry.transport.native" not in imported
