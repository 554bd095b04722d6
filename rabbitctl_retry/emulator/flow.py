"""How messages move: publish, route, enqueue, deliver, settle, requeue, expire, dead-letter.

Synchronous and single-threaded; the asyncio glue (consumer callbacks as tasks) is in
``transport.py``. Every rule here is the server's, measured on RabbitMQ 3.10.8:

* A message published to a queue with a consumer that can take it goes straight to it;
  otherwise it waits at the back of the queue. Consumers take turns (round robin), each
  limited by the prefetch it was created under (basic.qos, per consumer).
* A classic queue puts a requeued message back in its original place (by enqueue order). A
  quorum queue puts a message rejected or nacked with requeue at the back, but one its
  channel held when it closed at the front, behind others given back that way (3.10's
  ``rabbit_fifo`` re-enqueues a requeue, and serves its ``returns`` first); 4.0 puts every
  return at the front that way, rejected and nacked ones too. It counts every
  return: ``x-delivery-count`` on later deliveries, and past ``x-delivery-limit`` returns the
  message is dead-lettered (``delivery_limit``) instead; 4.0 has a default limit of 20 and
  takes a negative one as no limit (``args.py``).
  On 3.x a basic.get shows ``x-delivery-count = 0`` on the first delivery; basic.deliver does
  not. From 4.3 a basic.nack no longer counts.
* Messages expire from the head only, on both queue types: a short TTL behind a long one
  waits for it, then both go in order. A RabbitMQ 4.3 quorum queue has a head for what was
  given back and one for the other messages of each priority, and expires at each. The TTL
  is the smaller of the message's ``expiration`` and the queue's ``x-message-ttl``; an
  expiration of ``0`` expires at once unless a consumer takes the message immediately. A
  quorum queue's get-ok counts what expired behind the message it took (unless no_ack).
* ``x-max-length`` / ``x-max-length-bytes`` count ready messages only; ``drop-head`` removes
  (dead-letters, ``maxlen``) from the head, also after a requeue; ``reject-publish`` refuses the
  new message (a negative confirm), ``reject-publish-dlx`` dead-letters it too. A quorum queue
  overshoots by one before it refuses, and treats ``reject-publish-dlx`` as ``drop-head``.
* Dead-lettering writes ``x-death`` (see ``deadletter.py``), drops ``expiration``, publishes to
  the queue's ``x-dead-letter-exchange`` with its ``x-dead-letter-routing-key`` or the original
  keys; if that routes nowhere the message is gone (no return). On 4.0 the broker keeps the
  deaths of a message it dead-lettered (:class:`DeadLetter`) and ignores a client's ``x-death``.
* An ``x-delayed-message`` exchange holds a message with ``0 < x-delay <= 2**32-1`` ms and
  routes it later with ``x-delay`` negated; at publish time it counts as unroutable, so a
  mandatory publish is returned at once (the plugin's documented limitation) and an
  alternate exchange gets a copy.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Literal

from rabbitctl_retry.emulator.clock import VirtualClock, on_grid
from rabbitctl_retry.emulator.deadletter import (
    DeathReason,
    broker_dead_letter_headers,
    dead_letter_headers,
    death_time,
    without_cycles,
)
from rabbitctl_retry.emulator.events import (
    DeadLettered,
    Delayed,
    Delivered,
    Dropped,
    Event,
    Expired,
    Published,
    Released,
    Returned,
    Unroutable,
)
from rabbitctl_retry.emulator.model import (
    ChannelState,
    Consumer,
    EmulatedQueue,
    Entry,
    Exchange,
    StoredMessage,
    Unacked,
)
from rabbitctl_retry.emulator.routing import headers_match, topic_matches
from rabbitctl_retry.emulator.values import (
    client_table,
    copy_headers,
    parse_delay_ms,
    parse_expiration,
    server_table,
    timestamp,
    with_headers,
)
from rabbitctl_retry.errors import AccessRefused, NotFound, PreconditionFailed
from rabbitctl_retry.fields import EncodedTable, like
from rabbitctl_retry.server import ServerVersion
from rabbitctl_retry.transport.base import Delivery, Properties

PublishOutcome = Literal["ack", "returned", "nack"]
"""What a confirm channel hears: basic.ack, basic.return (+ ack), or basic.nack."""

VHOST = "/"


DEAD_LETTER_RETRY_S = 180.0
"""RabbitMQ's ``dead_letter_worker_publisher_confirm_timeout`` default: how long an
at-least-once dead-letter worker waits before it sends a refused dead letter again."""


AT_MOST_ONCE = object()
"""The publisher of an at-most-once dead letter: the server sends it untracked, and a quorum
queue's ``reject-publish`` never refuses it (:meth:`Flow._refuses`)."""


