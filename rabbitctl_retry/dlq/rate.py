"""Pure. ``--rate``: how long to wait before the next publish, on a clock given in seconds.

A token bucket with room for one token: publishes are spaced ``1 / rate`` seconds apart, with
no burst after a pause longer than that. The shell asks :meth:`Pacer.reserve` with the current
time and sleeps the answer; reservations are handed out in call order, so concurrent callers
keep their order.

:func:`parse_rate` reads ``--rate``: a finite decimal number of messages per second, at least
:data:`MIN_RATE_PER_S`; anything else (``inf``, ``nan``, ``1e400``, ``0``, ``-5``, ``fast``)
is a usage error (docs/how-to/after-an-outage.md, "When an option is wrong").
"""

from __future__ import annotations

import math

from rabbitctl_retry.errors import UsageError

MIN_RATE_PER_S = 0.001
"""The slowest ``--rate``: one message every 1,000 s."""


def parse_rate(text: str, *, field: str | None = None) -> float:
    """``--rate`` as messages per second; :class:`UsageError` unless it is a finite number of
    at least :data:`MIN_RATE_PER_S`. ``field``: the form field it came from (the console),
    which the error names in its words instead of the option."""
    try:  # ASCII only: float() also reads other scripts' digits ("١٢")
        rate_per_s = float(text.strip()) if text.isascii() else math.nan
    except ValueError:
        rate_per_s = math.nan
    if not math.isfinite(rate_per_s) or rate_per_s < MIN_RATE_PER_S:
        if field is not None:
            raise UsageError(
                f"{field} {text!r}: give the messages per second as a number, at least "
                f"{MIN_RATE_PER_S:g} (e.g. 200); leave it empty for full speed"
            )
        raise UsageError(
            f"--rate {text!r}: give the messages per second as a finite number, at least "
            f"{MIN_RATE_PER_S:g} (e.g. --rate 200); leave --rate out for full speed"
        )
    return rate_per_s


class Pacer:
    """Spaces events ``1 / rate`` seconds apart."""

    __slots__ = ("_interval_s", "_next_s")

    def __init__(self, rate_per_s: float) -> None:
        if not (math.isfinite(rate_per_s) and rate_per_s > 0):
            raise ValueError(f"rate must be positive, not {rate_per_s!r}")
        self._interval_s = 1.0 / rate_per_s
        self._next_s: float | None = None

    def reserve(self, now_s: float) -> float:
        """Book the next slot; return how many seconds from ``now_s`` it starts (0: now)."""
        start = now_s if self._next_s is None or self._next_s < now_s else self._next_s
        self._next_s = start + self._interval_s
        return start - now_s
