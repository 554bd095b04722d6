"""basic.publish over the broker's state: check, store, route and enqueue one message, and the
management API's publish rate.

A publish to a missing exchange is NOT_FOUND, to an internal one ACCESS_REFUSED; an invalid
``expiration`` PRECONDITION_FAILED. Sender-selected distribution: the ``CC`` and ``BCC``
headers route the message too, ``BCC`` is removed from it. A message routed nowhere is
returned when mandatory. A publish reaches every queue it is routed to before any dead letter
it causes (``state.dead_letters_afterwards``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Literal

from rabbitctl_retry.emulator.args import VHOST
from rabbitctl_retry.emulator.events import Published, Returned, Unroutable
from rabbitctl_retry.emulator.message_size import property_bytes
from rabbitctl_retry.emulator.model import StoredMessage
from rabbitctl_retry.emulator.queues import enqueue
from rabbitctl_retry.emulator.route import names_of, route
from rabbitctl_retry.emulator.state import BrokerState, dead_letters_afterwards, emit
from rabbitctl_retry.emulator.values import (
    client_table,
    parse_expiration,
    server_table,
    timestamp,
    with_headers,
)
from rabbitctl_retry.errors import AccessRefused, NotFound, PreconditionFailed
from rabbitctl_retry.fields import EncodedTable, like
from rabbitctl_retry.transport.base import Properties

PublishOutcome = Literal["ack", "returned", "nack"]
"""What a confirm channel hears: basic.ack, basic.return (+ ack), or basic.nack."""

RATE_WINDOW_S = 5
"""The management API's statistics sample: rates are over its last 5 seconds."""


def publish(
    state: BrokerState,
    exchange: str,
    routing_key: str,
    body: bytes,
    properties: Properties,
    mandatory: bool,
    publisher: object = None,
) -> PublishOutcome:
    """Route and enqueue one message; ``publisher`` (the channel) is who a quorum queue
    blocks when it refuses the message (reject-publish)."""
    state.activity += 1
    x = state.exchanges.get(exchange)
    if x is None:
        raise NotFound(f"NOT_FOUND - no exchange '{exchange}' in vhost '{VHOST}'")
    _count_publish(state, exchange)
    if x.internal:
        raise AccessRefused(
            f"ACCESS_REFUSED - cannot publish to internal exchange '{exchange}' in vhost '{VHOST}'"
        )
    message = _stored(state, exchange, routing_key, body, properties)
    queues, delayed = route(state, x, message, enqueue)
    now_s = state.clock.now_s
    if not queues:
        if mandatory:
            emit(state, Returned(now_s, message.number, exchange, routing_key))
            return "returned"
        if not delayed:
            emit(state, Unroutable(now_s, message.number, exchange, routing_key))
        return "ack"
    emit(
        state,
        Published(
            now_s,
            message.number,
            exchange,
            routing_key,
            names_of(queues),
            message_id=message.properties.message_id,
        ),
    )
    accepted = True
    with dead_letters_afterwards(state):
        for queue in queues:
            accepted = enqueue(state, queue, message, publisher) and accepted
    return "ack" if accepted else "nack"


def _stored(
    state: BrokerState, exchange: str, routing_key: str, body: bytes, properties: Properties
) -> StoredMessage:
    """The message as the broker keeps it: its expiration parsed, its headers as the server
    writes them, its timestamp in seconds, its CC and BCC keys taken."""
    sent_bytes = property_bytes(properties)
    bcc = "BCC" in (properties.headers or {})
    try:
        ttl_ms = parse_expiration(properties.expiration)
    except ValueError as error:
        raise PreconditionFailed(
            f"PRECONDITION_FAILED - invalid expiration '{properties.expiration}': {error}"
        ) from None
    headers = properties.headers
    if headers is not None and properties.raw is None:
        if state.behaviour.sorts_headers_on_arrival:
            headers = server_table(headers, sort=True)
        elif not isinstance(headers, EncodedTable):
            headers = client_table(headers)
        properties = with_headers(properties, headers)
    if properties.timestamp is not None:
        properties = replace(properties, timestamp=timestamp(properties.timestamp))
    extra_keys: tuple[str, ...] = ()
    if properties.headers:
        properties, extra_keys = _sender_selected(properties)
    if bcc:
        # the server writes the properties again without BCC (mc_amqpl's strip_header)
        sent_bytes = property_bytes(properties)
    return StoredMessage(
        number=next(state.message_numbers),
        body=bytes(body),
        properties=properties,
        exchange=exchange,
        routing_keys=(routing_key, *extra_keys),
        ttl_ms=ttl_ms,
        property_bytes=sent_bytes,
    )


def _count_publish(state: BrokerState, exchange: str) -> None:
    second = int(state.clock.now_s)
    seconds = state.published_per_second.setdefault(exchange, {})
    seconds[second] = seconds.get(second, 0) + 1
    if len(seconds) > 2 * RATE_WINDOW_S:
        for old in [s for s in seconds if s < second - RATE_WINDOW_S]:
            del seconds[old]


def publish_rate(state: BrokerState, exchange: str) -> float | None:
    """Messages per second published into ``exchange`` over the last
    :data:`RATE_WINDOW_S` virtual seconds, as the management API's
    ``publish_in_details.rate`` states it; None when nothing was ever published to it."""
    seconds = state.published_per_second.get(exchange)
    if seconds is None:
        return None
    now = int(state.clock.now_s)
    recent = sum(n for second, n in seconds.items() if now - RATE_WINDOW_S < second <= now)
    return recent / RATE_WINDOW_S


def _sender_selected(properties: Properties) -> tuple[Properties, tuple[str, ...]]:
    """Sender-selected distribution: the routing keys in the ``CC`` and ``BCC`` headers (arrays
    of strings) route the message too; ``BCC`` is removed from the stored message."""
    headers = properties.headers or {}
    keys: list[str] = []
    for name in ("CC", "BCC"):
        value = headers.get(name)
        if isinstance(value, list):
            keys.extend(item for item in value if isinstance(item, str))
    if "BCC" in headers:
        remaining = {name: value for name, value in headers.items() if name != "BCC"}
        # written again without it: L as l, the names in their order (measured on 3.10.8; 4.0
        # and 4.3 sorted them on arrival already)
        properties = with_headers(properties, server_table(like(headers, remaining), sort=False))
    return properties, tuple(keys)
