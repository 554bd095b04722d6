"""Settling deliveries: ack, reject, nack, and what a closing channel gives back.

Measured on RabbitMQ 3.10.8 (and where 4.0.5 differs, said so):

* basic.ack / reject / nack name a delivery tag of the channel; ``multiple`` covers every tag
  up to it, and tag 0 with ``multiple`` covers them all. An unknown tag is PRECONDITION_FAILED
  (``unknown delivery tag N``), which closes the channel. One of them settles its
  deliveries as several commands, one per queue and consumer (each basic.get its own), and
  the queue runs after each: with ``multiple`` over two consumers, the one with the lower
  tag takes the next waiting message first (3.10.8, 4.0.5 and 4.3.6).
* A requeued message is marked redelivered. A classic queue puts it back where it was (by
  enqueue order). A quorum queue appends a message rejected or nacked with requeue, but puts
  those a closing channel held at the front (behind others returned that way, ahead of all
  never delivered), and counts the return either way: past ``x-delivery-limit`` returns it is
  dead-lettered (``delivery_limit``) instead. From 4.3 a basic.nack no longer counts.
  From 4.0 a quorum queue puts every returned message at the front, rejected and nacked
  ones too (behind others returned, in the order they came back); 3.10 does too when the
  queue has a delivery limit.
* RabbitMQ 3.10: a consumer whose rejected or nacked message the delivery limit dead-letters
  gets one more message of credit, for good: with prefetch 1 it then holds two at a time
  (4.0.5 does not).
* A classic queue applies ``drop-head`` to what comes back, then delivers; a quorum queue
  delivers first, then applies its limit to what is left.
* A closing channel cancels its consumers first, then returns its unacked deliveries in
  delivery-tag order (a quorum queue serves them in that order, before anything else).
* Cancelling the last consumer of an auto-delete queue deletes the queue.
"""

from __future__ import annotations

import itertools
from typing import Literal

from rabbitctl_retry.emulator import single_active
from rabbitctl_retry.emulator.consumer_timeout import still_held
from rabbitctl_retry.emulator.dead_letters import dead_letter_entry
from rabbitctl_retry.emulator.erlang_maps import fold_order
from rabbitctl_retry.emulator.events import Acked, Dropped, Rejected, RequeueCause, Requeued
from rabbitctl_retry.emulator.model import ChannelState, Consumer, EmulatedQueue, Entry, Unacked
from rabbitctl_retry.emulator.queues import (
    delete_queue,
    dispatch,
    enqueue,
    expire_head,
    mark_used,
    trim,
)
from rabbitctl_retry.emulator.state import BrokerState, dead_letters_afterwards, emit
from rabbitctl_retry.errors import PreconditionFailed

Held = tuple[int, Unacked]
"""A delivery a channel holds: its delivery tag and what it took."""


def _settled(state: BrokerState, channel: ChannelState, tag: int, multiple: bool) -> list[Held]:
    """The deliveries one basic.ack / reject / nack names, taken off ``channel``."""
    unacked = channel.unacked
    if multiple and tag == 0:
        taken = list(unacked.items())
        unacked.clear()
    elif multiple:
        if tag not in unacked:
            raise PreconditionFailed(f"PRECONDITION_FAILED - unknown delivery tag {tag}")
        tags = list(itertools.takewhile(lambda t: t <= tag, unacked))
        taken = [(t, unacked.pop(t)) for t in tags]
    else:
        one = unacked.pop(tag, None)
        if one is None:
            raise PreconditionFailed(f"PRECONDITION_FAILED - unknown delivery tag {tag}")
        taken = [(tag, one)]
    for consumer in still_held(state, channel, taken):  # RabbitMQ 4.3: timed out, now settled
        consumer.queue.capacity_freed(consumer)
        dispatch(state, consumer.queue)
    return taken


def _uncount(item: Unacked) -> None:
    """A settled delivery no longer counts against its queue and consumer."""
    item.queue.unacked -= 1
    if item.consumer is not None:
        item.consumer.unacked -= 1
        item.queue.capacity_freed(item.consumer)


