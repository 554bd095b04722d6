"""``--rate`` and ``--ramp`` (``rabbitctl_retry/dlq/rate.py``): the schedule a pacer hands
out, and what each option takes."""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rabbitctl_retry.dlq.rate import MAX_RAMP_S, Pace, Pacer, parse_pace
from rabbitctl_retry.errors import UsageError


def schedule(pacer: Pacer, count: int, start_s: float = 100.0) -> list[float]:
    """When each of ``count`` events goes, each asked for the moment the one before went (no
    pause), as offsets from the first."""
    now_s = start_s
    went: list[float] = []
    for _ in range(count):
        now_s += pacer.reserve(now_s)
        went.append(now_s - start_s)
    return went


def test_a_ramp_of_60_s_to_200_a_second() -> None:
    """The module doc's example: the first at once, the second after 0.55 s, 6,000 in the
    first minute, then 200 a second."""
    went = schedule(Pacer(200, ramp_s=60), 6_003)
    assert went[0] == 0
    assert went[1] == pytest.approx(math.sqrt(0.6))
    assert went[6_000] == pytest.approx(60.0)
    assert sum(1 for s in went if s < 60.0 - 1e-9) == 6_000
    assert went[6_001] - went[6_000] == pytest.approx(0.005)
    assert went[6_002] - went[6_001] == pytest.approx(0.005)


def test_without_a_ramp_the_spacing_is_one_over_the_rate() -> None:
    assert schedule(Pacer(4), 4) == pytest.approx([0, 0.25, 0.5, 0.75])


def test_a_ramp_shorter_than_one_event_barely_slows_the_first() -> None:
    """rate 1, ramp 1 s: half an event in the ramp; the second goes at 1.5 s, then 1 s apart."""
    assert schedule(Pacer(1, ramp_s=1), 3) == pytest.approx([0, 1.5, 2.5])


def test_a_pause_does_not_restart_the_ramp_nor_bring_a_burst() -> None:
    """Past the ramp, a late caller gets the next slot at once and the spacing again after it."""
    pacer = Pacer(10, ramp_s=1)  # 5 events on the ramp
    schedule(pacer, 6)
    assert pacer.reserve(1_000.0) == 0
    assert pacer.reserve(1_000.0) == pytest.approx(0.1)


@given(
    rate_per_s=st.floats(min_value=0.001, max_value=100_000),
    ramp_s=st.floats(min_value=0.001, max_value=MAX_RAMP_S),
    count=st.integers(min_value=2, max_value=300),
)
def test_a_ramp_never_goes_faster_than_its_line_nor_than_the_rate(
    rate_per_s: float, ramp_s: float, count: int
) -> None:
    """By any moment t of sending, at most ``N(t) + 1`` events have gone, N the straight line
    from 0 to the rate over the ramp (``rate t² / (2 ramp)``, then ``rate`` a second); no two
    are closer than ``1 / rate``; and the schedule is the line's own (each event on it)."""
    went = schedule(Pacer(rate_per_s, ramp_s=ramp_s), count, start_s=0.0)

    def line(t_s: float) -> float:
        if t_s <= ramp_s:
            return rate_per_s * t_s * t_s / (2 * ramp_s)
        return rate_per_s * ramp_s / 2 + rate_per_s * (t_s - ramp_s)

    tolerance = 1e-6 * max(1.0, went[-1])
    for event, t_s in enumerate(went):
        assert line(t_s) == pytest.approx(event, rel=1e-6, abs=1e-6)
    gaps = [later - earlier for earlier, later in itertools.pairwise(went)]
    assert min(gaps) >= 1 / rate_per_s - tolerance


@pytest.mark.parametrize(
    ("rate", "ramp", "pace"),
    [
        (None, None, None),
        ("200", None, Pace(200.0)),
        ("200", "60", Pace(200.0, 60.0)),
        (" 0.5 ", "0.25", Pace(0.5, 0.25)),
        ("1", "86400", Pace(1.0, MAX_RAMP_S)),
    ],
)
def test_what_the_options_take(rate: str | None, ramp: str | None, pace: Pace | None) -> None:
    assert parse_pace(rate, ramp) == pace


@pytest.mark.parametrize(
    ("rate", "ramp", "error"),
    [
        (None, "60", "--ramp '60' needs --rate, the rate it climbs to (e.g. --rate 200 --ramp 60)"),
        ("200", "0", "--ramp '0': give the seconds the rate takes to climb as a number above 0"),
        ("200", "-5", "--ramp '-5': "),
        ("200", "inf", "--ramp 'inf': "),
        ("200", "nan", "--ramp 'nan': "),
        ("200", "86401", "--ramp '86401': "),
        ("200", "soon", "--ramp 'soon': "),
        ("200", "١٢", "--ramp '١٢': "),
        ("fast", "60", "--rate 'fast': "),
    ],
)
def test_what_the_options_refuse(rate: str | None, ramp: str | None, error: str) -> None:
    with pytest.raises(UsageError) as refused:
        parse_pace(rate, ramp)
    assert str(refused.value).startswith(error)


def test_the_consoles_fields_are_named_as_fields() -> None:
    with pytest.raises(UsageError, match=r"^give the ramp a rate to climb to"):
        parse_pace(None, "60", fields=True)
    with pytest.raises(UsageError, match=r"^ramp '0': give the seconds"):
        parse_pace("10", "0", fields=True)
    with pytest.raises(UsageError, match=r"^rate 'x': give the messages per second"):
        parse_pace("x", None, fields=True)


def test_a_pacer_refuses_what_no_option_gives() -> None:
    with pytest.raises(ValueError, match="rate must be positive"):
        Pacer(0)
    with pytest.raises(ValueError, match="ramp must be positive"):
        Pacer(1, ramp_s=0)
