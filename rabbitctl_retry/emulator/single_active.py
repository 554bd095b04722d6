"""``x-single-active-consumer``: which consumer of a queue is the active one, the only one it
delivers to (docs/reference/testing.md, "What the emulator models").

Measured on 3.10.8, 4.0.5 and 4.3.6 (``scripts/measure_single_active.py``), classic and
quorum queues, each consumer on a connection of its own:

* The first consumer is the active one; the others wait, whatever their prefetch: while the
  active one is at its prefetch limit the queue delivers to nobody.
* When the active one goes (basic.cancel, its channel or connection closes), the next takes
  over: a classic queue's waiting consumer of highest ``x-priority`` (the first come among
  equals), a quorum queue's first come on 3.10 and of highest priority from 4.0. A
  cancelled consumer keeps what it holds; what it gives back goes to the new active one. A
  closing channel's deliveries come back before the queue delivers again, so the new
  active one gets them first (redelivered; a quorum queue counts them).
* A classic queue never hands over to a consumer of higher priority arriving later, nor
  does a 3.10 quorum queue. From 4.0 a quorum queue does: at once when the active one holds
  nothing, else the active one gets nothing more and the queue hands over when it holds
  nothing: after an ack or a rejection without requeue (4.0.5; a return with requeue leaves
  the queue stuck on the old one until it goes), or any settle (4.3.6).
* RabbitMQ 3.10 (``classic_single_active_cancel_stalls``): a classic queue whose active
  consumer is cancelled while it holds deliveries marks the next one active but delivers to
  nobody; the server's queue process then crashes at the next publish (restarted empty of
  transient messages, its consumers cancelled), which the emulator does not model: it stays
  stalled until its last consumer goes.
* basic.get takes the next ready message from a classic queue, beside its active consumer;
  a quorum queue refuses it (405 RESOURCE_LOCKED), consumers or not.
* An exclusive basic.consume on a classic queue is refused (403, "in exclusive use"), even
  on a queue without consumers; a quorum queue ignores the flag (emulator/channels.py).
"""

from __future__ import annotations

from rabbitctl_retry.emulator.args import VHOST
from rabbitctl_retry.emulator.model import Consumer, EmulatedQueue
from rabbitctl_retry.emulator.state import BrokerState
from rabbitctl_retry.errors import ResourceLocked

ARGUMENT = "x-single-active-consumer"


def is_single_active(q: EmulatedQueue) -> bool:
    """Whether ``q`` was declared with ``x-single-active-consumer = true``."""
    return q.arguments.get(ARGUMENT) is True


def check_get(state: BrokerState, q: EmulatedQueue) -> None:
    """basic.get on ``q``: a quorum queue with a single active consumer refuses it."""
    if is_single_active(q) and q.is_quorum:
        kind = '<<"quorum">>' if state.behaviour.single_active_get_type_as_binary else "quorum"
        raise ResourceLocked(
            f"RESOURCE_LOCKED - cannot obtain access to locked queue '{q.name}' in vhost "
            f"'{VHOST}'. basic.get operations are not supported by "
            f"{kind} queues with single active consumer"
        )


def deliverable(state: BrokerState, q: EmulatedQueue) -> Consumer | None:
    """The consumer single active consumer queue ``q`` hands its next message to: the active
    one while it has room and no consumer of higher priority waits for it to empty."""
    active = q.active
    if active is None or q.stalled or not active.has_capacity():
        return None
    if _by_priority(state, q) and _higher_waits(q, active):
        return None
    return active


def consumer_added(state: BrokerState, q: EmulatedQueue, consumer: Consumer) -> None:
    """``consumer`` joined ``q``: the first is the active one; a quorum queue that goes by
    priority hands over to a higher one at once if the active one holds nothing."""
    if not is_single_active(q) or q.stalled:
        return
    if q.active is None:
        q.active = consumer
    else:
        hand_over(state, q)


def consumer_removed(
    state: BrokerState, q: EmulatedQueue, consumer: Consumer, *, cancelled: bool
) -> bool:
    """``consumer`` left ``q`` (``cancelled``: by basic.cancel, its channel still open): when
    it was the active one, the next takes over. Whether one did (the queue should deliver)."""
    if not q.consumers:
        q.active, q.stalled = None, False
        return False
    if consumer is not q.active:
        return False
    q.active = None
    stalls = state.behaviour.classic_single_active_cancel_stalls
    if cancelled and consumer.unacked and stalls and not q.is_quorum:
        q.stalled = True
        return False
    q.active = _next(state, q)
    return q.active is not None


def settled(state: BrokerState, q: EmulatedQueue, *, returned: bool) -> None:
    """The active consumer of ``q`` settled deliveries (``returned``: gave them back with
    requeue): a quorum queue hands over to a waiting consumer of higher priority once it holds
    nothing (on 4.0 not after a return)."""
    if returned and not state.behaviour.single_active_return_hands_over:
        return
    hand_over(state, q)


def hand_over(state: BrokerState, q: EmulatedQueue) -> None:
    """A quorum queue that goes by priority: the waiting consumer of highest priority takes
    over from an active one of lower priority that holds nothing."""
    active = q.active
    if active is None or active.unacked or not is_single_active(q) or not _by_priority(state, q):
        return
    best = _next(state, q)
    if best is not None and best.priority > active.priority:
        q.active = best


def _by_priority(state: BrokerState, q: EmulatedQueue) -> bool:
    """Whether ``q`` hands over to a consumer of higher priority arriving later."""
    return q.is_quorum and state.behaviour.quorum_single_active_priorities


def _higher_waits(q: EmulatedQueue, active: Consumer) -> bool:
    return any(c.priority > active.priority for c in q.consumers)


def _next(state: BrokerState, q: EmulatedQueue) -> Consumer | None:
    """The waiting consumer that takes over: the first come, of highest priority where the
    queue goes by priority (a classic queue always, a quorum queue from 4.0)."""
    waiting = [c for c in q.consumers if c is not q.active]
    if not waiting:
        return None
    if q.is_quorum and not state.behaviour.quorum_single_active_priorities:
        return waiting[0]
    return max(waiting, key=lambda c: c.priority)  # max keeps the first of equals
