"""A delivery held past its queue's consumer timeout, as each server handles it (measured on
3.10.8, 4.0.5 and 4.3.6: ``scripts/measure_consumer_timeout.py``; emulator/consumer_timeout.py;
docs/reference/testing.md, "What the emulator models").

* 3.10 ignores ``x-consumer-timeout``: only the node's ``consumer_timeout`` (30 minutes) applies.
* 4.0 closes the channel (406 ``delivery acknowledgement on channel 1 timed out. Timeout value
  used: 2000 ms. ...``), checked on a tick once a minute, on the channel's oldest delivery
  only: everything the channel held comes back as from any closing channel (counted by a
  quorum queue, dead-lettered past its limit).
* 4.0 and 4.3 take the smaller of the argument and a ``consumer-timeout`` policy.
* 4.3's quorum queue gives the delivery back uncounted (``x-acquired-count`` only), sends its
  consumer ``basic.cancel`` and leaves the channel open; a ``basic.get``'s comes back the same
  way and the channel closes (``Timeout value used: -1 ms``). A 4.3 classic queue refuses the
  argument and times out nothing.

The emulator acts at the timeout exactly (its clock is moved past it); on a server the test
waits for the event (up to :data:`EVENT_DEADLINE_S`: 4.0 notices on its minute tick). What
cannot be waited for on a server (nothing happening, the node's 30 minutes) runs on the
emulator only.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from rabbitctl_retry.fields import FieldValue
from rabbitctl_retry.server import Policy
from rabbitctl_retry.transport.base import Channel, Delivery
from tests.backends import Backend
from tests.contract.support import drain
from tests.contract.test_policies import only, put_policies

TIMEOUT_MS = 2000
GAP_S = 1.0
"""The second message is delivered this long after the first."""
EVENT_DEADLINE_S = 120.0
"""How long a server may take to act (4.0 checks its channels once a minute)."""
NODE_TIMEOUT_S = 1800.0
"""The node's ``consumer_timeout`` on every server (read: ``{ok,1800000}``)."""

CLOSED = (
    "PRECONDITION_FAILED - delivery acknowledgement on channel 1 timed out. Timeout value "
    "used: {ms} ms. This timeout value can be configured, see consumers doc guide to learn "
    "more (406)"
)

# what each line does with a delivery held past x-consumer-timeout, by queue type
OUTCOME: dict[str, dict[str, str]] = {
    "3.10": {"classic": "ignored", "quorum": "ignored"},
    "4.0": {"classic": "close", "quorum": "close"},
    "4.3": {"classic": "refused", "quorum": "cancel"},
}


def arguments(version: str, kind: str, **more: FieldValue) -> dict[str, FieldValue]:
    """A queue of ``kind`` timing out after :data:`TIMEOUT_MS`, where the line takes it."""
    timed: dict[str, FieldValue] = {"x-queue-type": kind, **more}
    if OUTCOME[version][kind] != "refused":
        timed["x-consumer-timeout"] = TIMEOUT_MS
    return timed


def outcome(backend: Backend, kind: str) -> str:
    """What ``backend``'s line does; skips on a server what only the emulator can show."""
    happens = OUTCOME[backend.version][kind]
    if backend.name != "emulator" and happens in ("ignored", "refused"):
        pytest.skip(
            f"RabbitMQ {backend.version}, {kind}: nothing happens (measured: 75 s or more); "
            "a test cannot wait for nothing"
        )
    return happens


pytestmark = pytest.mark.timeout(EVENT_DEADLINE_S + 60)
"""Past :data:`EVENT_DEADLINE_S`: a server that does not act fails with what it showed."""


async def until_timed_out(
    backend: Backend,
    check: Callable[[], Awaitable[bool]],
    what: str,
    shown: Callable[[], Awaitable[str]] | None = None,
) -> None:
    """The emulator: its clock past both deliveries' timeouts, then ``check``; a server: wait
    for ``check``, up to :data:`EVENT_DEADLINE_S` (then fail with what ``shown`` says)."""
    if backend.name == "emulator":
        await backend.elapse(TIMEOUT_MS / 1000 + GAP_S)
        await backend.until(check, what)
        return
    loop = asyncio.get_running_loop()
    deadline = loop.time() + EVENT_DEADLINE_S
    while not await check():
        if loop.time() > deadline:
            state = f": {await shown()}" if shown is not None else ""
            raise AssertionError(f"RabbitMQ did not get to {what} in {EVENT_DEADLINE_S:g} s{state}")
        await asyncio.sleep(0.05)


