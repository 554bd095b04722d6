"""Messages expire from the head only: a short TTL behind a long one waits for it. A RabbitMQ
4.3 quorum queue has several heads (what was given back, and each priority's other messages);
a quorum queue's get-ok counts what expired behind the message it took."""

from __future__ import annotations

import time

import pytest

from rabbitctl_retry.transport.base import Channel, Properties
from tests.backends import Backend
from tests.contract.support import bodies, death, drain, first_death, settle, view
from tests.contract.versions import expected, last_death
from tests.observe import Recorder, depth


async def head_of_line(backend: Backend, long_ms: int, short_ms: int) -> None:
    """A (``long_ms``) then B (``short_ms``) in one wait queue dead-lettering to 'work'."""
    channel = await backend.channel()
    await channel.queue_declare("work")
    await channel.queue_declare(
        "wait", arguments={"x-dead-letter-exchange": "", "x-dead-letter-routing-key": "work"}
    )
    published_at = backend.clock.now()
    for body, ttl in (("A", long_ms), ("B", short_ms)):
        await channel.publish(
            body.encode(), routing_key="wait", properties=Properties(expiration=str(ttl))
        )
    # long after B's TTL, before A's: B waits behind A, nothing has reached 'work'
    halfway_s = long_ms / 2000
    await backend.elapse(halfway_s)
    depths = (await depth(channel, "work"), await depth(channel, "wait"))
    if (backend.clock.now() - published_at).total_seconds() < long_ms / 1000 - 0.25:
        # only a claim while A's TTL has surely not run out: a busy machine may take longer
        assert depths == (0, 2)
    await backend.elapse(long_ms / 1000 - halfway_s)

    async def both_arrived() -> bool:
        return await depth(channel, "work") == 2

    await backend.until(both_arrived, "A and B in 'work'")
    expired = {
        **first_death("expired", "wait", ""),
        **last_death(backend.version, "expired", "wait", ""),
    }
    assert [view(d) for d in await drain(channel, "work")] == [
        {
            "body": body,
            "exchange": "",
            "routing_key": "work",
            "redelivered": False,
            "headers": {
                "x-death": [
                    death(
                        "expired",
                        "wait",
                        exchange="",
                        routing_keys=["wait"],
                        original_expiration=str(ttl),
                    )
                ],
                **expired,
            },
            "expiration": None,
        }
        for body, ttl in (("A", long_ms), ("B", short_ms))
    ]


async def test_head_of_line_expiry(backend: Backend) -> None:
    await head_of_line(backend, long_ms=2000, short_ms=200)


@pytest.mark.parametrize(
    "backend",
    [pytest.param(("emulator", v), id=f"emulator-{v}") for v in ("3.10", "4.0")],
    indirect=True,
)
async def test_head_of_line_expiry_at_minutes_takes_no_real_time(backend: Backend) -> None:
    started = time.monotonic()
    await head_of_line(backend, long_ms=60_000, short_ms=1_000)
    assert time.monotonic() - started < 5.0


async def publish_expiring(channel: Channel, queue: str, *messages: tuple[str, str | None]) -> None:
    """Publish each (body, expiration) to ``queue`` (confirmed)."""
    for body, expiration in messages:
        await channel.publish(
            body.encode(), routing_key=queue, properties=Properties(expiration=expiration)
        )


@pytest.mark.parametrize("no_ack", [False, True], ids=["ack", "no_ack"])
@pytest.mark.parametrize("kind", ["classic", "quorum"])
async def test_a_get_ok_counts_what_expired_behind_the_head(
    backend: Backend, kind: str, no_ack: bool
) -> None:
    """m1, m2 expiring after 100 ms, m3; once m2's time is up, basic.get takes m1. A classic
    queue drops m2 before it counts (1 left). A quorum queue counts m2 when the get waits for
    an ack (2 left), and drops it before it counts when it does not (no_ack settles the
    message at once, and the queue runs again before it answers); either way m2 is gone
    afterwards, dead-lettered as expired."""
    channel = await backend.channel()
    await channel.queue_declare("dead", durable=True)
    await channel.queue_declare(
        "q",
        durable=True,
        arguments={
            "x-queue-type": kind,
            "x-dead-letter-exchange": "",
            "x-dead-letter-routing-key": "dead",
        },
    )
    await publish_expiring(channel, "q", ("m1", None), ("m2", "100"), ("m3", None))
    await backend.elapse(0.3)
    taking = await backend.channel(confirms=False)
    taken = await taking.get("q", no_ack=no_ack)
    assert taken is not None
    counted = 2 if kind == "quorum" and not no_ack else 1
    assert (taken.body, taken.message_count) == (b"m1", counted)
    await settle(backend, channel, "dead", 1)
    assert await depth(channel, "q") == 1
    assert await bodies(channel, "dead") == ["m2"]
    assert await bodies(channel, "q") == ["m3"]


