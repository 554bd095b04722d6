"""A queue's messages over the broker's state: enqueue, length limits, expiry, dispatch to
consumers, basic.get, purge, delete, and ``x-expires``.

Synchronous and single-threaded; every rule here is the server's, measured on RabbitMQ 3.10.8:

* A message published to a queue with a consumer that can take it goes straight to it;
  otherwise it waits at the back of the queue. Consumers take turns (round robin), each
  limited by the prefetch it was created under (basic.qos, per consumer); a queue with
  ``x-single-active-consumer`` delivers to its active one only (``single_active.py``).
* Messages expire from the head only, on both queue types: a short TTL behind a long one
  waits for it, then both go in order. A RabbitMQ 4.3 quorum queue has a head for what was
  given back and one for the other messages of each priority, and expires at each. The TTL
  is the smaller of the message's ``expiration`` and the queue's ``x-message-ttl``; an
  expiration of ``0`` expires at once unless a consumer takes the message immediately. A
  quorum queue's get-ok counts what expired behind the message it took (unless no_ack). A
  classic queue checks its head only at some moments (alone after a publish, after
  handing out a message, on its timer: docs/reference/testing.md, "Priorities with message TTLs in
  classic queues"), so a message that went ahead of a non-empty queue's head waits.
* ``x-max-length`` / ``x-max-length-bytes`` count ready messages only (bytes: the body; a 4.3
  quorum queue adds the properties as published, :func:`_size_bytes`); ``drop-head`` removes
  (dead-letters, ``maxlen``) from the head, also after a requeue; ``reject-publish`` refuses the
  new message (a negative confirm), ``reject-publish-dlx`` dead-letters it too. A quorum queue
  overshoots by one before it refuses, and treats ``reject-publish-dlx`` as ``drop-head``
  (``limits.py``).
"""

from __future__ import annotations

from rabbitctl_retry.emulator import single_active
from rabbitctl_retry.emulator.clock import on_grid
from rabbitctl_retry.emulator.consumer_timeout import arm
from rabbitctl_retry.emulator.dead_letters import dead_letter, dead_letter_entry
from rabbitctl_retry.emulator.deliver import deliver, delivery, record_delivered
from rabbitctl_retry.emulator.events import Dropped, Expired
from rabbitctl_retry.emulator.limits import block_publishers, refuses
from rabbitctl_retry.emulator.model import (
    ChannelState,
    Consumer,
    EmulatedQueue,
    Entry,
    StoredMessage,
    Unacked,
)
from rabbitctl_retry.emulator.route import reindex_bindings
from rabbitctl_retry.emulator.state import BrokerState, dead_letters_afterwards, emit
from rabbitctl_retry.transport.base import Delivery


def enqueue(
    state: BrokerState, q: EmulatedQueue, message: StoredMessage, publisher: object = None
) -> bool:
    """Put ``message`` in ``q`` (or straight to a consumer); False if the queue refused it."""
    settings = q.settings
    if settings.overflow != "drop-head" and refuses(q, message, publisher):
        if settings.overflow == "reject-publish-dlx":
            dead_letter(state, q, message, "maxlen", enqueue)
        else:
            emit(state, Dropped(state.clock.now_s, message.number, q.name, "reject_publish"))
        return False
    now_s = state.clock.now_s
    ttl_ms = message.ttl_ms
    queue_ttl_ms = settings.message_ttl_ms
    if queue_ttl_ms is not None and (ttl_ms is None or queue_ttl_ms < ttl_ms):
        ttl_ms = queue_ttl_ms
    entry = Entry(
        message=message,
        seq=next(state.enqueue_seq),
        expires_at_s=None if ttl_ms is None else on_grid(now_s + ttl_ms / 1000),
        enqueued_at_s=now_s,
        size_bytes=_size_bytes(state, q, message),
    )
    _start_counts(state, q, entry)
    if q.consumers and not q.ready:
        consumer = _next_consumer(state, q)
        if consumer is not None:
            if not q.is_quorum:
                # RabbitMQ 4.3: a classic queue hands a carrying dead letter straight to a
                # waiting consumer as not redelivered (measured on 4.3.6, seed 60)
                entry.redelivered = False
            q.count_turn()
            deliver(state, q, entry, consumer)
            return True
    q.push(entry)
    block_publishers(q)
    if q.over_limit() and settings.overflow == "drop-head":
        trim(state, q)
    if q.is_quorum or len(q.ready) == 1:
        # a classic queue checks its head here only when the message is alone in it (or
        # drop-head pushed some out, trim): one that went ahead of the head of a non-empty
        # queue waits for the next check (docs/reference/testing.md, "Priorities with message TTLs
        # in classic queues")
        expire_due(state, q)
    if q.consumers:
        dispatch(state, q)
    return True


