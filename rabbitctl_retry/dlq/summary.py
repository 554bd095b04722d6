"""Pure. ``rr dlq inspect --summary``: counts over every dead letter read, in constant memory.

A :class:`Summary` takes one :class:`~rabbitctl_retry.dlq.letter.Letter` at a time and keeps
only counters and the two extreme letters' ids and times, never the letters themselves: a
summary of 100,000 dead letters holds as much as one of 10 (docs/reference/dlq.md, "Big queues").

Counted: by origin queue, by reason, by retry count, by age (how long ago it was dead-lettered,
in :data:`AGE_BUCKETS`), plus the oldest and newest dead-lettering, the letters whose
properties could not be decoded, and the bodies' total size.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime

from rabbitctl_retry.dlq.letter import Letter, Read

AGE_BUCKETS: tuple[tuple[str, float], ...] = (
    ("< 1 min", 60.0),
    ("< 1 h", 3_600.0),
    ("< 1 day", 86_400.0),
    ("< 1 week", 604_800.0),
    ("older", float("inf")),
)
"""Age bucket names and their upper bound in seconds (exclusive), youngest first."""

AGE_UNKNOWN = "unknown"
"""The bucket of a letter with no ``x-death`` time and no ``rr-failed-at``."""


def age_bucket(failed_at: datetime | None, now: datetime) -> str:
    """The :data:`AGE_BUCKETS` name for a letter dead-lettered at ``failed_at``; a time in the
    future (clocks apart) counts as age 0."""
    if failed_at is None:
        return AGE_UNKNOWN
    age_s = max(0.0, (now - failed_at).total_seconds())
    for name, below_s in AGE_BUCKETS:
        if age_s < below_s:
            return name
    return AGE_BUCKETS[-1][0]  # pragma: no cover - the last bound is infinite


@dataclass(frozen=True, slots=True)
class Landmark:
    """The oldest or newest dead-lettering seen: when, and which message."""

    failed_at: datetime
    message_id: str | None
    position: int


@dataclass(slots=True)
class Summary:
    """Counters over the letters :meth:`add` was given (see the module doc)."""

    now: datetime
    """The time ages are measured from (the start of the read)."""
    count: int = 0
    origins: Counter[str | None] = field(default_factory=Counter)
    reasons: Counter[str | None] = field(default_factory=Counter)
    retry_counts: Counter[int | None] = field(default_factory=Counter)
    ages: Counter[str] = field(default_factory=Counter)
    oldest: Landmark | None = None
    newest: Landmark | None = None
    undecodable: int = 0
    """Letters with a property that could not be decoded."""
    body_bytes: int = 0

    def add(self, letter: Letter[Read]) -> None:
        self.count += 1
        self.origins[letter.origin] += 1
        self.reasons[letter.reason] += 1
        self.retry_counts[letter.retry_count] += 1
        self.ages[age_bucket(letter.failed_at, self.now)] += 1
        properties = letter.delivery.properties
        if properties.undecodable:
            self.undecodable += 1
        self.body_bytes += len(letter.delivery.body)
        if letter.failed_at is not None:
            mark = Landmark(letter.failed_at, properties.message_id, letter.position)
            if self.oldest is None or mark.failed_at < self.oldest.failed_at:
                self.oldest = mark
            # Times to the second tie often; a queue holds its dead letters in the order they
            # came, so the oldest is the first of a tie and the newest the last.
            if self.newest is None or mark.failed_at >= self.newest.failed_at:
                self.newest = mark

    def retry_rows(self) -> list[tuple[int | None, int]]:
        """Retry counts ascending, letters without the header last."""
        known = sorted((value, n) for value, n in self.retry_counts.items() if value is not None)
        missing = self.retry_counts.get(None)
        return known + ([(None, missing)] if missing else [])

    def age_rows(self) -> list[tuple[str, int]]:
        """Every age bucket that holds a letter, youngest first, ``unknown`` last."""
        names = [name for name, _ in AGE_BUCKETS] + [AGE_UNKNOWN]
        return [(name, self.ages[name]) for name in names if self.ages[name]]
