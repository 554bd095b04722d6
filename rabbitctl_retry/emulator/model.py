"""The broker's mutable state: messages, queues, exchanges, connections, channels, consumers.

Plain slotted classes, no behaviour beyond bookkeeping; the rules live in the modules of
functions over ``state.py``'s :class:`BrokerState` (``channels.py``, ``entities.py``,
``publish.py``, ``queues.py``, ``deliver.py``, ``settle.py``, ``dead_letters.py``).
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from rabbitctl_retry.emulator.args import QueueSettings, StrictPriorities
from rabbitctl_retry.emulator.clock import TimerHandle
from rabbitctl_retry.emulator.delayed_retry import WaitingRoom
from rabbitctl_retry.fields import FieldTable, FieldValue
from rabbitctl_retry.transport.base import Delivery, ExchangeDeclare, Properties


@dataclass(slots=True, eq=False)
class StoredMessage:
    """A message's content, shared by every queue it was routed to. Never mutated."""

    number: int
    body: bytes
    properties: Properties
    exchange: str
    routing_keys: tuple[str, ...]
    """The first is the publish routing key (``x-death`` ``routing-keys``)."""
    ttl_ms: int | None
    """From the ``expiration`` property."""
    carried_count: int = 0
    """The delivery count a dead letter carries from the queues it died in. RabbitMQ 4.0: the
    failed deliveries (rejections without requeue, returns of a closing channel) of quorum
    queues; a quorum queue shows it as its first ``x-delivery-count``
    (:attr:`Entry.failed_deliveries`). RabbitMQ 4.3: every counted return (basic.reject, a
    closing channel) and a basic.reject without requeue, in queues of either type; the
    queue it reaches starts counting from it (:attr:`Entry.delivery_count`)."""
    property_bytes: int = 0
    """Its basic properties' bytes as its publisher encoded them (emulator/message_size.py);
    a dead letter keeps its message's. RabbitMQ 4.3's quorum queues count them toward
    ``x-max-length-bytes`` (:attr:`Entry.size_bytes`)."""


@dataclass(slots=True, eq=False)
class DeadLetter(StoredMessage):
    """A message the broker dead-lettered: its ``x-death`` is the broker's own record (what
    RabbitMQ 4.0 keeps as a message annotation), unlike one a client published. A marker
    type, no behaviour of its own."""


@dataclass(slots=True, eq=False)
class Entry:
    """One message in one queue."""

    message: StoredMessage
    seq: int
    """Enqueue order; a classic queue puts a requeued message back by it."""
    expires_at_s: float | None
    delivery_count: int = 0
    """Counted returns in this queue (quorum queues; the delivery limit counts these).
    RabbitMQ 4.3: in queues of either type, from the count the message arrived with."""
    acquired_before: int = 0
    """RabbitMQ 4.3: how often this queue took the message back (every return counts, the
    count it arrived with does not); a quorum queue shows it as ``x-acquired-count``, and
    :attr:`delivery_count` until it took it back once (measured on 4.3.6)."""
    redelivered: bool = False
    enqueued_at_s: float = 0.0
    size_bytes: int = 0
    """What the queue counts toward ``x-max-length-bytes`` (``ready_bytes``): the body, and on
    RabbitMQ 4.3 in a quorum queue the properties too (``ServerRelease.quorum_message_bytes``)."""
    failed_deliveries: int = 0
    """RabbitMQ 4.0: the failed deliveries a dead letter of this message carries (those it
    came with, and a quorum queue's returns of a closing channel; rejections without requeue
    are added when it is dead-lettered), shown by a quorum queue it reaches as
    ``x-delivery-count``. A requeue by basic.reject or basic.nack is not one."""

    @property
    def shown_delivery_count(self) -> int:
        """The ``x-delivery-count`` a quorum queue shows: its own count once it counted a
        return, else the count the message came with (RabbitMQ 4.0 dead letters; measured on
        4.0.5: a dead letter arriving with 1 shows 1, 1 after one return, 2 after two)."""
        return self.delivery_count or self.message.carried_count


@dataclass(slots=True, eq=False)
class Binding:
    queue: str
    routing_key: str
    arguments: FieldTable