def _size_bytes(state: BrokerState, q: EmulatedQueue, message: StoredMessage) -> int:
    """What ``q`` counts of ``message`` toward ``x-max-length-bytes``: the body, and on
    RabbitMQ 4.3 in a quorum queue its properties as published too (releases.py)."""
    body_bytes = len(message.body)
    if not q.is_quorum:
        return body_bytes
    return state.behaviour.quorum_message_bytes(body_bytes, message.property_bytes)


def _start_counts(state: BrokerState, q: EmulatedQueue, entry: Entry) -> None:
    """What a message arriving in ``q`` starts with of the count it carries."""
    carried = entry.message.carried_count
    if state.behaviour.counts_travel_from_any_queue:
        entry.delivery_count = carried
        entry.redelivered = carried > 0
    else:
        entry.failed_deliveries = carried
        entry.redelivered = q.is_quorum and carried > 0


def trim(state: BrokerState, q: EmulatedQueue) -> None:
    """drop-head: dead-letter (``maxlen``) from the head until ``q`` is within its limits.

    A classic queue dead-letters them oldest first; a quorum queue that drops several at
    once dead-letters them newest first (rabbit_fifo gathers the evictions of one command
    and hands them on in reverse; measured on 3.10.8 and 4.0.5: publishing 2, 2, 2 and
    11 bytes into ``x-max-length-bytes = 10`` dead-letters m4, m3, m2, m1). RabbitMQ 4.3
    hands them on oldest first, as a classic queue (measured on 4.3.6)."""
    evicted: list[Entry] = []
    while q.ready and q.over_limit():
        evicted.append(q.pop())
    newest_first = q.is_quorum and state.behaviour.quorum_evictions_newest_first
    for entry in reversed(evicted) if newest_first else evicted:
        dead_letter_entry(state, q, entry, "maxlen", enqueue)
    expire_head(state, q)


def expire_due(state: BrokerState, q: EmulatedQueue) -> None:
    """:func:`expire_head`, when ``q`` may have something to expire."""
    if q.ready and (_expires_at_each_head(state, q) or q.head().expires_at_s is not None):
        expire_head(state, q)


def _expires_at_each_head(state: BrokerState, q: EmulatedQueue) -> bool:
    return state.behaviour.quorum_expires_at_each_head and q.is_quorum


def expire_head(state: BrokerState, q: EmulatedQueue) -> None:
    """Expire from the head while due; arm the timer for the head's expiry.

    The head is the message ``q`` would serve next; on RabbitMQ 4.3 a quorum queue has
    several (:func:`_expire_heads`)."""
    if _expires_at_each_head(state, q):
        _expire_heads(state, q)
        return
    while q.ready:
        head = q.head()
        expires_at_s = head.expires_at_s
        if expires_at_s is None:
            break
        if expires_at_s > state.clock.now_s:
            _arm_ttl(state, q, expires_at_s)
            return
        q.pop()
        emit(state, Expired(state.clock.now_s, head.message.number, q.name))
        dead_letter_entry(state, q, head, "expired", enqueue)
    _arm_ttl(state, q, None)