NUDGE = b"nudge"


async def nudge_when_due(backend: Backend, admin: Channel, queue: str, held_s: float) -> None:
    """Once a delivery the test received at ``held_s`` (monotonic) is past its timeout,
    publish :data:`NUDGE` to quorum queue ``queue``. RabbitMQ 4.3.6 times a delivery out on
    a timer of its queue that, while other queues of the node time out too, sometimes never
    fires for a consumer's second delivery; the queue's next command (this publish) times it
    out at once (measured: 20 of 36 runs, three at a time; docs/measurements.md, "Consumer
    timeouts"). The emulator's clock is past both timeouts already."""
    if backend.name != "emulator":
        due_s = held_s + TIMEOUT_MS / 1000
        await asyncio.sleep(max(0.0, due_s - asyncio.get_running_loop().time()))
    await admin.publish(NUDGE, routing_key=queue)


def counts(delivery: Delivery) -> dict[str, FieldValue]:
    headers = delivery.properties.headers or {}
    return {k: v for k, v in headers.items() if k in ("x-delivery-count", "x-acquired-count")}


class Holder:
    """A connection of the test's own whose first channel (number 1, prefetch 10) consumes
    ``timed`` (consumer A: a1, then a2 after :data:`GAP_S`) and ``untimed`` (consumer B:
    b1, a queue without a timeout of its own)."""

    def __init__(self, channel: Channel) -> None:
        self.channel = channel
        self.held: dict[str, list[Delivery]] = {"A": [], "B": []}
        self.received_s: dict[str, list[float]] = {"A": [], "B": []}
        """When each delivery arrived (the event loop's clock)."""
        self.cancelled: list[str] = []

    @classmethod
    async def make(cls, backend: Backend, admin: Channel, kind: str) -> Holder:
        await admin.queue_declare("timed", durable=True, arguments=arguments(backend.version, kind))
        await admin.queue_declare("untimed", durable=True, arguments={"x-queue-type": kind})
        holder = cls(await (await backend.connect()).channel())
        await holder.channel.qos(10)
        for tag, queue in (("A", "timed"), ("B", "untimed")):

            async def hold(delivery: Delivery, tag: str = tag) -> None:
                holder.held[tag].append(delivery)
                holder.received_s[tag].append(asyncio.get_running_loop().time())

            await holder.channel.consume(
                queue, hold, consumer_tag=tag, on_cancel=holder.cancelled.append
            )
        await admin.publish(b"a1", routing_key="timed")
        await admin.publish(b"b1", routing_key="untimed")
        await backend.until(lambda: len(holder.held["A"]) == 1, "a1 held")
        await backend.elapse(GAP_S)
        await admin.publish(b"a2", routing_key="timed")
        await backend.until(lambda: len(holder.held["A"]) == 2, "a2 held")
        await backend.until(lambda: len(holder.held["B"]) == 1, "b1 held")
        return holder


async def ready(channel: Channel, queue: str) -> int:
    return (await channel.queue_declare(queue, passive=True)).message_count


