"""Pure. What a target queue's arguments mean for the copies a replay or a move sends it.

A queue with a length limit (``x-max-length``, ``x-max-length-bytes``) and the overflow
``drop-head`` (RabbitMQ's default) confirms every message it takes, then drops the oldest
once it is over the limit: the broker's confirm is no proof that the copy stays. rr removes
a message only once its copy is confirmed, so it would report as moved copies the target
has already thrown away (docs/reference/dlq.md, "When the target drops what it takes").
"""

from __future__ import annotations

from collections.abc import Mapping

from rabbitctl_retry.fields import FieldValue

LENGTH_LIMITS = ("x-max-length", "x-max-length-bytes")
DROPPING_OVERFLOW = "drop-head"


def drops_on_overflow(arguments: Mapping[str, FieldValue]) -> str | None:
    """How the queue with these ``arguments`` drops what it confirmed, or ``None``."""
    limits = [f"{name} = {arguments[name]!r}" for name in LENGTH_LIMITS if name in arguments]
    overflow = arguments.get("x-overflow", DROPPING_OVERFLOW)
    if not limits or overflow != DROPPING_OVERFLOW:
        return None
    shown = "" if "x-overflow" in arguments else " (RabbitMQ's default)"
    return (
        f"has {' and '.join(limits)} with x-overflow = {DROPPING_OVERFLOW}{shown}: RabbitMQ "
        "confirms a copy, then drops the oldest once the queue is over its limit, and rr "
        "would report as moved copies already dropped"
    )
