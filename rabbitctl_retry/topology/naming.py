"""Pure. Names rr derives from a queue's name, and the duration format of delay tiers.

Every derived name comes from one function here, so the loader, the expansion, the runtime
and ``rr dlq`` agree on them.
"""

from __future__ import annotations

import re

_DURATION = re.compile(r"^\s*([0-9]+)\s*(ms|s|m|h|d)\s*$")
_MAX_DURATION_DIGITS = 20
"""More digits than any delay RabbitMQ takes; longer numbers are refused before ``int()``."""
_UNIT_MS = {"ms": 1, "s": 1_000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


WAIT_QUEUE_SUFFIX = ".retry"

_DERIVED_WAIT_QUEUE = re.compile(
    "." + re.escape(WAIT_QUEUE_SUFFIX) + r"(\.[0-9]+(ms|s|m|h|d))?\Z", re.DOTALL
)


def wait_queue_name(queue: str) -> str:
    """The default wait queue of ``delay = "dlx-ttl"``: ``refunds`` -> ``refunds.retry``."""
    return f"{queue}{WAIT_QUEUE_SUFFIX}"


def tier_queue_name(queue: str, tier_ms: int) -> str:
    """The wait queue of one delay tier: ``("refunds", 30_000)`` -> ``refunds.retry.30s``."""
    return f"{wait_queue_name(queue)}.{format_duration_ms(tier_ms)}"


def is_derived_wait_queue(name: str) -> bool:
    """Whether ``name`` has the shape of a wait queue rr derives: ``<q>.retry[.<duration>]``."""
    return _DERIVED_WAIT_QUEUE.search(name) is not None


def delay_exchange_name(queue: str) -> str:
    """The delayed-message exchange of ``delay = "plugin-dme"``: ``refunds.delay``."""
    return f"{queue}.delay"


def parse_duration_ms(text: str) -> int:
    """``"1500ms"``, ``"30s"``, ``"5m"``, ``"2h"``, ``"1d"`` -> milliseconds.

    Raises:
        ValueError: the text is not a whole number followed by one of ms, s, m, h, d, or the
            number has more than 20 digits.
    """
    match = _DURATION.match(text)
    if match is None:
        shown = repr(text) if len(text) <= 40 else repr(text[:40]) + "..."
        raise ValueError(f"{shown} is not a duration like '500ms', '30s', '5m', '1h'")
    digits = match.group(1).lstrip("0") or "0"
    if len(digits) > _MAX_DURATION_DIGITS:
        raise ValueError(
            f"a duration of {len(digits)} digits is longer than any delay RabbitMQ takes"
        )
    return int(digits) * _UNIT_MS[match.group(2)]


def format_duration_ms(duration_ms: int) -> str:
    """The shortest exact spelling: 30_000 -> ``30s``, 300_000 -> ``5m``, 1_500 -> ``1500ms``."""
    for unit in ("d", "h", "m", "s"):
        size = _UNIT_MS[unit]
        if duration_ms >= size and duration_ms % size == 0:
            return f"{duration_ms // size}{unit}"
    return f"{duration_ms}ms"