@pytest.mark.parametrize("returned_by", ["a closing channel", "basic.reject"])
async def test_a_quorum_queue_expires_behind_what_was_given_back(
    backend: Backend, returned_by: str
) -> None:
    """Quorum q: a consumer (prefetch 1) holds m1; m2 expiring after 200 ms waits; m1 comes
    back (its channel closes, or a basic.reject with requeue) and waits ahead of m2. RabbitMQ
    4.3 expires m2 on time all the same (what was given back and the other messages each
    expire at their own head); 3.10 and 4.0 expire only what they would serve next, so m2
    waits behind m1 until m1 is taken (seeds 118 and 174 of the randomized test on 4.3.6).
    3.10 puts a rejected message at the back, behind m2, so it expires m2 there."""
    channel = await backend.channel()
    await channel.queue_declare("dead", durable=True)
    await channel.queue_declare(
        "q",
        durable=True,
        arguments={
            "x-queue-type": "quorum",
            "x-dead-letter-exchange": "",
            "x-dead-letter-routing-key": "dead",
        },
    )
    connection = await backend.connect()
    taking = await connection.channel(confirms=False)
    await taking.qos(1)
    recorder = Recorder(taking, "hold")
    tag = await taking.consume("q", recorder)
    await publish_expiring(channel, "q", ("m1", None))
    await backend.until(lambda: len(recorder.deliveries) == 1, "m1 delivered")
    await publish_expiring(channel, "q", ("m2", "200"))
    await settle(backend, channel, "q", 1)
    if returned_by == "a closing channel":
        await connection.close()
    else:
        await taking.cancel(tag)
        await taking.reject(recorder.deliveries[0].delivery_tag, requeue=True)
    await settle(backend, channel, "q", 2)
    await backend.elapse(0.4)
    behind = returned_by == "a closing channel" or backend.version != "3.10"
    expires_behind = expected(backend.version, "quorum-expiry-heads") == "each"
    if behind and not expires_behind:
        assert await depth(channel, "q") == 2  # m2 waits, expired, behind m1
        assert await depth(channel, "dead") == 0
    else:
        await settle(backend, channel, "dead", 1)
        assert await depth(channel, "q") == 1
    assert await bodies(channel, "q") == ["m1"]
    await settle(backend, channel, "dead", 1)
    assert await bodies(channel, "dead") == ["m2"]
    if not connection.is_closed:
        await connection.close()


async def test_a_quorum_queue_expires_behind_a_higher_priority(backend: Backend) -> None:
    """Quorum q: p9 (priority 9), then n (no priority: 4 on 4.3) expiring after 200 ms. A 4.3
    queue keeps each priority's messages apart and expires n on time at the head of its own;
    4.0 (two priorities, the high one served first) and 3.10 (none) expire only what they
    would serve next, p9, so n waits until p9 is taken."""
    channel = await backend.channel()
    await channel.queue_declare("dead", durable=True)
    await channel.queue_declare(
        "q",
        durable=True,
        arguments={
            "x-queue-type": "quorum",
            "x-dead-letter-exchange": "",
            "x-dead-letter-routing-key": "dead",
        },
    )
    await channel.publish(b"p9", routing_key="q", properties=Properties(priority=9))
    await publish_expiring(channel, "q", ("n", "200"))
    await settle(backend, channel, "q", 2)
    await backend.elapse(0.4)
    if expected(backend.version, "quorum-expiry-heads") == "each":
        await settle(backend, channel, "dead", 1)
        assert await depth(channel, "q") == 1
    else:
        assert await depth(channel, "q") == 2  # n waits, expired, behind p9
        assert await depth(channel, "dead") == 0
    assert await bodies(channel, "q") == ["p9"]
    await settle(backend, channel, "dead", 1)
    assert await bodies(channel, "dead") == ["n"]