RATE_WINDOW_S = 5
"""The management API's statistics sample: rates are over its last 5 seconds."""


class Flow:
    """The broker's state and the message rules over it."""

    def __init__(
        self, clock: VirtualClock, server_version: ServerVersion, *, record_events: bool = True
    ) -> None:
        self.clock = clock
        self.server_version = server_version
        self.queues: dict[str, EmulatedQueue] = {}
        self.exchanges: dict[str, Exchange] = {}
        self.events: list[Event] = []
        self.activity = 0
        """Bumped by every operation and timer: lets the glue tell when things stopped moving."""
        self._record = record_events
        self._published_per_second: dict[str, dict[int, int]] = {}
        """Exchange -> virtual second -> messages published into it (the last few seconds):
        the management API's publish rate (:meth:`publish_rate`)."""
        self._numbers = itertools.count(1)
        self._seq = itertools.count(1)
        self.behaviour = server_version.behaviour
        """What this server does where releases differ (``releases.py``), read once: every
        version switch of the emulator is a field of it (docs/testing.md, "What differs
        between releases")."""
        self._held_dead_letters: deque[Callable[[], None]] | None = None
        """Dead letters waiting for the operation that caused them (dead_letters_afterwards)."""
        self.dead_letter_retry_s = DEAD_LETTER_RETRY_S
        self.kept_dead_letters = 0
        """Dead letters quorum queues keep (at-least-once) because their target refused them."""

    def _emit(self, event: Event) -> None:
        if self._record:
            self.events.append(event)

    # -- publish and route -------------------------------------------------------------------

    def _count_publish(self, exchange: str) -> None:
        second = int(self.clock.now_s)
        seconds = self._published_per_second.setdefault(exchange, {})
        seconds[second] = seconds.get(second, 0) + 1
        if len(seconds) > 2 * RATE_WINDOW_S:
            for old in [s for s in seconds if s < second - RATE_WINDOW_S]:
                del seconds[old]

    def publish_rate(self, exchange: str) -> float | None:
        """Messages per second published into ``exchange`` over the last
        :data:`RATE_WINDOW_S` virtual seconds, as the management API's
        ``publish_in_details.rate`` states it; None when nothing was ever published to it."""
        seconds = self._published_per_second.get(exchange)
        if seconds is None:
            return None
        now = int(self.clock.now_s)
        recent = sum(n for second, n in seconds.items() if now - RATE_WINDOW_S < second <= now)
        return recent / RATE_WINDOW_S

    def publish(
        self,
        exchange: str,
        routing_key: str,
        body: bytes,
        properties: Properties,
        mandatory: bool,
        publisher: object = None,
    ) -> PublishOutcome:
        """Route and enqueue one message; ``publisher`` (the channel) is who a quorum queue
        blocks when it refuses the message (reject-publish)."""
        self.activity += 1
        x = self.exchanges.get(exchange)
        if x is None:
            raise NotFound(f"NOT_FOUND - no exchange '{exchange}' in vhost '{VHOST}'")
        self._count_publish(exchange)
        if x.internal:
            raise AccessRefused(
                f"ACCESS_REFUSED - cannot publish to internal exchange '{exchange}' in vhost "
                f"'{VHOST}'"
            )
        try:
            ttl_ms = parse_expiration(properties.expiration)
        except ValueError as error:
            raise PreconditionFailed(
                f"PRECONDITION_FAILED - invalid expiration '{properties.expiration}': {error}"
            ) from None
        headers = properties.headers
        if headers is not None and properties.raw is None:
            if self.behaviour.sorts_headers_on_arrival:
                headers = server_table(headers, sort=True)
            elif not isinstance(headers, EncodedTable):
                headers = client_table(headers)
            properties = with_headers(properties, headers)
        if properties.timestamp is not None:
            properties = replace(properties, timestamp=timestamp(properties.timestamp))
        extra_keys: tuple[str, ...] = ()
        if properties.headers:
            properties, extra_keys = _sender_selected(properties)
        message = StoredMessage(
            number=next(self._numbers),
            body=bytes(body),
            properties=properties,
            exchange=exchange,
            routing_keys=(routing_key, *extra_keys),
            ttl_ms=ttl_ms,
        )
        queues, delayed = self._route(x, message)
        now_s = self.clock.now_s
        if not queues:
            if mandatory:
                self._emit(Returned(now_s, message.number, exchange, routing_key))
                return "returned"
            if not delayed:
                self._emit(Unroutable(now_s, message.number, exchange, routing_key))
            return "ack"
        self._emit(
            Published(
                now_s,
                message.number,
                exchange,
                routing_key,
                _names(queues),
                message_id=properties.message_id,
            )
        )
        accepted = True
        with self.dead_letters_afterwards():
            for queue in queues:
                accepted = self._enqueue(queue, message, publisher) and accepted
        return "ack" if accepted else "nack"

    @contextmanager
    def dead_letters_afterwards(self) -> Iterator[None]:
        """Hold back the dead letters an operation causes until the operation is done.

        RabbitMQ dead-letters by publishing from the queue's own process, after it handled the
        command that caused it: a publish reaches every queue it is routed to before any dead
        letter it causes (a queue over its length limit drops its head), and a consumer freed
        by a basic.nack gets the next ready message before the nacked one comes back to a
        queue that dead-letters to itself (measured on 3.10.8 and 4.0.5). Dead letters caused
        while the held ones go out are sent after them, in order.
        """
        if self._held_dead_letters is not None:
            yield  # inside another operation: that one sends them
            return
        held: deque[Callable[[], None]] = deque()
        self._held_dead_letters = held
        try:
            yield
        finally:
            while held:
                held.popleft()()
            self._held_dead_letters = None

    def _route(self, x: Exchange, message: StoredMessage) -> tuple[list[EmulatedQueue], bool]:
        """The queues ``message`` goes to through ``x`` (and its alternate exchanges)."""
        delayed = False
        seen: set[str] = set()
        current: Exchange | None = x
        while current is not None and current.name not in seen:
            seen.add(current.name)
            if current.delayed:
                delay_ms = parse_delay_ms(message.properties.headers)
                if delay_ms is not None:
                    self._delay(current, message, delay_ms)
                    delayed = True
                    names: list[str] = []
                else:
                    names = self._match(current, message)
            else:
                names = self._match(current, message)
            if names:
                queues = self.queues
                return [queues[n] for n in names if n in queues], delayed
            alternate = current.arguments.get("alternate-exchange")
            current = self.exchanges.get(alternate) if isinstance(alternate, str) else None
        return [], delayed

    def _match(self, x: Exchange, message: StoredMessage) -> list[str]:
        keys = message.routing_keys
        if x.name == "":
            return [k for k in keys if k in self.queues]
        kind = x.routing_type
        if kind == "direct":
            if len(keys) == 1:
                return x.by_key.get(keys[0], [])
            found = [n for k in keys for n in x.by_key.get(k, [])]
        elif kind == "fanout":
            found = [b.queue for b in x.bindings]
        elif kind == "topic":
            found = [
                b.queue for b in x.bindings if any(topic_matches(b.routing_key, k) for k in keys)
            ]
        else:
            headers = message.properties.headers
            strict = self.behaviour.headers_exchange_strict_numbers
            found = [
                b.queue
                for b in x.bindings
                if headers_match(b.arguments, headers, strict_numbers=strict)
            ]
        return list(dict.fromkeys(found))

    def _delay(self, x: Exchange, message: StoredMessage, delay_ms: int) -> None:
        self._emit(Delayed(self.clock.now_s, message.number, x.name, delay_ms))
        self.clock.call_later(delay_ms / 1000, lambda: self._release(x, message, delay_ms))

    def _release(self, x: Exchange, message: StoredMessage, delay_ms: int) -> None:
        self.activity += 1
        if self.exchanges.get(x.name) is not x:
            self._emit(Released(self.clock.now_s, message.number, x.name, ()))
            return
        before = message.properties.headers
        headers = dict(before or {})
        headers["x-delay"] = -delay_ms
        # not measured (the test servers have no delayed-message plugin): written again as
        # 3.10 writes a table it changed without adding to it (BCC removed), names unsorted
        stored = server_table(like(before, headers), sort=False)
        released = replace(message, properties=replace(message.properties, headers=stored))
        queues, _ = self._route(x, released)
        self._emit(Released(self.clock.now_s, message.number, x.name, _names(queues)))
        for queue in queues:
            self._enqueue(queue, released)

    # -- queues ------------------------------------------------------------------------------

    def _enqueue(self, q: EmulatedQueue, message: StoredMessage, publisher: object = None) -> bool:
        """Put ``message`` in ``q`` (or straight to a consumer); False if the queue refused it."""
        settings = q.settings
        if settings.overflow != "drop-head" and self._refuses(q, message, publisher):
            if settings.overflow == "reject-publish-dlx":
                self._dead_letter(q, message, "maxlen")
            else:
                self._emit(Dropped(self.clock.now_s, message.number, q.name, "reject_publish"))
            return False
        now_s = self.clock.now_s
        ttl_ms = message.ttl_ms
        queue_ttl_ms = settings.message_ttl_ms
        if queue_ttl_ms is not None and (ttl_ms is None or queue_ttl_ms < ttl_ms):
            ttl_ms = queue_ttl_ms
        entry = Entry(
            message=message,
            seq=next(self._seq),
            expires_at_s=None if ttl_ms is None else on_grid(now_s + ttl_ms / 1000),
            enqueued_at_s=now_s,
        )
        self._start_counts(q, entry)
        if q.consumers and not q.ready:
            consumer = q.next_consumer()
            if consumer is not None:
                if not q.is_quorum:
                    # RabbitMQ 4.3: a classic queue hands a carrying dead letter straight to a
                    # waiting consumer as not redelivered (measured on 4.3.6, seed 60)
                    entry.redelivered = False
                self._deliver(q, entry, consumer)
                return True
        q.push(entry)
        self._block_publishers(q)
        if q.over_limit() and settings.overflow == "drop-head":
            self._trim(q)
        self._expire_due(q)
        if q.consumers:
            self._dispatch(q)
        return True

    def _start_counts(self, q: EmulatedQueue, entry: Entry) -> None:
        """What a message arriving in ``q`` starts with of the count it carries."""
        carried = entry.message.carried_count
        if self.behaviour.counts_travel_from_any_queue:
            entry.delivery_count = carried
            entry.redelivered = carried > 0
        else:
            entry.failed_deliveries = carried
            entry.redelivered = q.is_quorum and carried > 0

    def _trim(self, q: EmulatedQueue) -> None:
        """drop-head: dead-letter (``maxlen``) from the head until ``q`` is within its limits.

        A classic queue dead-letters them oldest first; a quorum queue that drops several at
        once dead-letters them newest first (rabbit_fifo gathers the evictions of one command
        and hands them on in reverse; measured on 3.10.8 and 4.0.5: publishing 2, 2, 2 and
        11 bytes into ``x-max-length-bytes = 10`` dead-letters m4, m3, m2, m1). RabbitMQ 4.3
        hands them on oldest first, as a classic queue (measured on 4.3.6)."""
        evicted: list[Entry] = []
        while q.ready and q.over_limit():
            evicted.append(q.pop())
        newest_first = q.is_quorum and self.behaviour.quorum_evictions_newest_first
        for entry in reversed(evicted) if newest_first else evicted:
            self._dead_letter_entry(q, entry, "maxlen")
        self._expire_head(q)

    def _refuses(self, q: EmulatedQueue, message: StoredMessage, publisher: object) -> bool:
        """reject-publish: does ``q`` refuse ``message`` from ``publisher``?

        A classic queue refuses a message that would take it over its limit. A quorum queue
        (``rabbit_fifo``) takes a message while it is not over its limit, so it goes over by
        one. The message that takes it over its limit makes it refuse every publisher that
        published to it before (each stays refused until the queue's ready messages fall to
        80 % of the limit, the soft limit: :meth:`_block_publishers`), and a publisher it
        refuses for being over is refused likewise; a publisher new to it is refused only
        while the queue is over its limit (measured on 3.10.8 and 4.0.5; the emulator
        unblocks when a blocked publisher publishes again). An
        at-most-once dead letter (:data:`AT_MOST_ONCE`) is never refused by a quorum queue: it
        takes it over its limit (measured on 3.10.8 and 4.0.5: four dead letters into
        ``x-max-length = 1`` are four ready messages).
        """
        if not q.is_quorum:
            return _would_overflow(q, message)
        if publisher is AT_MOST_ONCE:
            return False
        if q.blocked and _below_soft_limit(q):
            q.blocked.clear()
        if publisher in q.blocked:
            return True
        q.enqueuers.add(publisher)
        if q.over_limit():
            q.blocked.add(publisher)
            return True
        return False

    @staticmethod
    def _block_publishers(q: EmulatedQueue) -> None:
        """Quorum reject-publish: a message took ``q`` over its limit; it tells every publisher
        it knows to stop (rabbit_fifo's reject_publish status)."""
        if q.is_quorum and q.settings.overflow == "reject-publish" and q.over_limit():
            q.blocked |= q.enqueuers

    def _expire_due(self, q: EmulatedQueue) -> None:
        """:meth:`_expire_head`, when ``q`` may have something to expire."""
        if q.ready and (self._expires_at_each_head(q) or q.head().expires_at_s is not None):
            self._expire_head(q)

    def _expires_at_each_head(self, q: EmulatedQueue) -> bool:
        return self.behaviour.quorum_expires_at_each_head and q.is_quorum

    def _expire_head(self, q: EmulatedQueue) -> None:
        """Expire from the head while due; arm the timer for the head's expiry.

        The head is the message ``q`` would serve next; on RabbitMQ 4.3 a quorum queue has
        several (:meth:`_expire_heads`)."""
        if self._expires_at_each_head(q):
            self._expire_heads(q)
            return
        while q.ready:
            head = q.head()
            expires_at_s = head.expires_at_s
            if expires_at_s is None:
                break
            if expires_at_s > self.clock.now_s:
                self._arm_ttl(q, expires_at_s)
                return
            q.pop()
            self._emit(Expired(self.clock.now_s, head.message.number, q.name))
            self._dead_letter_entry(q, head, "expired")
        self._arm_ttl(q, None)

    def _expire_heads(self, q: EmulatedQueue) -> None:
        """RabbitMQ 4.3 quorum queues: what was given back expires at its head, and the other
        messages at the head of each priority (EmulatedQueue.expiry_heads): all that is due
        at each, given back first, then by priority, highest first, each oldest first
        (measured on 4.3.6: a message given back no longer holds up the expiry of those
        behind it). The timer is armed for the first of the heads to fall due."""
        now_s = self.clock.now_s
        while True:
            heads = q.expiry_heads()
            due = [i for i in heads if _due_by(q.ready[i].expires_at_s, now_s)]
            if not due:
                break
            entry = q.remove_at(due[0])
            self._emit(Expired(now_s, entry.message.number, q.name))
            self._dead_letter_entry(q, entry, "expired")
        times = [t for i in heads if (t := q.ready[i].expires_at_s) is not None]
        self._arm_ttl(q, min(times, default=None))

    def _arm_ttl(self, q: EmulatedQueue, when_s: float | None) -> None:
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
            q.ttl_timer = self.clock.call_at(when_s, lambda: self._on_ttl(q))

    def _on_ttl(self, q: EmulatedQueue) -> None:
        q.ttl_timer = None
        if q.deleted:
            return
        self.activity += 1
        self._expire_head(q)

    def _take(self, q: EmulatedQueue, *, expire_after: bool = True) -> Entry | None:
        """Expire what is due, take the message served next, and (``expire_after``) expire
        what is due behind it."""
        self._expire_due(q)
        if not q.ready:
            return None
        entry = q.pop()
        if expire_after:
            self._expire_due(q)
        return entry

    def _dispatch(self, q: EmulatedQueue) -> None:
        """Deliver ready messages to consumers while one can take one: what is due expires
        first, then the consumer whose turn it is (EmulatedQueue.next_consumer) takes the
        message served next."""
        while q.ready and q.consumers:
            self._expire_due(q)
            if not q.ready:
                return
            consumer = q.next_consumer()
            if consumer is None:
                return
            self._deliver(q, q.pop(), consumer)

    def _deliver(self, q: EmulatedQueue, entry: Entry, consumer: Consumer) -> None:
        channel = consumer.channel
        tag = channel.next_tag
        channel.next_tag = tag + 1
        if not consumer.no_ack:
            channel.unacked[tag] = Unacked(q, entry, consumer, consumer.next_msg_id)
            consumer.unacked += 1
            q.unacked += 1
        consumer.next_msg_id += 1
        if consumer.crashes_its_channel:
            # the server closes the connection: the message never reaches the client and goes
            # back to the queue with the connection's other unacked messages
            channel.connection.on_fault(541, "INTERNAL_ERROR")
            return
        delivery = self._delivery(q, entry, tag, consumer.tag, None, via_get=False)
        if self._record:
            self.events.append(
                Delivered(
                    self.clock.now_s,
                    entry.message.number,
                    q.name,
                    tag,
                    consumer.tag,
                    entry.redelivered,
                    entry.delivery_count,
                )
            )
        consumer.sink(delivery)

    def _delivery(
        self,
        q: EmulatedQueue,
        entry: Entry,
        tag: int,
        consumer_tag: str | None,
        message_count: int | None,
        *,
        via_get: bool,
    ) -> Delivery:
        message = entry.message
        properties = message.properties
        shown = entry.shown_delivery_count
        # RabbitMQ 4.3 (measured on 4.3.6, seed 290): x-acquired-count counts the returns of
        # this queue; until there is one, it shows the x-delivery-count the message came with
        acquired = (
            (entry.acquired_before or entry.delivery_count)
            if self.behaviour.counts_travel_from_any_queue
            else 0
        )
        if q.is_quorum and (
            shown > 0 or acquired > 0 or (via_get and self.behaviour.quorum_get_shows_zero_count)
        ):
            headers = dict(properties.headers) if properties.headers else {}
            if shown > 0 or not self.behaviour.counts_travel_from_any_queue:
                headers["x-delivery-count"] = shown
            if acquired > 0:
                headers["x-acquired-count"] = acquired
            # the server adds the header with set_table_value, which sorts the table
            properties = with_headers(
                properties, server_table(like(properties.headers, headers), sort=True)
            )
        elif (stored := properties.headers) is not None and properties.raw is None:
            if q.is_quorum and self.behaviour.quorum_writes_headers_again:
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

    def get(self, channel: ChannelState, q: EmulatedQueue, no_ack: bool) -> Delivery | None:
        """basic.get. Its get-ok's message count: a classic queue drops what is due behind
        the message taken before it counts; a quorum queue counts it when the message waits
        for an ack, and drops it just after (a no_ack get settles at once, and the queue runs
        again before it answers: dropped first). Measured on 3.10.8, 4.0.5 and 4.3.6."""
        self.activity += 1
        self.mark_used(q)
        counts_expired = q.is_quorum and not no_ack
        entry = self._take(q, expire_after=not counts_expired)
        if entry is None:
            return None
        tag = channel.next_tag
        channel.next_tag = tag + 1
        if not no_ack:
            channel.unacked[tag] = Unacked(q, entry, None)
            q.unacked += 1
        self._emit(
            Delivered(
                self.clock.now_s,
                entry.message.number,
                q.name,
                tag,
                None,
                entry.redelivered,
                entry.delivery_count,
            )
        )
        delivery = self._delivery(q, entry, tag, None, len(q.ready), via_get=True)
        if counts_expired:
            self._expire_due(q)
        return delivery

    # -- dead letters, purge, delete ---------------------------------------------------------

    def _dead_letter_entry(
        self,
        q: EmulatedQueue,
        entry: Entry,
        reason: DeathReason,
        *,
        rejected_by: Literal["reject", "nack"] | None = None,
    ) -> None:
        """Dead-letter a message of ``q``; ``rejected_by``: the method that rejected it
        without requeue, if that is why it dies."""
        self._dead_letter(q, entry.message, reason, carried=self._carried(q, entry, rejected_by))

    def _carried(
        self, q: EmulatedQueue, entry: Entry, rejected_by: Literal["reject", "nack"] | None
    ) -> int:
        """The delivery count the dead letter of ``entry`` takes along (StoredMessage's
        ``carried_count``): on 4.3 its count, one more when a basic.reject made it die; on
        4.0 its failed deliveries, one more when a quorum queue's rejection did."""
        if self.behaviour.counts_travel_from_any_queue:
            return entry.delivery_count + (rejected_by == "reject")
        quorum_rejection = (
            self.behaviour.quorum_rejections_travel and q.is_quorum and rejected_by is not None
        )
        return entry.failed_deliveries + quorum_rejection

    def _dead_letter(
        self,
        q: EmulatedQueue,
        message: StoredMessage,
        reason: DeathReason,
        *,
        carried: int | None = None,
    ) -> None:
        now_s = self.clock.now_s
        dlx_name = q.settings.dead_letter_exchange
        if dlx_name is None:
            self._emit(Dropped(now_s, message.number, q.name, reason))
            return
        properties = message.properties
        death_keys = _death_routing_keys(message)
        if self.behaviour.broker_keeps_deaths:
            headers = broker_dead_letter_headers(
                properties.headers,
                died_before=isinstance(message, DeadLetter),
                reason=reason,
                queue=q.name,
                exchange=message.exchange,
                routing_keys=death_keys,
                time=death_time(now_s),
                original_expiration=properties.expiration,
            )
        else:
            headers = dead_letter_headers(
                properties.headers,
                reason=reason,
                queue=q.name,
                exchange=message.exchange,
                routing_keys=death_keys,
                time=death_time(now_s),
                original_expiration=properties.expiration,
                write_last_death=self.behaviour.writes_last_death_headers,
            )
        dlrk = q.settings.dead_letter_routing_key
        if dlrk is not None and self.behaviour.dead_letter_key_drops_cc and "CC" in headers:
            headers = {name: value for name, value in headers.items() if name != "CC"}
        headers = server_table(like(properties.headers, headers), sort=True)
        dead = DeadLetter(
            number=message.number,
            body=message.body,
            properties=replace(properties, headers=headers, expiration=None),
            exchange=dlx_name,
            routing_keys=(dlrk,) if dlrk is not None else message.routing_keys,
            ttl_ms=None,
            carried_count=message.carried_count if carried is None else carried,
        )
        dlx = self.exchanges.get(dlx_name)
        targets = self._route(dlx, dead)[0] if dlx is not None else []
        if not targets and q.settings.dead_letter_at_least_once:
            self._emit(
                DeadLettered(now_s, message.number, reason, q.name, dlx_name, dead.routing_keys, ())
            )
            self._keep_unroutable(q, dlx_name, dead)
            return
        keep, cycling = without_cycles(reason, headers, _names(targets))
        self._emit(
            DeadLettered(
                now_s, message.number, reason, q.name, dlx_name, dead.routing_keys, tuple(keep)
            )
        )
        for name in cycling:
            self._emit(Dropped(now_s, message.number, name, "cycle"))

        def send() -> None:
            for target in targets:
                if target.name in keep and not target.deleted:
                    if not q.settings.dead_letter_at_least_once:
                        self._enqueue(target, dead, AT_MOST_ONCE)
                    elif self._refuses(target, dead, q):
                        self._keep_dead_letter(q, target, dead)
                    else:
                        self._enqueue(target, dead)

        if self._held_dead_letters is not None:
            self._held_dead_letters.append(send)
        else:
            send()

    def _keep_dead_letter(
        self, source: EmulatedQueue, target: EmulatedQueue, dead: StoredMessage
    ) -> None:
        """At-least-once: the target refused the dead letter; ``source`` keeps it and RabbitMQ's
        dead-letter worker sends it again after ``dead_letter_retry_s`` (its
        ``dead_letter_worker_publisher_confirm_timeout``, 3 minutes by default), until the
        target takes it or ``source`` is deleted."""
        self.kept_dead_letters += 1

        def again() -> None:
            self.kept_dead_letters -= 1
            if self.queues.get(source.name) is not source or self.queues.get(target.name) is None:
                return  # deleted: the worker and what it kept go with the queue
            if self._refuses(target, dead, source):
                self._keep_dead_letter(source, target, dead)
            else:
                self._enqueue(target, dead)

        self.clock.call_later(self.dead_letter_retry_s, again)

    def _keep_unroutable(self, source: EmulatedQueue, dlx_name: str, dead: StoredMessage) -> None:
        """At-least-once: no queue takes the dead letter (its exchange is missing or routes it
        nowhere); ``source`` keeps it and the dead-letter worker routes it again every
        ``dead_letter_retry_s`` until a queue takes it or ``source`` is deleted (measured on
        3.10.8 and 4.0.5: it arrives once a queue is bound)."""
        self.kept_dead_letters += 1

        def again() -> None:
            self.kept_dead_letters -= 1
            if self.queues.get(source.name) is not source:
                return
            dlx = self.exchanges.get(dlx_name)
            targets = self._route(dlx, dead)[0] if dlx is not None else []
            if not targets:
                self._keep_unroutable(source, dlx_name, dead)
                return
            for target in targets:
                if self._refuses(target, dead, source):
                    self._keep_dead_letter(source, target, dead)
                else:
                    self._enqueue(target, dead)

        self.clock.call_later(self.dead_letter_retry_s, again)

    def mark_used(self, q: EmulatedQueue) -> None:
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
            if self.queues.get(q.name) is q and not q.consumers:
                self.activity += 1
                self.delete_queue(q)

        q.expiry_timer = self.clock.call_later(expires_ms / 1000, expire)

    def purge(self, q: EmulatedQueue) -> int:
        """Remove ``q``'s ready messages, and those waiting out a delayed retry (RabbitMQ 4.3:
        a purge counts them too)."""
        self.activity += 1
        gone = [*q.ready, *q.waiting.clear()]
        now_s = self.clock.now_s
        for entry in gone:
            self._emit(Dropped(now_s, entry.message.number, q.name, "purged"))
        q.clear()
        if q.ttl_timer is not None:
            q.ttl_timer.cancel()
            q.ttl_timer = None
        return len(gone)

    def delete_queue(self, q: EmulatedQueue) -> int:
        """Remove ``q`` with its ready messages, bindings and consumers."""
        self.activity += 1
        count = len(q.ready)
        now_s = self.clock.now_s
        for entry in q.ready:
            self._emit(Dropped(now_s, entry.message.number, q.name, "queue_deleted"))
        q.clear()
        q.deleted = True
        for timer in (q.ttl_timer, q.expiry_timer):
            if timer is not None:
                timer.cancel()
        q.ttl_timer = q.expiry_timer = None
        for entry in q.waiting.clear():
            self._emit(Dropped(now_s, entry.message.number, q.name, "queue_deleted"))
        if self.queues.get(q.name) is q:
            del self.queues[q.name]
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
        for x in list(self.exchanges.values()):
            if any(b.queue == q.name for b in x.bindings):
                x.bindings = [b for b in x.bindings if b.queue != q.name]
                reindex_bindings(x)
                if x.auto_delete and not x.bindings:
                    del self.exchanges[x.name]
        return count