def _expire_heads(state: BrokerState, q: EmulatedQueue) -> None:
    """RabbitMQ 4.3 quorum queues: what was given back expires at its head, and the other
    messages at the head of each priority (EmulatedQueue.expiry_heads): all that is due
    at each, given back first, then by priority, highest first, each oldest first
    (measured on 4.3.6: a message given back no longer holds up the expiry of those
    behind it). The timer is armed for the first of the heads to fall due."""
    now_s = state.clock.now_s
    while True:
        heads = q.expiry_heads()
        due = [i for i in heads if _due_by(q.ready[i].expires_at_s, now_s)]
        if not due:
            break
        entry = q.remove_at(due[0])
        emit(state, Expired(now_s, entry.message.number, q.name))
        dead_letter_entry(state, q, entry, "expired", enqueue)
    times = [t for i in heads if (t := q.ready[i].expires_at_s) is not None]
    _arm_ttl(state, q, min(times, default=None))


def _due_by(expires_at_s: float | None, now_s: float) -> bool:
    return expires_at_s is not None and expires_at_s <= now_s


def _arm_ttl(state: BrokerState, q: EmulatedQueue, when_s: float | None) -> None:
    """Arm ``q``'s expiry timer for ``when_s`` (None: no timer)."""
    timer = q.ttl_timer
    if when_s is None:
        if timer is not None:
            timer.cancel()
            q.ttl_timer = None
        return
    if timer is None or timer.cancelled or timer.when_s != when_s:
        if timer is not None:
            timer.cancel()
        q.ttl_timer = state.clock.call_at(when_s, lambda: _on_ttl(state, q))


def _on_ttl(state: BrokerState, q: EmulatedQueue) -> None:
    """The expiry timer of ``q``: what falls due expires as one operation, as a publish is
    one: its dead letter reaches every queue it is routed to before any dead letter it
    causes there (measured on 3.10.8, 4.0.5 and 4.3.6: a message expiring into a fanout
    bound to a full queue, then to q0, reaches q0 before the full queue's ``maxlen`` copy
    of it). Of several expiring together, the later ones race on the servers with what the
    first pushed out (docs/reference/testing.md); the emulator sends them first."""
    q.ttl_timer = None
    if q.deleted:
        return
    state.activity += 1
    with dead_letters_afterwards(state):
        expire_head(state, q)


def _take(state: BrokerState, q: EmulatedQueue, *, expire_after: bool = True) -> Entry | None:
    """Expire what is due (a quorum queue; a classic queue hands out its head unchecked),
    take the message served next, and (``expire_after``) expire what is due behind it."""
    if q.is_quorum:
        expire_due(state, q)
    if not q.ready:
        return None
    entry = q.pop()
    if expire_after:
        expire_due(state, q)
    return entry


def dispatch(state: BrokerState, q: EmulatedQueue) -> None:
    """Deliver ready messages to consumers while one can take one: the consumer whose turn
    it is (EmulatedQueue.next_consumer) takes the message served next. A quorum queue
    expires what is due before each, a classic queue after each (it hands out its head
    unchecked, then checks the next)."""
    checks_before = q.is_quorum
    while q.ready and q.consumers:
        if checks_before:
            expire_due(state, q)
            if not q.ready:
                return
        consumer = _next_consumer(state, q)
        if consumer is None:
            return
        deliver(state, q, q.pop(), consumer)
        if not checks_before:
            expire_due(state, q)


def _next_consumer(state: BrokerState, q: EmulatedQueue) -> Consumer | None:
    """The consumer whose turn it is (EmulatedQueue.next_consumer), or a single active
    consumer queue's active one (emulator/single_active.py)."""
    if single_active.is_single_active(q):
        return single_active.deliverable(state, q)
    return q.next_consumer()