@pytest.mark.parametrize("kind", ["classic", "quorum"])
async def test_a_consumer_holding_past_the_timeout(backend: Backend, kind: str) -> None:
    happens = outcome(backend, kind)
    admin = await backend.channel()
    holder = await Holder.make(backend, admin, kind)
    channel = holder.channel
    if happens in ("ignored", "refused"):  # the emulator only
        await backend.elapse(TIMEOUT_MS / 1000 + GAP_S)
        assert not channel.is_closed
        assert holder.cancelled == []
        assert (await ready(admin, "timed"), await ready(admin, "untimed")) == (0, 0)
        return
    if happens == "close":

        async def closed() -> bool:
            return channel.is_closed and await ready(admin, "untimed") == 1

        await until_timed_out(backend, closed, "the channel closed")
        assert channel.close_reason == CLOSED.format(ms=TIMEOUT_MS)
        assert holder.cancelled == []
        back = {"timed": await drain(admin, "timed"), "untimed": await drain(admin, "untimed")}
        shown = {q: [(d.body, d.redelivered, counts(d)) for d in ds] for q, ds in back.items()}
        count = {"x-delivery-count": 1} if kind == "quorum" else {}
        assert shown == {
            "timed": [(b"a1", True, count), (b"a2", True, count)],
            "untimed": [(b"b1", True, count)],
        }
        return
    # 4.3, quorum: back uncounted one by one, A cancelled, the channel and B untouched

    async def a1_back() -> bool:
        return await ready(admin, "timed") >= 1 and holder.cancelled == ["A"]

    await until_timed_out(backend, a1_back, "a1 back")
    await nudge_when_due(backend, admin, "timed", holder.received_s["A"][1])

    async def both_back() -> bool:
        return await ready(admin, "timed") == 3  # a1, a2 and the nudge

    async def shown() -> str:
        ready_now = {q: await ready(admin, q) for q in ("timed", "untimed")}
        held = {tag: len(deliveries) for tag, deliveries in holder.held.items()}
        return (
            f"ready {ready_now}, held {held}, cancelled {holder.cancelled}, "
            f"channel closed {channel.is_closed} ({channel.close_reason})"
        )

    await until_timed_out(backend, both_back, "a1 and a2 back", shown)
    assert holder.cancelled == ["A"]
    assert not channel.is_closed
    info = await admin.queue_declare("timed", passive=True)
    assert info.consumer_count == 1  # the queue keeps the consumer it cancelled
    assert await ready(admin, "untimed") == 0  # b1 still with B
    shown = [(d.body, d.redelivered, counts(d)) for d in await drain(admin, "timed")]
    assert shown == [
        (b"a1", True, {"x-acquired-count": 1}),
        (b"a2", True, {"x-acquired-count": 1}),
        (NUDGE, False, {}),
    ]


@pytest.mark.parametrize("kind", ["classic", "quorum"])
async def test_a_basic_get_held_past_the_timeout(backend: Backend, kind: str) -> None:
    happens = outcome(backend, kind)
    admin = await backend.channel()
    await admin.queue_declare("timed", durable=True, arguments=arguments(backend.version, kind))
    await admin.publish(b"g1", routing_key="timed")
    channel = await (await backend.connect()).channel()
    got = await channel.get("timed")
    assert got is not None

    async def closed() -> bool:
        return channel.is_closed and await ready(admin, "timed") == 1

    if happens in ("ignored", "refused"):  # the emulator only
        await backend.elapse(TIMEOUT_MS / 1000 + GAP_S)
        assert not channel.is_closed
        assert await ready(admin, "timed") == 0
        return
    await until_timed_out(backend, closed, "the channel closed")
    (back,) = await drain(admin, "timed")
    if happens == "close":
        assert channel.close_reason == CLOSED.format(ms=TIMEOUT_MS)
        count = {"x-delivery-count": 1} if kind == "quorum" else {}
    else:  # 4.3: the queue took it back uncounted, then the channel closed
        assert channel.close_reason == CLOSED.format(ms=-1)
        count = {"x-acquired-count": 1}
    assert (back.body, back.redelivered, counts(back)) == (b"g1", True, count)


async def test_a_delivery_limit_and_the_timeout(backend: Backend) -> None:
    """A quorum queue with ``x-delivery-limit = 0``: 4.0's closing channel counts the return
    and dead-letters the message; 4.3's timeout does not count, so it comes back."""
    happens = outcome(backend, "quorum")
    admin = await backend.channel()
    await admin.queue_declare("sink", durable=True)
    limited = arguments(
        backend.version,
        "quorum",
        **{
            "x-delivery-limit": 0,
            "x-dead-letter-exchange": "",
            "x-dead-letter-routing-key": "sink",
        },
    )
    await admin.queue_declare("timed", durable=True, arguments=limited)
    channel = await (await backend.connect()).channel()
    held: list[Delivery] = []
    cancelled: list[str] = []

    async def hold(delivery: Delivery) -> None:
        held.append(delivery)

    await channel.consume("timed", hold, consumer_tag="C", on_cancel=cancelled.append)
    await admin.publish(b"l1", routing_key="timed")
    await backend.until(lambda: len(held) == 1, "l1 held")
    if happens == "ignored":  # the emulator only
        await backend.elapse(TIMEOUT_MS / 1000 + GAP_S)
        assert not channel.is_closed
        assert (await ready(admin, "timed"), await ready(admin, "sink")) == (0, 0)
        return

    async def somewhere() -> bool:
        return await ready(admin, "timed") + await ready(admin, "sink") == 1

    await until_timed_out(backend, somewhere, "l1 back or dead-lettered")
    if happens == "close":
        (letter,) = await drain(admin, "sink")
        deaths = (letter.properties.headers or {})["x-death"]
        assert isinstance(deaths, list)
        assert isinstance(deaths[0], dict)
        assert deaths[0]["reason"] == "delivery_limit"
        assert channel.is_closed
    else:
        (back,) = await drain(admin, "timed")
        assert (back.body, back.redelivered, counts(back)) == (b"l1", True, {"x-acquired-count": 1})
        assert cancelled == ["C"]
        assert not channel.is_closed


