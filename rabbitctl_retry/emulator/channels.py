"""Connections, channels and consumers of the emulated broker, as functions over its state
(``state.py``): open and close them (a closing connection's channels close together, and its
exclusive queues go), basic.qos, basic.consume, basic.cancel and basic.get by queue name.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from rabbitctl_retry.emulator import single_active
from rabbitctl_retry.emulator.args import VHOST, consumer_priority
from rabbitctl_retry.emulator.entities import ConnectionFault, queue_of
from rabbitctl_retry.emulator.model import ChannelState, ConnectionState, Consumer, EmulatedQueue
from rabbitctl_retry.emulator.queues import delete_queue, dispatch, get, mark_used
from rabbitctl_retry.emulator.settle import release_channels, remove_consumer
from rabbitctl_retry.emulator.state import BrokerState
from rabbitctl_retry.emulator.timed_out import time_out
from rabbitctl_retry.errors import AccessRefused
from rabbitctl_retry.fields import FieldValue
from rabbitctl_retry.server import RR_CLIENT_PRODUCT
from rabbitctl_retry.transport.base import Delivery

RR_CLIENT_PROPERTIES: Mapping[str, FieldValue] = {
    "product": RR_CLIENT_PRODUCT,
    "connection_name": "rr",
}
"""The client properties of a connection made without any: those of rr's own client (the
emulator's connections stand in for rr's), a ``product`` and a ``connection_name``."""


def open_connection(
    state: BrokerState, client_properties: Mapping[str, FieldValue] | None = None
) -> ConnectionState:
    connection = ConnectionState(
        number=next(state.connection_numbers),
        client_properties=dict(client_properties or RR_CLIENT_PROPERTIES),
    )
    connection.on_fault = lambda reply_code, reply_text: close_connection(state, connection)
    state.connections.append(connection)
    return connection


def open_channel(
    state: BrokerState, connection: ConnectionState, *, confirms: bool
) -> ChannelState:
    number = connection.next_channel
    connection.next_channel += 1
    channel = ChannelState(number=number, connection=connection, confirms=confirms)
    channel.on_delivery_timeout = lambda tag, held: time_out(state, channel, tag, held)
    connection.channels[number] = channel
    return channel


def close_channel(state: BrokerState, channel: ChannelState) -> None:
    if channel.closed:
        return
    release_channels(state, [channel])
    channel.connection.channels.pop(channel.number, None)


def close_connection(
    state: BrokerState, connection: ConnectionState, failing: ChannelState | None = None
) -> None:
    """``connection`` closes, by the client or by a connection error that a method on
    channel ``failing`` caused (docs/reference/testing.md, "What the emulator does — like the
    server")."""
    if connection.closed:
        return
    connection.closed = True
    # Its channels close together: every consumer goes first (what one channel gives back
    # is never delivered to another channel of the same closing connection: the server
    # sends it nothing more), then all come back before a queue expires or delivers.
    closing = closing_order(list(connection.channels.values()), failing)
    release_channels(state, closing)
    connection.channels.clear()
    for q in list(state.queues.values()):
        if q.exclusive_owner is connection:
            delete_queue(state, q)
    if connection in state.connections:
        state.connections.remove(connection)


def closing_order(channels: list[ChannelState], failing: ChannelState | None) -> list[ChannelState]:
    """The order a closing connection's open ``channels`` (in the order they were opened)
    give back what they held: the channel whose method caused the connection error first
    (measured on 3.10.8, 4.0.5 and 4.3.6 with two channels holding messages of one quorum
    queue), then the others as they were opened (on the server they race, as they do when
    the client closes the connection)."""
    open_channels = [channel for channel in channels if not channel.closed]
    if failing is None or failing not in open_channels:
        return open_channels
    return [failing, *(channel for channel in open_channels if channel is not failing)]


def qos(state: BrokerState, channel: ChannelState, prefetch_count: int) -> None:
    channel.prefetch_count = prefetch_count


def consume(
    state: BrokerState,
    channel: ChannelState,
    queue: str,
    sink: Callable[[Delivery], None],
    *,
    no_ack: bool,
    exclusive: bool,
    consumer_tag: str | None,
    on_cancel: Callable[[str], None] | None = None,
    arguments: Mapping[str, FieldValue] | None = None,
) -> str:
    state.activity += 1
    q = queue_of(state, channel, queue)
    _check_exclusive(q, exclusive=exclusive)
    priority = consumer_priority(q.name, q.settings.kind, arguments)
    tag = consumer_tag or f"amq.ctag-{next(state.consumer_numbers):022d}"
    if tag in channel.consumers:
        raise ConnectionFault(530, f"NOT_ALLOWED - attempt to reuse consumer tag '{tag}'")
    consumer = Consumer(
        tag=tag,
        queue=q,
        channel=channel,
        sink=sink,
        no_ack=no_ack,
        exclusive=exclusive,
        prefetch_count=channel.prefetch_count,
        on_cancel=on_cancel,
        priority=priority,
        crashes_its_channel=state.behaviour.reused_consumer_tag_crashes
        and _tag_still_holds(channel, q, tag),
    )
    channel.consumers[tag] = consumer
    q.add_consumer(consumer)
    single_active.consumer_added(state, q, consumer)
    q.had_consumer = True
    mark_used(state, q)
    dispatch(state, q)
    return tag


def cancel(state: BrokerState, channel: ChannelState, consumer_tag: str) -> None:
    state.activity += 1
    consumer = channel.consumers.get(consumer_tag)
    if consumer is not None:
        q = consumer.queue
        if remove_consumer(state, consumer, cancelled=True) and q.ready:
            dispatch(state, q)  # the new active consumer takes what waits


def get_from(
    state: BrokerState, channel: ChannelState, queue: str, *, no_ack: bool
) -> Delivery | None:
    q = queue_of(state, channel, queue)
    single_active.check_get(state, q)
    return get(state, channel, q, no_ack)


def _check_exclusive(q: EmulatedQueue, *, exclusive: bool) -> None:
    """basic.consume on ``q``: a classic queue refuses an exclusive consumer beside others,
    and any consumer beside an exclusive one; with single active consumer it refuses an
    exclusive one even alone (403). A quorum queue ignores the flag: an exclusive consumer
    shares the queue like any other (measured on 3.10.8, 4.0.5 and 4.3.6)."""
    if q.is_quorum:
        return
    if single_active.is_single_active(q):
        refused = exclusive
    else:
        refused = bool(q.consumers) and (exclusive or any(c.exclusive for c in q.consumers))
    if refused:
        raise AccessRefused(
            f"ACCESS_REFUSED - queue '{q.name}' in vhost '{VHOST}' in exclusive use"
        )


def _tag_still_holds(channel: ChannelState, q: EmulatedQueue, tag: str) -> bool:
    """A cancelled consumer of quorum queue ``q`` on ``channel``, tagged ``tag``, still holds
    deliveries."""
    return q.is_quorum and any(
        held.consumer is not None and held.consumer.tag == tag and held.queue is q
        for held in channel.unacked.values()
    )
