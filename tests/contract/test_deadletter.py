"""Dead-lettering for each reason, with the exact ``x-death`` and ``x-first-death-*`` headers."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest

from rabbitctl_retry.fields import FieldTable, FieldValue
from rabbitctl_retry.transport.base import Properties
from tests.backends import Backend
from tests.contract.support import bodies, death, drain, first_death, view
from tests.contract.versions import carried_count, dead_letter_redelivered, expected, last_death
from tests.observe import depth

DLX_TO_WORK: dict[str, FieldValue] = {
    "x-dead-letter-exchange": "",
    "x-dead-letter-routing-key": "work",
}


async def test_rejected_and_nacked_without_requeue(backend: Backend) -> None:
    channel = await backend.channel()
    await channel.exchange_declare("orders", type="direct")
    await channel.exchange_declare("graveyard", type="fanout")
    await channel.queue_declare("work", arguments={"x-dead-letter-exchange": "graveyard"})
    await channel.queue_bind("work", "orders", "new")
    await channel.queue_declare("dead")
    await channel.queue_bind("dead", "graveyard", "")
    sent = {
        "r1": Properties(
            headers={"h": "v"}, message_id="r1", content_type="text/plain", correlation_id="c1"
        ),
        # an expiration far away: the death is 'rejected', and still says original-expiration
        "r2": Properties(message_id="r2", expiration="60000"),
        "r3": Properties(message_id="r3"),
    }
    for body, properties in sent.items():
        await channel.publish(
            body.encode(), exchange="orders", routing_key="new", properties=properties
        )
    first = await channel.get("work")
    second = await channel.get("work")
    third = await channel.get("work")
    assert first is not None
    assert second is not None
    assert third is not None
    await channel.reject(first.delivery_tag, requeue=False)
    await channel.reject(second.delivery_tag, requeue=False)
    await channel.nack(third.delivery_tag, requeue=False)

    async def all_dead() -> bool:
        return await depth(channel, "dead") == 3

    await backend.until(all_dead, "three messages in 'dead'")
    dead = await drain(channel, "dead")
    # a basic.reject counts on 4.3 (the dead letter comes out redelivered), a basic.nack not
    rejected_redelivered = dead_letter_redelivered(
        backend.version, carried_count(backend.version, rejects=1, quorum=False), quorum=False
    )
    rejected = {
        **first_death("rejected", "work", "orders"),
        **last_death(backend.version, "rejected", "work", "orders"),
    }
    assert [view(d) for d in dead] == [
        {
            "body": "r1",
            "exchange": "graveyard",
            "routing_key": "new",
            "redelivered": rejected_redelivered,
            "headers": {
                "h": "v",
                "x-death": [death("rejected", "work", exchange="orders", routing_keys=["new"])],
                **rejected,
            },
            "expiration": None,
        },
        {
            "body": "r2",
            "exchange": "graveyard",
            "routing_key": "new",
            "redelivered": rejected_redelivered,
            "headers": {
                "x-death": [
                    death(
                        "rejected",
                        "work",
                        exchange="orders",
                        routing_keys=["new"],
                        original_expiration="60000",
                    )
                ],
                **rejected,
            },
            "expiration": None,
        },
        {
            "body": "r3",
            "exchange": "graveyard",
            "routing_key": "new",
            "redelivered": False,
            "headers": {
                "x-death": [death("rejected", "work", exchange="orders", routing_keys=["new"])],
                **rejected,
            },
            "expiration": None,
        },
    ]
    # the other properties travel unchanged
    kept = dead[0].properties
    assert (kept.message_id, kept.content_type, kept.correlation_id, kept.delivery_mode) == (
        "r1",
        "text/plain",
        "c1",
        None,
    )
    assert await depth(channel, "work") == 0


async def test_expired_per_message(backend: Backend) -> None:
    channel = await backend.channel()
    await channel.queue_declare("work")
    await channel.queue_declare("wait", arguments=DLX_TO_WORK)
    published_at = backend.clock.now()
    await channel.publish(
        b"e1", routing_key="wait", properties=Properties(expiration="300", headers={"h": 1})
    )
    await backend.elapse(0.1)
    depths = (await depth(channel, "work"), await depth(channel, "wait"))
    if (backend.clock.now() - published_at).total_seconds() < 0.25:
        # Only a claim while the 300 ms have surely not passed: a busy machine may take
        # longer than that between the publish and the second count.
        assert depths == (0, 1)
    await backend.elapse(0.2)

    async def arrived() -> bool:
        return await depth(channel, "work") == 1

    await backend.until(arrived, "the expired message in 'work'")
    assert [view(d) for d in await drain(channel, "work")] == [
        {
            "body": "e1",
            "exchange": "",
            "routing_key": "work",
            "redelivered": False,
            "headers": {
                "h": 1,
                "x-death": [
                    death(
                        "expired",
                        "wait",
                        exchange="",
                        routing_keys=["wait"],
                        original_expiration="300",
                    )
                ],
                **first_death("expired", "wait", ""),
                **last_death(backend.version, "expired", "wait", ""),
            },
            "expiration": None,
        }
    ]


async def test_expired_by_queue_ttl(backend: Backend) -> None:
    channel = await backend.channel()
    await channel.queue_declare("work")
    await channel.queue_declare("wait", arguments={"x-message-ttl": 300, **DLX_TO_WORK})
    published_at_s = time.monotonic()
    await channel.publish(b"e2", routing_key="wait")
    # the queue's TTL is the shorter one; the message's own still shows as original-expiration
    await channel.publish(b"e3", routing_key="wait", properties=Properties(expiration="100000"))
    await backend.elapse(0.1)
    depths = (await depth(channel, "work"), await depth(channel, "wait"))
    if time.monotonic() - published_at_s < 0.25:  # else a busy machine let the TTL run out
        assert depths == (0, 2)
    await backend.elapse(0.2)

    async def arrived() -> bool:
        return await depth(channel, "work") == 2

    await backend.until(arrived, "both expired messages in 'work'")
    expired = {
        **first_death("expired", "wait", ""),
        **last_death(backend.version, "expired", "wait", ""),
    }
    assert [view(d) for d in await drain(channel, "work")] == [
        {
            "body": "e2",
            "exchange": "",
            "routing_key": "work",
            "redelivered": False,
            "headers": {
                "x-death": [death("expired", "wait", exchange="", routing_keys=["wait"])],
                **expired,
            },
            "expiration": None,
        },
        {
            "body": "e3",
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
                        original_expiration="100000",
                    )
                ],
                **expired,
            },
            "expiration": None,
        },
    ]


async def test_an_automatic_dead_letter_cycle_drops_the_message(backend: Backend) -> None:
    channel = await backend.channel()
    # no dead-letter routing key: the expired message goes back to 'loop' itself, a cycle
    await channel.queue_declare(
        "loop", arguments={"x-message-ttl": 100, "x-dead-letter-exchange": ""}
    )
    await channel.publish(b"c", routing_key="loop")
    await backend.elapse(0.5)

    async def gone() -> bool:
        return await depth(channel, "loop") == 0

    await backend.until(gone, "the cycling message dropped")
    await backend.elapse(0.3)
    assert await depth(channel, "loop") == 0


@pytest.mark.parametrize("kind", ["classic", "quorum"])
async def test_maxlen_drops_the_head(backend: Backend, kind: str) -> None:
    channel = await backend.channel()
    await channel.queue_declare("dead")
    await channel.queue_declare(
        "capped",
        arguments={
            "x-queue-type": kind,
            "x-max-length": 2,
            "x-dead-letter-exchange": "",
            "x-dead-letter-routing-key": "dead",
        },
    )
    for body in ("m1", "m2", "m3", "m4"):
        await channel.publish(body.encode(), routing_key="capped")

    async def two_dead() -> bool:
        return await depth(channel, "dead") == 2

    await backend.until(two_dead, "two messages in 'dead'")
    maxlen = {
        **first_death("maxlen", "capped", ""),
        **last_death(backend.version, "maxlen", "capped", ""),
    }
    assert [view(d) for d in await drain(channel, "dead")] == [
        {
            "body": body,
            "exchange": "",
            "routing_key": "dead",
            "redelivered": False,
            "headers": {
                "x-death": [death("maxlen", "capped", exchange="", routing_keys=["capped"])],
                **maxlen,
            },
            "expiration": None,
        }
        for body in ("m1", "m2")
    ]
    assert await bodies(channel, "capped") == ["m3", "m4"]


async def test_the_same_queue_and_reason_merge_into_one_entry(backend: Backend) -> None:
    """q rejects -> dlq (TTL) -> back to q -> q rejects again -> ... ; a fanout DLX also
    copies every death in q to 'tap', where the headers of each round can be read."""
    channel = await backend.channel()
    await channel.exchange_declare("in", type="direct")
    await channel.exchange_declare("q-dead", type="fanout")
    await channel.queue_declare("q", arguments={"x-dead-letter-exchange": "q-dead"})
    await channel.queue_bind("q", "in", "new")
    await channel.queue_declare(
        "dlq",
        arguments={
            "x-message-ttl": 200,
            "x-dead-letter-exchange": "",
            "x-dead-letter-routing-key": "q",
        },
    )
    await channel.queue_declare("tap")
    await channel.queue_bind("dlq", "q-dead", "")
    await channel.queue_bind("tap", "q-dead", "")
    await channel.publish(b"m", exchange="in", routing_key="new")

    async def reject_from_q() -> dict[str, object]:
        async def back() -> bool:
            return await depth(channel, "q") == 1

        await backend.until(back, "the message in 'q'")
        delivery = await channel.get("q")
        assert delivery is not None
        await channel.reject(delivery.delivery_tag, requeue=False)
        return view(delivery)

    version = backend.version
    first_rejection = first_death("rejected", "q", "in")
    # x-last-death-exchange is the exchange the message died from: 'in' the first time, then ''
    # (dlq dead-letters it to q through the default exchange), not the merged entry's 'in'
    rejected_from_in = {**first_rejection, **last_death(version, "rejected", "q", "in")}
    rejected_from_default = {**first_rejection, **last_death(version, "rejected", "q", "")}
    expired_in_dlq = {**first_rejection, **last_death(version, "expired", "dlq", "q-dead")}
    rejected_once = death("rejected", "q", exchange="in", routing_keys=["new"])
    expired_once = death("expired", "dlq", exchange="q-dead", routing_keys=["new"])
    # round 1: from the publisher
    seen_1 = await reject_from_q()
    assert seen_1["headers"] is None
    await backend.elapse(0.25)
    # round 2: back from dlq, once dead in each queue
    seen_2 = await reject_from_q()
    assert seen_2 == {
        "body": "m",
        "exchange": "",
        "routing_key": "q",
        # rejected once in q (counted on 4.3), then expired in dlq: the count travels
        "redelivered": dead_letter_redelivered(
            version, carried_count(version, rejects=1, quorum=False), quorum=False
        ),
        "headers": {"x-death": [expired_once, rejected_once], **expired_in_dlq},
        "expiration": None,
    }
    await backend.elapse(0.25)
    # round 3: (q, rejected) is one entry with count 2, moved to the front; its exchange and
    # routing keys are still those of the first rejection
    seen_3 = await reject_from_q()
    assert seen_3["headers"] == {
        "x-death": [
            death("expired", "dlq", exchange="q-dead", routing_keys=["new"], count=2),
            death("rejected", "q", exchange="in", routing_keys=["new"], count=2),
        ],
        **expired_in_dlq,
    }

    async def three_copies() -> bool:
        return await depth(channel, "tap") == 3

    await backend.until(three_copies, "three copies in 'tap'")
    tapped = [view(d)["headers"] for d in await drain(channel, "tap")]
    assert tapped == [
        {"x-death": [rejected_once], **rejected_from_in},
        {
            "x-death": [
                death("rejected", "q", exchange="in", routing_keys=["new"], count=2),
                expired_once,
            ],
            **rejected_from_default,
        },
        {
            "x-death": [
                death("rejected", "q", exchange="in", routing_keys=["new"], count=3),
                death("expired", "dlq", exchange="q-dead", routing_keys=["new"], count=2),
            ],
            **rejected_from_default,
        },
    ]


async def test_the_order_of_x_death_over_three_queues(backend: Backend) -> None:
    """Rejected in qa -> qb -> qc -> qb: 3.10 regroups (reverses) the older entries before
    each death, 4.0 keeps them most recent first (tests/contract/versions.py)."""
    channel = await backend.channel()
    for queue, target in (("qa", "qb"), ("qb", "qc"), ("qc", "qb")):
        await channel.queue_declare(
            queue,
            arguments={"x-dead-letter-exchange": "", "x-dead-letter-routing-key": target},
        )
    # qa's death carries original-expiration: it shows where each version puts that key
    await channel.publish(b"m", routing_key="qa", properties=Properties(expiration="60000"))

    async def reject_from(queue: str) -> list[dict[str, FieldValue]]:
        async def there() -> bool:
            return await depth(channel, queue) == 1

        await backend.until(there, f"the message in {queue!r}")
        delivery = await channel.get(queue)
        assert delivery is not None
        await channel.reject(delivery.delivery_tag, requeue=False)
        deaths = (view(delivery)["headers"] or {}).get("x-death", [])
        assert isinstance(deaths, list)
        return [entry for entry in deaths if isinstance(entry, dict)]

    for queue in ("qa", "qb", "qc"):
        await reject_from(queue)
    in_qb = await reject_from("qb")
    in_qc = await reject_from("qc")
    after_qc, after_qb = expected(backend.version, "x-death-order-three-queues")
    assert [(e["queue"], e["count"]) for e in in_qb] == after_qc
    assert [(e["queue"], e["count"]) for e in in_qc] == after_qb
    assert [list(e) for e in in_qc] == expected(backend.version, "x-death-entry-keys")
    assert all(e["reason"] == "rejected" for e in in_qc)
    assert [e.get("original-expiration") for e in in_qc if e["queue"] == "qa"] == ["60000"]


CLIENT_DEATH_TIME = datetime(2024, 1, 1, tzinfo=UTC)


async def test_an_x_death_a_client_published(backend: Backend) -> None:
    """3.10 continues the x-death a client wrote; 4.0 ignores it (tests/contract/versions.py)."""
    channel = await backend.channel()
    await channel.queue_declare("dead")
    await channel.queue_declare(
        "q", arguments={"x-dead-letter-exchange": "", "x-dead-letter-routing-key": "dead"}
    )
    written: dict[str, FieldTable] = {
        "list": {
            "x-death": [
                {
                    "count": 3,
                    "reason": "rejected",
                    "queue": "q",
                    "time": CLIENT_DEATH_TIME,
                    "exchange": "",
                    "routing-keys": ["q"],
                },
                {
                    "count": 1,
                    "reason": "expired",
                    "queue": "other",
                    "time": CLIENT_DEATH_TIME,
                    "exchange": "e",
                    "routing-keys": ["k"],
                },
            ],
            "x-first-death-exchange": "e",
            "x-first-death-queue": "other",
            "x-first-death-reason": "expired",
        },
        "not-a-list": {"x-death": "garbage"},
        "last-death-only": {"x-last-death-queue": "elsewhere", "h": 1},
    }
    seen: dict[str, FieldTable | None] = {}
    for name, headers in written.items():
        await channel.publish(
            name.encode(), routing_key="q", properties=Properties(headers=headers)
        )
        delivery = await channel.get("q")
        assert delivery is not None
        await channel.reject(delivery.delivery_tag, requeue=False)

        async def arrived() -> bool:
            return await depth(channel, "dead") == 1

        await backend.until(arrived, f"{name!r} in 'dead'")
        (dead,) = await drain(channel, "dead")
        seen[name] = view(dead)["headers"]

    fresh = death("rejected", "q", exchange="", routing_keys=["q"])
    rejected_in_q = {
        **first_death("rejected", "q", ""),
        **last_death(backend.version, "rejected", "q", ""),
    }
    if expected(backend.version, "client-x-death") == "continued":
        assert seen == {
            "list": {
                "x-death": [
                    death("rejected", "q", exchange="", routing_keys=["q"], count=4),
                    death("expired", "other", exchange="e", routing_keys=["k"]),
                ],
                **first_death("expired", "other", "e"),
            },
            # replaced, and no x-first-death-*: the message "had died before"
            "not-a-list": {"x-death": [fresh]},
            # the client's x-last-death-queue stays: 3.10 writes no x-last-death-*
            "last-death-only": {
                "h": 1,
                "x-death": [fresh],
                **rejected_in_q,
                "x-last-death-queue": "elsewhere",
            },
        }
    else:
        assert seen == {
            "list": {"x-death": [fresh], **rejected_in_q},
            "not-a-list": {"x-death": [fresh], **rejected_in_q},
            "last-death-only": {"h": 1, "x-death": [fresh], **rejected_in_q},
        }


async def test_a_client_published_x_death_and_cycles(backend: Backend) -> None:
    """A client's x-death naming 'loop' as an expiry: on 3.10 the message expiring from 'wait'
    into 'loop' closes an automatic cycle and is dropped; 4.0 does not read it."""
    channel = await backend.channel()
    await channel.queue_declare("loop")
    await channel.queue_declare(
        "wait",
        arguments={
            "x-message-ttl": 100,
            "x-dead-letter-exchange": "",
            "x-dead-letter-routing-key": "loop",
        },
    )
    client_death: FieldTable = {
        "count": 1,
        "reason": "expired",
        "queue": "loop",
        "time": CLIENT_DEATH_TIME,
        "exchange": "",
        "routing-keys": ["loop"],
    }
    await channel.publish(
        b"c", routing_key="wait", properties=Properties(headers={"x-death": [client_death]})
    )
    await backend.elapse(0.3)

    async def expired() -> bool:
        return await depth(channel, "wait") == 0

    await backend.until(expired, "the message gone from 'wait'")
    if expected(backend.version, "client-x-death") == "continued":
        await backend.elapse(0.2)
        assert await depth(channel, "loop") == 0
    else:

        async def arrived() -> bool:
            return await depth(channel, "loop") == 1

        await backend.until(arrived, "the message in 'loop'")
        (delivery,) = await drain(channel, "loop")
        assert view(delivery)["headers"] == {
            "x-death": [death("expired", "wait", exchange="", routing_keys=["wait"])],
            **first_death("expired", "wait", ""),
            **last_death(backend.version, "expired", "wait", ""),
        }
