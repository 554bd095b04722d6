"""AckWindow: a multiple ack never covers a delivery that is still being handled."""

from __future__ import annotations

import random

import pytest

from rabbitctl_retry.runtime.ackwindow import AckWindow


def window(*tags: int) -> AckWindow:
    result = AckWindow()
    for tag in tags:
        result.delivered(tag)
    return result


def test_in_order_acks_coalesce() -> None:
    acks = window(1, 2, 3)
    for tag in (1, 2, 3):
        acks.acked(tag)
    assert acks.take() == 3
    assert len(acks) == 0
    assert acks.take() is None


def test_an_unfinished_head_holds_the_multiple_ack_back() -> None:
    acks = window(1, 2, 3)
    acks.acked(2)
    acks.acked(3)
    assert acks.take() is None
    acks.acked(1)
    assert acks.take() == 3


def test_rejected_deliveries_are_stepped_over() -> None:
    acks = window(1, 2, 3, 4)
    acks.acked(1)
    acks.rejected(2)
    acks.acked(3)
    assert acks.take() == 3
    acks.rejected(4)
    assert acks.take() is None
    assert len(acks) == 0


def test_singles_free_the_window_behind_a_slow_head() -> None:
    acks = window(1, 2, 3)
    acks.acked(3)
    acks.acked(2)
    assert acks.pending_acks == 2
    assert acks.take_singles() == [2, 3]
    assert acks.pending_acks == 0
    acks.acked(1)
    assert acks.take() == 1
    assert len(acks) == 0


def test_forget_after_a_channel_close() -> None:
    acks = window(1, 2)
    acks.acked(2)
    acks.forget()
    assert acks.take() is None
    assert acks.pending_acks == 0


@pytest.mark.parametrize("seed", range(20))
def test_a_multiple_ack_only_ever_covers_finished_deliveries(seed: int) -> None:
    rng = random.Random(seed)
    tags = list(range(1, 60))
    acks = window(*tags)
    finished: set[int] = set()
    rejected: set[int] = set()
    acked_on_wire: set[int] = set()
    order = tags[:]
    rng.shuffle(order)
    for tag in order:
        if rng.random() < 0.2:
            acks.rejected(tag)
            rejected.add(tag)
        else:
            acks.acked(tag)
        finished.add(tag)
        if rng.random() < 0.1:
            acked_on_wire.update(acks.take_singles())
        upto = acks.take()
        if upto is not None:
            covered = {t for t in tags if t <= upto} - rejected - acked_on_wire
            assert covered <= finished
            acked_on_wire |= covered
    assert acked_on_wire == set(tags) - rejected
