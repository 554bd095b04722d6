"""Pure tables for topology/consumers.py: the consumers of a topology's queues that are not rr
run, and what each queue does with what they settle (docs/reference/cli.md, "Consumers that are not
rr")."""

from __future__ import annotations

import pytest

from rabbitctl_retry.server import QueueConsumer
from rabbitctl_retry.topology.consumers import (
    NoteLevel,
    checked_queues,
    consumer_notes,
    describe,
    foreign,
)
from rabbitctl_retry.topology.expand import expand
from rabbitctl_retry.topology.load import load_text

TOPOLOGY = """
[queues.work]
max_attempts = 3
dead_letter = "work.dead"
delay = "dlx-ttl"

[queues.kept]
max_attempts = 3
rejected = "kept.rejected"

[queues.by_hand]
max_attempts = 2
dead_letter_exchange = "dlx"

[queues.plain]

[queues.jobs]
type = "quorum"
max_attempts = 3
dead_letter = "jobs.dead"

[queues.parked]
type = "quorum"
"""


def consumer(queue: str, product: str | None, name: str | None, ack: bool = True) -> QueueConsumer:
    return QueueConsumer(
        queue=queue,
        tag=f"{queue}-{product}-{name}",
        connection=f"10.0.0.1:{len(queue)} -> 10.0.0.2:5672",
        ack_required=ack,
        product=product,
        version="1.4.4" if product else None,
        connection_name=name,
    )


PIKA = "Pika Python Client Library"

EVERY_QUEUE = [
    consumer(queue, PIKA, "svc-a")
    for queue in ("work", "work.retry", "work.dead", "kept", "by_hand", "plain", "jobs", "parked")
] + [consumer(queue, "rr", "rr run svc on h") for queue in ("work", "jobs")]


def notes(server: tuple[int, int, int], consumers: list[QueueConsumer]) -> dict[str, object]:
    topology = load_text(TOPOLOGY)
    retried = frozenset(q.name for q in topology.queues if q.max_attempts is not None)
    found = consumer_notes(expand(topology, server).queues, retried, consumers, server)
    return {note.queue: (note.code, note.level) for note in found}


def test_each_queue_says_what_a_foreign_consumer_does_to_it_on_4_3() -> None:
    assert notes((4, 3, 6), EVERY_QUEUE) == {
        "work": ("foreign-consumer-rejects-dropped", NoteLevel.WARNING),
        "kept": ("foreign-consumer-rejects-kept", NoteLevel.INFO),
        "by_hand": ("foreign-consumer-rejects-kept", NoteLevel.INFO),
        "jobs": ("quorum-foreign-consumer-nack", NoteLevel.WARNING),
        # a wait queue's consumer is rr doctor's wait-queue-consumer error; a dead-letter
        # queue, a plain queue and a quorum queue without a limit count nothing
    }


@pytest.mark.parametrize("server", [(3, 10, 8), (4, 0, 5)])
def test_before_4_3_a_quorum_queue_counts_a_nack(server: tuple[int, int, int]) -> None:
    assert "jobs" not in notes(server, EVERY_QUEUE)
    assert notes(server, EVERY_QUEUE)["work"] == (
        "foreign-consumer-rejects-dropped",
        NoteLevel.WARNING,
    )


def test_a_consumer_whose_connection_is_not_stated_yet_is_not_named() -> None:
    """4.3.6 states a new consumer's channel as {} for a moment (measured): its client is
    not known, so it is neither rr's nor another's until the API states it."""
    new = QueueConsumer(queue="work", tag="t", connection=None, ack_required=True)
    assert foreign([new]) == ()
    assert notes((4, 3, 6), [new]) == {}


def test_rr_s_own_consumers_are_no_note() -> None:
    own = [c for c in EVERY_QUEUE if c.product == "rr"]
    assert notes((4, 3, 6), own) == {}
    assert foreign(EVERY_QUEUE) == tuple(c for c in EVERY_QUEUE if c.product == PIKA)


def test_an_auto_ack_consumer_is_a_warning_even_where_rejects_are_kept() -> None:
    found = notes((4, 3, 6), [consumer("kept", "py-amqp", None, ack=False)])
    assert found == {"kept": ("foreign-consumer-rejects-kept", NoteLevel.WARNING)}


def test_the_words_name_each_consumer_and_the_fix() -> None:
    topology = load_text(TOPOLOGY)
    desired = expand(topology, (4, 3, 6))
    pika = consumer("work", PIKA, "svc-a")
    [dropped] = consumer_notes(desired.queues, frozenset({"work"}), [pika], (4, 3, 6))
    assert dropped.message.startswith(
        "'work' (classic, attempts counted by rr run) has 1 consumer that is not rr run: "
        f"{describe(pika)}: what they reject or nack without requeue is dropped"
    )
    assert 'rejected = "work.rejected" in [queues.work]' in dropped.message
    assert dropped.consumers == (pika,)
    assert describe(pika) == (
        "Pika Python Client Library 1.4.4 ('svc-a', 10.0.0.1:4 -> 10.0.0.2:5672)"
    )
    assert describe(consumer("q", None, None, ack=False)) == (
        "a client that does not name itself (10.0.0.1:1 -> 10.0.0.2:5672; auto-ack)"
    )


def test_the_queues_looked_at() -> None:
    topology = load_text(TOPOLOGY)
    retried = frozenset(q.name for q in topology.queues if q.max_attempts is not None)
    assert checked_queues(expand(topology, (4, 3, 6)).queues, retried) == [
        "work",
        "kept",
        "by_hand",
        "jobs",
    ]
