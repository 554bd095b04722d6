"""Consumer timeouts, per release: how long a delivery may be held unacknowledged, and what the
server does once it was held longer (docs/reference/testing.md, "What the emulator models").

Measured on 3.10.8, 4.0.5 and 4.3.6 (``scripts/measure_consumer_timeout.py``, classic and
quorum queues, a timeout of 2000 ms; docs/measurements.md, "Consumer timeouts"):

* The timeout of a delivery is its queue's ``x-consumer-timeout`` (an integer of ms, from
  RabbitMQ 3.12: ``ServerRelease.queue_consumer_timeout``) or its policy's
  ``consumer-timeout``, the smaller of the two, else the node's ``consumer_timeout`` (30
  minutes on every server here). 3.10.8 ignores the argument.
* Before 4.3 the channel times its deliveries out (consumers' and ``basic.get``'s alike):
  it closes, 406 ``delivery acknowledgement on channel N timed out. Timeout value used: T
  ms. ...``, giving back everything it held as any closing channel does (redelivered,
  counted by a quorum queue, dead-lettered past a delivery limit). The server notices on
  a tick of the channel, once a minute; the emulator acts exactly at the timeout.
* RabbitMQ 4.3 (``ServerRelease.quorum_times_out_deliveries``): a quorum queue times out
  each delivery itself, at its own time: the message comes back uncounted (redelivered,
  ``x-acquired-count`` grows, no ``x-delivery-count``, no delivery limit), served before
  the others; its consumer gets ``basic.cancel`` (once) and serves nothing more, though
  the queue still counts it and the channel stays open; the consumer's other deliveries
  stay with it until they time out too. The channel still knows the timed-out tags: a
  settle of one does nothing, and once none is left the queue serves the consumer again.
  A delivery with no consumer of the queue left (a ``basic.get``'s, or a consumer the
  client cancelled) comes back the same way and the channel closes (406, ``Timeout value
  used: -1 ms``). A classic queue times out nothing at all.

Here: the timeout of a delivery (:func:`timeout_ms`), arming its timer on the virtual clock
(:func:`arm`), the deliveries of a settle still held, their timers stopped
(:func:`still_held`), and the decision at the timeout (:func:`verdict`);
``emulator/timed_out.py`` carries it out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from rabbitctl_retry.emulator import policies
from rabbitctl_retry.emulator.clock import on_grid
from rabbitctl_retry.emulator.model import ChannelState, Consumer, EmulatedQueue, Unacked
from rabbitctl_retry.emulator.state import BrokerState
from rabbitctl_retry.fields import FieldValue
from rabbitctl_retry.releases import ServerRelease

CLOSE_TEXT = (
    "PRECONDITION_FAILED - delivery acknowledgement on channel {channel} timed out. "
    "Timeout value used: {timeout_ms} ms. This timeout value can be configured, see "
    "consumers doc guide to learn more"
)
"""The server's reply text when a consumer timeout closes a channel (406)."""

ARGUMENT = "x-consumer-timeout"

NO_CONSUMER_TIMEOUT_MS = -1
"""The ``Timeout value used`` RabbitMQ 4.3 names when a delivery without a consumer times
out (a ``basic.get``'s)."""

Action = Literal["close_channel", "give_back_and_cancel", "give_back_and_close", "wait"]


@dataclass(frozen=True, slots=True)
class Verdict:
    """What the server does with a delivery held past its timeout."""

    action: Action
    """``close_channel``: the channel closes (before 4.3); ``give_back_and_cancel``: the
    queue takes it back uncounted and cancels its consumer (4.3); ``give_back_and_close``:
    the queue takes it back uncounted, then the channel closes (4.3, no consumer); ``wait``:
    nothing yet (before 4.3, a delivery that is not the channel's oldest)."""
    close_text: str | None
    """The channel.close reply text (406), None when the channel stays open."""


def timeout_ms(state: BrokerState, q: EmulatedQueue) -> int | None:
    """How long a delivery of ``q`` may be held (ms), None when it never times out: the
    smaller of its ``x-consumer-timeout`` and its policies' ``consumer-timeout`` (measured on
    4.0.5 and 4.3.6), else the node's."""
    behaviour = state.behaviour
    if behaviour.quorum_times_out_deliveries and not q.is_quorum:
        return None  # RabbitMQ 4.3's classic queues time out nothing
    if behaviour.queue_consumer_timeout:
        value = _queue_timeout(state, q)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
    return behaviour.default_consumer_timeout_ms


def _queue_timeout(state: BrokerState, q: EmulatedQueue) -> FieldValue:
    """``q``'s ``x-consumer-timeout`` once its policies apply (emulator/policies.py)."""
    if not state.policies[False] and not state.policies[True]:
        return q.arguments.get(ARGUMENT)
    effective = policies.queue_arguments(
        q.arguments, q.name, q.settings.kind, state.server_version, state.policies
    )
    return effective.get(ARGUMENT)


