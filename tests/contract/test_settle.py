"""One basic.ack or basic.nack over deliveries of several consumers of one channel.

Measured on RabbitMQ 3.10.8, 4.0.5 and 4.3.6, classic and quorum queues: the channel settles
what each consumer held as a command of its own, in consumer tag order (compared as bytes;
docs/reference/testing.md), and the queue runs after each: the consumer settled first takes the next
waiting message before the next consumer is settled.
"""

from __future__ import annotations

import pytest

from rabbitctl_retry.transport.base import Properties
from tests.backends import Backend
from tests.contract.support import settle
from tests.observe import Recorder


@pytest.mark.parametrize("method", ["ack", "nack", "nack-requeue"])
@pytest.mark.parametrize("first", ["aa", "zz"], ids=["aa-first", "zz-first"])
@pytest.mark.parametrize("kind", ["classic", "quorum"])
async def test_a_multiple_settle_over_two_consumers_runs_the_queue_after_each(
    backend: Backend, kind: str, first: str, method: str
) -> None:
    """One channel, two consumers of q with prefetch 1, tagged "aa" and "zz" (``first``
    consumes first): m1 and m2 go one to each; m3 and m4 wait. One basic.ack (or basic.nack
    without requeue) with ``multiple`` settles both: "aa" first, which then takes m3, then
    "zz", which takes m4 — whichever consumer came first and took m1. With requeue each
    takes back what it gave back (its message returns to the head: to its place in a classic
    queue, to the front of a 4.x quorum queue), "aa" first; a 3.10 quorum queue puts them
    behind m3 and m4, which "aa" and "zz" take."""
    channel = await backend.channel()
    await channel.queue_declare("q", durable=True, arguments={"x-queue-type": kind})
    taking = await backend.channel(confirms=False)
    await taking.qos(1)
    second = "zz" if first == "aa" else "aa"
    recorders = {tag: Recorder(taking, "hold") for tag in (first, second)}
    for tag in (first, second):
        await taking.consume("q", recorders[tag], consumer_tag=tag)
    for body in ("m1", "m2"):
        await channel.publish(body.encode(), routing_key="q", properties=Properties())

    def holding(*counts: int) -> bool:
        return [len(recorders[tag].deliveries) for tag in ("aa", "zz")] == list(counts)

    await backend.until(lambda: holding(1, 1), "one message held by each consumer")
    assert [recorders[tag].deliveries[0].body for tag in (first, second)] == [b"m1", b"m2"]
    for body in ("m3", "m4"):
        await channel.publish(body.encode(), routing_key="q", properties=Properties())
    await settle(backend, channel, "q", 2)
    if method == "ack":
        await taking.ack(2, multiple=True)
    else:
        await taking.nack(2, multiple=True, requeue=method == "nack-requeue")
    await backend.until(lambda: holding(2, 2), "one more message for each consumer")
    again = {tag: recorders[tag].deliveries[1] for tag in ("aa", "zz")}
    assert again["aa"].delivery_tag < again["zz"].delivery_tag  # "aa" first
    # 3.10 appends a message nacked with requeue to a quorum queue (versions.py
    # "quorum-got-after-reject")
    own_back = method == "nack-requeue" and (kind == "classic" or backend.version != "3.10")
    if own_back:
        assert [again[tag].body for tag in ("aa", "zz")] == [
            recorders[tag].deliveries[0].body for tag in ("aa", "zz")
        ]
    else:
        assert [again[tag].body for tag in ("aa", "zz")] == [b"m3", b"m4"]


@pytest.mark.parametrize("first", ["aa", "zz"], ids=["aa-first", "zz-first"])
@pytest.mark.parametrize("kind", ["classic", "quorum"])
async def test_whose_turn_it_is_after_a_settle(backend: Backend, kind: str, first: str) -> None:
    """As above, with m3 waiting: one multiple ack gives m3 to "aa"; then "aa" nacks it with
    requeue. A classic queue gives it back to "aa": its consumers take turns in the order they
    were last served, one found at its limit set aside until a settle frees it ("zz" was,
    and came back behind "aa"). A quorum queue gives it to "zz": it serves the consumers with
    credit in turn, and "zz" got its credit back before "aa" did (seeds 33, 196 and 209 of
    the randomized test on 4.3.6)."""
    channel = await backend.channel()
    await channel.queue_declare("q", durable=True, arguments={"x-queue-type": kind})
    taking = await backend.channel(confirms=False)
    await taking.qos(1)
    second = "zz" if first == "aa" else "aa"
    recorders = {tag: Recorder(taking, "hold") for tag in (first, second)}
    for tag in (first, second):
        await taking.consume("q", recorders[tag], consumer_tag=tag)
    for body in ("m1", "m2", "m3"):
        await channel.publish(body.encode(), routing_key="q", properties=Properties())

    def holding(*counts: int) -> bool:
        return [len(recorders[tag].deliveries) for tag in ("aa", "zz")] == list(counts)

    await backend.until(lambda: holding(1, 1), "one message held by each consumer")
    await taking.ack(2, multiple=True)
    await backend.until(lambda: holding(2, 1), "m3 for aa")
    assert recorders["aa"].deliveries[1].body == b"m3"
    await taking.nack(recorders["aa"].deliveries[1].delivery_tag, requeue=True)
    taker = "aa" if kind == "classic" else "zz"
    await backend.until(
        lambda: holding(3, 1) if taker == "aa" else holding(2, 2), f"m3 again, for {taker}"
    )
    assert recorders[taker].deliveries[-1].body == b"m3"