@dataclass(slots=True, eq=False)
class Exchange:
    name: str
    type: str
    durable: bool
    auto_delete: bool
    internal: bool
    arguments: FieldTable
    routing_type: str
    """``type``, or the ``x-delayed-type`` of an ``x-delayed-message`` exchange."""
    bindings: list[Binding] = field(default_factory=list)
    by_key: dict[str, list[str]] = field(default_factory=dict)
    """direct routing: routing key -> queue names, in binding order."""

    @property
    def declared(self) -> ExchangeDeclare:
        """The exchange.declare that makes it as it is: what a redeclare is compared with."""
        return ExchangeDeclare(
            self.name,
            self.type,
            durable=self.durable,
            auto_delete=self.auto_delete,
            internal=self.internal,
            arguments=self.arguments,
        )

    @property
    def delayed(self) -> bool:
        return self.type == "x-delayed-message"


_CONSUMERS_CREATED = itertools.count(1)


@dataclass(slots=True, eq=False)
class Consumer:
    tag: str
    queue: EmulatedQueue
    channel: ChannelState
    sink: Callable[[Delivery], None]
    no_ack: bool
    exclusive: bool
    prefetch_count: int
    """Captured at basic.consume (basic.qos global=false: a per-consumer limit)."""
    unacked: int = 0
    next_msg_id: int = 0
    """The number its next delivery gets: a quorum queue numbers each consumer's deliveries
    from 0 (rabbit_fifo's message ids, whose map order RabbitMQ 3.10 returns in; settle.py)."""
    on_cancel: Callable[[str], None] | None = None
    """Told the tag when the broker cancels the consumer (its queue was deleted)."""
    created: int = field(default_factory=lambda: next(_CONSUMERS_CREATED))
    """The order consumers were created in: a RabbitMQ 4 quorum queue keys a consumer by the
    log index of its basic.consume, and a closing channel gives back what its consumers held
    in that order (settle.py, _return_order)."""
    priority: int = 0
    """Its ``x-priority`` consumer argument (0 without one): the queue serves its consumers
    of highest priority first (:meth:`EmulatedQueue.next_consumer`), and a single active
    consumer queue picks its active one by it (emulator/single_active.py)."""
    crashes_its_channel: bool = False
    """RabbitMQ 3.10 (before rabbitmq-server #5927): a quorum consumer re-created on a channel
    with the tag of a cancelled one that still holds deliveries; the first message the queue
    delivers to it crashes the channel, and the server closes the connection (541)."""

    timed_out: bool = False
    """RabbitMQ 4.3: its quorum queue timed out one of its deliveries and sent it
    ``basic.cancel``; the queue keeps it (counted among its consumers) but serves it nothing
    until the channel settles every delivery that timed out (emulator/consumer_timeout.py)."""
    cancel_sent: bool = False
    """RabbitMQ 4.3: the queue sent it ``basic.cancel`` for a consumer timeout; a client
    forgets a consumer cancelled, so it sees no second one."""

    def has_capacity(self, more: int = 1) -> bool:
        """Whether the consumer may take ``more`` deliveries on top of what it holds."""
        if self.timed_out:
            return False
        limit = self.prefetch_count
        return self.no_ack or limit == 0 or self.unacked + more <= limit


def _take_turn(turns: deque[Consumer]) -> Consumer:
    """Take out of ``turns`` (not empty) the consumer whose turn it is: the first of the
    highest ``x-priority`` (the first of all when they are equal, as they mostly are)."""
    chosen = turns[0]
    for consumer in turns:
        if consumer.priority > chosen.priority:
            chosen = consumer
    if chosen is turns[0]:
        return turns.popleft()
    turns.remove(chosen)
    return chosen