def ack(state: BrokerState, channel: ChannelState, tag: int, multiple: bool) -> None:
    """basic.ack."""
    state.activity += 1
    now_s = state.clock.now_s
    for command in _commands(state, _settled(state, channel, tag, multiple), requeue=False):
        for settled_tag, item in command:
            _uncount(item)
            if state.record_events:
                state.events.append(
                    Acked(now_s, item.entry.message.number, item.queue.name, settled_tag)
                )
        q = command[0][1].queue
        single_active.settled(state, q, returned=False)
        if q.ready and q.consumers:
            dispatch(state, q)


def reject(
    state: BrokerState,
    channel: ChannelState,
    tag: int,
    multiple: bool,
    requeue: bool,
    method: Literal["reject", "nack"],
) -> None:
    """basic.reject (``method`` "reject") or basic.nack ("nack")."""
    state.activity += 1
    with dead_letters_afterwards(state):
        taken = _settled(state, channel, tag, multiple)
        for command in _commands(state, taken, requeue=requeue):
            for settled_tag, item in command:
                _uncount(item)
                _reject_one(state, settled_tag, item, requeue, method)
            q = command[0][1].queue
            single_active.settled(state, q, returned=requeue)
            _after_returns(state, {id(q): q})


def _reject_one(
    state: BrokerState, tag: int, item: Unacked, requeue: bool, method: Literal["reject", "nack"]
) -> None:
    q, entry = item.queue, item.entry
    emit(state, Rejected(state.clock.now_s, entry.message.number, q.name, tag, requeue, method))
    if requeue:
        kept = _return(state, q, entry, method)
        consumer = item.consumer
        leaks = state.behaviour.limit_drop_leaks_credit and not kept
        if leaks and consumer is not None and consumer.prefetch_count:
            consumer.prefetch_count += 1
            q.capacity_freed(consumer)
    elif q.deleted:
        # the server's queue is gone with its dead-letter settings: the rejection does
        # nothing (measured on 3.10.8, 4.0.5 and 4.3.6)
        emit(state, Dropped(state.clock.now_s, entry.message.number, q.name, "queue_deleted"))
    else:
        dead_letter_entry(state, q, entry, "rejected", enqueue, rejected_by=method)


def _commands(state: BrokerState, taken: list[Held], *, requeue: bool) -> list[list[Held]]:
    """The commands the server settles the deliveries of one basic.ack / reject / nack
    in, in order: queue by queue (in the order of their first delivery tag; between
    queues the server races), in each what basic.get took (one command per delivery, by
    delivery tag), then each consumer's (one command per consumer, by consumer tag,
    compared as bytes): a basic.get is a consumer tagged with its delivery tag (measured
    on 3.10.8 and 4.0.5). The queue runs after each command: the consumer settled first
    takes the next waiting message (or one it gave back) before the next is settled
    (measured on 3.10.8, 4.0.5 and 4.3.6, classic and quorum queues). A consumer's
    messages in delivery order, except that RabbitMQ 3.10 takes back more than 32 of them
    into a quorum queue with a delivery limit in the order of an Erlang map of their
    message ids (emulator/erlang_maps.py)."""
    if len(taken) == 1:  # one delivery: one command
        return [taken]
    first_tag: dict[int, int] = {}
    groups: dict[tuple[int, tuple[int, int, bytes]], list[Held]] = {}
    for tag, item in taken:
        queue_rank = first_tag.setdefault(id(item.queue), tag)
        groups.setdefault((queue_rank, _command_of(tag, item)), []).append((tag, item))
    ordered: list[list[Held]] = []
    for group in sorted(groups):
        members = groups[group]
        q = members[0][1].queue
        in_map_order = (
            requeue
            and state.behaviour.quorum_returns_in_map_order
            and q.is_quorum
            and q.settings.delivery_limit is not None
        )
        if in_map_order:
            by_msg_id = {item.msg_id: (tag, item) for tag, item in members}
            members = [by_msg_id[msg_id] for msg_id in fold_order(by_msg_id)]
        ordered.append(members)
    return ordered


