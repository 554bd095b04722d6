"""Consumers of different ``x-priority`` on a plain queue (no single active consumer), and
exclusive consumers (docs/reference/testing.md, "What the emulator models"; the emulator's
``EmulatedQueue.next_consumer`` and ``channels._check_exclusive``).

Measured on 3.10.8, 4.0.5 and 4.3.6 with ``scripts/measure_consumer_priority.py``, classic
and quorum queues alike, each consumer on a connection of its own: a message goes to the
consumer of highest priority with room under its prefetch, consumers of one priority take
turns, a consumer without the argument has priority 0. Every wait is for a count.
"""

from __future__ import annotations

import pytest

from rabbitctl_retry.errors import AccessRefused, PreconditionFailed
from rabbitctl_retry.transport.base import Channel
from tests.backends import Backend
from tests.contract.support import settle
from tests.contract.takers import Taker, publish

KINDS = ["classic", "quorum"]


async def queue(backend: Backend, kind: str) -> Channel:
    publisher = await backend.channel()
    await publisher.queue_declare("q", durable=True, arguments={"x-queue-type": kind})
    return publisher


def held(*takers: Taker) -> int:
    return sum(len(taker.recorder.deliveries) for taker in takers)


@pytest.mark.parametrize("kind", KINDS)
async def test_the_highest_priority_with_room_takes_the_next_message(
    backend: Backend, kind: str
) -> None:
    """c0 (no priority, prefetch 3), c10 (10, prefetch 2), c5 (5, prefetch 1): each takes
    what its room allows, highest first; m7 and m8 wait until an ack frees a consumer. (An
    ack then a publish would race on the server: they travel on two connections.)"""
    publisher = await queue(backend, kind)
    c0 = await Taker.start(backend, prefetch=3)
    c10 = await Taker.start(backend, priority=10, prefetch=2)
    c5 = await Taker.start(backend, priority=5, prefetch=1)
    await publish(publisher, *(f"m{n}" for n in range(1, 9)))
    await backend.until(lambda: held(c0, c10, c5) == 6, "m1..m6 handed out")
    await settle(backend, publisher, "q", 2)
    assert (c0.got, c10.got, c5.got) == (["m4", "m5", "m6"], ["m1", "m2"], ["m3"])
    await c5.ack_first()
    await backend.until(lambda: c5.has(2), "m7 with c5")
    await c10.ack_first()
    await backend.until(lambda: c10.has(3), "m8 with c10")
    assert (c0.got, c10.got, c5.got) == (["m4", "m5", "m6"], ["m1", "m2", "m8"], ["m3", "m7"])


@pytest.mark.parametrize("kind", KINDS)
async def test_consumers_of_one_priority_take_turns(backend: Backend, kind: str) -> None:
    publisher = await queue(backend, kind)
    a5 = await Taker.start(backend, priority=5)
    low = await Taker.start(backend)
    b5 = await Taker.start(backend, priority=5)
    await publish(publisher, *(f"m{n}" for n in range(1, 6)))
    await backend.until(lambda: held(a5, low, b5) == 5, "m1..m5 handed out")
    assert (a5.got, low.got, b5.got) == (["m1", "m3", "m5"], [], ["m2", "m4"])


@pytest.mark.parametrize("kind", KINDS)
async def test_a_negative_priority_comes_after_none(backend: Backend, kind: str) -> None:
    publisher = await queue(backend, kind)
    negative = await Taker.start(backend, priority=-5)
    plain = await Taker.start(backend, prefetch=2)
    await publish(publisher, "m1", "m2", "m3", "m4")
    await backend.until(lambda: held(negative, plain) == 4, "m1..m4 handed out")
    assert (negative.got, plain.got) == (["m3", "m4"], ["m1", "m2"])


