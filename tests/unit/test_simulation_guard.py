"""rr simulate's loop guard (docs/reference/runtime.md, "rr simulate"): pure counting."""

from __future__ import annotations

from rabbitctl_retry.simulation import LoopGuard


def test_one_message_at_one_instant_trips_at_the_bound() -> None:
    guard = LoopGuard(per_instant=3, total=100)
    assert guard.note(0.0, "q", "m1") is None
    assert guard.note(0.0, "q", "m2") is None
    assert guard.note(0.0, "q", "m1") is None
    problem = guard.note(0.0, "q", "m1")
    assert problem is not None
    assert problem.startswith("message 'm1' on queue 'q' was handled 3 times at virtual time 0s")


def test_the_clock_moving_starts_the_count_again() -> None:
    guard = LoopGuard(per_instant=3, total=100)
    for instant in range(10):  # a retry every second, forever: not a loop at one instant
        assert guard.note(float(instant), "q", "m1") is None
        assert guard.note(float(instant), "q", "m1") is None


def test_the_same_id_on_two_queues_is_two_messages() -> None:
    guard = LoopGuard(per_instant=2, total=100)
    assert guard.note(0.0, "a", "m1") is None
    assert guard.note(0.0, "b", "m1") is None
    assert guard.note(0.0, "a", "m1") is not None


def test_the_total_bound() -> None:
    guard = LoopGuard(per_instant=1000, total=5)
    results = [guard.note(float(n), "q", f"m{n}") for n in range(5)]
    assert results[:4] == [None] * 4
    assert results[4] == (
        "5 handlings by virtual time 4s: stopped (a shorter --for or fewer messages simulate less)"
    )
