"""Pure. A subscriber's failure mapping: which exceptions a handler raises become which outcome.

``@subscriber("refunds", drop_on=(CardDeclined,), retry_after_on={ProcessorBusy: 30},
pause_on={ProcessorDown: 60}, dead_letter_on=(InvalidRefund,))`` lists exception classes; an
exception the handler raises is matched against them with ``isinstance`` (subclasses
included) in one order — ``dead_letter_on``, ``drop_on``, ``retry_after_on``, ``pause_on``,
each in the order it was written — and the first match wins. Whatever matches nothing retries,
as an unmapped exception always did. The exception's type and message travel in the
outcome's ``failure`` (``rr-error-type`` / ``rr-error-message`` on the dead-letter copy), as
for a plain failure (docs/reference/handlers.md, "Failures mapped to outcomes").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum

from rabbitctl_retry.retry.outcome import (
    AnyOutcome,
    DeadLetter,
    Drop,
    Failure,
    Pause,
    Retry,
    RetryAfter,
    delay_ms_of,
)

Delay = float | timedelta


class Mapped(StrEnum):
    """The outcome an exception class is mapped to."""

    DEAD_LETTER = "dead_letter_on"
    DROP = "drop_on"
    RETRY_AFTER = "retry_after_on"
    PAUSE = "pause_on"


@dataclass(frozen=True, slots=True)
class FailureRule:
    """``kind`` (and its subclasses) -> ``mapped`` (after ``delay_ms`` where it has one)."""

    kind: type[BaseException]
    mapped: Mapped
    delay_ms: int = 0

    def outcome(self, failure: Failure) -> AnyOutcome:
        match self.mapped:
            case Mapped.DEAD_LETTER:
                return DeadLetter(failure=failure)
            case Mapped.DROP:
                return Drop(failure=failure)
            case Mapped.RETRY_AFTER:
                return RetryAfter(delay_ms=self.delay_ms, failure=failure)
            case Mapped.PAUSE:
                return Pause(delay_ms=self.delay_ms, failure=failure)


@dataclass(frozen=True, slots=True)
class FailureMap:
    """The rules of one subscriber, in the order they are tried."""

    rules: tuple[FailureRule, ...] = ()

    @classmethod
    def of(
        cls,
        *,
        dead_letter_on: Iterable[type[BaseException]] = (),
        drop_on: Iterable[type[BaseException]] = (),
        retry_after_on: Mapping[type[BaseException], Delay] | None = None,
        pause_on: Mapping[type[BaseException], Delay] | None = None,
    ) -> FailureMap:
        """The rules ``@subscriber``'s keywords give; ``TypeError``/``ValueError`` for a class
        that is not an exception or a delay out of range, naming the keyword."""
        rules = [
            FailureRule(_exception(kind, Mapped.DEAD_LETTER), Mapped.DEAD_LETTER)
            for kind in _classes(dead_letter_on, Mapped.DEAD_LETTER)
        ]
        rules += [
            FailureRule(_exception(kind, Mapped.DROP), Mapped.DROP)
            for kind in _classes(drop_on, Mapped.DROP)
        ]
        for mapped, delays in ((Mapped.RETRY_AFTER, retry_after_on), (Mapped.PAUSE, pause_on)):
            if delays is None:
                continue
            if not isinstance(delays, Mapping):
                raise TypeError(
                    f"{mapped.value} takes a dict of exception class -> seconds, "
                    f"not {type(delays).__name__}"
                )
            for kind, delay in delays.items():
                if isinstance(delay, bool) or not isinstance(delay, int | float | timedelta):
                    raise TypeError(
                        f"{mapped.value}: the delay of {getattr(kind, '__name__', kind)!r} "
                        f"must be seconds or a timedelta, not {delay!r}"
                    )
                delay_ms = delay_ms_of(delay, what=f"{mapped.value} delay")
                rules.append(FailureRule(_exception(kind, mapped), mapped, delay_ms))
        return cls(rules=tuple(rules))

    def outcome_for(self, error: BaseException) -> AnyOutcome:
        """What ``error`` (raised by the handler) means: the first rule that matches, else a
        retry."""
        failure = Failure.from_exception(error)
        for rule in self.rules:
            if isinstance(error, rule.kind):
                return rule.outcome(failure)
        return Retry(failure=failure)


def _classes(value: object, mapped: Mapped) -> tuple[object, ...]:
    if isinstance(value, type):
        return (value,)
    if isinstance(value, str | bytes) or not isinstance(value, Iterable):
        raise TypeError(f"{mapped.value} takes exception classes, not {value!r}")
    return tuple(value)


def _exception(kind: object, mapped: Mapped) -> type[BaseException]:
    if not isinstance(kind, type) or not issubclass(kind, BaseException):
        raise TypeError(f"{mapped.value} takes exception classes, not {kind!r}")
    return kind