@pytest.mark.parametrize("kind", KINDS)
async def test_messages_waiting_go_to_a_higher_consumer_arriving(
    backend: Backend, kind: str
) -> None:
    """m1..m4 wait; c0 (prefetch 1) takes m1; c10 (prefetch 2) comes and takes m2, m3; c0's
    ack frees it for m4."""
    publisher = await queue(backend, kind)
    await publish(publisher, "m1", "m2", "m3", "m4")
    await settle(backend, publisher, "q", 4)
    c0 = await Taker.start(backend, prefetch=1)
    await backend.until(lambda: c0.has(1), "m1 with c0")
    c10 = await Taker.start(backend, priority=10, prefetch=2)
    await backend.until(lambda: c10.has(2), "m2 and m3 with c10")
    await c0.ack_first()
    await backend.until(lambda: c0.has(2), "m4 with c0")
    assert (c0.got, c10.got) == (["m1", "m4"], ["m2", "m3"])


@pytest.mark.parametrize("kind", KINDS)
async def test_a_higher_consumer_arriving_takes_the_next_messages(
    backend: Backend, kind: str
) -> None:
    publisher = await queue(backend, kind)
    c0 = await Taker.start(backend)
    await publish(publisher, "m1", "m2")
    await backend.until(lambda: c0.has(2), "m1 and m2 with c0")
    c10 = await Taker.start(backend, priority=10)
    await publish(publisher, "m3", "m4")
    await backend.until(lambda: c10.has(2), "m3 and m4 with c10")
    assert (c0.got, c10.got) == (["m1", "m2"], ["m3", "m4"])


@pytest.mark.parametrize("kind", KINDS)
async def test_an_ack_frees_its_consumer_for_the_next_message(backend: Backend, kind: str) -> None:
    """c10 and c0, prefetch 1 each, hold m1 and m2; m3 and m4 wait. c10 acks: m3 is its; c0
    acks: m4 is c0's (c10 is full)."""
    publisher = await queue(backend, kind)
    c10 = await Taker.start(backend, priority=10, prefetch=1)
    c0 = await Taker.start(backend, prefetch=1)
    await publish(publisher, "m1", "m2", "m3", "m4")
    await backend.until(lambda: held(c10, c0) == 2, "m1 and m2 handed out")
    await settle(backend, publisher, "q", 2)
    assert (c10.got, c0.got) == (["m1"], ["m2"])
    await c10.ack_first()
    await backend.until(lambda: c10.has(2), "m3 with c10")
    await c0.ack_first()
    await backend.until(lambda: c0.has(2), "m4 with c0")
    assert (c10.got, c0.got) == (["m1", "m3"], ["m2", "m4"])


@pytest.mark.parametrize("kind", KINDS)
async def test_a_priority_that_is_not_an_integer_is_refused(backend: Backend, kind: str) -> None:
    await queue(backend, kind)
    channel = await (await backend.connect()).channel()
    with pytest.raises(PreconditionFailed) as refused:
        await channel.consume("q", lambda _: None, arguments={"x-priority": "high"})
    assert str(refused.value) == (
        f"consume from queue 'q': PRECONDITION_FAILED - invalid arg 'x-priority' for queue "
        f"'q' in vhost '{backend.vhost}': \"expected integer, got longstr\" (406)"
    )


@pytest.mark.parametrize("kind", KINDS)
async def test_an_exclusive_consumer(backend: Backend, kind: str) -> None:
    """A classic queue refuses an exclusive consumer beside another and any consumer beside
    an exclusive one; a quorum queue ignores the flag, and its consumers take turns."""
    publisher = await queue(backend, kind)
    first = await Taker.start(backend, exclusive=True)
    if kind == "classic":
        for exclusive in (False, True):
            with pytest.raises(AccessRefused) as refused:
                await Taker.start(backend, exclusive=exclusive)
            assert str(refused.value).endswith(
                f"ACCESS_REFUSED - queue 'q' in vhost '{backend.vhost}' in exclusive use (403)"
            )
        return
    plain = await Taker.start(backend)
    second = await Taker.start(backend, exclusive=True)
    await publish(publisher, "m1", "m2", "m3")
    await backend.until(lambda: held(first, plain, second) == 3, "m1..m3 handed out")
    assert (first.got, plain.got, second.got) == (["m1"], ["m2"], ["m3"])
