"""A queue declared with ``x-single-active-consumer = true``: which consumer gets messages
(docs/reference/testing.md, "What the emulator models"; emulator/single_active.py).

Measured on 3.10.8, 4.0.5 and 4.3.6 with ``scripts/measure_single_active.py``, classic and
quorum queues, each consumer on a connection of its own. Where the servers differ, the
expectation is a line of tests/contract/versions.py (``single-active-*``), read from the
release table. Every wait is for a count: a delivery that arrives, or the ready messages
adding up with what the consumers hold.
"""

from __future__ import annotations

import pytest

from rabbitctl_retry.errors import AccessRefused, ResourceLocked
from rabbitctl_retry.fields import FieldValue
from rabbitctl_retry.transport.base import Channel
from tests.backends import Backend
from tests.contract.support import settle
from tests.contract.takers import Taker, publish
from tests.contract.versions import expected

KINDS = ["classic", "quorum"]


def arguments(kind: str) -> dict[str, FieldValue]:
    table: dict[str, FieldValue] = {"x-single-active-consumer": True}
    if kind == "quorum":
        table["x-queue-type"] = "quorum"
    return table


async def queue(backend: Backend, kind: str) -> Channel:
    publisher = await backend.channel()
    await publisher.queue_declare("q", durable=True, arguments=arguments(kind))
    return publisher


@pytest.mark.parametrize("kind", KINDS)
async def test_the_first_consumer_takes_everything_then_the_next(
    backend: Backend, kind: str
) -> None:
    publisher = await queue(backend, kind)
    c1, c2, c3 = [await Taker.start(backend) for _ in range(3)]
    await publish(publisher, "m1", "m2", "m3", "m4")
    await backend.until(lambda: c1.has(4), "m1..m4 with c1")
    assert (c2.got, c3.got) == ([], [])
    await c1.ack_all()
    await c1.channel.cancel(c1.tag)
    await publish(publisher, "m5", "m6")
    await backend.until(lambda: c2.has(2), "m5 and m6 with c2")
    assert (c1.got, c2.got, c3.got) == (["m1", "m2", "m3", "m4"], ["m5", "m6"], [])


@pytest.mark.parametrize("kind", KINDS)
async def test_a_full_prefetch_leaves_the_others_waiting(backend: Backend, kind: str) -> None:
    publisher = await queue(backend, kind)
    c1 = await Taker.start(backend, prefetch=1)
    c2 = await Taker.start(backend)
    await publish(publisher, "m1", "m2", "m3")
    await settle(backend, publisher, "q", 2)
    await backend.until(lambda: c1.has(1), "m1 with c1")
    assert c2.got == []
    await c1.ack_all()
    await backend.until(lambda: c1.has(2), "m2 with c1")
    await settle(backend, publisher, "q", 1)
    assert (c1.got, c2.got) == (["m1", "m2"], [])


@pytest.mark.parametrize("kind", KINDS)
async def test_a_closing_channel_gives_back_to_the_next_consumer(
    backend: Backend, kind: str
) -> None:
    """What the active consumer held comes back to the next one, first, redelivered."""
    publisher = await queue(backend, kind)
    c1 = await Taker.start(backend, prefetch=2)
    c2, c3 = await Taker.start(backend), await Taker.start(backend)
    await publish(publisher, "m1", "m2", "m3", "m4")
    await settle(backend, publisher, "q", 2)
    await c1.channel.close()
    await backend.until(lambda: c2.has(4), "four with c2")
    back = ["m1*/1", "m2*/1"] if kind == "quorum" else ["m1*", "m2*"]
    assert (c1.got, c2.got, c3.got) == (["m1", "m2"], [*back, "m3", "m4"], [])


