"""The count of a fault run whose handler publishes outputs (decisions only, no I/O): by
message id, which outputs exist how often, and whether that keeps docs/reference/runtime.md's rule
("Publishing"): an acked message's outputs are never lost, an output exists only for a
message whose handler acked, and an output is published twice only for a message handled
(acked) again because its ack did not reach the broker after its outputs were confirmed.

Each source message ``id`` gets two outputs, ``output_id("work", id, 0)`` to one queue and
``output_id("work", id, 1)`` through an exchange to another (the derived ids of
``runtime/outputs.py``): :func:`count_outputs` maps them back to their message.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from rabbitctl_retry.runtime.outputs import output_id


@dataclass(frozen=True, slots=True)
class OutputCount:
    """What a run left, by source message id."""

    missing: list[str]
    """Acked (in no queue at the end, not dead-lettered) without each output at least once."""
    without_ack: list[str]
    """With an output although no handler call of theirs returned an ack."""
    dead_with_outputs: list[str]
    """Dead-lettered, yet with an output (an ack call's outputs were confirmed, and its
    delivery failed or came back after: the documented window)."""
    duplicated: list[str]
    """With an output more than once."""
    acked_again: list[str]
    """Whose handler returned an ack more than once (handled again after an ack that did not
    reach the broker, or whose outputs were cut)."""
    strangers: int
    """Output messages whose id belongs to no source message, or sits in the wrong queue."""
    outputs: int
    """Output messages found, in all."""

    @property
    def disturbed(self) -> set[str]:
        """The messages whose outputs the fault touched: handled again, or dead with outputs."""
        return set(self.acked_again) | set(self.dead_with_outputs)

    def unexplained_duplicates(self) -> list[str]:
        """Duplicated outputs of a message acked only once: outside the documented window."""
        again = set(self.acked_again)
        return [message_id for message_id in self.duplicated if message_id not in again]

    def summary(self) -> str:
        return (
            f"{self.outputs} outputs; missing {len(self.missing)} {self.missing[:5]}, without "
            f"an ack {len(self.without_ack)} {self.without_ack[:5]}, dead with outputs "
            f"{len(self.dead_with_outputs)}, duplicated {len(self.duplicated)} (unexplained "
            f"{self.unexplained_duplicates()[:5]}), acked again {len(self.acked_again)}, "
            f"strangers {self.strangers}"
        )


def count_outputs(
    ids: Sequence[str],
    *,
    ack_calls: Counter[str],
    dead: Counter[str],
    queued: Counter[str],
    per_queue: Sequence[Counter[str]],
    source_queue: str = "work",
) -> OutputCount:
    """``per_queue[n]``: the ids found in the queue output number ``n`` goes to;
    ``ack_calls``: handler calls that returned an ack, by source id; ``dead`` and ``queued``:
    source ids in the dead-letter queue and still in the source queues at the end."""
    expected = [
        {output_id(source_queue, message_id, index): message_id for message_id in ids}
        for index in range(len(per_queue))
    ]
    found: Counter[str] = Counter()
    most: Counter[str] = Counter()
    strangers = 0
    for index, counts in enumerate(per_queue):
        for found_id, times in counts.items():
            message_id = expected[index].get(found_id)
            if message_id is None:
                strangers += times
                continue
            found[message_id] += 1  # outputs present, each counted once
            most[message_id] = max(most[message_id], times)
    outputs_each = len(per_queue)
    return OutputCount(
        missing=[i for i in ids if not dead[i] and not queued[i] and found[i] < outputs_each],
        without_ack=[i for i in ids if found[i] and not ack_calls[i]],
        dead_with_outputs=[i for i in ids if dead[i] and found[i]],
        duplicated=[i for i in ids if most[i] > 1],
        acked_again=[i for i in ids if ack_calls[i] > 1],
        strangers=strangers,
        outputs=sum(sum(counts.values()) for counts in per_queue),
    )


def ack_calls_of(calls: Iterable[tuple[str, int, str]]) -> Counter[str]:
    """Handler calls that returned an ack, by id, from ``(id, attempt, outcome name)``."""
    return Counter(message_id for message_id, _, kind in calls if kind == "Ack")
