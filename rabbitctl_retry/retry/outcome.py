"""Pure. What a handler decided about a message: ack, retry, drop, retry after a delay,
dead-letter now, or pause the queue.

``Outcome.ack()``, ``Outcome.retry()``, ``Outcome.drop()``, ``Outcome.retry_after(d)``,
``Outcome.dead_letter()`` and ``Outcome.pause(d)`` build the values; the runtime turns them
into AMQP frames (``retry/policy.py``). A handler that returns ``None`` acks; one that raises
retries (or what its subscriber's failure mapping says, ``retry/failure_map.py``), and the
exception travels in the outcome's ``failure`` to the dead-letter copy (docs/reference/runtime.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import timedelta

MAX_ERROR_MESSAGE_CHARS = 1000
"""How much of an exception's message travels in ``rr-error-message``."""

MAX_DELAY_MS = 2**32 - 1
"""The longest delay RabbitMQ accepts: a per-message ``expiration`` (and ``x-delay``) is at
most 2^32 - 1 ms, about 49.7 days. A longer one would make the broker close the channel."""


@dataclass(frozen=True, slots=True)
class Failure:
    """An exception a handler raised: its type (``module.QualName``) and message."""

    type: str
    message: str

    @classmethod
    def from_exception(cls, error: BaseException) -> Failure:
        kind = type(error)
        name = kind.__qualname__
        if kind.__module__ not in {"builtins", "__main__"}:
            name = f"{kind.__module__}.{name}"
        message = str(error)
        if len(message) > MAX_ERROR_MESSAGE_CHARS:
            message = message[: MAX_ERROR_MESSAGE_CHARS - 1] + "…"
        return cls(type=name, message=message)


class Outcome:
    """Base of the four outcomes; its static methods are how handlers build them."""

    __slots__ = ()

    @staticmethod
    def ack() -> Ack:
        """Done: ``basic.ack``."""
        return Ack()

    @staticmethod
    def retry() -> Retry:
        """Deliver again now, up to the queue's ``max_attempts``."""
        return Retry()

    @staticmethod
    def drop() -> Drop:
        """Give up without retrying: ``basic.reject(requeue=false)``."""
        return Drop()

    @staticmethod
    def retry_after(delay: float | timedelta) -> RetryAfter:
        """Deliver again after ``delay`` (seconds, or a timedelta), up to ``max_attempts``."""
        return RetryAfter(delay_ms=delay_ms_of(delay, what="a retry delay"))

    @staticmethod
    def dead_letter(reason: str | None = None) -> DeadLetter:
        """Give up now, without spending the remaining attempts: the message goes to the
        queue's dead-letter queue as after its last attempt (``rr-error-type =
        rr.DeadLettered`` and ``reason`` in ``rr-error-message``), or is rejected where there
        is none."""
        return DeadLetter(failure=Failure(type=DEAD_LETTERED_TYPE, message=reason or ""))

    @staticmethod
    def pause(delay: float | timedelta) -> Pause:
        """A dependency is down: give the message back without spending an attempt where the
        server allows it, and stop consuming this queue for ``delay`` (seconds, or a
        timedelta) (docs/reference/handlers.md, "Pausing a queue")."""
        return Pause(delay_ms=delay_ms_of(delay, what="a pause"))


DEAD_LETTERED_TYPE = "rr.DeadLettered"
"""``rr-error-type`` of a message its handler dead-lettered with ``Outcome.dead_letter()``."""


def delay_ms_of(delay: float | timedelta, *, what: str) -> int:
    """``delay`` (seconds or a timedelta) in whole milliseconds, rounded up; ``ValueError``
    below 0 or past RabbitMQ's longest message TTL."""
    seconds = delay.total_seconds() if isinstance(delay, timedelta) else float(delay)
    if math.isnan(seconds) or seconds < 0:
        raise ValueError(f"{what} must be >= 0 seconds, not {delay!r}")
    if seconds * 1000 > MAX_DELAY_MS:
        raise ValueError(
            f"{what} must be at most {MAX_DELAY_MS // 1000:,} seconds (about 49.7 "
            f"days, RabbitMQ's longest message TTL), not {delay!r}"
        )
    return math.ceil(seconds * 1000)


@dataclass(frozen=True, slots=True)
class Ack(Outcome):
    pass


@dataclass(frozen=True, slots=True)
class Retry(Outcome):
    failure: Failure | None = None
    """Set when the handler raised instead of returning."""


@dataclass(frozen=True, slots=True)
class Drop(Outcome):
    failure: Failure | None = None
    """Set when a failure mapping turned the handler's exception into a drop."""


def _check_delay_ms(delay_ms: int) -> None:
    if not 0 <= delay_ms <= MAX_DELAY_MS:
        raise ValueError(f"delay_ms must be from 0 to {MAX_DELAY_MS}, not {delay_ms}")


@dataclass(frozen=True, slots=True)
class RetryAfter(Outcome):
    delay_ms: int
    failure: Failure | None = None
    """Set when a failure mapping turned the handler's exception into this delay."""

    def __post_init__(self) -> None:
        _check_delay_ms(self.delay_ms)


@dataclass(frozen=True, slots=True)
class DeadLetter(Outcome):
    """Give up now: as a retry at the cap, whatever the attempt (a body that does not decode,
    ``Outcome.dead_letter()``)."""

    failure: Failure


@dataclass(frozen=True, slots=True)
class Pause(Outcome):
    """Give the message back uncounted where the server allows, and stop consuming the queue
    for ``delay_ms``."""

    delay_ms: int
    failure: Failure | None = None

    def __post_init__(self) -> None:
        _check_delay_ms(self.delay_ms)


AnyOutcome = Ack | Retry | Drop | RetryAfter | DeadLetter | Pause
OUTCOME_TYPES: tuple[type[AnyOutcome], ...] = (Ack, Retry, Drop, RetryAfter, DeadLetter, Pause)
"""The classes of :data:`AnyOutcome`: what a handler may return
(``isinstance(result, OUTCOME_TYPES)``)."""