@dataclass(slots=True, eq=False)
class EmulatedQueue:
    """A queue as the emulator holds it: its messages, consumers and settings (a topology
    file's queue is ``topology.model.Queue``; what a passive declare reports, ``QueueInfo``)."""

    name: str
    settings: QueueSettings
    durable: bool
    exclusive_owner: ConnectionState | None
    auto_delete: bool
    arguments: FieldTable
    ready: deque[Entry] = field(default_factory=deque)
    ready_bytes: int = 0
    served_in_turn: int = 0
    """Two priorities: how many messages were taken since the last turn of the low ones
    (0 to :data:`PRIORITY_WEIGHT`)."""
    high_ready: int = 0
    """Two priorities: how many ready messages are of high priority (none: plain FIFO)."""
    ready_by_level: dict[int, int] = field(default_factory=dict)
    """Strict priorities: how many ready messages there are of each priority served."""
    returned: int = 0
    """Quorum: how many entries at the head of ``ready`` a closing channel gave back; they
    are served before everything else, in the order they came back (:meth:`push_returned`)."""
    consumers: deque[Consumer] = field(default_factory=deque)
    """Every consumer, in the order they came (:meth:`add_consumer`)."""
    turns: deque[Consumer] = field(default_factory=deque)
    """Whose turn it is to take the next message, first first (:meth:`next_consumer`): a
    classic queue's active consumers, a quorum queue's consumers with credit (its service
    queue)."""
    limited: list[Consumer] = field(default_factory=list)
    """A classic queue's consumers found at their prefetch limit when it was their turn, in
    that order, until a settle frees them (:meth:`capacity_freed`)."""
    had_consumer: bool = False
    active: Consumer | None = None
    """``x-single-active-consumer``: the consumer the queue delivers to (emulator/
    single_active.py); None before the first, or while the queue is stalled."""
    stalled: bool = False
    """RabbitMQ 3.10 classic queues: the active consumer was cancelled while it held
    deliveries; the queue delivers to no consumer (emulator/single_active.py)."""
    unacked: int = 0
    ttl_timer: TimerHandle | None = None
    expiry_timer: TimerHandle | None = None
    """``x-expires``: armed while the queue is unused."""
    deleted: bool = False
    blocked: set[object] = field(default_factory=set)
    """Quorum reject-publish: the publishers (channels, dead-letter sources) the queue refused
    a message; each stays refused until the queue falls to 80 % of its limit."""
    enqueuers: set[object] = field(default_factory=set)
    """Quorum reject-publish: the publishers that published to the queue; when a message takes
    the queue over its limit, every one of them is refused from then on (``blocked``)."""
    waiting: WaitingRoom[Entry] = field(default_factory=WaitingRoom)
    """RabbitMQ 4.3 quorum queues: returned messages held back by a delayed retry, not ready
    yet (emulator/delayed_retry.py)."""

    @property
    def is_quorum(self) -> bool:
        return self.settings.kind == "quorum"

    def add_consumer(self, consumer: Consumer) -> None:
        """A new consumer: its turn comes after every other's."""
        self.consumers.append(consumer)
        self.turns.append(consumer)

    def remove_consumer(self, consumer: Consumer) -> None:
        """Remove ``consumer`` (ValueError when it is not one of the queue's)."""
        self.consumers.remove(consumer)
        if consumer in self.turns:
            self.turns.remove(consumer)
        if consumer in self.limited:
            self.limited.remove(consumer)

    def next_consumer(self) -> Consumer | None:
        """The consumer that takes the next message, None when none can (the caller delivers
        one message to it). Measured on 3.10.8, 4.0.5 and 4.3.6 (docs/reference/testing.md):

        * a classic queue (rabbit_queue_consumers) takes its active consumers in turn, each
          back at the end after its delivery; one found at its prefetch limit is set aside
          (:attr:`limited`) until a settle of its channel frees it, and comes back at the end;
        * a quorum queue (rabbit_fifo) serves the consumers with credit in turn, each back at
          the end after its delivery while it has credit left, and one that gets credit back
          comes at the end (:meth:`capacity_freed`);
        * both serve the consumers of highest ``x-priority`` first, in turn among themselves,
          a lower one only while every higher one is at its limit (:func:`_take_turn`;
          ``scripts/measure_consumer_priority.py``).
        """
        turns = self.turns
        if self.is_quorum:
            while turns:
                consumer = _take_turn(turns)
                if not consumer.has_capacity():
                    continue
                if consumer.has_capacity(more=2):
                    turns.append(consumer)
                return consumer
            return None
        while turns:
            consumer = _take_turn(turns)
            if consumer.has_capacity():
                turns.append(consumer)
                return consumer
            self.limited.append(consumer)
        return None

    def capacity_freed(self, consumer: Consumer) -> None:
        """A settle (or a return) freed room for ``consumer``: a quorum queue serves it again
        after the others with credit; a classic queue brings back every consumer of its
        channel set aside at its limit that has room now, in the order they were set aside."""
        if consumer not in self.consumers or not consumer.has_capacity():
            return
        if self.is_quorum:
            if consumer not in self.turns:
                self.turns.append(consumer)
            return
        freed = [c for c in self.limited if c.channel is consumer.channel and c.has_capacity()]
        for other in freed:
            self.limited.remove(other)
            self.turns.append(other)

    def push(self, entry: Entry) -> None:
        self.ready.append(entry)
        self._count_in(entry)

    def _count_in(self, entry: Entry) -> None:
        self.ready_bytes += entry.size_bytes
        if self.settings.two_priorities and _is_high(entry):
            self.high_ready += 1
        strict = self.settings.strict_priorities
        if strict is not None:
            level = strict.level(entry.message.properties.priority)
            self.ready_by_level[level] = self.ready_by_level.get(level, 0) + 1

    def head(self) -> Entry:
        """The ready message served next (``ready`` must not be empty)."""
        return self.ready[self._next_index()]

    def pop(self) -> Entry:
        """Take the ready message served next (``ready`` must not be empty)."""
        index = self._next_index()
        given_back = index < self.returned
        entry = self.remove_at(index)
        if not given_back:
            self.count_turn()
        return entry

    def count_turn(self) -> None:
        """Two priorities: one more message taken from the messages never delivered (a
        message handed straight to a waiting consumer too: rabbit_fifo_q's dequeue counter
        of RabbitMQ 4.0 counts every message it hands out, whichever priority; seed 9005)."""
        if self.settings.two_priorities:
            self.served_in_turn = (
                0 if self.served_in_turn == PRIORITY_WEIGHT else (self.served_in_turn + 1)
            )

    def remove_at(self, index: int) -> Entry:
        """Take the ready message at ``index`` out of ``ready``."""
        if index == 0:
            entry = self.ready.popleft()
        else:
            entry = self.ready[index]
            del self.ready[index]
        self.ready_bytes -= entry.size_bytes
        if self.settings.two_priorities and _is_high(entry):
            self.high_ready -= 1
        strict = self.settings.strict_priorities
        if strict is not None:
            level = strict.level(entry.message.properties.priority)
            left = self.ready_by_level[level] - 1
            if left:
                self.ready_by_level[level] = left
            else:
                del self.ready_by_level[level]
        if index < self.returned:
            self.returned -= 1
        return entry

    def expiry_heads(self) -> list[int]:
        """Where in ``ready`` a RabbitMQ 4.3 quorum queue expires messages: the head of those
        given back, then the first of each priority among the others, highest first (each a
        queue of its own on the server, expiring at its head; docs/reference/testing.md)."""
        heads = [0] if self.returned else []
        strict = self.settings.strict_priorities
        if strict is None:
            return heads + ([self.returned] if len(self.ready) > self.returned else [])
        firsts: dict[int, int] = {}
        for index in range(self.returned, len(self.ready)):
            firsts.setdefault(strict.level(self.ready[index].message.properties.priority), index)
            if len(firsts) == len(self.ready_by_level):
                break
        return heads + [firsts[level] for level in sorted(firsts, reverse=True)]

    def _next_index(self) -> int:
        """Where in ``ready`` the next message is: the head, except on a queue with two
        priorities (RabbitMQ 4 quorum queues), past the messages given back (served first):
        the oldest message of priority above 4, but every third time the oldest of the others
        if it is older still (so two high ones are served for every low one while both wait,
        and a high one never overtakes an older low one then). With strict priorities
        (:class:`~rabbitctl_retry.emulator.args.StrictPriorities`), past those given back, the
        oldest of the highest priority waiting."""
        strict = self.settings.strict_priorities
        if strict is not None:
            return 0 if self.returned else self._strict_index(strict)
        if not self.high_ready or self.high_ready == len(self.ready) or self.returned:
            return 0
        high = low = None
        for index, entry in enumerate(self.ready):
            if _is_high(entry):
                high = index if high is None else high
            else:
                low = index if low is None else low
            if high is not None and low is not None:
                break
        if high is None or low is None:
            return 0
        if self.served_in_turn == PRIORITY_WEIGHT and low < high:
            return low
        return high

    def _strict_index(self, strict: StrictPriorities) -> int:
        if len(self.ready_by_level) < 2:
            return 0
        highest = max(self.ready_by_level)
        for index, entry in enumerate(self.ready):
            if strict.level(entry.message.properties.priority) == highest:
                return index
        raise AssertionError("ready_by_level counts a priority no ready message has")

    def push_returned(self, entry: Entry) -> None:
        """Put back a message a closing channel held (quorum): behind the others returned
        that way, ahead of every message never delivered."""
        self.ready.insert(self.returned, entry)
        self.returned += 1
        self._count_in(entry)

    def clear(self) -> None:
        """Purge: every ready message out (a quorum queue's dequeue counter starts again)."""
        self.ready.clear()
        self.ready_bytes = 0
        self.high_ready = 0
        self.served_in_turn = 0
        self.ready_by_level.clear()
        self.returned = 0

    def insert_by_seq(self, entry: Entry) -> None:
        """Put a requeued message back in its original place (classic queues)."""
        index = 0
        for other in self.ready:
            if other.seq > entry.seq:
                break
            index += 1
        self.ready.insert(index, entry)
        self._count_in(entry)

    def over_limit(self) -> bool:
        settings = self.settings
        return (settings.max_length is not None and len(self.ready) > settings.max_length) or (
            settings.max_length_bytes is not None and self.ready_bytes > settings.max_length_bytes
        )