def _return(state: BrokerState, q: EmulatedQueue, entry: Entry, cause: RequeueCause) -> bool:
    """Put a delivered message back; False when it did not come back (its queue is gone,
    or the delivery limit dead-lettered it)."""
    behaviour = state.behaviour
    if q.deleted:
        emit(state, Dropped(state.clock.now_s, entry.message.number, q.name, "queue_deleted"))
        return False
    entry.redelivered = True
    entry.acquired_before += 1
    # RabbitMQ 4.3 takes back a delivery held past its consumer timeout uncounted
    counted = cause != "consumer_timeout" and (
        cause != "nack" or behaviour.nack_requeue_counts_delivery
    )
    if q.is_quorum:
        if cause == "channel_closed" and behaviour.quorum_rejections_travel:
            entry.failed_deliveries += 1
        if counted:
            entry.delivery_count += 1
            limit = q.settings.delivery_limit
            if limit is not None and entry.delivery_count > limit:
                dead_letter_entry(state, q, entry, "delivery_limit", enqueue)
                return False
        _return_to_quorum(state, q, entry, cause)
    else:
        if behaviour.counts_travel_from_any_queue and counted:
            entry.delivery_count += 1  # RabbitMQ 4.3: counted, shown only by a quorum queue
        q.insert_by_seq(entry)
    emit(
        state,
        Requeued(state.clock.now_s, entry.message.number, q.name, cause, entry.delivery_count),
    )
    # a classic queue applies drop-head to what comes back before it delivers again; a
    # quorum queue delivers first (_dispatch_returned)
    if not q.is_quorum and q.settings.overflow == "drop-head" and q.over_limit():
        trim(state, q)
    return True


def _return_to_quorum(
    state: BrokerState, q: EmulatedQueue, entry: Entry, cause: RequeueCause
) -> None:
    """Where a message given back to quorum queue ``q`` goes: a delayed retry's waiting room,
    the returns served first, or the back."""
    # rabbit_fifo keeps returns apart and serves them first; 3.10 re-enqueues a message
    # rejected or nacked with requeue at the back, unless the queue has a delivery
    # limit (measured on 3.10.8)
    delayed = q.settings.delayed_retry
    counted = cause not in ("nack", "consumer_timeout")
    wait_ms = delayed.wait_ms(entry.delivery_count, counted=counted) if delayed else 0
    if wait_ms:
        _hold_back(state, q, entry, wait_ms)
    elif (
        cause == "channel_closed"
        or state.behaviour.quorum_requeue_to_front
        or q.settings.delivery_limit is not None
    ):
        q.push_returned(entry)
    else:
        q.push(entry)


def _hold_back(state: BrokerState, q: EmulatedQueue, entry: Entry, wait_ms: int) -> None:
    """RabbitMQ 4.3's delayed retry: ``entry`` waits out ``wait_ms``, not ready, then comes
    back as a message given back (emulator/delayed_retry.py)."""

    def due() -> None:
        if not q.waiting.release(entry) or q.deleted:
            return
        state.activity += 1
        q.push_returned(entry)
        _after_returns(state, {id(q): q})

    q.waiting.hold(entry, state.clock.call_later(wait_ms / 1000, due))


def _after_returns(state: BrokerState, touched: dict[int, EmulatedQueue]) -> None:
    """Once every message of one settle command or one closing channel is back: expire
    what is due at each queue's head (a message that expired while out counts only when it
    is the head then, as on the server), then deliver."""
    for q in touched.values():
        expire_head(state, q)
        _dispatch_returned(state, q)


def _dispatch_returned(state: BrokerState, q: EmulatedQueue) -> None:
    """Deliver after messages came back to ``q``; a quorum queue applies its drop-head
    limit only then, to what its consumers did not take (rabbit_fifo: checkout, then the
    limit; measured on 3.10.8 and 4.0.5)."""
    dispatch(state, q)
    if q.is_quorum and q.settings.overflow == "drop-head" and q.over_limit():
        trim(state, q)


