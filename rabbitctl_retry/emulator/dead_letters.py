"""Dead-lettering over the broker's state: a message that dies in a queue (``rejected``,
``expired``, ``maxlen``, ``delivery_limit``) goes to the queue's ``x-dead-letter-exchange``.

Dead-lettering writes ``x-death`` (see ``deadletter.py``, the headers), drops ``expiration``,
publishes to the queue's ``x-dead-letter-exchange`` with its ``x-dead-letter-routing-key`` or
the original keys; if that routes nowhere the message is gone (no return). On 4.0 the broker
keeps the deaths of a message it dead-lettered (:class:`~.model.DeadLetter`) and ignores a
client's ``x-death``. An at-least-once queue keeps a dead letter its target refused, or that
routes nowhere, and sends it again every ``dead_letter_retry_s``.

The dead letters go into their queues through the ``enqueue`` the caller hands in
(``queues.enqueue``, which dead-letters in turn): this module does not import it.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Literal

from rabbitctl_retry.emulator.deadletter import (
    Death,
    DeathReason,
    broker_dead_letter_headers,
    dead_letter_headers,
    death_time,
    without_cycles,
)
from rabbitctl_retry.emulator.events import DeadLettered, Dropped
from rabbitctl_retry.emulator.limits import AT_MOST_ONCE, refuses
from rabbitctl_retry.emulator.model import DeadLetter, EmulatedQueue, Entry, StoredMessage
from rabbitctl_retry.emulator.route import Enqueue, names_of, route
from rabbitctl_retry.emulator.state import BrokerState, emit
from rabbitctl_retry.emulator.values import server_table
from rabbitctl_retry.fields import FieldTable, like


def dead_letter_entry(
    state: BrokerState,
    q: EmulatedQueue,
    entry: Entry,
    reason: DeathReason,
    enqueue: Enqueue,
    *,
    rejected_by: Literal["reject", "nack"] | None = None,
) -> None:
    """Dead-letter a message of ``q``; ``rejected_by``: the method that rejected it
    without requeue, if that is why it dies."""
    carried = _carried(state, q, entry, rejected_by)
    dead_letter(state, q, entry.message, reason, enqueue, carried=carried)


def _carried(
    state: BrokerState,
    q: EmulatedQueue,
    entry: Entry,
    rejected_by: Literal["reject", "nack"] | None,
) -> int:
    """The delivery count the dead letter of ``entry`` takes along (StoredMessage's
    ``carried_count``): on 4.3 its count, one more when a basic.reject made it die; on
    4.0 its failed deliveries, one more when a quorum queue's rejection did."""
    behaviour = state.behaviour
    if behaviour.counts_travel_from_any_queue:
        return entry.delivery_count + (rejected_by == "reject")
    quorum_rejection = (
        behaviour.quorum_rejections_travel and q.is_quorum and rejected_by is not None
    )
    return entry.failed_deliveries + quorum_rejection


def dead_letter(
    state: BrokerState,
    q: EmulatedQueue,
    message: StoredMessage,
    reason: DeathReason,
    enqueue: Enqueue,
    *,
    carried: int | None = None,
) -> None:
    """Dead-letter ``message`` of ``q`` for ``reason``: now, or when the operation that
    caused it is done (``state.dead_letters_afterwards``)."""
    now_s = state.clock.now_s
    dlx_name = q.settings.dead_letter_exchange
    if dlx_name is None:
        emit(state, Dropped(now_s, message.number, q.name, reason))
        return
    dead = _dead_letter_message(state, q, message, reason, dlx_name, carried)
    headers = dead.properties.headers
    dlx = state.exchanges.get(dlx_name)
    targets = route(state, dlx, dead, enqueue)[0] if dlx is not None else []
    if not targets and q.settings.dead_letter_at_least_once:
        emit(
            state,
            DeadLettered(now_s, message.number, reason, q.name, dlx_name, dead.routing_keys, ()),
        )
        _keep_unroutable(state, q, dlx_name, dead, enqueue)
        return
    keep, cycling = without_cycles(reason, headers, names_of(targets))
    emit(
        state,
        DeadLettered(
            now_s, message.number, reason, q.name, dlx_name, dead.routing_keys, tuple(keep)
        ),
    )
    for name in cycling:
        emit(state, Dropped(now_s, message.number, name, "cycle"))

    def send() -> None:
        for target in targets:
            if target.name in keep and not target.deleted:
                if not q.settings.dead_letter_at_least_once:
                    enqueue(state, target, dead, AT_MOST_ONCE)
                else:
                    _send_at_least_once(state, q, target, dead, enqueue)

    if state.held_dead_letters is not None:
        state.held_dead_letters.append(send)
    else:
        send()