PRIORITY_WEIGHT = 2
"""RabbitMQ 4 quorum queues serve this many high-priority messages for one low one."""

HIGH_PRIORITY_ABOVE = 4
"""RabbitMQ 4 quorum queues: a ``priority`` above this is high; anything else (none) is low."""


def _is_high(entry: Entry) -> bool:
    priority = entry.message.properties.priority
    return priority is not None and priority > HIGH_PRIORITY_ABOVE


@dataclass(slots=True, eq=False)
class Unacked:
    queue: EmulatedQueue
    entry: Entry
    consumer: Consumer | None
    msg_id: int = 0
    """The consumer's number for this delivery (Consumer.next_msg_id; 0 for basic.get)."""
    timer: TimerHandle | None = None
    """When it times out (emulator/consumer_timeout.py), while held."""
    limit_ms: int | None = None
    """Its consumer timeout (ms), once armed (None: it never times out)."""
    due_s: float = 0.0
    """When it times out, once armed."""
    timed_out: bool = False
    """RabbitMQ 4.3: its quorum queue took it back for its consumer timeout; the channel
    still knows the tag (a settle of it does nothing)."""


@dataclass(slots=True, eq=False)
class ConnectionState:
    number: int
    client_properties: dict[str, FieldValue] = field(default_factory=dict)
    """What its client said of itself when it connected (``product``, ``connection_name``,
    ...): the management twin's connections state them."""
    channels: dict[int, ChannelState] = field(default_factory=dict)
    closed: bool = False
    next_channel: int = 1
    on_fault: Callable[[int, str], None] = lambda reply_code, reply_text: None
    """Closes the connection with this reply code and text when the broker does so on its
    own (set by whoever opens it: the broker closes it, the transport also tells its client)."""


@dataclass(slots=True, eq=False)
class ChannelState:
    number: int
    connection: ConnectionState
    confirms: bool
    next_tag: int = 1
    unacked: dict[int, Unacked] = field(default_factory=dict)
    """By delivery tag, in tag order."""
    prefetch_count: int = 0
    consumers: dict[str, Consumer] = field(default_factory=dict)
    closed: bool = False
    close_listeners: list[Callable[[], None]] = field(default_factory=list)
    """Told once when the channel closes."""
    timeout_timer: TimerHandle | None = None
    """Before RabbitMQ 4.3: when the channel next checks its oldest delivery's consumer
    timeout (emulator/consumer_timeout.py)."""
    closed_by: tuple[int, str] | None = None
    """The reply code and text of the broker's channel.close when the broker closed the
    channel on its own (a consumer timeout), not in answer to a method."""
    on_delivery_timeout: Callable[[int, Unacked], None] = lambda tag, held: None
    """Times out the delivery ``tag`` (set by whoever opens the channel:
    emulator/consumer_timeout.py arms it, emulator/timed_out.py acts)."""
