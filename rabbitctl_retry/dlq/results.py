"""A transfer's results (one per message read, in the order read) in bounded memory.

``rr dlq replay`` and ``rr dlq move`` report every message they read (docs/dlq.md, "JSON
output"): on 100,000 dead letters that list alone would be the biggest thing the process
holds. :class:`TransferResults` keeps the counts per outcome and at most :data:`CHUNK`
results in memory; the others go, in chunks, to an anonymous temporary file (deleted by the
system when the process ends, however it ends), and are read back, in order, each time the
results are iterated. Reading 100,000 letters then holds what reading 10,000 holds
(docs/dlq.md, "Big queues").
"""

from __future__ import annotations

import marshal
import tempfile
import weakref
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from enum import StrEnum
from typing import IO


class TransferOutcome(StrEnum):
    SENT = "sent"
    """Copied to its target, confirmed, and removed from the source (shown as "replayed" or
    "moved")."""
    SKIPPED = "skipped"
    FAILED = "failed"


@dataclass(frozen=True, slots=True)
class TransferResult:
    """What happened to one dead letter (one entry of the JSON ``results``, docs/dlq.md)."""

    message_id: str | None
    to: str | None
    outcome: TransferOutcome
    reason: str | None = None


CHUNK = 4096
"""Results kept in memory before they are written out together."""

_Row = tuple[str | None, str | None, str, str | None]
"""A result as stored: message id, target, outcome's value, reason."""


class TransferResults:
    """Append-only results, in order, in bounded memory (see the module doc)."""

    def __init__(self, results: Iterable[TransferResult] = (), *, chunk: int = CHUNK) -> None:
        self._chunk = max(1, chunk)
        self._memory: list[_Row] = []
        self._file: IO[bytes] | None = None
        self._spilled = 0
        self._counts: Counter[TransferOutcome] = Counter()
        for result in results:
            self.append(result)

    def append(self, result: TransferResult) -> None:
        self._memory.append((result.message_id, result.to, result.outcome.value, result.reason))
        self._counts[result.outcome] += 1
        if len(self._memory) >= self._chunk:
            self._spill()

    def count(self, outcome: TransferOutcome) -> int:
        return self._counts[outcome]

    def __len__(self) -> int:
        return self._spilled + len(self._memory)

    def __iter__(self) -> Iterator[TransferResult]:
        for row in self._rows():
            message_id, to, outcome, reason = row
            yield TransferResult(message_id, to, TransferOutcome(outcome), reason)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, TransferResults):
            return len(self) == len(other) and list(self) == list(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(len(self))  # equal results have equal lengths

    def __repr__(self) -> str:
        return f"TransferResults({len(self):,} results)"

    def _spill(self) -> None:
        if self._file is None:
            # open as long as the results live (closed with them); the system deletes it
            self._file = tempfile.TemporaryFile(prefix="rr-results-")  # noqa: SIM115
            weakref.finalize(self, self._file.close)
        self._file.seek(0, 2)
        marshal.dump(self._memory, self._file)
        self._spilled += len(self._memory)
        self._memory = []

    def _rows(self) -> Iterator[_Row]:
        """Every stored row, in order: the file's chunks, then those in memory (a snapshot:
        results appended meanwhile are not seen)."""
        spilled = self._spilled
        memory = list(self._memory)
        if self._file is not None:
            self._file.flush()
            position = 0
            seen = 0
            while seen < spilled:
                self._file.seek(position)
                rows: list[_Row] = marshal.load(self._file)
                position = self._file.tell()
                yield from rows[: spilled - seen]
                seen += len(rows)
        yield from memory


__all__ = ["CHUNK", "TransferOutcome", "TransferResult", "TransferResults"]