@pytest.mark.parametrize("kind", ["classic", "quorum"])
async def test_without_the_argument_the_nodes_timeout_applies(backend: Backend, kind: str) -> None:
    """The node's ``consumer_timeout`` (30 minutes on every server: read, not waited for):
    the emulator only."""
    if backend.name != "emulator":
        pytest.skip("the node's 30 minutes: read from the node, not waited for")
    admin = await backend.channel()
    await admin.queue_declare("q", durable=True, arguments={"x-queue-type": kind})
    channel = await (await backend.connect()).channel()
    cancelled: list[str] = []

    async def hold(delivery: Delivery) -> None:
        pass

    await channel.consume("q", hold, consumer_tag="A", on_cancel=cancelled.append)
    await admin.publish(b"m1", routing_key="q")
    await backend.elapse(NODE_TIMEOUT_S - 1)
    assert (channel.is_closed, cancelled, await ready(admin, "q")) == (False, [], 0)
    await backend.elapse(1)
    happens = {"4.3": {"classic": "nothing", "quorum": "cancel"}}.get(backend.version, {})
    match happens.get(kind, "close"):
        case "close":
            assert channel.close_reason == CLOSED.format(ms=int(NODE_TIMEOUT_S * 1000))
            assert await ready(admin, "q") == 1
        case "cancel":
            assert (channel.is_closed, cancelled, await ready(admin, "q")) == (False, ["A"], 1)
        case _:
            assert (channel.is_closed, cancelled, await ready(admin, "q")) == (False, [], 0)


@pytest.mark.parametrize("first", ["timed", "reference"], ids=["timed-first", "reference-first"])
@pytest.mark.parametrize(
    ("argument_ms", "policy_ms"), [(10_000, 2000), (2000, 10_000)], ids=["policy", "argument"]
)
async def test_the_smaller_of_the_argument_and_a_policy_applies(
    backend: Backend, argument_ms: int, policy_ms: int, first: str
) -> None:
    """A quorum queue ``timed`` (its argument and a ``consumer-timeout`` policy, the smaller
    2000 ms) and ``reference`` (5000 ms), one delivery of each held on one channel, ``first``
    delivered first. 4.3 cancels ``timed``'s consumer before ``reference``'s. 4.0 checks the
    channel's oldest delivery only: it closes the channel naming that one's timeout (2000
    ms, or 5000 ms when ``reference`` came first). 3.10 refuses the policy key."""
    if backend.version == "3.10":
        pytest.skip("RabbitMQ 3.10 refuses the policy key consumer-timeout")
    admin = await backend.channel()
    timed: dict[str, FieldValue] = {"x-queue-type": "quorum", "x-consumer-timeout": argument_ms}
    policy = Policy.of("timeout", only("timed"), {"consumer-timeout": policy_ms})
    await put_policies(backend, [(policy, False)])
    await admin.queue_declare("timed", durable=True, arguments=timed)
    reference: dict[str, FieldValue] = {"x-queue-type": "quorum", "x-consumer-timeout": 5000}
    await admin.queue_declare("reference", durable=True, arguments=reference)
    channel = await (await backend.connect()).channel()
    held: list[Delivery] = []
    cancelled: list[str] = []

    async def hold(delivery: Delivery) -> None:
        held.append(delivery)

    order = ("timed", "reference") if first == "timed" else ("reference", "timed")
    for count, queue in enumerate(order, start=1):
        await channel.consume(queue, hold, consumer_tag=queue, on_cancel=cancelled.append)
        await admin.publish(queue.encode(), routing_key=queue)
        await backend.until(lambda n=count: len(held) == n, f"{queue} held")
    if backend.name == "emulator":
        await backend.elapse(5.0)  # past reference's timeout too
    if expected_line(backend.version) == "close":

        async def closed() -> bool:
            return channel.is_closed

        await until_timed_out(backend, closed, "the channel closed")
        assert channel.close_reason == CLOSED.format(ms=2000 if first == "timed" else 5000)
        return

    async def both() -> bool:
        return len(cancelled) == 2

    await until_timed_out(backend, both, "both consumers cancelled")
    assert cancelled == ["timed", "reference"]


