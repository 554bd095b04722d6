"""Pure. ``--rate`` and ``--ramp``: how long to wait before the next publish, on a clock
given in seconds.

A token bucket with room for one token: publishes are spaced ``1 / rate`` seconds apart, with
no burst after a pause longer than that. With a ramp the rate climbs from nothing to ``rate``
over the ramp's seconds of sending, in a straight line: the first publish goes at once, the
k-th ``sqrt(2 k ramp / rate)`` seconds after it, ``rate * ramp / 2`` of them before the full
rate (``--rate 200 --ramp 60``: the second after 0.55 s, 6,000 in the first minute, then 200 a
second). The shell asks :meth:`Pacer.reserve` with the current time and sleeps the answer;
reservations are handed out in call order, so concurrent callers keep their order.

:func:`parse_pace` reads both options: ``--rate`` a finite decimal number of messages per
second, at least :data:`MIN_RATE_PER_S`; ``--ramp`` a number of seconds above 0 and at most
:data:`MAX_RAMP_S`, with a ``--rate`` to climb to; anything else (``inf``, ``nan``, ``1e400``,
``0``, ``-5``, ``fast``) is a usage error (docs/how-to/after-an-outage.md, "When an option is
wrong").
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from rabbitctl_retry.errors import UsageError

MIN_RATE_PER_S = 0.001
"""The slowest ``--rate``: one message every 1,000 s."""
MAX_RAMP_S = 86_400.0
"""The longest ``--ramp``: a day."""


@dataclass(frozen=True, slots=True)
class Pace:
    """At most ``rate_per_s`` messages a second (``--rate``), reached over ``ramp_s`` seconds
    of sending (``--ramp``; None: at once)."""

    rate_per_s: float
    ramp_s: float | None = None

    def pacer(self) -> Pacer:
        return Pacer(self.rate_per_s, ramp_s=self.ramp_s)


def parse_pace(rate: str | None, ramp: str | None, *, fields: bool = False) -> Pace | None:
    """``--rate`` and ``--ramp`` (None: not given) as a :class:`Pace`, None without a rate;
    :class:`UsageError` for a wrong one, or a ramp without a rate. ``fields``: they came from
    the console's form fields ``rate`` and ``ramp``, which the errors name instead."""
    if rate is None:
        if ramp is not None:
            raise UsageError(
                "give the ramp a rate to climb to (e.g. rate 200, ramp 60)"
                if fields
                else f"--ramp {ramp!r} needs --rate, the rate it climbs to "
                "(e.g. --rate 200 --ramp 60)"
            )
        return None
    rate_per_s = _parse_rate(rate, fields=fields)
    return Pace(rate_per_s, None if ramp is None else _parse_ramp(ramp, fields=fields))


def _parse_ramp(text: str, *, fields: bool) -> float:
    ramp_s = _number(text)
    if not math.isfinite(ramp_s) or not 0 < ramp_s <= MAX_RAMP_S:
        named = "ramp" if fields else "--ramp"
        raise UsageError(
            f"{named} {text!r}: give the seconds the rate takes to climb as a number above 0 "
            f"and at most {MAX_RAMP_S:,.0f} (e.g. 60)"
        )
    return ramp_s


def _number(text: str) -> float:
    """``text`` as a float, NaN unless it is an ASCII decimal number (``float()`` also reads
    other scripts' digits, ``"١٢"``)."""
    try:
        return float(text.strip()) if text.isascii() else math.nan
    except ValueError:
        return math.nan


def _parse_rate(text: str, *, fields: bool) -> float:
    rate_per_s = _number(text)
    if not math.isfinite(rate_per_s) or rate_per_s < MIN_RATE_PER_S:
        if fields:
            raise UsageError(
                f"rate {text!r}: give the messages per second as a number, at least "
                f"{MIN_RATE_PER_S:g} (e.g. 200); leave it empty for full speed"
            )
        raise UsageError(
            f"--rate {text!r}: give the messages per second as a finite number, at least "
            f"{MIN_RATE_PER_S:g} (e.g. --rate 200); leave --rate out for full speed"
        )
    return rate_per_s


class Pacer:
    """Spaces events ``1 / rate`` seconds apart, the first ``rate * ramp_s / 2`` of them
    further while the rate climbs (module doc)."""

    __slots__ = ("_booked", "_next_s", "_ramp_events", "_ramp_s", "_rate_per_s")

    def __init__(self, rate_per_s: float, *, ramp_s: float | None = None) -> None:
        if not (math.isfinite(rate_per_s) and rate_per_s > 0):
            raise ValueError(f"rate must be positive, not {rate_per_s!r}")
        if ramp_s is not None and not (math.isfinite(ramp_s) and ramp_s > 0):
            raise ValueError(f"ramp must be positive, not {ramp_s!r}")
        self._rate_per_s = rate_per_s
        self._ramp_s = ramp_s
        self._ramp_events = 0.0 if ramp_s is None else rate_per_s * ramp_s / 2
        """How many events the ramp holds before the full rate."""
        self._booked = 0
        self._next_s: float | None = None

    def reserve(self, now_s: float) -> float:
        """Book the next slot; return how many seconds from ``now_s`` it starts (0: now)."""
        start = now_s if self._next_s is None or self._next_s < now_s else self._next_s
        self._next_s = start + self._gap_s(self._booked)
        self._booked += 1
        return start - now_s

    def _gap_s(self, event: int) -> float:
        """Seconds between event ``event`` and the next, when nothing pauses the sending."""
        if event >= self._ramp_events:
            return 1.0 / self._rate_per_s
        return self.offset_s(event + 1) - self.offset_s(event)

    def offset_s(self, event: int) -> float:
        """When event ``event`` (the first is 0) is due, in seconds after the first, when
        nothing pauses the sending: ``event / rate``, or on the ramp ``sqrt(2 event ramp /
        rate)`` until the ``rate * ramp / 2``-th, then ``1 / rate`` apart."""
        rate_per_s = self._rate_per_s
        if self._ramp_s is None:
            return event / rate_per_s
        if event <= self._ramp_events:
            return math.sqrt(2 * event * self._ramp_s / rate_per_s)
        return self._ramp_s + (event - self._ramp_events) / rate_per_s
