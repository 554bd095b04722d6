"""The consumer's lifecycle (runtime/consumer_state.py) driven through random orders of the
events the real world allows, with the settle window of each channel (ops/settlement.py) as
runtime/consumer.py and runtime/consumer_watch.py use them, checked against a model of RabbitMQ.

The world: a queue, the consumer's channels one after the other, and on each the frames
both ways in order (deliveries, consume-ok and the server's ``basic.cancel`` to rr; acks,
rejects, nacks, ``basic.cancel`` and ``basic.consume`` to the broker), read and processed
at any moment. Handlers finish in any order with any outcome. The broker may cancel a
consumer (its queue deleted), time one out as RabbitMQ 4.3 does (the timed-out delivery
goes back to the queue, the consumer is cancelled, and revived by a settle of that delivery:
what it is handed then reaches rr after the cancel), or close the channel; a restart may
fail and back off; the stop may come at any moment, the connection go. The checks:

* every delivery rr reads is recorded, then handled once or, for a consumer the broker
  cancelled, given back (``basic.nack``); a handled one is settled once, as its handler
  said, or goes back with its channel; no frame names a tag the channel does not hold
  ("unknown delivery tag" closes the channel), and no multiple ack covers a delivery that was
  not handled with an ack;
* no message is lost or removed twice;
* after a cancel or a closed channel the consumer consumes again (when left alone), with the
  restart backoff;
* a handler's pause cancels the consumer (once per pause) and, the pause over, the consumer
  consumes again; a stop during a pause stops;
* a stop takes no new consumer, drains: every decision is written before the channel
  closes, and leaves no consumer active.
"""

from __future__ import annotations

import random
from collections import Counter, deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from hypothesis import given, settings
from hypothesis import strategies as st

from rabbitctl_retry.ops.settlement import AckFrame, NackFrame, SettleFrame, SettleWindow
from rabbitctl_retry.runtime.consumer_state import (
    RESTART_BACKOFF,
    ConsumerPhase,
    ConsumerState,
    Watch,
)

T = TypeVar("T")
ACK, REQUEUE, DROP, GIVE_BACK = "ack", "requeue", "drop", "give back"
PAUSE = "pause"
"""A handler paused the queue: its message is given back (``basic.nack``), the consumer
cancelled until the pause is over."""


class UnknownDeliveryTag(AssertionError):
    """The broker would close the channel: PRECONDITION_FAILED - unknown delivery tag."""


@dataclass
class Consumer:
    """One consumer as the broker holds it."""

    tag: str
    channel: int
    state: str = "active"
    """``active``; ``timed out`` (cancelled by a 4.3 consumer timeout, revived by a settle of
    its timed-out delivery); ``revived``; ``gone``."""
    timed_out: int | None = None
    """The delivery tag that timed out."""


@dataclass
class Channel:
    """One channel: the broker's side, the wire both ways, rr's settle window."""

    number: int
    open: bool = True
    next_tag: int = 1
    outstanding: dict[int, int] = field(default_factory=dict)
    """Delivery tag -> message, not settled at the broker."""
    consumer_of: dict[int, str] = field(default_factory=dict)
    timed_out: set[int] = field(default_factory=set)
    """Tags whose message the broker took back (a 4.3 consumer timeout): a settle of one is
    still accepted, and changes nothing."""
    to_client: deque[tuple[str, str, int]] = field(default_factory=deque)
    """``("deliver", consumer tag, delivery tag)``, ``("cancel", consumer tag, 0)``,
    ``("consume-ok", consumer tag, 0)``."""
    to_broker: deque[SettleFrame | tuple[str, str]] = field(default_factory=deque)
    """Settle frames, ``("cancel", tag)``, ``("consume", tag)``."""
    window: SettleWindow = field(default_factory=SettleWindow)
    force_singles: bool = False
    forgotten: bool = False