def expected_line(version: str) -> str:
    """What a quorum queue's consumer timeout does on ``version``."""
    return OUTCOME[version]["quorum"]


async def test_4_3_serves_a_timed_out_consumer_again_once_it_settled(backend: Backend) -> None:
    """RabbitMQ 4.3: a quorum consumer (prefetch 1) times out on o1: o1 comes back ahead of o2,
    uncounted; the channel's ack of o1's old tag is no error, and the queue serves the
    consumer again: o1 (``x-acquired-count`` 1), which times out again, without a second
    ``basic.cancel`` reaching the client."""
    if expected_line(backend.version) != "cancel":
        pytest.skip(f"RabbitMQ {backend.version} closes the channel (or ignores the argument)")
    admin = await backend.channel()
    await admin.queue_declare("timed", durable=True, arguments=arguments(backend.version, "quorum"))
    channel = await (await backend.connect()).channel()
    await channel.qos(1)
    held: list[Delivery] = []
    cancelled: list[str] = []

    async def hold(delivery: Delivery) -> None:
        held.append(delivery)

    await channel.consume("timed", hold, consumer_tag="E", on_cancel=cancelled.append)
    await admin.publish(b"o1", routing_key="timed")
    await admin.publish(b"o2", routing_key="timed")
    await backend.until(lambda: len(held) == 1, "o1 held")

    async def o1_back() -> bool:
        return bool(cancelled) and await ready(admin, "timed") == 2

    await until_timed_out(backend, o1_back, "o1 back, E cancelled")
    await channel.ack(held[0].delivery_tag)
    await backend.until(lambda: len(held) == 2, "o1 delivered again")
    again = held[1]
    assert (again.body, again.redelivered, counts(again)) == (
        b"o1",
        True,
        {"x-acquired-count": 1},
    )
    assert await ready(admin, "timed") == 1  # o2

    async def o1_back_again() -> bool:
        return await ready(admin, "timed") == 2

    await until_timed_out(backend, o1_back_again, "o1 back a second time")
    assert cancelled == ["E"]
    assert not channel.is_closed
    shown = [(d.body, d.redelivered, counts(d)) for d in await drain(admin, "timed")]
    assert shown == [(b"o1", True, {"x-acquired-count": 2}), (b"o2", False, {})]


async def test_before_4_3_the_next_oldest_decides_once_the_oldest_is_settled(
    backend: Backend,
) -> None:
    """4.0: ``slow`` (5000 ms) held first, ``quick`` (2000 ms) after it; ``slow`` acked 3 s in,
    when ``quick`` is overdue already: the channel closes naming 2000 ms (the emulator at
    once, the server on its tick)."""
    if expected_line(backend.version) != "close":
        pytest.skip(f"RabbitMQ {backend.version}: no channel-wide check of the argument")
    admin = await backend.channel()
    for queue, limit_ms in (("slow", 5000), ("quick", 2000)):
        limits: dict[str, FieldValue] = {"x-queue-type": "quorum", "x-consumer-timeout": limit_ms}
        await admin.queue_declare(queue, durable=True, arguments=limits)
    channel = await (await backend.connect()).channel()
    held: list[Delivery] = []

    async def hold(delivery: Delivery) -> None:
        held.append(delivery)

    for count, queue in enumerate(("slow", "quick"), start=1):
        await channel.consume(queue, hold, consumer_tag=queue)
        await admin.publish(queue.encode(), routing_key=queue)
        await backend.until(lambda n=count: len(held) == n, f"{queue} held")
    await backend.elapse(3.0)
    assert not channel.is_closed
    await channel.ack(held[0].delivery_tag)

    async def closed() -> bool:
        return channel.is_closed and await ready(admin, "quick") == 1

    await until_timed_out(backend, closed, "the channel closed")
    assert channel.close_reason == CLOSED.format(ms=2000)
    assert await ready(admin, "slow") == 0
