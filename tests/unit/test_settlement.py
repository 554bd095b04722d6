"""Settlement frames: random outcome orders and completion orders, checked against the broker's
own rule for a channel's acks (a frame naming a delivery that is not unacknowledged closes the
channel: "unknown delivery tag")."""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st

from rabbitctl_retry.errors import ChannelClosed
from rabbitctl_retry.ops.settlement import (
    AckFrame,
    NackFrame,
    RejectFrame,
    SettleFrame,
    SettleWindow,
)
from rabbitctl_retry.ops.settler import ChannelSettler

ACK, REQUEUE, DROP, GIVE_BACK = "ack", "requeue", "drop", "give back"


class UnknownDeliveryTag(AssertionError):
    pass


@dataclass
class BrokerChannel:
    """What RabbitMQ does with one channel's settlement frames (rabbit_channel:collect_acks)."""

    outstanding: set[int] = field(default_factory=set)
    settled: dict[int, str] = field(default_factory=dict)

    def deliver(self, tag: int) -> None:
        self.outstanding.add(tag)

    def apply(self, frame: SettleFrame) -> None:
        if frame.tag not in self.outstanding:
            raise UnknownDeliveryTag(f"PRECONDITION_FAILED - unknown delivery tag {frame.tag}")
        if isinstance(frame, AckFrame):
            covered = (
                [tag for tag in self.outstanding if tag <= frame.tag]
                if frame.multiple
                else [frame.tag]
            )
            for tag in covered:
                self.settled[tag] = ACK
                self.outstanding.discard(tag)
        elif isinstance(frame, NackFrame):
            self.settled[frame.tag] = GIVE_BACK
            self.outstanding.discard(frame.tag)
        else:
            self.settled[frame.tag] = REQUEUE if frame.requeue else DROP
            self.outstanding.discard(frame.tag)


def decide(window: SettleWindow, tag: int, outcome: str) -> bool:
    if outcome == ACK:
        return window.ack(tag)
    if outcome == GIVE_BACK:
        return window.give_back(tag)
    return window.reject(tag, requeue=outcome == REQUEUE)


steps = st.lists(
    st.tuples(st.sampled_from([ACK, REQUEUE, DROP, GIVE_BACK]), st.integers(0, 3), st.booleans()),
    min_size=1,
    max_size=60,
)


@settings(max_examples=400, deadline=None)
@given(plan=steps, seed=st.integers(0, 2**32 - 1))
def test_any_completion_order_gives_frames_the_broker_accepts(
    plan: list[tuple[str, int, bool]], seed: int
) -> None:
    """Deliveries arrive in tag order; handlers finish in a random order; flushes happen at
    random moments, with or without singles. Every frame is accepted, each delivery is
    settled once, as its handler said, and never before its handler said it."""
    shuffle = random.Random(seed)
    window = SettleWindow()
    broker = BrokerChannel()
    outcomes = {tag: outcome for tag, (outcome, _, _) in enumerate(plan, start=1)}
    undecided: list[int] = []
    decided: set[int] = set()

    def flush(singles: bool) -> None:
        for frame in window.frames(singles=singles):
            assert frame.tag in decided, f"{frame} sent before its handler finished"
            broker.apply(frame)

    for tag, (_, finishes, singles) in enumerate(plan, start=1):
        window.delivered(tag)
        broker.deliver(tag)
        undecided.append(tag)
        shuffle.shuffle(undecided)
        for _ in range(min(finishes, len(undecided))):
            done = undecided.pop()
            assert decide(window, done, outcomes[done])
            decided.add(done)
        flush(singles)
    for done in undecided:
        assert decide(window, done, outcomes[done])
        decided.add(done)
    flush(singles=False)
    flush(singles=True)
    assert broker.settled == outcomes
    assert broker.outstanding == set()
    assert len(window) == 0
    assert window.unsent == 0


def test_a_multiple_ack_never_covers_an_undecided_delivery() -> None:
    window = SettleWindow()
    for tag in (1, 2, 3, 4):
        window.delivered(tag)
    window.ack(1)
    window.ack(3)
    window.ack(4)
    assert window.frames() == [AckFrame(1, multiple=True)]
    assert window.frames(singles=True) == [AckFrame(3), AckFrame(4)]
    window.ack(2)
    assert window.frames() == [AckFrame(2, multiple=True)]


def test_rejects_go_out_at_once_and_before_the_multiple_ack_that_spans_them() -> None:
    window = SettleWindow()
    for tag in (1, 2, 3, 4):
        window.delivered(tag)
    window.ack(1)
    window.reject(2, requeue=True)
    window.ack(3)
    window.reject(4, requeue=False)
    assert window.frames() == [
        RejectFrame(2, requeue=True),
        RejectFrame(4, requeue=False),
        AckFrame(3, multiple=True),
    ]
    assert window.frames(singles=True) == []


