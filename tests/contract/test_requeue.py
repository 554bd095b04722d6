"""Requeues: where a message goes back, and in which order, on classic and quorum queues.

Measured on RabbitMQ 3.10.8 and 4.0.5: a classic queue puts a requeued message back in its old
place. A 3.10 quorum queue appends a message rejected with requeue, but serves the messages a
closing channel held first, ahead of those never delivered; a 4.0 quorum queue serves every
returned message first, in the order they came back. Quorum expectations differ by version and
live in tests/contract/versions.py.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from rabbitctl_retry.fields import FieldValue
from rabbitctl_retry.transport.base import Channel, Delivery
from tests.backends import Backend
from tests.contract.support import delivery_count, drain
from tests.contract.versions import expected
from tests.observe import Recorder, depth

QUEUE_ARGUMENTS: dict[str, dict[str, FieldValue]] = {
    "classic": {},
    "quorum": {"x-queue-type": "quorum"},
}

Seen = list[tuple[str, bool, FieldValue]]
"""(body, redelivered, x-delivery-count or "absent") of each delivery."""

ABSENT = "absent"
"""No ``x-delivery-count`` header."""


def quorum_or(backend: Backend, kind: str, classic: Seen, quorum: str) -> Seen:
    """``classic`` on a classic queue; on a quorum queue, the versions.py entry ``quorum``."""
    return classic if kind == "classic" else expected(backend.version, quorum)


def seen(deliveries: Sequence[Delivery | None]) -> Seen:
    out: Seen = []
    for delivery in deliveries:
        assert delivery is not None
        out.append((delivery.body.decode(), delivery.redelivered, delivery_count(delivery)))
    return out


async def four_messages(backend: Backend, kind: str) -> None:
    channel = await backend.channel()
    await channel.queue_declare("q", arguments=QUEUE_ARGUMENTS[kind])
    for body in ("m1", "m2", "m3", "m4"):
        await channel.publish(body.encode(), routing_key="q")


async def ready_again(backend: Backend, count: int) -> Seen:
    """Wait until 'q' holds ``count`` ready messages; take them all, head first."""
    channel = await backend.channel()

    async def back() -> bool:
        return await depth(channel, "q") == count

    await backend.until(back, f"{count} messages ready in 'q'")
    return seen(await drain(channel, "q"))


# m1..m4; a consumer with prefetch 2 holds m1, m2; its channel closes. Quorum: returned first,
# and counted (versions.py "quorum-after-consumer-close")
AFTER_CONSUMER_CLOSE: Seen = [
    ("m1", True, ABSENT),
    ("m2", True, ABSENT),
    ("m3", False, ABSENT),
    ("m4", False, ABSENT),
]


@pytest.mark.parametrize("kind", ["classic", "quorum"])
async def test_a_closing_channel_requeues_its_consumers_deliveries(
    backend: Backend, kind: str
) -> None:
    await four_messages(backend, kind)
    consuming = await backend.channel(confirms=False)
    await consuming.qos(2)
    recorder = Recorder(consuming, "hold")
    await consuming.consume("q", recorder)

    async def holding_two() -> bool:
        return len(recorder.deliveries) == 2

    await backend.until(holding_two, "two deliveries held")
    assert seen(recorder.deliveries) == [("m1", False, ABSENT), ("m2", False, ABSENT)]
    await consuming.close()
    assert await ready_again(backend, 4) == quorum_or(
        backend, kind, AFTER_CONSUMER_CLOSE, "quorum-after-consumer-close"
    )
    assert len(recorder.deliveries) == 2


# m1..m4; basic.get takes m1, m2, m3, acks m2; the channel closes (quorum: versions.py
# "quorum-got-by-basic-get", "quorum-after-get-and-close")
GOT: Seen = [("m1", False, ABSENT), ("m2", False, ABSENT), ("m3", False, ABSENT)]
AFTER_GET_CLOSE: Seen = [("m1", True, ABSENT), ("m3", True, ABSENT), ("m4", False, ABSENT)]


@pytest.mark.parametrize("kind", ["classic", "quorum"])
async def test_order_after_basic_get_and_channel_close(backend: Backend, kind: str) -> None:
    await four_messages(backend, kind)
    getting = await backend.channel(confirms=False)
    got = [await getting.get("q") for _ in range(3)]
    assert seen(got) == quorum_or(backend, kind, GOT, "quorum-got-by-basic-get")
    assert got[1] is not None
    await getting.ack(got[1].delivery_tag)
    await getting.close()
    assert await ready_again(backend, 3) == quorum_or(
        backend, kind, AFTER_GET_CLOSE, "quorum-after-get-and-close"
    )


# m1..m4; a consumer with prefetch 1 rejects m1 with requeue twice, acks everything else
# (quorum: versions.py "quorum-after-rejects": 3.10 appends m1, 4.0 serves it first)
AFTER_REJECTS: Seen = [
    ("m1", False, ABSENT),
    ("m1", True, ABSENT),
    ("m1", True, ABSENT),
    ("m2", False, ABSENT),
    ("m3", False, ABSENT),
    ("m4", False, ABSENT),
]


@pytest.mark.parametrize("kind", ["classic", "quorum"])
async def test_reject_with_requeue(backend: Backend, kind: str) -> None:
    await four_messages(backend, kind)
    consuming = await backend.channel(confirms=False)
    await consuming.qos(1)
    deliveries: list[Delivery] = []

    async def reject_m1_twice(delivery: Delivery) -> None:
        deliveries.append(delivery)
        rejected = sum(d.body == b"m1" for d in deliveries) <= 2
        if delivery.body == b"m1" and rejected:
            await consuming.reject(delivery.delivery_tag, requeue=True)
        else:
            await consuming.ack(delivery.delivery_tag)

    await consuming.consume("q", reject_m1_twice)

    async def all_done() -> bool:
        return len(deliveries) == 6

    await backend.until(all_done, "six deliveries")
    assert seen(deliveries) == quorum_or(backend, kind, AFTER_REJECTS, "quorum-after-rejects")
    assert await ready_again(backend, 0) == []


# m1..m5; basic.get takes m1, m2, m3; m2 is rejected with requeue; one more get; close
# (quorum: versions.py "quorum-got-after-reject", "quorum-after-reject-and-close")
GOT_AFTER_REJECT: Seen = [("m2", True, ABSENT)]  # back in its place, at the head
AFTER_REJECT_AND_CLOSE: Seen = [
    ("m1", True, ABSENT),
    ("m2", True, ABSENT),
    ("m3", True, ABSENT),
    ("m4", False, ABSENT),
    ("m5", False, ABSENT),
]


@pytest.mark.parametrize("kind", ["classic", "quorum"])
async def test_requeued_by_reject_and_by_closing_together(backend: Backend, kind: str) -> None:
    channel = await backend.channel()
    await channel.queue_declare("q", arguments=QUEUE_ARGUMENTS[kind])
    for body in ("m1", "m2", "m3", "m4", "m5"):
        await channel.publish(body.encode(), routing_key="q")
    getting = await backend.channel(confirms=False)
    got = [await getting.get("q") for _ in range(3)]
    assert got[1] is not None
    await getting.reject(got[1].delivery_tag, requeue=True)
    assert seen([await getting.get("q")]) == quorum_or(
        backend, kind, GOT_AFTER_REJECT, "quorum-got-after-reject"
    )
    await getting.close()
    assert await ready_again(backend, 5) == quorum_or(
        backend, kind, AFTER_REJECT_AND_CLOSE, "quorum-after-reject-and-close"
    )


# m1..m5; basic.get takes m1, m2, m3; one basic.nack(multiple, requeue) gives all three back
# (quorum: versions.py "quorum-after-nack-multiple")
AFTER_NACK_MULTIPLE: Seen = [
    ("m1", True, ABSENT),
    ("m2", True, ABSENT),
    ("m3", True, ABSENT),
    ("m4", False, ABSENT),
    ("m5", False, ABSENT),
]


@pytest.mark.parametrize("kind", ["classic", "quorum"])
async def test_nack_multiple_with_requeue(backend: Backend, kind: str) -> None:
    channel = await backend.channel()
    await channel.queue_declare("q", arguments=QUEUE_ARGUMENTS[kind])
    for body in ("m1", "m2", "m3", "m4", "m5"):
        await channel.publish(body.encode(), routing_key="q")
    getting = await backend.channel(confirms=False)
    got = [await getting.get("q") for _ in range(3)]
    assert got[2] is not None
    await getting.nack(got[2].delivery_tag, multiple=True, requeue=True)
    assert await ready_again(backend, 5) == quorum_or(
        backend, kind, AFTER_NACK_MULTIPLE, "quorum-after-nack-multiple"
    )


# m1..m4; basic.get takes m1, m2; m2 is rejected with requeue, then m1: a classic queue puts
# each back in its place; a quorum queue does not (versions.py
# "quorum-after-rejects-out-of-order")
AFTER_REJECTS_OUT_OF_ORDER: Seen = [
    ("m1", True, ABSENT),
    ("m2", True, ABSENT),
    ("m3", False, ABSENT),
    ("m4", False, ABSENT),
]


@pytest.mark.parametrize("kind", ["classic", "quorum"])
async def test_rejected_out_of_order(backend: Backend, kind: str) -> None:
    await four_messages(backend, kind)
    getting = await backend.channel(confirms=False)
    got = [await getting.get("q") for _ in range(2)]
    assert got[0] is not None
    assert got[1] is not None
    await getting.reject(got[1].delivery_tag, requeue=True)
    await getting.reject(got[0].delivery_tag, requeue=True)
    assert await ready_again(backend, 4) == quorum_or(
        backend, kind, AFTER_REJECTS_OUT_OF_ORDER, "quorum-after-rejects-out-of-order"
    )


# -- one basic.nack over several consumers and basic.gets -------------------------------------

# fmt: off
ORDER_OF_40_RETURNS_ON_3_10 = (
    16, 18, 5, 19, 27, 35, 10, 24, 36, 4, 21, 22, 17, 3, 8, 1, 7, 2, 14, 15,
    20, 13, 38, 0, 6, 28, 25, 34, 32, 9, 37, 11, 31, 26, 39, 30, 29, 23, 12, 33,
)
# fmt: on
"""The order in which RabbitMQ 3.10.8 takes back the 40 messages z0..z39 of one consumer, nacked
together into a quorum queue with a delivery limit (measured; the order of an Erlang map of the
consumer's message ids 0..39, emulator/erlang_maps.py)."""


async def holding_all(backend: Backend, channel: Channel, tag: str, bodies: list[str]) -> None:
    """A consumer tagged ``tag`` on ``channel`` takes ``bodies`` published to ``q`` and keeps
    them; then it is cancelled (what it holds stays unacked)."""
    recorder = Recorder(channel, "hold")
    await channel.consume("q", recorder, consumer_tag=tag)
    publishing = await backend.channel()
    for body in bodies:
        await publishing.publish(body.encode(), routing_key="q")

    async def all_held() -> bool:
        return len(recorder.deliveries) == len(bodies)

    await backend.until(all_held, f"{tag} holds {len(bodies)}")
    await channel.cancel(tag)


async def got_by_basic_get(backend: Backend, channel: Channel, body: str) -> None:
    await (await backend.channel()).publish(body.encode(), routing_key="q")
    delivery = await channel.get("q")
    assert delivery is not None
    assert delivery.body == body.encode()


@pytest.mark.parametrize("held", [3, 40])
@pytest.mark.parametrize("limit", [None, 5])
async def test_one_nack_returns_gets_then_each_consumer_by_tag(
    backend: Backend, limit: int | None, held: int
) -> None:
    """One channel: consumer "zz" takes z0..z(held-1), basic.get g1, consumer "aa" a0 a1,
    basic.get g2; "rest" waits in the quorum queue; then one basic.nack(0, multiple, requeue).
    The channel settles per consumer tag, a basic.get being tagged with its delivery tag: g1,
    g2, then "aa"'s, then "zz"'s, on 3.10 and 4.0. RabbitMQ 3.10 puts them behind "rest" when
    the queue has no delivery limit, and takes back more than 32 messages of one consumer in its
    own order when it has one (ORDER_OF_40_RETURNS_ON_3_10)."""
    channel = await backend.channel()
    arguments: dict[str, FieldValue] = {"x-queue-type": "quorum"}
    if limit is not None:
        arguments["x-delivery-limit"] = limit
    await channel.queue_declare("q", durable=True, arguments=arguments)
    taking = await backend.channel(confirms=False)
    await holding_all(backend, taking, "zz", [f"z{n}" for n in range(held)])
    await got_by_basic_get(backend, taking, "g1")
    await holding_all(backend, taking, "aa", ["a0", "a1"])
    await got_by_basic_get(backend, taking, "g2")
    await channel.publish(b"rest", routing_key="q")
    await taking.nack(0, multiple=True, requeue=True)
    in_map_order = backend.version == "3.10" and limit is not None and held == 40
    zz: Sequence[int] = ORDER_OF_40_RETURNS_ON_3_10 if in_map_order else range(held)
    returned = ["g1", "g2", "a0", "a1", *(f"z{n}" for n in zz)]
    behind_rest = backend.version == "3.10" and limit is None
    expected_order = ["rest", *returned] if behind_rest else [*returned, "rest"]
    assert [d.body.decode() for d in await drained_when(backend, held + 5)] == expected_order


@pytest.mark.parametrize("kind", ["classic", "quorum"])
async def test_one_nack_dead_letters_gets_then_each_consumer_by_tag(
    backend: Backend, kind: str
) -> None:
    """The same without requeue, dead-lettering to "dead": within the queue, g1, g2, then
    consumer "aa"'s, then "zz"'s, each consumer's in delivery order (3.10 and 4.0)."""
    channel = await backend.channel()
    await channel.queue_declare("dead", durable=True)
    await channel.queue_declare(
        "q",
        durable=True,
        arguments={
            **QUEUE_ARGUMENTS[kind],
            "x-dead-letter-exchange": "",
            "x-dead-letter-routing-key": "dead",
        },
    )
    taking = await backend.channel(confirms=False)
    await holding_all(backend, taking, "zz", [f"z{n}" for n in range(40)])
    await got_by_basic_get(backend, taking, "g1")
    await holding_all(backend, taking, "aa", ["a0", "a1"])
    await got_by_basic_get(backend, taking, "g2")
    await taking.nack(0, multiple=True, requeue=False)
    dead = await drained_when(backend, 44, queue="dead")
    assert [d.body.decode() for d in dead] == [
        "g1",
        "g2",
        "a0",
        "a1",
        *(f"z{n}" for n in range(40)),
    ]


@pytest.mark.parametrize(("first", "second"), [("zz", "aa"), ("aa", "zz")])
async def test_a_closing_channel_returns_gets_and_consumers_in_the_servers_order(
    backend: Backend, first: str, second: str
) -> None:
    """A channel: consumer ``first`` takes two messages, basic.get g1, consumer ``second``
    two, basic.get g2; the channel closes. RabbitMQ 3.10 gives back g1, g2, then each
    consumer's by consumer tag ("aa" before "zz", whichever came first); 4.0 the consumers'
    in delivery order, then g1, g2."""
    channel = await backend.channel()
    await channel.queue_declare(
        "q", durable=True, arguments={"x-queue-type": "quorum", "x-delivery-limit": 5}
    )
    taking = await backend.channel(confirms=False)
    await holding_all(backend, taking, first, [f"{first}0", f"{first}1"])
    await got_by_basic_get(backend, taking, "g1")
    await holding_all(backend, taking, second, [f"{second}0", f"{second}1"])
    await got_by_basic_get(backend, taking, "g2")
    await taking.close()
    held = {tag: [f"{tag}0", f"{tag}1"] for tag in (first, second)}
    if backend.version == "3.10":
        expected_order = ["g1", "g2", *held["aa"], *held["zz"]]
    else:
        expected_order = [*held[first], *held[second], "g1", "g2"]
    assert [d.body.decode() for d in await drained_when(backend, 6)] == expected_order


@pytest.mark.parametrize(("first", "second"), [("zz", "aa"), ("aa", "zz")])
async def test_a_closing_channel_returns_two_live_consumers_in_the_servers_order(
    backend: Backend, first: str, second: str
) -> None:
    """A channel: consumers ``first`` then ``second`` of a quorum queue, prefetch 1, take m1
    and m2; ``first`` acks m1 and takes m3 (a later delivery tag than m2); the channel
    closes. RabbitMQ 3.10 gives back each consumer's by consumer tag ("aa" before "zz");
    4.0 and 4.3 consumer by consumer in the order they were created, not in delivery order
    (seed 11 of the randomized test, widened to two consumers of one channel)."""
    channel = await backend.channel()
    await channel.queue_declare("q", durable=True, arguments={"x-queue-type": "quorum"})
    taking = await backend.channel(confirms=False)
    await taking.qos(1)
    recorders = {tag: Recorder(taking, "hold") for tag in (first, second)}
    for tag in (first, second):
        await taking.consume("q", recorders[tag], consumer_tag=tag)
    for body in ("m1", "m2", "m3"):
        await channel.publish(body.encode(), routing_key="q")

    def held(*counts: int) -> bool:
        return [len(recorders[tag].deliveries) for tag in (first, second)] == list(counts)

    await backend.until(lambda: held(1, 1), "m1 and m2 held")
    assert [recorders[tag].deliveries[0].body for tag in (first, second)] == [b"m1", b"m2"]
    await taking.ack(recorders[first].deliveries[0].delivery_tag)
    await backend.until(lambda: held(2, 1), "m3 held by the first consumer")
    await taking.close()
    holds = {first: "m3", second: "m2"}
    order = ["aa", "zz"] if backend.version == "3.10" else [first, second]
    assert [d.body.decode() for d in await drained_when(backend, 2)] == [
        holds[tag] for tag in order
    ]


async def drained_when(backend: Backend, ready: int, queue: str = "q") -> list[Delivery]:
    """Every message of ``queue``, head first, once ``ready`` are there."""
    channel = await backend.channel()

    async def there() -> bool:
        return await depth(channel, queue) == ready

    await backend.until(there, f"{ready} ready in {queue!r}")
    return await drain(channel, queue)