@dataclass(slots=True, eq=False)
class DeadLetter(StoredMessage):
    """A message the broker dead-lettered: its ``x-death`` is the broker's own record (what
    RabbitMQ 4.0 keeps as a message annotation), unlike one a client published."""


def _due_by(expires_at_s: float | None, now_s: float) -> bool:
    return expires_at_s is not None and expires_at_s <= now_s


def _names(queues: list[EmulatedQueue]) -> tuple[str, ...]:
    return tuple(q.name for q in queues)


def _would_overflow(q: EmulatedQueue, message: StoredMessage) -> bool:
    settings = q.settings
    return (settings.max_length is not None and len(q.ready) + 1 > settings.max_length) or (
        settings.max_length_bytes is not None
        and q.ready_bytes + len(message.body) > settings.max_length_bytes
    )


def _below_soft_limit(q: EmulatedQueue) -> bool:
    settings = q.settings
    return (settings.max_length is None or len(q.ready) <= int(settings.max_length * 0.8)) and (
        settings.max_length_bytes is None or q.ready_bytes <= int(settings.max_length_bytes * 0.8)
    )


def reindex_bindings(x: Exchange) -> None:
    by_key: dict[str, list[str]] = {}
    for binding in x.bindings:
        names = by_key.setdefault(binding.routing_key, [])
        if binding.queue not in names:
            names.append(binding.queue)
    x.by_key = by_key


def _death_routing_keys(message: StoredMessage) -> tuple[str, ...]:
    """An ``x-death`` entry's ``routing-keys``: the key the message was published (or last
    dead-lettered) with, then the keys of its ``CC`` header; never the ``BCC`` keys, which
    routed it but were removed from it (measured on RabbitMQ 3.10.8 and 4.0.5)."""
    cc = (message.properties.headers or {}).get("CC")
    copied = [item for item in cc if isinstance(item, str)] if isinstance(cc, list) else []
    return (message.routing_keys[0], *copied)


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
