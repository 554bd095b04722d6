"""The failure mapping of ``@subscriber(..., drop_on=..., retry_after_on=..., ...)``: which
exception becomes which outcome (retry/failure_map.py, docs/reference/handlers.md "Failures mapped
to outcomes")."""

from __future__ import annotations

from datetime import timedelta

import pytest

from rabbitctl_retry import subscriber
from rabbitctl_retry.retry.failure_map import FailureMap
from rabbitctl_retry.retry.outcome import DeadLetter, Drop, Failure, Pause, Retry, RetryAfter
from rabbitctl_retry.runtime.handlers import Subscriber, subscriber_options


class PaymentError(Exception):
    pass


class CardDeclined(PaymentError):
    pass


class StolenCard(CardDeclined):
    pass


class ProcessorBusy(PaymentError):
    pass


class ProcessorDown(ConnectionError):
    pass


class InvalidRefund(ValueError):
    pass


GUIDE = FailureMap.of(
    dead_letter_on=(InvalidRefund,),
    drop_on=(CardDeclined,),
    retry_after_on={ProcessorBusy: 30, PaymentError: timedelta(minutes=2)},
    pause_on={ProcessorDown: 60},
)


def failure(error: BaseException) -> Failure:
    return Failure.from_exception(error)


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (InvalidRefund("amount < 0"), DeadLetter(failure(InvalidRefund("amount < 0")))),
        (CardDeclined("do not honor"), Drop(failure(CardDeclined("do not honor")))),
        # a subclass matches its listed base
        (StolenCard("lost"), Drop(failure(StolenCard("lost")))),
        (ProcessorBusy("429"), RetryAfter(30_000, failure(ProcessorBusy("429")))),
        # PaymentError is listed after ProcessorBusy: only what nothing earlier took
        (PaymentError("?"), RetryAfter(120_000, failure(PaymentError("?")))),
        (ProcessorDown("refused"), Pause(60_000, failure(ProcessorDown("refused")))),
        # a sibling of a listed class is not it
        (ConnectionError("reset"), Retry(failure(ConnectionError("reset")))),
        (KeyError("card"), Retry(failure(KeyError("card")))),
    ],
    ids=lambda value: type(value).__name__,
)
def test_each_exception_becomes_its_outcome(error: BaseException, expected: object) -> None:
    assert GUIDE.outcome_for(error) == expected


def test_the_failure_keeps_the_type_and_message() -> None:
    outcome = GUIDE.outcome_for(CardDeclined("do not honor"))
    assert isinstance(outcome, Drop)
    assert outcome.failure == Failure(type=f"{__name__}.CardDeclined", message="do not honor")


def test_first_match_wins_in_the_documented_order() -> None:
    """dead_letter_on, drop_on, retry_after_on, pause_on; each in the order written."""
    both = FailureMap.of(drop_on=(PaymentError,), dead_letter_on=(PaymentError,))
    assert isinstance(both.outcome_for(CardDeclined()), DeadLetter)
    ordered = FailureMap.of(retry_after_on={PaymentError: 1, CardDeclined: 2})
    assert ordered.outcome_for(CardDeclined()) == RetryAfter(1_000, failure(CardDeclined()))
    paused = FailureMap.of(retry_after_on={ProcessorDown: 5}, pause_on={ProcessorDown: 60})
    assert isinstance(paused.outcome_for(ProcessorDown()), RetryAfter)


def test_an_empty_map_retries_everything() -> None:
    assert FailureMap().outcome_for(CardDeclined("x")) == Retry(failure(CardDeclined("x")))
    assert FailureMap.of().rules == ()


def test_one_class_alone_is_accepted() -> None:
    assert FailureMap.of(drop_on=CardDeclined).outcome_for(StolenCard()) == Drop(
        failure(StolenCard())
    )


@pytest.mark.parametrize(
    ("keywords", "message"),
    [
        ({"drop_on": ("CardDeclined",)}, "drop_on takes exception classes, not 'CardDeclined'"),
        ({"drop_on": "CardDeclined"}, "drop_on takes exception classes, not 'CardDeclined'"),
        ({"dead_letter_on": (int,)}, "dead_letter_on takes exception classes, not <class 'int'>"),
        ({"retry_after_on": (ProcessorBusy,)}, "retry_after_on takes a dict of exception class"),
        (
            {"pause_on": {ProcessorDown: "60"}},
            "pause_on: the delay of 'ProcessorDown' must be seconds or a timedelta, not '60'",
        ),
        (
            {"retry_after_on": {ProcessorBusy: True}},
            "retry_after_on: the delay of 'ProcessorBusy' must be seconds or a timedelta, not True",
        ),
        ({"retry_after_on": {dict: 1}}, "retry_after_on takes exception classes, not <class"),
    ],
)
def test_bad_mappings_fail_at_decoration(keywords: dict[str, object], message: str) -> None:
    with pytest.raises(TypeError) as raised:
        subscriber("refunds", **keywords)  # type: ignore[arg-type]
    assert str(raised.value).startswith(message)


@pytest.mark.parametrize("delay", [-1, float("nan"), 2**32])
def test_delays_out_of_range_fail_at_decoration(delay: float) -> None:
    with pytest.raises(ValueError, match="retry_after_on delay must be"):
        subscriber("refunds", retry_after_on={ProcessorBusy: delay})


def test_the_decorator_keeps_the_map_on_the_handler() -> None:
    @subscriber("refunds", drop_on=(CardDeclined,), pause_on={ProcessorDown: 60})
    async def handle(msg: object) -> None:
        return None

    options = subscriber_options(handle)
    assert options is not None
    assert options.queue == "refunds"
    item = Subscriber("refunds", handle, "m:handle")
    assert item.settings.failures is options.failures
    assert item.settings.failures.outcome_for(ProcessorDown()) == Pause(
        60_000, failure(ProcessorDown())
    )


def test_an_unknown_decode_rule_fails_at_decoration() -> None:
    with pytest.raises(TypeError, match="on_decode_error must be 'dead-letter' or 'drop'"):
        subscriber("refunds", on_decode_error="retry")
