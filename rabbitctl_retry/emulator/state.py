"""The emulated broker's state: one value, :class:`BrokerState`, that every module of rules
(``channels.py``, ``entities.py``, ``publish.py``, ``queues.py``, ``deliver.py``,
``settle.py``, ``dead_letters.py``, ``route.py``) takes as its first argument;
``broker.py``'s :class:`Broker` holds one.

It holds what exists in the vhost (queues, exchanges, connections with their channels and
consumers, policies), the release row the rules read (``behaviour``), the virtual clock, the
counters that number messages, connections, consumers and generated names, and the events
recorded so far. Only bookkeeping lives here: :func:`emit` and
:func:`dead_letters_afterwards`.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from rabbitctl_retry.emulator.args import QueueKind
from rabbitctl_retry.emulator.clock import VirtualClock
from rabbitctl_retry.emulator.events import Event
from rabbitctl_retry.emulator.model import ConnectionState, EmulatedQueue, Exchange
from rabbitctl_retry.releases import ServerRelease
from rabbitctl_retry.server import Policy, ServerVersion

DEAD_LETTER_RETRY_S = 180.0
"""RabbitMQ's ``dead_letter_worker_publisher_confirm_timeout`` default: how long an
at-least-once dead-letter worker waits before it sends a refused dead letter again."""


@dataclass(slots=True, eq=False)
class BrokerState:
    """One vhost (``/``) of an emulated RabbitMQ, as data."""

    clock: VirtualClock
    server_version: ServerVersion
    behaviour: ServerRelease
    """What this server does where releases differ (``releases.py``), read once: every
    version switch of the emulator is a field of it (docs/reference/testing.md, "What differs
    between releases")."""
    record_events: bool = True
    delayed_message_exchange: bool = True
    default_queue_type: QueueKind | None = None
    """The vhost's default queue type (``rabbitmqctl add_vhost --default-queue-type``),
    None when it was made without one: a queue declared without ``x-queue-type`` is of
    this type, and a redeclaration without one means it (measured on 3.10.8, 4.0.5 and
    4.3.6, docs/reference/topology.md, "The queue's type")."""
    queues: dict[str, EmulatedQueue] = field(default_factory=dict)
    exchanges: dict[str, Exchange] = field(default_factory=dict)
    connections: list[ConnectionState] = field(default_factory=list)
    policies: dict[bool, dict[str, Policy]] = field(default_factory=lambda: {False: {}, True: {}})
    """The vhost's policies (at False) and operator policies (at True), by name."""
    events: list[Event] = field(default_factory=list)
    activity: int = 0
    """Bumped by every operation and timer: lets the glue tell when things stopped moving."""
    published_per_second: dict[str, dict[int, int]] = field(default_factory=dict)
    """Exchange -> virtual second -> messages published into it (the last few seconds):
    the management API's publish rate (``publish.publish_rate``)."""
    message_numbers: Iterator[int] = field(default_factory=lambda: itertools.count(1))
    enqueue_seq: Iterator[int] = field(default_factory=lambda: itertools.count(1))
    connection_numbers: Iterator[int] = field(default_factory=lambda: itertools.count(1))
    consumer_numbers: Iterator[int] = field(default_factory=lambda: itertools.count(1))
    generated_names: Iterator[int] = field(default_factory=lambda: itertools.count(1))
    held_dead_letters: deque[Callable[[], None]] | None = None
    """Dead letters waiting for the operation that caused them (dead_letters_afterwards)."""
    dead_letter_retry_s: float = DEAD_LETTER_RETRY_S
    kept_dead_letters: int = 0
    """Dead letters quorum queues keep (at-least-once) because their target refused them."""


def emit(state: BrokerState, event: Event) -> None:
    """Record ``event`` (when the broker records events)."""
    if state.record_events:
        state.events.append(event)


@contextmanager
def dead_letters_afterwards(state: BrokerState) -> Iterator[None]:
    """Hold back the dead letters an operation causes until the operation is done.

    RabbitMQ dead-letters by publishing from the queue's own process, after it handled the
    command that caused it: a publish reaches every queue it is routed to before any dead
    letter it causes (a queue over its length limit drops its head), and a consumer freed
    by a basic.nack gets the next ready message before the nacked one comes back to a
    queue that dead-letters to itself (measured on 3.10.8 and 4.0.5). Dead letters caused
    while the held ones go out are sent after them, in order.
    """
    if state.held_dead_letters is not None:
        yield  # inside another operation: that one sends them
        return
    held: deque[Callable[[], None]] = deque()
    state.held_dead_letters = held
    try:
        yield
    finally:
        while held:
            held.popleft()()
        state.held_dead_letters = None