@pytest.mark.parametrize("kind", KINDS)
async def test_the_active_consumer_cancelled_while_holding(backend: Backend, kind: str) -> None:
    """The next consumer takes over at once; what the cancelled one gives back goes to it.
    RabbitMQ 3.10's classic queue delivers to nobody (versions.py)."""
    publisher = await queue(backend, kind)
    c1 = await Taker.start(backend, prefetch=2)
    c2 = await Taker.start(backend)
    await publish(publisher, "m1", "m2", "m3")
    await settle(backend, publisher, "q", 1)
    await c1.channel.cancel(c1.tag)
    if kind == "classic" and expected(backend.version, "single-active-cancel-stalls"):
        # the server's queue crashes at the next publish: the scenario stops here
        await settle(backend, publisher, "q", 1)
        assert (c1.got, c2.got) == (["m1", "m2"], [])
        return
    await backend.until(lambda: c2.has(1), "m3 with c2")
    first = c1.recorder.deliveries[0]
    await c1.channel.reject(first.delivery_tag, requeue=True)
    await backend.until(lambda: c2.has(2), "m1 back with c2")
    await c1.connection.close()
    await backend.until(lambda: c2.has(3), "m2 back with c2")
    back = ["m1*/1", "m2*/1"] if kind == "quorum" else ["m1*", "m2*"]
    assert (c1.got, c2.got) == (["m1", "m2"], ["m3", *back])


@pytest.mark.parametrize("kind", KINDS)
async def test_a_higher_priority_consumer_arriving_later(backend: Backend, kind: str) -> None:
    """c1 holds m1 (prefetch 1), m2 waits; c2 of x-priority 10 comes: nothing moves. When c1
    acks, a quorum queue going by priority hands m2 to c2; otherwise c1 takes it."""
    publisher = await queue(backend, kind)
    c1 = await Taker.start(backend, prefetch=1)
    await publish(publisher, "m1", "m2")
    await backend.until(lambda: c1.has(1), "m1 with c1")
    c2 = await Taker.start(backend, prefetch=1, priority=10)
    await settle(backend, publisher, "q", 1)
    assert (c1.got, c2.got) == (["m1"], [])
    await c1.ack_all()
    if kind == "quorum" and expected(backend.version, "single-active-priorities"):
        await backend.until(lambda: c2.has(1), "m2 with c2")
        assert (c1.got, c2.got) == (["m1"], ["m2"])
    else:
        await backend.until(lambda: c1.has(2), "m2 with c1")
        assert (c1.got, c2.got) == (["m1", "m2"], [])


@pytest.mark.parametrize("kind", KINDS)
async def test_a_higher_priority_consumer_while_the_active_one_holds_nothing(
    backend: Backend, kind: str
) -> None:
    publisher = await queue(backend, kind)
    c1 = await Taker.start(backend)
    c2 = await Taker.start(backend, priority=10)
    await publish(publisher, "m1", "m2")
    if kind == "quorum" and expected(backend.version, "single-active-priorities"):
        await backend.until(lambda: c2.has(2), "m1 and m2 with c2")
        assert c1.got == []
    else:
        await backend.until(lambda: c1.has(2), "m1 and m2 with c1")
        assert c2.got == []


SETTLES = ["reject", "nack", "ack", "drop"]
"""How the active consumer settles its one delivery: basic.reject or basic.nack with requeue,
basic.ack, basic.reject without requeue."""


async def settle_one(taker: Taker, how: str) -> None:
    tag = taker.recorder.deliveries[0].delivery_tag
    match how:
        case "reject" | "drop":
            await taker.channel.reject(tag, requeue=how == "reject")
        case "nack":
            await taker.channel.nack(tag, requeue=True)
        case _:
            await taker.channel.ack(tag)


def given_back(backend: Backend, kind: str, how: str) -> str:
    """m1 as it comes back after ``how``: redelivered, and counted by a quorum queue (a nack
    not from 4.3: versions.py 'counted-return')."""
    counted = how == "reject" or expected(backend.version, "counted-return") == "nack"
    return "m1*/1" if kind == "quorum" and counted else "m1*"


