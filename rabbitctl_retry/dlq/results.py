"""A transfer's results (one per message read, in the order read) in bounded memory.

``rr dlq replay`` and ``rr dlq move`` report every message they read (docs/reference/dlq.md, "JSON
output"): on 100,000 dead letters that list alone would be the biggest thing the process
holds. :class:`TransferResults` keeps the counts per outcome and the results in
:class:`~rabbitctl_retry.dlq.spill.SpilledRows` (at most :data:`CHUNK` in memory, the others in a
temporary file). Reading 100,000 letters then holds what reading 10,000 holds
(docs/reference/dlq.md, "Big queues").
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from enum import StrEnum

from rabbitctl_retry.dlq.spill import CHUNK, SpilledRows


class TransferOutcome(StrEnum):
    SENT = "sent"
    """Copied to its target, confirmed, and removed from the source (shown as "replayed" or
    "moved")."""
    SKIPPED = "skipped"
    FAILED = "failed"


@dataclass(frozen=True, slots=True)
class TransferResult:
    """What happened to one dead letter (one entry of the JSON ``results``,
    docs/reference/dlq.md)."""

    message_id: str | None
    to: str | None
    outcome: TransferOutcome
    reason: str | None = None


_Row = tuple[str | None, str | None, str, str | None]
"""A result as stored: message id, target, outcome's value, reason."""


class TransferResults:
    """Append-only results, in order, in bounded memory (see the module doc)."""

    def __init__(self, results: Iterable[TransferResult] = (), *, chunk: int = CHUNK) -> None:
        self._rows: SpilledRows[_Row] = SpilledRows(chunk=chunk)
        self._counts: Counter[TransferOutcome] = Counter()
        for result in results:
            self.append(result)

    def append(self, result: TransferResult) -> None:
        self._rows.append((result.message_id, result.to, result.outcome.value, result.reason))
        self._counts[result.outcome] += 1

    def count(self, outcome: TransferOutcome) -> int:
        return self._counts[outcome]

    def __len__(self) -> int:
        return len(self._rows)

    def __iter__(self) -> Iterator[TransferResult]:
        for message_id, to, outcome, reason in self._rows:
            yield TransferResult(message_id, to, TransferOutcome(outcome), reason)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, TransferResults):
            return len(self) == len(other) and list(self) == list(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(len(self))  # equal results have equal lengths

    def __repr__(self) -> str:
        return f"TransferResults({len(self):,} results)"


__all__ = ["CHUNK", "TransferOutcome", "TransferResult", "TransferResults"]
