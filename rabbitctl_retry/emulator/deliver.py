"""Handing a message to a consumer or a basic.get: the delivery tag, the unacked record, and
the :class:`~rabbitctl_retry.transport.base.Delivery` the client sees.

A quorum queue shows ``x-delivery-count`` once a message came back (on 3.x a basic.get
shows ``x-delivery-count = 0`` on the first delivery; basic.deliver does not), and from 4.3
``x-acquired-count``; the server adds them with ``set_table_value``, which sorts the table.
"""

from __future__ import annotations

from rabbitctl_retry.emulator.consumer_timeout import arm
from rabbitctl_retry.emulator.events import Delivered
from rabbitctl_retry.emulator.model import Consumer, EmulatedQueue, Entry, Unacked
from rabbitctl_retry.emulator.state import BrokerState
from rabbitctl_retry.emulator.values import copy_headers, server_table, with_headers
from rabbitctl_retry.fields import like
from rabbitctl_retry.transport.base import Delivery


def deliver(state: BrokerState, q: EmulatedQueue, entry: Entry, consumer: Consumer) -> None:
    """Give ``entry`` of ``q`` to ``consumer`` (basic.deliver)."""
    channel = consumer.channel
    tag = channel.next_tag
    channel.next_tag = tag + 1
    if not consumer.no_ack:
        held = Unacked(q, entry, consumer, consumer.next_msg_id)
        channel.unacked[tag] = held
        arm(state, channel, tag, held)
        consumer.unacked += 1
        q.unacked += 1
    consumer.next_msg_id += 1
    if consumer.crashes_its_channel:
        # the server closes the connection: the message never reaches the client and goes
        # back to the queue with the connection's other unacked messages
        channel.connection.on_fault(541, "INTERNAL_ERROR")
        return
    shown = delivery(state, q, entry, tag, consumer.tag, None, via_get=False)
    record_delivered(state, q, entry, tag, consumer.tag)
    consumer.sink(shown)


def record_delivered(
    state: BrokerState, q: EmulatedQueue, entry: Entry, tag: int, consumer_tag: str | None
) -> None:
    """The :class:`Delivered` event of ``entry`` from ``q`` as ``tag`` (to a consumer, or
    ``None``: by basic.get), when the broker records events."""
    if state.record_events:
        state.events.append(
            Delivered(
                state.clock.now_s,
                entry.message.number,
                q.name,
                tag,
                consumer_tag,
                entry.redelivered,
                entry.delivery_count,
            )
        )


def delivery(
    state: BrokerState,
    q: EmulatedQueue,
    entry: Entry,
    tag: int,
    consumer_tag: str | None,
    message_count: int | None,
    *,
    via_get: bool,
) -> Delivery:
    """What the client receives of ``entry``."""
    behaviour = state.behaviour
    message = entry.message
    properties = message.properties
    shown = entry.shown_delivery_count
    # RabbitMQ 4.3 (measured on 4.3.6, seed 290): x-acquired-count counts the returns of
    # this queue; until there is one, it shows the x-delivery-count the message came with
    acquired = (
        (entry.acquired_before or entry.delivery_count)
        if behaviour.counts_travel_from_any_queue
        else 0
    )
    if q.is_quorum and (
        shown > 0 or acquired > 0 or (via_get and behaviour.quorum_get_shows_zero_count)
    ):
        headers = dict(properties.headers) if properties.headers else {}
        if shown > 0 or not behaviour.counts_travel_from_any_queue:
            headers["x-delivery-count"] = shown
        if acquired > 0:
            headers["x-acquired-count"] = acquired
        # the server adds the header with set_table_value, which sorts the table
        properties = with_headers(
            properties, server_table(like(properties.headers, headers), sort=True)
        )
    elif (stored := properties.headers) is not None and properties.raw is None:
        if q.is_quorum and behaviour.quorum_writes_headers_again:
            properties = with_headers(properties, server_table(stored, sort=False))
        else:
            properties = with_headers(properties, copy_headers(stored))
    return Delivery(
        body=message.body,
        properties=properties,
        exchange=message.exchange,
        routing_key=message.routing_keys[0],
        redelivered=entry.redelivered,
        delivery_tag=tag,
        consumer_tag=consumer_tag,
        message_count=message_count,
    )