def test_the_prefix_rejects_precede_its_multiple_ack() -> None:
    window = SettleWindow()
    for tag in (1, 2, 3, 4):
        window.delivered(tag)
    window.ack(1)
    window.reject(2, requeue=True)
    window.ack(3)
    assert window.frames() == [RejectFrame(2, requeue=True), AckFrame(3, multiple=True)]
    window.reject(4, requeue=False)
    assert window.frames() == [RejectFrame(4, requeue=False)]


def test_the_first_decision_wins() -> None:
    window = SettleWindow()
    window.delivered(7)
    assert window.ack(7)
    assert not window.reject(7, requeue=True)
    assert not window.ack(8)  # never delivered
    assert window.frames() == [AckFrame(7, multiple=True)]
    assert not window.reject(7, requeue=True)  # already sent


def test_forget_drops_everything() -> None:
    window = SettleWindow()
    window.delivered(1)
    window.ack(1)
    window.forget()
    assert window.frames(singles=True) == []
    assert not window.is_open(1)


class SlowChannel:
    """A channel whose writes take a random number of loop turns (a full write queue), and
    that closes, as RabbitMQ does, on the first frame it would refuse."""

    def __init__(self, broker: BrokerChannel, seed: int) -> None:
        self.broker = broker
        self.random = random.Random(seed)
        self.frames: list[SettleFrame] = []
        self.error: AssertionError | None = None

    @property
    def is_closed(self) -> bool:
        return self.error is not None

    async def _write(self, frame: SettleFrame) -> None:
        for _ in range(self.random.randint(0, 3)):
            await asyncio.sleep(0)
        if self.error is not None:
            raise ChannelClosed("the channel is closed")
        self.frames.append(frame)
        try:
            self.broker.apply(frame)
        except AssertionError as error:
            self.error = error
            raise ChannelClosed(str(error)) from None

    async def ack(self, delivery_tag: int, *, multiple: bool = False) -> None:
        await self._write(AckFrame(delivery_tag, multiple))

    async def reject(self, delivery_tag: int, *, requeue: bool) -> None:
        await self._write(RejectFrame(delivery_tag, requeue))


@settings(max_examples=150, deadline=None)
@given(
    outcomes=st.lists(st.sampled_from([ACK, REQUEUE, DROP]), min_size=1, max_size=80),
    seed=st.integers(0, 2**32 - 1),
    threshold=st.integers(1, 40),
)
def test_concurrent_handlers_through_the_settler_keep_the_wire_order(
    outcomes: list[str], seed: int, threshold: int
) -> None:
    """Many handlers finish concurrently, each after a random number of loop turns, and the
    writes themselves are slow: the frames still reach the broker in an order it accepts,
    and every delivery ends as its handler said."""

    async def run() -> tuple[BrokerChannel, SlowChannel]:
        broker = BrokerChannel()
        channel = SlowChannel(broker, seed)
        settler = ChannelSettler(channel, singles_threshold=threshold)  # type: ignore[arg-type]
        delays = random.Random(seed + 1)

        async def handler(tag: int, outcome: str, turns: int) -> None:
            settler.delivered(tag)  # first, as the consumer does
            broker.deliver(tag)
            for _ in range(turns):
                await asyncio.sleep(0)
            if outcome == ACK:
                settler.ack(tag)
            else:
                settler.reject(tag, requeue=outcome == REQUEUE)

        tasks = [
            asyncio.ensure_future(handler(tag, outcome, delays.randint(0, 12)))
            for tag, outcome in enumerate(outcomes, start=1)
        ]
        await asyncio.gather(*tasks)
        await settler.drain()
        assert not settler.closed, channel.error
        return broker, channel

    broker, channel = asyncio.run(run())
    assert channel.error is None
    assert broker.settled == dict(enumerate(outcomes, start=1))
    assert broker.outstanding == set()


def test_a_give_back_goes_out_at_once_as_a_nack_and_before_the_ack_that_spans_it() -> None:
    """A delivery for a consumer the broker cancelled (runtime/consumer.py): given back with
    basic.nack (uncounted on RabbitMQ 4.3), never taken along by a multiple ack."""
    window = SettleWindow()
    for tag in (1, 2, 3):
        window.delivered(tag)
    assert window.give_back(2)
    assert window.frames() == [NackFrame(2)]  # at once, though 1 is undecided
    assert window.ack(3)
    assert window.ack(1)
    assert window.frames() == [AckFrame(3, multiple=True)]
    assert not window.give_back(2)  # decided once


def test_open_tags_are_the_undecided_in_delivery_order() -> None:
    window = SettleWindow()
    for tag in (1, 2, 3, 4):
        window.delivered(tag)
    window.ack(2)
    window.give_back(4)
    assert window.open_tags() == [1, 3]
    window.frames()
    assert window.open_tags() == [1, 3]  # sending decided frames leaves the open ones
