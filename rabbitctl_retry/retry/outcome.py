"""Pure. What a handler decided about a message: ack, retry, drop, or retry after a delay.

``Outcome.ack()``, ``Outcome.retry()``, ``Outcome.drop()`` and ``Outcome.retry_after(d)``
build the four values; the runtime turns them into AMQP frames (``retry/policy.py``). A
handler that returns ``None`` acks; one that raises retries, and the exception travels in
:attr:`Retry.failure` to the dead-letter copy.
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
        seconds = delay.total_seconds() if isinstance(delay, timedelta) else float(delay)
        if math.isnan(seconds) or seconds < 0:
            raise ValueError(f"a retry delay must be >= 0 seconds, not {delay!r}")
        if seconds * 1000 > MAX_DELAY_MS:
            raise ValueError(
                f"a retry delay must be at most {MAX_DELAY_MS // 1000:,} seconds (about 49.7 "
                f"days, RabbitMQ's longest message TTL), not {delay!r}"
            )
        return RetryAfter(delay_ms=math.ceil(seconds * 1000))


@dataclass(frozen=True, slots=True)
class Ack(Outcome):
    pass


@dataclass(frozen=True, slots=True)
class Retry(Outcome):
    failure: Failure | None = None
    """Set when the handler raised instead of returning."""


@dataclass(frozen=True, slots=True)
class Drop(Outcome):
    pass


@dataclass(frozen=True, slots=True)
class RetryAfter(Outcome):
    delay_ms: int

    def __post_init__(self) -> None:
        if not 0 <= self.delay_ms <= MAX_DELAY_MS:
            raise ValueError(f"delay_ms must be from 0 to {MAX_DELAY_MS}, not {self.delay_ms}")


AnyOutcome = Ack | Retry | Drop | RetryAfter