@dataclass
class World:
    random: random.Random
    """Picks the next event and what it says (a seed drawn by hypothesis)."""
    messages: int
    prefetch: int
    state: ConsumerState = field(default_factory=ConsumerState)
    queue: deque[int] = field(default_factory=deque)
    removed: Counter[int] = field(default_factory=Counter)
    channels: list[Channel] = field(default_factory=list)
    consumers: dict[str, Consumer] = field(default_factory=dict)
    next_consumer: int = 1
    handlers: list[tuple[int, int, int]] = field(default_factory=list)
    """Handlers running: (channel, delivery tag, message)."""
    watcher: str = "waiting"
    confirmed: tuple[int, str] | None = None
    """A consume-ok read, whose awaiting coroutine has not resumed yet."""
    """``waiting``, ``recovering``, ``backing off``, ``consuming`` (consume-ok awaited),
    ``done``."""
    failures: int = 0
    stopped: bool = False
    lost: bool = False
    # what the test saw
    received: set[tuple[int, int]] = field(default_factory=set)
    handled: set[tuple[int, int]] = field(default_factory=set)
    given_back: set[tuple[int, int]] = field(default_factory=set)
    decided: dict[tuple[int, int], str] = field(default_factory=dict)
    settled: Counter[tuple[int, int]] = field(default_factory=Counter)
    returned: set[tuple[int, int]] = field(default_factory=set)
    """Deliveries that went back with their channel, or timed out."""
    cancels_seen: set[str] = field(default_factory=set)
    """Consumer tags whose cancel rr read from the server."""
    delays: list[tuple[int, float]] = field(default_factory=list)
    """(failures in a row, backoff) of each failed restart."""
    pauses: int = 0
    """Pauses started (each cancelled the consumer)."""
    now: float = 0.0

    def __post_init__(self) -> None:
        self.queue.extend(range(self.messages))
        self._open_channel()
        self._send_consume()
        self.watcher = "starting"

    # -- helpers ---------------------------------------------------------------------------

    def pick(self, items: Sequence[T]) -> T:
        return items[self.random.randrange(len(items))]

    @property
    def channel(self) -> Channel:
        return self.channels[-1]

    def _open_channel(self) -> None:
        self.channels.append(Channel(len(self.channels)))

    def _send_consume(self) -> None:
        tag = f"ctag{self.next_consumer}"
        self.next_consumer += 1
        self.channel.to_broker.append(("consume", tag))

    def _unacked(self, consumer: Consumer) -> int:
        channel = self.channels[consumer.channel]
        return sum(
            1
            for tag, owner in channel.consumer_of.items()
            if owner == consumer.tag and tag in channel.outstanding
        )

    # -- the events ------------------------------------------------------------------------

    def enabled(self, *, disruptions: bool) -> list[str]:
        events: list[str] = []
        if self.queue and any(self._may_deliver(c) for c in self.consumers.values()):
            events.append("deliver")
        if any(c.open and c.to_client for c in self.channels):
            events.append("receive")
        if self.handlers:
            events.append("finish")
        if self.confirmed is not None:
            events.append("resume")
        if any(c.open and not c.forgotten and len(c.window) for c in self.channels):
            events.append("flush")
        if any(c.open and c.to_broker for c in self.channels):
            events.append("process")
        if self.watcher == "waiting" and (
            not self.channel.open
            or self.state.watcher_wanted
            or self.state.stopping
            or self.state.paused
        ):
            events.append("watch")
        if self.watcher == "paused":
            events.append("unpause")
        if self.watcher in ("recovering", "backing off"):
            events.append("restart")
        if disruptions and self.watcher != "starting":
            if any(c.state == "active" for c in self.consumers.values()):
                events.append("cancel")
            if any(self._may_time_out(c) for c in self.consumers.values()):
                events.append("time out")
            if self.channel.open:
                events.append("close")
        return events

    def step(self, event: str) -> None:
        getattr(self, "_" + event.replace(" ", "_"))()

    def _may_deliver(self, consumer: Consumer) -> bool:
        return (
            consumer.state in ("active", "revived")
            and self.channels[consumer.channel].open
            and self._unacked(consumer) < self.prefetch
        )

    def _may_time_out(self, consumer: Consumer) -> bool:
        channel = self.channels[consumer.channel]
        return consumer.state == "active" and any(
            channel.consumer_of[tag] == consumer.tag for tag in channel.outstanding
        )

    def _deliver(self) -> None:
        consumer = self.pick([c for c in self.consumers.values() if self._may_deliver(c)])
        channel = self.channels[consumer.channel]
        message = self.queue.popleft()
        tag = channel.next_tag
        channel.next_tag += 1
        channel.outstanding[tag] = message
        channel.consumer_of[tag] = consumer.tag
        channel.to_client.append(("deliver", consumer.tag, tag))

    def _receive(self) -> None:
        channel = self.pick([c for c in self.channels if c.open and c.to_client])
        kind, consumer_tag, tag = channel.to_client.popleft()
        if kind == "cancel":
            self.cancels_seen.add(consumer_tag)
            self.state.server_cancelled(consumer_tag)
        elif kind == "consume-ok":
            # the client resolves the consume; the coroutine that awaits it resumes later
            assert self.watcher in ("starting", "consuming"), self.watcher
            assert self.confirmed is None
            self.confirmed = (channel.number, consumer_tag)
        else:  # QueueConsumer._on_delivery
            key = (channel.number, tag)
            self.received.add(key)
            channel.window.delivered(tag)  # first: every delivery is in the window
            if self.state.delivered(consumer_tag):
                assert consumer_tag not in self.cancels_seen, "handled for a cancelled one"
                self.handled.add(key)
                self.handlers.append((channel.number, tag, channel.outstanding.get(tag, -1)))
            else:
                assert consumer_tag in self.cancels_seen
                assert channel.window.give_back(tag)
                self.given_back.add(key)
                self.decided[key] = GIVE_BACK

    def _resume(self) -> None:
        """ConsumerWatch._consume resumes after its consume-ok."""
        assert self.confirmed is not None
        number, consumer_tag = self.confirmed
        self.confirmed = None
        channel = self.channels[number]
        if not self.state.consuming(consumer_tag):
            assert self.stopped, "a consumer refused while no stop was asked for"
            if channel.open:
                channel.to_broker.append(("cancel", consumer_tag))
        self.watcher = "waiting"

    def _finish(self) -> None:
        number, tag, _ = handler = self.pick(self.handlers)
        self.handlers.remove(handler)
        channel = self.channels[number]
        outcome = self.pick([ACK, ACK, ACK, REQUEUE, DROP, PAUSE])
        if outcome == PAUSE:  # ConsumerWatch.pause, then the give-back
            was = self.state.phase
            resume_at = self.state.resume_at_s
            if self.state.pause(self.now + self.pick([1.0, 2.0])):
                assert was is ConsumerPhase.CONSUMING
                self.pauses += 1
                tag_to_cancel = self.state.own_cancel()
                assert tag_to_cancel is not None
                if self.channel.open:
                    self.channel.to_broker.append(("cancel", tag_to_cancel))
            elif was is ConsumerPhase.PAUSED:  # extended, never shortened
                assert resume_at is not None
                assert self.state.resume_at_s is not None
                assert self.state.resume_at_s >= resume_at
            else:
                assert self.state.phase is was  # not taken
            decided = channel.window.give_back(tag)
            outcome = GIVE_BACK
        else:
            decided = (
                channel.window.ack(tag)
                if outcome == ACK
                else channel.window.reject(tag, requeue=outcome == REQUEUE)
            )
        if decided:
            self.decided[number, tag] = outcome
        else:
            assert channel.forgotten, "a decision refused on a channel that is open"
        idle = self.state.handled()
        assert idle == (not self.handlers)

    def _flush(self) -> None:
        channel = self.pick(
            [c for c in self.channels if c.open and not c.forgotten and len(c.window)]
        )
        self._flush_channel(channel, singles=False)

    def _flush_channel(self, channel: Channel, *, singles: bool) -> None:
        threshold = max(1, self.prefetch // 2)
        channel.to_broker.extend(
            channel.window.frames(
                singles=singles or channel.force_singles or channel.window.pending_acks >= threshold
            )
        )

    def _process(self) -> None:
        channel = self.pick([c for c in self.channels if c.open and c.to_broker])
        self._process_one(channel)

    def _process_one(self, channel: Channel) -> None:
        item = channel.to_broker.popleft()
        if isinstance(item, tuple):
            kind, consumer_tag = item
            if kind == "consume":
                self.consumers[consumer_tag] = Consumer(consumer_tag, channel.number)
                channel.to_client.append(("consume-ok", consumer_tag, 0))
            elif consumer_tag in self.consumers:  # basic.cancel from rr
                self.consumers[consumer_tag].state = "gone"
            return
        if item.tag not in channel.outstanding:
            raise UnknownDeliveryTag(f"channel {channel.number}: unknown delivery tag {item.tag}")
        if isinstance(item, AckFrame):
            covered = (
                [t for t in channel.outstanding if t <= item.tag] if item.multiple else [item.tag]
            )
        else:
            covered = [item.tag]
        for tag in covered:
            key = (channel.number, tag)
            said = self.decided.get(key)
            if isinstance(item, AckFrame):
                assert said == ACK, f"{key} acked, its handler said {said}"
            elif isinstance(item, NackFrame):
                assert said == GIVE_BACK, f"{key} given back, its handler said {said}"
            else:
                assert said == (REQUEUE if item.requeue else DROP), (key, said)
            self.settled[key] += 1
            message = channel.outstanding.pop(tag)
            if tag in channel.timed_out:
                self._revive(channel.consumer_of[tag], tag)
                continue  # the broker took it back already
            if said in (ACK, DROP):
                self.removed[message] += 1
            else:
                self.queue.append(message)

    def _revive(self, consumer_tag: str, tag: int) -> None:
        consumer = self.consumers[consumer_tag]
        if consumer.state == "timed out" and consumer.timed_out == tag:
            consumer.state = "revived"

    def _watch(self) -> None:
        """ConsumerWatch._watch woke."""
        channel = self.channel
        watch = self.state.woke(channel_closed=not channel.open, connection_closed=self.lost)
        if watch is Watch.STOP:
            self.watcher = "done"
            return
        if watch is Watch.PAUSE:
            self.watcher = "paused"
            return
        self._reconsume(watch)

    def _unpause(self) -> None:
        """ConsumerWatch._sit_out_the_pause: the clock reached the resume time, or a stop came
        (its wait cut short)."""
        channel = self.channel
        if self.state.paused:
            assert self.state.resume_at_s is not None
            self.now = max(self.now, self.state.resume_at_s)
        watch = self.state.resumed(channel_closed=not channel.open)
        if watch is Watch.STOP:
            self.watcher = "waiting"  # the watcher's loop sees the stop
            return
        assert self.state.own_cancel() is None  # cancelled when the pause began
        self.failures = 0
        if watch is Watch.REOPEN:
            channel.window.forget()
            channel.forgotten = True
        self.watcher = "recovering"

    def _reconsume(self, watch: Watch) -> None:
        channel = self.channel
        # a closed channel is replaced (its deliveries went back), an open one consumes again
        assert (watch is Watch.REOPEN) == (not channel.open), watch
        self.failures = 0
        if watch is Watch.REOPEN:
            channel.window.forget()
            channel.forgotten = True
        if watch is Watch.RECONSUME:
            tag = self.state.own_cancel()
            if tag is not None and channel.open:
                channel.to_broker.append(("cancel", tag))
            channel.force_singles = True
            if channel.open:
                self._flush_channel(channel, singles=True)
        self.watcher = "recovering"

    def _restart(self) -> None:
        """One step of ConsumerWatch._restart."""
        if self.watcher == "backing off":  # the backoff is over, or cut short by a stop
            self.watcher = "recovering"
            if self.state.stopping:
                self.watcher = "done"
            return
        if self.pick((True, True, False)):  # recover() and the consume went out
            if self.state.stopping:
                self.watcher = "done"
                return
            if not self.channel.open:
                self._open_channel()
            self._send_consume()
            self.watcher = "consuming"
            return
        delay_s = self.state.restart_failed()
        self.failures += 1
        self.delays.append((self.failures, delay_s))
        self.watcher = "backing off"

    def _cancel(self) -> None:
        """The broker cancels a consumer (its queue deleted, its node down)."""
        consumer = self.pick([c for c in self.consumers.values() if c.state == "active"])
        consumer.state = "gone"
        self.channels[consumer.channel].to_client.append(("cancel", consumer.tag, 0))

    def _time_out(self) -> None:
        """RabbitMQ 4.3's consumer timeout: one delivery goes back uncounted, its consumer is
        cancelled, and revived by a settle of that delivery."""
        consumer = self.pick([c for c in self.consumers.values() if self._may_time_out(c)])
        channel = self.channels[consumer.channel]
        tag = self.pick([t for t in channel.outstanding if channel.consumer_of[t] == consumer.tag])
        channel.timed_out.add(tag)
        self.queue.append(channel.outstanding[tag])
        self.returned.add((channel.number, tag))
        consumer.state = "timed out"
        consumer.timed_out = tag
        channel.to_client.append(("cancel", consumer.tag, 0))

    def _close(self) -> None:
        """The channel closes (a channel error, 3.10's consumer timeout, an operator)."""
        self._channel_closes(self.channel)
        if self.watcher == "consuming" and self.confirmed is None:  # the consume raised
            delay_s = self.state.restart_failed()
            self.failures += 1
            self.delays.append((self.failures, delay_s))
            self.watcher = "backing off"

    def _channel_closes(self, channel: Channel) -> None:
        """Whatever rr had not settled on it goes back to the queue."""
        channel.open = False
        for tag, message in sorted(channel.outstanding.items()):
            if tag not in channel.timed_out:
                self.queue.append(message)
            self.returned.add((channel.number, tag))
        channel.outstanding.clear()
        channel.to_client.clear()
        channel.to_broker.clear()
        for consumer in self.consumers.values():
            if consumer.channel == channel.number:
                consumer.state = "gone"

    def _stop(self) -> None:
        """QueueConsumer.stop_consuming."""
        self.stopped = True
        tag = self.state.stop()
        if tag is not None and self.channel.open:
            self.channel.to_broker.append(("cancel", tag))

    # -- the end ---------------------------------------------------------------------------

    def run_until(self, done: str, *, limit: int = 20_000) -> None:
        for _ in range(limit):
            if getattr(self, done)():
                return
            events = [e for e in self.enabled(disruptions=False) if e != "deliver"]
            if not events:
                return
            self.step(self.pick(events))
        raise AssertionError(f"never {done}")  # pragma: no cover

    def quiet(self) -> bool:
        return (
            self.watcher in ("waiting", "done")
            and self.confirmed is None
            and not self.state.watcher_wanted
            and not self.state.paused
            and not any(c.open and (c.to_client or c.to_broker) for c in self.channels)
            and (self.channel.open or self.watcher == "done")
        )

    def idle(self) -> bool:
        """After a stop: no handler runs, the watcher is done, nothing is on its way."""
        return not self.handlers and self.watcher == "done" and self.quiet()

    def close(self) -> None:
        """QueueConsumer.wait_idle then close: drain, forget, close the channel."""
        channel = self.channel
        if channel.open:
            self._flush_channel(channel, singles=True)
            while channel.to_broker:
                self._process_one(channel)
        self.state.stop()
        self.state.closed()
        if channel.open:
            assert not [
                key
                for key, said in self.decided.items()
                if key[0] == channel.number and not self.settled[key]
            ], "a decision not written before the channel closed"
            active = [c.tag for c in self.consumers.values() if c.state == "active"]
            assert active == [], f"consumers left active after the stop: {active}"
            self._channel_closes(channel)


@settings(max_examples=1000, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    messages=st.integers(0, 40),
    prefetch=st.integers(1, 6),
    steps=st.integers(0, 400),
    disrupt_every=st.integers(2, 40),
    stop_at=st.none() | st.integers(0, 400),
    lose_at=st.none() | st.integers(0, 400),
)
def test_any_order_of_events_settles_every_delivery_once(
    seed: int,
    messages: int,
    prefetch: int,
    steps: int,
    disrupt_every: int,
    stop_at: int | None,
    lose_at: int | None,
) -> None:
    world = World(random.Random(seed), messages, prefetch)
    for step in range(steps):
        if step == stop_at and not world.stopped:
            world.step("stop")
        if step == lose_at:
            world.lost = True
            break
        events = world.enabled(disruptions=step % disrupt_every == 0 and not world.stopped)
        if not events:
            break
        world.step(world.pick(events))

    if world.lost:
        # the service abandons the consumer: every channel's deliveries go back
        world.state.closed()
        for channel in world.channels:
            if channel.open:
                world._channel_closes(channel)
        assert world.state.stopping
    else:
        if not world.stopped:
            # left alone, the consumer consumes again after whatever happened
            world.run_until("quiet")
            assert world.state.phase is ConsumerPhase.CONSUMING, world.state.phase
            consumer = world.consumers[world.state.consumer_tag or ""]
            assert consumer.state == "active"
            assert consumer.channel == world.channel.number
            # every consumer the broker cancelled, rr cancelled too (4.3 would revive it)
            others = [c for c in world.consumers.values() if c is not consumer]
            assert all(c.state == "gone" for c in others), others
            world.step("stop")
        world.run_until("idle")
        assert world.idle(), "the stop never drained"
        world.close()

    # every delivery rr read was handled or given back, never both
    assert world.handled | world.given_back == world.received
    assert not world.handled & world.given_back
    # each was settled at most once; one not settled went back with its channel
    assert all(count == 1 for count in world.settled.values())
    for key in world.received:
        assert world.settled[key] == 1 or key in world.returned, f"{key} neither settled nor back"
    # no message lost or removed twice
    assert all(count == 1 for count in world.removed.values())
    assert len(world.queue) + len(world.removed) == messages
    assert sorted([*world.queue, *world.removed]) == list(range(messages))
    # the restart backoff
    assert all(delay == RESTART_BACKOFF.delay_s(n) for n, delay in world.delays)
    assert world.state.phase is ConsumerPhase.CLOSED


def test_a_delivery_for_a_cancelled_consumer_is_given_back_and_not_counted() -> None:
    state = ConsumerState()
    assert state.consuming("a")
    assert state.delivered("a")
    state.server_cancelled("a")
    assert state.watcher_wanted
    assert not state.delivered("a")  # a stray: RabbitMQ 4.3 revived the consumer
    assert state.in_flight == 1
    assert state.woke(channel_closed=False, connection_closed=False) is Watch.RECONSUME
    assert state.own_cancel() == "a"
    assert state.own_cancel() is None
    assert state.consuming("b")
    assert state.handled()


def test_a_consumer_confirmed_after_the_stop_is_cancelled_at_once() -> None:
    state = ConsumerState()
    assert state.consuming("a")
    state.server_cancelled("a")
    assert state.woke(channel_closed=False, connection_closed=False) is Watch.RECONSUME
    assert state.stop() is None  # the new consumer is not confirmed yet
    assert not state.consuming("b")  # its consume-ok comes after the stop
    assert state.woke(channel_closed=False, connection_closed=False) is Watch.STOP


def test_a_cancel_that_overtakes_the_consume_ok_wakes_the_watcher() -> None:
    state = ConsumerState()
    state.server_cancelled("a")  # the broker cancelled it before rr read its consume-ok
    assert state.consuming("a")
    assert state.watcher_wanted
    assert state.woke(channel_closed=False, connection_closed=False) is Watch.RECONSUME
    assert state.own_cancel() == "a"


def test_restarts_back_off_and_start_again_from_the_first_delay() -> None:
    state = ConsumerState()
    assert state.consuming("a")
    assert state.woke(channel_closed=True, connection_closed=False) is Watch.REOPEN
    assert [state.restart_failed() for _ in range(4)] == [0.5, 1.0, 2.0, 4.0]
    assert state.consuming("b")
    state.server_cancelled("b")
    state.woke(channel_closed=False, connection_closed=False)
    assert state.restart_failed() == 0.5


def test_a_pause_cancels_the_consumer_and_a_later_one_only_moves_the_resume_time_out() -> None:
    state = ConsumerState()
    assert not state.pause(10.0)  # not consuming yet: not taken
    assert state.phase is ConsumerPhase.OPENING
    assert state.consuming("a")
    assert state.pause(10.0)
    assert state.paused
    assert state.consumer_tag is None
    assert state.own_cancel() == "a"  # rr cancels it
    assert not state.pause(5.0)  # a shorter one keeps the first's end
    assert state.resume_at_s == 10.0
    assert not state.pause(30.0)
    assert state.resume_at_s == 30.0
    assert state.woke(channel_closed=False, connection_closed=False) is Watch.PAUSE
    assert state.resumed(channel_closed=False) is Watch.RECONSUME
    assert state.own_cancel() is None
    assert state.phase is ConsumerPhase.RESTARTING
    assert state.resume_at_s is None
    assert state.consuming("b")
    assert state.pause(40.0)
    assert state.resumed(channel_closed=True) is Watch.REOPEN  # its channel closed meanwhile


def test_a_stop_during_a_pause_stops() -> None:
    state = ConsumerState()
    assert state.consuming("a")
    assert state.pause(10.0)
    assert state.stop() == "a"  # paused before its basic.cancel went out
    assert state.resume_at_s is None
    assert state.resumed(channel_closed=False) is Watch.STOP
    assert state.woke(channel_closed=False, connection_closed=False) is Watch.STOP
    assert not state.pause(20.0)  # stopping: not taken
    state.closed()
    assert state.phase is ConsumerPhase.CLOSED


def test_a_cancel_by_the_broker_during_a_pause_changes_nothing() -> None:
    state = ConsumerState()
    assert state.consuming("a")
    assert state.pause(10.0)
    assert state.own_cancel() == "a"
    state.server_cancelled("a")  # its cancel crossed ours
    assert state.paused
    assert not state.watcher_wanted
    assert not state.delivered("a")  # what still comes for it goes back unhandled