@pytest.mark.parametrize("how", SETTLES)
@pytest.mark.parametrize("kind", KINDS)
async def test_the_active_consumer_settles_while_a_higher_priority_one_waits(
    backend: Backend, kind: str, how: str
) -> None:
    """c1 (prefetch 10) holds m1; c2 of x-priority 10 comes; m2, m3 are published; c1 settles
    m1.
    A quorum queue going by priority gives c1 nothing more and hands over once it holds
    nothing: after an ack or a drop, and on 4.3 after a return (4.0 stays on c1, delivering
    to nobody, until it goes); otherwise c1 keeps everything."""
    publisher = await queue(backend, kind)
    c1 = await Taker.start(backend)
    await publish(publisher, "m1")
    await backend.until(lambda: c1.has(1), "m1 with c1")
    c2 = await Taker.start(backend, priority=10)
    await publish(publisher, "m2", "m3")
    returns = how in ("reject", "nack")
    back = given_back(backend, kind, how)
    if kind == "classic" or not expected(backend.version, "single-active-priorities"):
        await backend.until(lambda: c1.has(3), "m2 and m3 with c1")
        await settle_one(c1, how)
        if returns:
            await backend.until(lambda: c1.has(4), "m1 back with c1")
        await settle(backend, publisher, "q", 0)
        assert (c1.got, c2.got) == (["m1", "m2", "m3", *([back] if returns else [])], [])
        return
    await settle(backend, publisher, "q", 2)  # c1 gets nothing more: c2 waits for it
    await settle_one(c1, how)
    if returns and not expected(backend.version, "single-active-return-hands-over"):
        await settle(backend, publisher, "q", 3)  # stuck on c1 until it goes
        assert (c1.got, c2.got) == (["m1"], [])
        await c1.connection.close()
    wanted = [back, "m2", "m3"] if returns else ["m2", "m3"]
    await backend.until(lambda: c2.has(len(wanted)), "what waits with c2")
    assert (c1.got, c2.got) == (["m1"], wanted)


@pytest.mark.parametrize("kind", KINDS)
async def test_the_next_active_consumer_by_priority(backend: Backend, kind: str) -> None:
    """c1 (x-priority 10), c2 (1), c3 (5), c4 (none); c1 takes m1, acks it and is cancelled:
    a classic queue, and a quorum queue going by priority, pick c3 (for m2 and m3); 3.10's
    quorum queue c2."""
    publisher = await queue(backend, kind)
    takers = [await Taker.start(backend, priority=p) for p in (10, 1, 5, None)]
    await publish(publisher, "m1")
    await backend.until(lambda: takers[0].has(1), "m1 with c1")
    await takers[0].ack_all()
    await takers[0].channel.cancel(takers[0].tag)
    await publish(publisher, "m2", "m3")
    by_priority = kind == "classic" or expected(backend.version, "single-active-priorities")
    chosen = takers[2] if by_priority else takers[1]
    await backend.until(lambda: chosen.has(2), "m2 and m3 with the next consumer")
    assert [t.got for t in takers] == [
        ["m1"],
        [] if by_priority else ["m2", "m3"],
        ["m2", "m3"] if by_priority else [],
        [],
    ]


@pytest.mark.parametrize("kind", KINDS)
async def test_basic_get_beside_the_active_consumer(backend: Backend, kind: str) -> None:
    publisher = await queue(backend, kind)
    c1 = await Taker.start(backend, prefetch=1)
    c2 = await Taker.start(backend)
    await publish(publisher, "m1", "m2", "m3")
    await settle(backend, publisher, "q", 2)
    getter = await (await backend.connect()).channel()
    if kind == "classic":
        got = await getter.get("q", no_ack=True)
        assert got is not None
        assert (got.body, got.message_count, c1.got, c2.got) == (b"m2", 1, ["m1"], [])
        return
    with pytest.raises(ResourceLocked) as refused:
        await getter.get("q")
    type_text = expected(backend.version, "single-active-get-type")
    assert str(refused.value) == (
        f"get from queue 'q': RESOURCE_LOCKED - cannot obtain access to locked queue 'q' in "
        f"vhost '{backend.vhost}'. basic.get operations are not supported by {type_text} "
        "queues with single active consumer (405)"
    )


@pytest.mark.parametrize("kind", KINDS)
async def test_an_exclusive_consumer(backend: Backend, kind: str) -> None:
    """A classic queue refuses an exclusive basic.consume, even without consumers; a quorum
    queue ignores the flag: a plain consumer joins, and the first is the active one."""
    publisher = await queue(backend, kind)
    if kind == "classic":
        with pytest.raises(AccessRefused) as refused:
            await Taker.start(backend, exclusive=True)
        assert "ACCESS_REFUSED - queue 'q' in vhost" in str(refused.value)
        assert str(refused.value).endswith("in exclusive use (403)")
        return
    x1 = await Taker.start(backend, exclusive=True)
    plain = await Taker.start(backend)
    x2 = await Taker.start(backend, exclusive=True)
    await publish(publisher, "m1")
    await backend.until(lambda: x1.has(1), "m1 with the exclusive consumer")
    assert (plain.got, x2.got) == ([], [])