def _dead_letter_message(
    state: BrokerState,
    q: EmulatedQueue,
    message: StoredMessage,
    reason: DeathReason,
    dlx_name: str,
    carried: int | None,
) -> DeadLetter:
    """The dead letter of ``message``: its ``x-death`` written, its ``expiration`` dropped,
    addressed to ``dlx_name`` with the queue's dead-letter routing key or its own keys."""
    behaviour = state.behaviour
    now_s = state.clock.now_s
    properties = message.properties
    death_keys = _death_routing_keys(message)
    death = Death(
        reason=reason,
        queue=q.name,
        exchange=message.exchange,
        routing_keys=death_keys,
        time=death_time(now_s),
        original_expiration=properties.expiration,
    )
    headers: FieldTable = (
        broker_dead_letter_headers(
            properties.headers, death, died_before=isinstance(message, DeadLetter)
        )
        if behaviour.broker_keeps_deaths
        else dead_letter_headers(
            properties.headers, death, write_last_death=behaviour.writes_last_death_headers
        )
    )
    dlrk = q.settings.dead_letter_routing_key
    if dlrk is not None and behaviour.dead_letter_key_drops_cc and "CC" in headers:
        headers = {name: value for name, value in headers.items() if name != "CC"}
    headers = server_table(like(properties.headers, headers), sort=True)
    return DeadLetter(
        number=message.number,
        body=message.body,
        properties=replace(properties, headers=headers, expiration=None),
        exchange=dlx_name,
        routing_keys=(dlrk,) if dlrk is not None else message.routing_keys,
        ttl_ms=None,
        carried_count=message.carried_count if carried is None else carried,
        property_bytes=message.property_bytes,
    )


def _send_at_least_once(
    state: BrokerState,
    source: EmulatedQueue,
    target: EmulatedQueue,
    dead: StoredMessage,
    enqueue: Enqueue,
) -> None:
    """At-least-once: ``dead`` (from ``source``) into ``target``. While the target refuses
    it, ``source`` keeps it and RabbitMQ's dead-letter worker sends it again after
    ``dead_letter_retry_s`` (its ``dead_letter_worker_publisher_confirm_timeout``, 3 minutes
    by default), until the target takes it or ``source`` is deleted."""
    if not refuses(target, dead, source):
        enqueue(state, target, dead, None)
        return
    state.kept_dead_letters += 1

    def again() -> None:
        state.kept_dead_letters -= 1
        if state.queues.get(source.name) is not source or state.queues.get(target.name) is None:
            return  # deleted: the worker and what it kept go with the queue
        _send_at_least_once(state, source, target, dead, enqueue)

    state.clock.call_later(state.dead_letter_retry_s, again)


def _keep_unroutable(
    state: BrokerState, source: EmulatedQueue, dlx_name: str, dead: StoredMessage, enqueue: Enqueue
) -> None:
    """At-least-once: no queue takes the dead letter (its exchange is missing or routes it
    nowhere); ``source`` keeps it and the dead-letter worker routes it again every
    ``dead_letter_retry_s`` until a queue takes it or ``source`` is deleted (measured on
    3.10.8 and 4.0.5: it arrives once a queue is bound)."""
    state.kept_dead_letters += 1

    def again() -> None:
        state.kept_dead_letters -= 1
        if state.queues.get(source.name) is not source:
            return
        dlx = state.exchanges.get(dlx_name)
        targets = route(state, dlx, dead, enqueue)[0] if dlx is not None else []
        if not targets:
            _keep_unroutable(state, source, dlx_name, dead, enqueue)
            return
        for target in targets:
            _send_at_least_once(state, source, target, dead, enqueue)

    state.clock.call_later(state.dead_letter_retry_s, again)


def _death_routing_keys(message: StoredMessage) -> tuple[str, ...]:
    """An ``x-death`` entry's ``routing-keys``: the key the message was published (or last
    dead-lettered) with, then the keys of its ``CC`` header; never the ``BCC`` keys, which
    routed it but were removed from it (measured on RabbitMQ 3.10.8 and 4.0.5)."""
    cc = (message.properties.headers or {}).get("CC")
    copied = [item for item in cc if isinstance(item, str)] if isinstance(cc, list) else []
    return (message.routing_keys[0], *copied)