def arm(state: BrokerState, channel: ChannelState, tag: int, held: Unacked) -> None:
    """Start the clock of delivery ``tag``, just added to what ``channel`` holds: RabbitMQ 4.3
    times each delivery out; before, the channel checks its oldest delivery only, on one
    timer of the channel (:func:`_check_oldest`)."""
    limit_ms = timeout_ms(state, held.queue)
    if limit_ms is None:
        return
    held.limit_ms = limit_ms
    held.due_s = on_grid(state.clock.now_s + limit_ms / 1000)
    if state.behaviour.quorum_times_out_deliveries:
        held.timer = state.clock.call_at(held.due_s, lambda: channel.on_delivery_timeout(tag, held))
    elif channel.timeout_timer is None:
        _check_at(state, channel, held.due_s)


def _check_at(state: BrokerState, channel: ChannelState, when_s: float) -> None:
    """Before 4.3: the channel's one timer, set for ``when_s``."""
    if channel.timeout_timer is not None:
        channel.timeout_timer.cancel()
    channel.timeout_timer = state.clock.call_at(when_s, lambda: _check_oldest(state, channel))


def _check_oldest(state: BrokerState, channel: ChannelState) -> None:
    """Before 4.3: the channel's oldest delivery times out once past its timeout (measured on
    4.0.5: one of 2000 ms held behind one of 5000 ms closes the channel at 5000 ms, naming
    5000); not yet, the timer is set again for it."""
    channel.timeout_timer = None
    oldest = next(iter(channel.unacked.items()), None)
    if channel.closed or oldest is None:
        return
    tag, held = oldest
    if held.limit_ms is None:
        return
    if held.due_s > state.clock.now_s:
        _check_at(state, channel, held.due_s)
    else:
        channel.on_delivery_timeout(tag, held)


def still_held(
    state: BrokerState, channel: ChannelState, taken: list[tuple[int, Unacked]]
) -> list[Consumer]:
    """Take the deliveries a queue took back already (RabbitMQ 4.3: timed out) out of
    ``taken``, a settle's or a closing channel's (off the channel already), and stop the
    others' clocks. The consumers the queue serves again (their last timed-out delivery
    settled), in order."""
    timed_out = [held for _, held in taken if held.timed_out]
    if timed_out:
        taken[:] = [(tag, held) for tag, held in taken if not held.timed_out]
    for _, held in taken:
        if held.timer is not None:
            held.timer.cancel()
            held.timer = None
    if channel.timeout_timer is not None:
        _oldest_changed(state, channel)
    return _revived(channel, timed_out) if timed_out else []


def _oldest_changed(state: BrokerState, channel: ChannelState) -> None:
    """Before 4.3, after a settle: no timer without a delivery; an oldest delivery past its
    timeout already (it was not the oldest when it fell due) times out at once (on the next
    move of the clock: the server notices on its next tick)."""
    timer = channel.timeout_timer
    assert timer is not None
    oldest = _oldest(channel)
    if oldest is None or channel.closed:
        timer.cancel()
        channel.timeout_timer = None
        return
    now_s = state.clock.now_s
    if oldest.limit_ms is not None and oldest.due_s <= now_s < timer.when_s:
        _check_at(state, channel, now_s)


def _revived(channel: ChannelState, timed_out: list[Unacked]) -> list[Consumer]:
    """RabbitMQ 4.3: the consumers of ``timed_out`` (settled now) with no timed-out delivery
    left on ``channel``, which their queue serves again, in order."""
    revived: list[Consumer] = []
    for held in timed_out:
        consumer = held.consumer
        if consumer is None or not consumer.timed_out or consumer in revived:
            continue
        if consumer not in consumer.queue.consumers:
            continue
        if not any(h.timed_out and h.consumer is consumer for h in channel.unacked.values()):
            consumer.timed_out = False
            revived.append(consumer)
    return revived


def _oldest(channel: ChannelState) -> Unacked | None:
    return next(iter(channel.unacked.values()), None)


def verdict(behaviour: ServerRelease, channel: ChannelState, held: Unacked) -> Verdict:
    """What the server does with ``held``, a delivery on ``channel`` held past its timeout."""
    if not behaviour.quorum_times_out_deliveries:
        if _oldest(channel) is not held:
            # before 4.3 the channel checks its oldest delivery only (measured on 4.0.5:
            # one of 2000 ms behind one of 5000 ms closes the channel naming 5000 ms)
            return Verdict("wait", None)
        text = CLOSE_TEXT.format(channel=channel.number, timeout_ms=held.limit_ms)
        return Verdict("close_channel", text)
    consumer = held.consumer
    if consumer is not None and consumer in held.queue.consumers:
        return Verdict("give_back_and_cancel", None)
    text = CLOSE_TEXT.format(channel=channel.number, timeout_ms=NO_CONSUMER_TIMEOUT_MS)
    return Verdict("give_back_and_close", text)
