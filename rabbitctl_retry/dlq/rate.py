"""Pure. ``--rate``: how long to wait before the next publish, on a clock given in seconds.

A token bucket with room for one token: publishes are spaced ``1 / rate`` seconds apart, with
no burst after a pause longer than that. The shell asks :meth:`Pacer.reserve` with the current
time and sleeps the answer; reservations are handed out in call order, so concurrent callers
keep their order.
"""

from __future__ import annotations


class Pacer:
    """Spaces events ``1 / rate`` seconds apart."""

    __slots__ = ("_interval_s", "_next_s")

    def __init__(self, rate_per_s: float) -> None:
        if not rate_per_s > 0:
            raise ValueError(f"rate must be positive, not {rate_per_s!r}")
        self._interval_s = 1.0 / rate_per_s
        self._next_s: float | None = None

    def reserve(self, now_s: float) -> float:
        """Book the next slot; return how many seconds from ``now_s`` it starts (0: now)."""
        start = now_s if self._next_s is None or self._next_s < now_s else self._next_s
        self._next_s = start + self._interval_s
        return start - now_s