def give_back_timed_out(state: BrokerState, held: Unacked) -> None:
    """RabbitMQ 4.3: ``held``'s quorum queue takes it back for its consumer timeout,
    uncounted, and serves it before the others (emulator/consumer_timeout.py); the channel
    keeps its tag."""
    state.activity += 1
    held.timed_out = True
    held.timer = None
    q = held.queue
    q.unacked -= 1
    if held.consumer is not None:
        held.consumer.unacked -= 1
    with dead_letters_afterwards(state):
        _return(state, q, held.entry, "consumer_timeout")
        _after_returns(state, {id(q): q})


def release_channels(state: BrokerState, channels: list[ChannelState]) -> None:
    """Channels closing together (a closing connection's, or one): cancel their consumers,
    return what each held (channel by channel, :func:`_return_order`), and only then expire
    and deliver, as after one settlement."""
    state.activity += 1
    touched: dict[int, EmulatedQueue] = {}
    for channel in channels:
        channel.closed = True
        for consumer in list(channel.consumers.values()):
            if remove_consumer(state, consumer):
                touched[id(consumer.queue)] = consumer.queue  # to its new active consumer
        channel.consumers.clear()
    for channel in channels:
        taken = sorted(channel.unacked.items(), key=lambda held: _return_order(state, held))
        channel.unacked.clear()
        still_held(state, channel, taken)
        for _, item in taken:
            item.queue.unacked -= 1
            if item.consumer is not None:
                item.consumer.unacked -= 1
            _return(state, item.queue, item.entry, "channel_closed")
            touched[id(item.queue)] = item.queue
    _after_returns(state, touched)
    for channel in channels:
        listeners, channel.close_listeners = channel.close_listeners, []
        for listener in listeners:
            listener()


def _return_order(state: BrokerState, held: Held) -> tuple[int, int, bytes, int]:
    """The order a closing channel gives back what it held (measured on 3.10.8 and 4.0.5
    with quorum queues; a classic queue puts every message back in its old place anyway):
    RabbitMQ 3.10 what basic.get took first, by delivery tag, then each consumer's by
    consumer tag (compared as bytes), in delivery order; 4.0 what consumers took first,
    consumer by consumer in the order they were created (measured on 4.0.5 and 4.3.6),
    then what basic.get took, each in delivery order."""
    tag, unacked = held
    if state.behaviour.closing_channel_returns_gets_first:
        return (*_command_of(tag, unacked), tag)
    consumer = unacked.consumer
    return (consumer is None, 0 if consumer is None else consumer.created, b"", tag)


def remove_consumer(state: BrokerState, consumer: Consumer, *, cancelled: bool = False) -> bool:
    """``consumer`` is cancelled (``cancelled``: by basic.cancel, else its channel closes):
    an auto-delete queue that loses its last consumer goes. Whether another consumer became
    the queue's single active one (emulator/single_active.py): the queue should deliver."""
    q = consumer.queue
    consumer.channel.consumers.pop(consumer.tag, None)
    try:
        q.remove_consumer(consumer)
    except ValueError:
        return False
    handed_over = single_active.consumer_removed(state, q, consumer, cancelled=cancelled)
    if q.auto_delete and not q.consumers and q.had_consumer and not q.deleted:
        delete_queue(state, q)
    elif not q.consumers and not q.deleted:
        mark_used(state, q)
    return handed_over


def _command_of(tag: int, held: Unacked) -> tuple[int, int, bytes]:
    """Which of the channel's settle commands a delivery goes in, as a sort key in the order
    the server sends them (Erlang term order: integer tags before binary ones): each
    basic.get is a consumer of its own tagged with its delivery tag, then one command per
    consumer tag (measured on 3.10.8 and 4.0.5)."""
    if held.consumer is None:
        return (0, tag, b"")
    return (1, 0, held.consumer.tag.encode())
