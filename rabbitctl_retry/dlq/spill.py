"""An append-only list in bounded memory: the rows past a chunk go to a temporary file.

What a command reports once per message (a transfer's results, ``inspect --output json``'s
messages) would, on 100,000 dead letters, be the biggest thing the process holds.
:class:`SpilledRows` keeps at most ``chunk`` rows in memory; the others go, in chunks, to an
anonymous temporary file (deleted by the system when the process ends, however it ends), and
are read back, in order, each time the rows are iterated (docs/reference/dlq.md, "Big queues").

A row is any value :mod:`marshal` writes (``None``, numbers, text, bytes, and tuples, lists
and dicts of them) and comes back equal to what was appended.
"""

from __future__ import annotations

import marshal
import tempfile
import weakref
from collections.abc import Iterator
from typing import IO, Generic, TypeVar

CHUNK = 4096
"""Rows kept in memory before they are written out together."""

Row = TypeVar("Row")


class SpilledRows(Generic[Row]):
    """Append-only rows, in order, in bounded memory (see the module doc)."""

    __slots__ = ("__weakref__", "_chunk", "_file", "_memory", "_spilled")

    def __init__(self, *, chunk: int = CHUNK) -> None:
        self._chunk = max(1, chunk)
        self._memory: list[Row] = []
        self._file: IO[bytes] | None = None
        self._spilled = 0

    def append(self, row: Row) -> None:
        self._memory.append(row)
        if len(self._memory) >= self._chunk:
            self._spill()

    def __len__(self) -> int:
        return self._spilled + len(self._memory)

    def __iter__(self) -> Iterator[Row]:
        """Every row, in order: the file's chunks, then those in memory (a snapshot: rows
        appended meanwhile are not seen)."""
        spilled = self._spilled
        memory = list(self._memory)
        if self._file is not None:
            self._file.flush()
            position = 0
            seen = 0
            while seen < spilled:
                self._file.seek(position)
                rows: list[Row] = marshal.load(self._file)
                position = self._file.tell()
                yield from rows[: spilled - seen]
                seen += len(rows)
        yield from memory

    def __repr__(self) -> str:
        return f"SpilledRows({len(self):,} rows)"

    def _spill(self) -> None:
        if self._file is None:
            # open as long as the rows live (closed with them); the system deletes it
            self._file = tempfile.TemporaryFile(prefix="rr-rows-")  # noqa: SIM115
            weakref.finalize(self, self._file.close)
        self._file.seek(0, 2)
        marshal.dump(self._memory, self._file)
        self._spilled += len(self._memory)
        self._memory = []


__all__ = ["CHUNK", "SpilledRows"]
