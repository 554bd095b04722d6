"""What the broker does when a delivery was held past its consumer timeout: the decision of
``emulator/consumer_timeout.py`` carried out on the broker's state, at the instant the
delivery's timer fires on the virtual clock (docs/reference/testing.md, "What the emulator
models"): the channel closes (406) and gives back all it held, or (RabbitMQ 4.3) the quorum
queue takes the delivery back uncounted and cancels its consumer, or closes the channel when
the delivery has no consumer left."""

from __future__ import annotations

from rabbitctl_retry.emulator.consumer_timeout import verdict
from rabbitctl_retry.emulator.model import ChannelState, Unacked
from rabbitctl_retry.emulator.settle import give_back_timed_out, release_channels
from rabbitctl_retry.emulator.state import BrokerState

PRECONDITION_FAILED = 406


def time_out(state: BrokerState, channel: ChannelState, tag: int, held: Unacked) -> None:
    """Delivery ``tag`` of ``channel`` (``held``) reached its consumer timeout."""
    if channel.closed or channel.unacked.get(tag) is not held or held.timed_out:
        return  # settled, given back or closed meanwhile
    held.timer = None
    decided = verdict(state.behaviour, channel, held)
    if decided.action == "wait":
        return  # the channel's oldest delivery decides (emulator/consumer_timeout.py)
    if decided.action == "close_channel":
        _close(state, channel, decided.close_text)
        return
    consumer = held.consumer
    cancels = decided.action == "give_back_and_cancel" and consumer is not None
    first = cancels and consumer is not None and not consumer.cancel_sent
    if cancels and consumer is not None:
        consumer.timed_out = True  # before its message comes back: it takes none
    give_back_timed_out(state, held)
    if decided.action == "give_back_and_close":
        _close(state, channel, decided.close_text)
    elif first and consumer is not None:
        consumer.cancel_sent = True
        if consumer.on_cancel is not None:
            consumer.on_cancel(consumer.tag)  # basic.cancel from the server


def _close(state: BrokerState, channel: ChannelState, reply_text: str | None) -> None:
    """The broker closes ``channel`` on its own (channel.close 406 ``reply_text``)."""
    channel.closed_by = (PRECONDITION_FAILED, reply_text or "")
    release_channels(state, [channel])
    channel.connection.channels.pop(channel.number, None)
