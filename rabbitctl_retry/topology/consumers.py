"""Pure. Consumers of a topology's queues that are not ``rr run``, and what becomes of what
they settle (``rr doctor``, ``rr status``; docs/reference/cli.md, "Consumers that are not rr").

The management API names each consumer of a queue and its connection's client properties
(``server.QueueConsumer``); rr's own connections say they are rr's (``server.is_rr_client``).
The API does not say how a consumer settles what it takes: it keeps no count per consumer
(measured on RabbitMQ 4.3.6: a queue's ``message_stats`` count its redeliveries whatever
caused them). So what is said here is what the queue does with each way of settling:

==========================  ================================================================
queue                       what a consumer that is not rr does to it
==========================  ================================================================
classic, ``max_attempts``   rr counts attempts only in the copies rr run makes: what another
                            consumer gives back with requeue comes back without a cap; what it
                            rejects or nacks without requeue is dropped, unless the queue has
                            a dead-letter route of its own (``rejected``, or
                            ``dead_letter_exchange``): then it goes there. An auto-ack
                            consumer loses a message it fails on, whatever the queue has.
quorum with a delivery      from RabbitMQ 4.3 only ``basic.reject`` counts toward it:
limit, RabbitMQ 4.3+        ``basic.nack(requeue=true)`` gives a message back forever
                            (measured on 4.3.6, docs/reference/cli.md); which one a consumer sends,
                            the API cannot tell
==========================  ================================================================
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum

from rabbitctl_retry.releases import release_of
from rabbitctl_retry.server import QueueConsumer, is_rr_client
from rabbitctl_retry.topology.expand import QueueEntity

CONSUMERS_PATH = "/api/consumers/VHOST"
"""Where the management API lists a vhost's consumers (their clients:
``/api/vhosts/VHOST/connections``)."""


class NoteLevel(StrEnum):
    INFO = "info"
    WARNING = "warning"


@dataclass(frozen=True, slots=True)
class ConsumerNote:
    """What a queue's consumers that are not rr mean for it: ``rr doctor`` makes each a
    finding, ``rr status`` a line."""

    code: str
    level: NoteLevel
    queue: str
    message: str
    consumers: tuple[QueueConsumer, ...]


def foreign(consumers: Iterable[QueueConsumer]) -> tuple[QueueConsumer, ...]:
    """The consumers whose connection is not rr's (``server.is_rr_client``); one whose
    connection the API does not state yet (a new consumer, for a moment) is not known to be
    either, and is left out until it does."""
    return tuple(
        c
        for c in consumers
        if c.connection is not None and not is_rr_client(c.product, c.connection_name)
    )


def describe(consumer: QueueConsumer) -> str:
    """``Pika Python Client Library 1.4.4 ('svc-a', 127.0.0.1:39600 -> 127.0.0.1:5675)``."""
    client = " ".join(part for part in (consumer.product, consumer.version) if part)
    where = ", ".join(
        part
        for part in (
            repr(consumer.connection_name) if consumer.connection_name else "",
            consumer.connection or "",
        )
        if part
    )
    auto = "; auto-ack" if not consumer.ack_required else ""
    return f"{client or 'a client that does not name itself'} ({where}{auto})"


def _named(consumers: Sequence[QueueConsumer]) -> str:
    """``2 consumers that are not rr run: A; B``."""
    count = len(consumers)
    shown = "; ".join(describe(consumer) for consumer in consumers)
    verb = "is" if count == 1 else "are"
    return f"{count} consumer{'' if count == 1 else 's'} that {verb} not rr run: {shown}"


def _classic_note(queue: QueueEntity, others: Sequence[QueueConsumer]) -> ConsumerNote:
    exchange = queue.setting("x-dead-letter-exchange")
    route = queue.setting("x-dead-letter-routing-key")
    requeued = (
        "what they give back with requeue comes back without a cap (RabbitMQ counts no "
        "attempt of a classic queue, and rr counts only the copies rr run makes)"
    )
    auto = [c for c in others if not c.ack_required]
    lost_auto = (
        f"; {len(auto)} of them take{'s' if len(auto) == 1 else ''} without acknowledging "
        "(auto-ack): a message such a consumer fails on is lost whatever the queue has"
        if auto
        else ""
    )
    head = f"{queue.name!r} (classic, attempts counted by rr run) has {_named(others)}"
    if isinstance(exchange, str):
        where = (
            f"the queue {route!r}"
            if exchange == "" and isinstance(route, str)
            else f"the exchange {exchange!r}"
        )
        return ConsumerNote(
            "foreign-consumer-rejects-kept",
            NoteLevel.INFO if not auto else NoteLevel.WARNING,
            queue.name,
            f"{head}: what they reject or nack without requeue goes to {where} (its "
            f"dead-letter route, x-death reason rejected); {requeued}{lost_auto}",
            tuple(others),
        )
    return ConsumerNote(
        "foreign-consumer-rejects-dropped",
        NoteLevel.WARNING,
        queue.name,
        f"{head}: what they reject or nack without requeue is dropped (the queue has no "
        f"dead-letter route: rr copies its own dead letters), {requeued}{lost_auto}. Keep "
        f'what they reject with rejected = "{queue.name}.rejected" in [queues.{queue.name}] '
        '(rr docs topology "What other consumers reject"); a cap on their requeues is '
        "theirs to keep, or consume the queue with rr run",
        tuple(others),
    )


def _quorum_note(
    queue: QueueEntity, limit: int, others: Sequence[QueueConsumer], release: str
) -> ConsumerNote:
    return ConsumerNote(
        "quorum-foreign-consumer-nack",
        NoteLevel.WARNING,
        queue.name,
        f"{queue.name!r} (quorum, x-delivery-limit = {limit}) has {_named(others)}: on "
        f"RabbitMQ {release} only basic.reject counts toward the limit; one that gives a "
        "message back with basic.nack(requeue=true) gets it again at once, without end "
        '(rr docs cli "Consumers that are not rr"). The '
        "management API cannot tell which they send (it keeps no count per consumer; the "
        "queue's redeliveries grow either way): make sure they reject, not nack",
        tuple(others),
    )


def _limit(queue: QueueEntity) -> int | None:
    limit = queue.setting("x-delivery-limit")
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        return None
    return limit


def consumer_notes(
    queues: Sequence[QueueEntity],
    retried: frozenset[str],
    consumers: Iterable[QueueConsumer],
    server: tuple[int, int, int],
) -> list[ConsumerNote]:
    """One note per queue of the topology whose consumers that are not rr change what its
    settings mean (the table of the module docstring), in the topology's order.

    ``retried``: the queues the file gives a ``max_attempts``; ``server``: the release read
    (4.3 and later count no ``basic.nack`` toward a quorum limit)."""
    by_queue: dict[str, list[QueueConsumer]] = {}
    for consumer in foreign(consumers):
        by_queue.setdefault(consumer.queue, []).append(consumer)
    release = ".".join(str(part) for part in server)
    notes = []
    for queue in queues:
        others = by_queue.get(queue.name)
        if not others or queue.wait_of is not None:
            continue  # a wait queue's consumer is an error of its own (rr doctor)
        kind = queue.setting("x-queue-type")
        if kind == "classic" and queue.name in retried:
            notes.append(_classic_note(queue, others))
        elif kind == "quorum" and not release_of(server).nack_requeue_counts_delivery:
            limit = _limit(queue)
            if limit is not None:
                notes.append(_quorum_note(queue, limit, others, release))
    return notes


def checked_queues(queues: Sequence[QueueEntity], retried: frozenset[str]) -> list[str]:
    """The queues whose consumers :func:`consumer_notes` would look at on RabbitMQ 4.3: a
    classic queue with ``max_attempts``, a quorum queue with a delivery limit."""
    return [
        queue.name
        for queue in queues
        if queue.wait_of is None
        and (
            (queue.setting("x-queue-type") == "classic" and queue.name in retried)
            or (queue.setting("x-queue-type") == "quorum" and _limit(queue) is not None)
        )
    ]


__all__ = [
    "CONSUMERS_PATH",
    "ConsumerNote",
    "NoteLevel",
    "checked_queues",
    "consumer_notes",
    "describe",
    "foreign",
]
