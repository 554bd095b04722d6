"""Pure. ``rr status --watch SECONDS``: how long rr waits between two readings
(docs/reference/cli.md, "rr status").

A number of seconds (``5``, ``2.5``) or a duration as ``rr simulate --for`` takes it
(``5s``, ``500ms``, ``1m``), from :data:`MIN_WATCH_S` to :data:`MAX_WATCH_S` (a day); anything
else — ``inf``, ``nan``, ``1e308``, ``-1``, ``5x`` — is a usage error.
"""

from __future__ import annotations

import re

from rabbitctl_retry.errors import UsageError
from rabbitctl_retry.topology.naming import parse_duration_ms

MIN_WATCH_S = 0.5
MAX_WATCH_S = 86_400.0
"""One day."""

_SECONDS = re.compile(r"[0-9]{1,6}(?:\.[0-9]{1,6})?")
"""Digits, and at most six decimals: nothing a float parser reads as infinity or NaN."""


def parse_watch_s(text: str) -> float:
    """``--watch``'s seconds; :class:`UsageError` unless a number within the range."""
    value = text.strip()
    seconds = float(value) if _SECONDS.fullmatch(value) else _duration_s(value)
    if seconds is None or not MIN_WATCH_S <= seconds <= MAX_WATCH_S:
        shown = value if len(value) <= 40 else value[:40] + "..."
        raise UsageError(
            f"--watch {shown!r}: give the seconds between two readings, a number from "
            f"{MIN_WATCH_S:g} to {MAX_WATCH_S:g} (a day), e.g. --watch 5 or --watch 5s"
        )
    return seconds


def _duration_s(value: str) -> float | None:
    try:
        return parse_duration_ms(value) / 1000
    except ValueError:
        return None


__all__ = ["MAX_WATCH_S", "MIN_WATCH_S", "parse_watch_s"]
