"""Pure. How long to wait before trying again, after ``failures`` failures in a row.

The runtime backs off in three places: reconnecting, re-opening a consumer whose channel or
consumer the broker closed, and publishing a copy the broker refused or returned (a full
dead-letter queue must slow the runtime down, not make it loop). The delay doubles from
``initial_s`` up to ``max_s``; no jitter, so the schedule is exact in tests.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Backoff:
    initial_s: float = 0.5
    max_s: float = 30.0
    factor: float = 2.0

    def delay_s(self, failures: int) -> float:
        """The wait after the ``failures``-th failure in a row (1 -> ``initial_s``)."""
        if failures <= 1:
            return self.initial_s
        exponent = min(failures - 1, 64)
        return min(self.max_s, self.initial_s * self.factor**exponent)