def get(
    state: BrokerState, channel: ChannelState, q: EmulatedQueue, no_ack: bool
) -> Delivery | None:
    """basic.get. Its get-ok's message count: a classic queue drops what is due behind
    the message taken before it counts; a quorum queue counts it when the message waits
    for an ack, and drops it just after (a no_ack get settles at once, and the queue runs
    again before it answers: dropped first). Measured on 3.10.8, 4.0.5 and 4.3.6."""
    state.activity += 1
    mark_used(state, q)
    counts_expired = q.is_quorum and not no_ack
    entry = _take(state, q, expire_after=not counts_expired)
    if entry is None:
        return None
    tag = channel.next_tag
    channel.next_tag = tag + 1
    if not no_ack:
        held = Unacked(q, entry, None)
        channel.unacked[tag] = held
        arm(state, channel, tag, held)
        q.unacked += 1
    record_delivered(state, q, entry, tag, None)
    shown = delivery(state, q, entry, tag, None, len(q.ready), via_get=True)
    if counts_expired:
        expire_due(state, q)
    return shown


def mark_used(state: BrokerState, q: EmulatedQueue) -> None:
    """``x-expires``: ``q`` was used (declared, got from, consumed from, or its last consumer
    went): it is deleted once unused for its ``x-expires`` (the server notices on a tick of
    its own, up to a few seconds later: measured on 3.10.8 and 4.0.5; the emulator deletes
    it on time). A passive declare is no use."""
    expires_ms = q.settings.expires_ms
    if expires_ms is None:
        return
    if q.expiry_timer is not None:
        q.expiry_timer.cancel()
        q.expiry_timer = None
    if q.consumers:
        return

    def expire() -> None:
        q.expiry_timer = None
        if state.queues.get(q.name) is q and not q.consumers:
            state.activity += 1
            delete_queue(state, q)

    q.expiry_timer = state.clock.call_later(expires_ms / 1000, expire)


def purge(state: BrokerState, q: EmulatedQueue) -> int:
    """Remove ``q``'s ready messages, and those waiting out a delayed retry (RabbitMQ 4.3:
    a purge counts them too)."""
    state.activity += 1
    gone = [*q.ready, *q.waiting.clear()]
    now_s = state.clock.now_s
    for entry in gone:
        emit(state, Dropped(now_s, entry.message.number, q.name, "purged"))
    q.clear()
    if q.ttl_timer is not None:
        q.ttl_timer.cancel()
        q.ttl_timer = None
    return len(gone)


def delete_queue(state: BrokerState, q: EmulatedQueue) -> int:
    """Remove ``q`` with its ready messages, bindings and consumers."""
    state.activity += 1
    count = len(q.ready)
    now_s = state.clock.now_s
    for entry in q.ready:
        emit(state, Dropped(now_s, entry.message.number, q.name, "queue_deleted"))
    q.clear()
    q.deleted = True
    for timer in (q.ttl_timer, q.expiry_timer):
        if timer is not None:
            timer.cancel()
    q.ttl_timer = q.expiry_timer = None
    for entry in q.waiting.clear():
        emit(state, Dropped(now_s, entry.message.number, q.name, "queue_deleted"))
    if state.queues.get(q.name) is q:
        del state.queues[q.name]
    cancelled = list(q.consumers)
    for consumer in cancelled:
        consumer.channel.consumers.pop(consumer.tag, None)
    q.consumers.clear()
    q.turns.clear()
    q.limited.clear()
    for consumer in cancelled:
        # basic.cancel from the server (consumer_cancel_notify)
        if consumer.on_cancel is not None and not consumer.channel.closed:
            consumer.on_cancel(consumer.tag)
    for x in list(state.exchanges.values()):
        if any(b.queue == q.name for b in x.bindings):
            x.bindings = [b for b in x.bindings if b.queue != q.name]
            reindex_bindings(x)
            if x.auto_delete and not x.bindings:
                del state.exchanges[x.name]
    return count
