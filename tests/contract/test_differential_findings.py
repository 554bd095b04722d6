"""Scenarios the randomized differential test found (tests/contract/test_random.py), each reduced
to its minimal form and checked on the emulator and on RabbitMQ 3.10.8 and 4.0.5: where the
emulator once differed from the server, the server was right.
"""

from __future__ import annotations

import pytest

from rabbitctl_retry.errors import NotFound, PublishFailed
from rabbitctl_retry.fields import FieldValue
from rabbitctl_retry.transport.base import Channel, Delivery, Properties
from tests.backends import Backend
from tests.contract.support import bodies, counted_return, delivery_count, drain, settle
from tests.contract.versions import expected
from tests.observe import Recorder, depth


async def publish_all(channel: Channel, queue: str, *names: str, exchange: str = "") -> list[str]:
    """Publish each name as a body (confirmed); return each publish's outcome."""
    outcomes = []
    for name in names:
        outcome = await channel.publish(
            name.encode(), exchange=exchange, routing_key=queue, properties=Properties()
        )
        outcomes.append(str(outcome))
    return outcomes


async def dead_lettering_queue(
    channel: Channel,
    kind: str,
    *,
    dead_kind: str = "classic",
    dead_arguments: dict[str, FieldValue] | None = None,
    **limits: FieldValue,
) -> None:
    """Queue ``q`` of type ``kind`` with ``limits`` (``x-max-length=1``), dead-lettering to
    ``dead`` (of type ``dead_kind``, with ``dead_arguments``) on the default exchange."""
    await channel.queue_declare(
        "dead", durable=True, arguments={"x-queue-type": dead_kind, **(dead_arguments or {})}
    )
    await channel.queue_declare(
        "q",
        durable=True,
        arguments={
            "x-queue-type": kind,
            **{name.replace("_", "-"): value for name, value in limits.items()},
            "x-dead-letter-exchange": "",
            "x-dead-letter-routing-key": "dead",
        },
    )


async def holding(channel: Channel, queue: str) -> Recorder:
    """A consumer of ``queue`` on ``channel`` with prefetch 1 that settles nothing."""
    await channel.qos(1)
    recorder = Recorder(channel, "hold")
    await channel.consume(queue, recorder)
    return recorder


@pytest.mark.parametrize("limit", [None, 5])
async def test_quorum_requeue_goes_to_the_head_with_a_delivery_limit(
    backend: Backend, limit: int | None
) -> None:
    """A quorum queue: get m1, reject it with requeue; the next get. RabbitMQ 3.10 puts m1
    back at the head when the queue has a delivery limit, at the back without one; 4.0 at the
    head either way."""
    channel = await backend.channel()
    arguments: dict[str, FieldValue] = {"x-queue-type": "quorum"}
    if limit is not None:
        arguments["x-delivery-limit"] = limit
    await channel.queue_declare("q", durable=True, arguments=arguments)
    await publish_all(channel, "q", "m1", "m2")
    first = await channel.get("q")
    assert first is not None
    await channel.reject(first.delivery_tag, requeue=True)
    await settle(backend, channel, "q", 2)
    again = await channel.get("q", no_ack=True)
    assert again is not None
    head_first = limit is not None or backend.version != "3.10"
    if head_first:
        assert (again.body, again.redelivered, delivery_count(again)) == (b"m1", True, 1)
        assert await bodies(channel, "q") == ["m2"]
    else:
        assert again.body == b"m2"
        assert await bodies(channel, "q") == ["m1"]


@pytest.mark.parametrize("kind", ["classic", "quorum"])
async def test_a_length_limit_and_a_requeued_message(backend: Backend, kind: str) -> None:
    """x-max-length 1 (drop-head, dead-lettering to ``dead``): a consumer (prefetch 1) holds
    m1, m2 is ready; nack m1 with requeue. A classic queue applies its limit to what comes
    back before it delivers again: it drops its head (m1, back at its old place) and delivers
    m2. A quorum queue delivers first and then applies the limit: the consumer takes one of
    the two, the other stays ready, none is dropped (tests/emulator/test_emulator_deadletter.py
    has the case without a consumer, where the quorum queue drops its head)."""
    channel = await backend.channel()
    await dead_lettering_queue(channel, kind, x_max_length=1)
    await publish_all(channel, "q", "m1")
    consuming = await backend.channel(confirms=False)
    recorder = await holding(consuming, "q")
    await backend.until(lambda: _count(recorder, 1), "m1 delivered")
    await publish_all(channel, "q", "m2")
    await settle(backend, channel, "q", 1)
    await consuming.nack(recorder.deliveries[0].delivery_tag, requeue=True)
    await backend.until(lambda: _count(recorder, 2), "a second delivery")
    await backend.elapse(0.2)
    second = recorder.deliveries[1]
    if kind == "quorum":
        # 3.10 puts a nacked message at the back (no delivery limit), 4.0 at the front
        if backend.version == "3.10":
            assert (second.body, second.redelivered) == (b"m2", False)
            assert await bodies(channel, "q") == ["m1"]
        else:
            assert (second.body, second.redelivered) == (b"m1", True)
            assert await bodies(channel, "q") == ["m2"]
        assert await depth(channel, "dead") == 0
    else:
        assert (second.body, second.redelivered) == (b"m2", False)
        assert await depth(channel, "q") == 0
        assert await bodies(channel, "dead") == ["m1"]


async def test_a_publish_reaches_every_queue_before_the_dead_letters_it_causes(
    backend: Backend,
) -> None:
    """A fanout with q0 (x-max-length 1, dead-lettering back to the same fanout) bound before
    q2. m1, m2, then m3: q0 drops m1 to the fanout, which reaches q2 after m3 did."""
    channel = await backend.channel()
    await channel.exchange_declare("fan", type="fanout")
    await channel.queue_declare(
        "q0", arguments={"x-max-length": 1, "x-dead-letter-exchange": "fan"}
    )
    await channel.queue_declare("q2")
    await channel.queue_bind("q0", "fan", "")
    await channel.queue_bind("q2", "fan", "")
    # each publish settles before the next (RabbitMQ sends a dead letter on its own time)
    for name, in_q2 in (("m1", 1), ("m2", 3), ("m3", 5)):
        await channel.publish(
            name.encode(), exchange="fan", routing_key="", properties=Properties()
        )
        await settle(backend, channel, "q2", in_q2)
    # m2 reaches q0 and q2; q0, over its limit, drops m1 to the fanout: not back to q0 (it died
    # there of maxlen: a cycle), so to q2 only, behind m2
    assert await bodies(channel, "q2") == ["m1", "m2", "m1", "m3", "m2"]
    assert await bodies(channel, "q0") == ["m3"]


@pytest.mark.parametrize("kind", ["classic", "quorum"])
async def test_an_expired_message_reaches_every_queue_before_the_dead_letters_it_causes(
    backend: Backend, kind: str
) -> None:
    """m1 (11 bytes) expires from ``timed`` into a fanout bound to ``small`` (10 bytes at most,
    dead-lettering to the same fanout) before ``q0``: ``small`` drops it (``maxlen``), and
    that copy reaches ``q0`` after the expired one, whatever the bindings' order (seed 1192;
    the same on 3.10.8, 4.0.5 and 4.3.6, classic or quorum)."""
    channel = await backend.channel()
    await channel.exchange_declare("fan", type="fanout")
    await channel.queue_declare(
        "small",
        durable=True,
        arguments={"x-max-length-bytes": 10, "x-dead-letter-exchange": "fan"},
    )
    await channel.queue_declare("q0", durable=True)
    await channel.queue_bind("small", "fan", "")
    await channel.queue_bind("q0", "fan", "")
    await channel.queue_declare(
        "timed",
        durable=True,
        arguments={"x-queue-type": kind, "x-message-ttl": 100, "x-dead-letter-exchange": "fan"},
    )
    await channel.publish(b"m1.........", routing_key="timed", properties=Properties())
    await backend.elapse(0.3)
    await settle(backend, channel, "q0", 2)
    reasons = []
    for letter in await drain(channel, "q0"):
        deaths = (letter.properties.headers or {})["x-death"]
        assert isinstance(deaths, list)
        assert isinstance(deaths[0], dict)
        reasons.append(deaths[0]["reason"])
    assert reasons == ["expired", "maxlen"]
    assert await depth(channel, "small") == 0


async def test_a_nacked_message_dead_letters_back_after_the_next_dispatch(
    backend: Backend,
) -> None:
    """A classic queue dead-lettering to itself, x-max-length-bytes 3: a consumer (prefetch 1)
    holds m1, m2 is ready; nack m1 without requeue. The freed consumer gets m2 first; m1's dead
    letter then comes back to the queue and waits there (nothing is over the limit)."""
    channel = await backend.channel()
    await channel.queue_declare(
        "q0",
        arguments={
            "x-max-length-bytes": 3,
            "x-dead-letter-exchange": "",
            "x-dead-letter-routing-key": "q0",
        },
    )
    await publish_all(channel, "q0", "m1")
    consuming = await backend.channel(confirms=False)
    recorder = await holding(consuming, "q0")
    await backend.until(lambda: _count(recorder, 1), "m1 delivered")
    await publish_all(channel, "q0", "m2")
    await settle(backend, channel, "q0", 1)
    await consuming.nack(recorder.deliveries[0].delivery_tag, requeue=False)
    await backend.until(lambda: _count(recorder, 2), "a second delivery")
    await settle(backend, channel, "q0", 1)
    assert recorder.bodies == [b"m1", b"m2"]
    [back] = await drain(channel, "q0")
    assert back.body == b"m1"
    x_death = (back.properties.headers or {}).get("x-death")
    assert isinstance(x_death, list)
    assert [(e["queue"], e["reason"]) for e in x_death if isinstance(e, dict)] == [
        ("q0", "rejected")
    ]


async def test_a_return_the_delivery_limit_drops_and_the_consumers_credit(
    backend: Backend,
) -> None:
    """A quorum queue with x-delivery-limit 0 holding m1-m6; a consumer with prefetch 1 gets
    m1 and nacks it with requeue (rejects it on 4.3, where a nack is not counted): the limit
    drops m1. RabbitMQ 3.10 then gives that consumer
    one more message of credit for good (it holds m2 and m3, then two at a time); 4.0 keeps it
    at one."""
    channel = await backend.channel()
    await channel.queue_declare(
        "q", durable=True, arguments={"x-queue-type": "quorum", "x-delivery-limit": 0}
    )
    await publish_all(channel, "q", "m1", "m2", "m3", "m4", "m5", "m6")
    consuming = await backend.channel(confirms=False)
    recorder = await holding(consuming, "q")
    leaked = backend.version == "3.10"

    async def holds(n: int) -> None:
        async def there() -> bool:
            return len(recorder.deliveries) == n

        await backend.until(there, f"{n} deliveries")
        await backend.elapse(0.3)  # and no more
        assert len(recorder.deliveries) == n, recorder.bodies

    await holds(1)
    await counted_return(backend.version, consuming, recorder.deliveries[0].delivery_tag)
    await holds(3 if leaked else 2)
    await consuming.ack(recorder.deliveries[1].delivery_tag)
    await holds(4 if leaked else 3)
    await consuming.ack(recorder.deliveries[-1].delivery_tag, multiple=True)
    await holds(6 if leaked else 4)
    assert recorder.bodies == [b"m1", b"m2", b"m3", b"m4", b"m5", b"m6"][: len(recorder.bodies)]
    assert await depth(channel, "q") == (0 if leaked else 2)


async def confirmed(channel: Channel, queue: str, body: str) -> bool:
    """Publish ``body`` on a confirm channel: True when acked, False when nacked."""
    try:
        await channel.publish(body.encode(), routing_key=queue, properties=Properties())
    except PublishFailed:
        return False
    return True


async def test_quorum_reject_publish_blocks_the_channel_it_refused(backend: Backend) -> None:
    """A quorum queue with x-max-length 2, x-overflow reject-publish takes m1-m3 (it goes over
    by one) and refuses m4. A get brings it back to 2 ready: the channel it refused is still
    refused (m5) until the queue falls below 80 % of its limit, while a new channel's m6 is
    taken (the queue is not over its limit)."""
    channel = await backend.channel()
    await channel.queue_declare(
        "q",
        durable=True,
        arguments={"x-queue-type": "quorum", "x-max-length": 2, "x-overflow": "reject-publish"},
    )
    assert [await confirmed(channel, "q", f"m{n}") for n in (1, 2, 3, 4)] == [
        True,
        True,
        True,
        False,
    ]
    assert await channel.get("q", no_ack=True) is not None
    await settle(backend, channel, "q", 2)
    assert await confirmed(channel, "q", "m5") is False
    other = await backend.channel()
    assert await confirmed(other, "q", "m6") is True
    assert await confirmed(other, "q", "m7") is False
    assert await bodies(channel, "q") == ["m2", "m3", "m6"]
    assert await confirmed(channel, "q", "m8") is True  # empty now: below the soft limit


@pytest.mark.parametrize("kind", ["classic", "quorum"])
async def test_one_publish_pushing_several_out_dead_letters_them_in_its_queues_order(
    backend: Backend, kind: str
) -> None:
    """x-max-length-bytes 10 (drop-head, dead-lettering to ``dead``): m1, m2, m3 of 2 bytes,
    then m4 of 11 bytes pushes all four out. A classic queue dead-letters them oldest first;
    a quorum queue, newest first before 4.3 (seed 14 of the randomized test)."""
    channel = await backend.channel()
    await dead_lettering_queue(channel, kind, x_max_length_bytes=10)
    await publish_all(channel, "q", "m1", "m2", "m3", "m4.........")
    await settle(backend, channel, "dead", 4)
    order = ["m1", "m2", "m3", "m4........."]
    if kind == "quorum" and expected(backend.version, "quorum-evictions") == "newest first":
        order.reverse()
    assert await bodies(channel, "dead") == order
    assert await depth(channel, "q") == 0


@pytest.mark.parametrize("kind", ["classic", "quorum"])
async def test_a_closing_connection_gets_nothing_its_own_channels_give_back(
    backend: Backend, kind: str
) -> None:
    """One connection: a consumer on channel A takes m1 (prefetch 1) and is cancelled, still
    holding it; a consumer on channel B comes; the connection closes. m1 goes back to the
    queue. Whether the server hands it to B's consumer on the way (B closes too, so it comes
    back once more) is a race: seed 34 saw it not, seed 525 saw it; the emulator never does
    (the randomized test's rule R11 keeps such closes out)."""
    channel = await backend.channel()
    await channel.queue_declare("q", durable=True, arguments={"x-queue-type": kind})
    connection = await backend.connect()
    first, second = await connection.channel(), await connection.channel()
    await first.qos(1)
    await second.qos(1)
    holding, coming = Recorder(first, "hold"), Recorder(second, "hold")
    tag = await first.consume("q", holding)
    await publish_all(channel, "q", "m1")
    await backend.until(lambda: _count(holding, 1), "m1 delivered on channel A")
    await first.cancel(tag)
    await second.consume("q", coming)
    await backend.elapse(0.2)
    await connection.close()
    await settle(backend, channel, "q", 1)
    await backend.elapse(0.2)
    if backend.name == "emulator":
        assert coming.deliveries == []
    again = await channel.get("q", no_ack=True)
    assert again is not None
    assert (again.body, again.redelivered) == (b"m1", True)


async def _count(recorder: Recorder, n: int) -> bool:
    return len(recorder.deliveries) == n


@pytest.mark.parametrize("returned_by", ["a closing channel", "basic.reject(requeue)"])
async def test_what_a_dead_letter_carries_of_the_returns_before_it(
    backend: Backend, returned_by: str
) -> None:
    """Quorum q (x-delivery-limit 0) dead-lettering to quorum ``dead``: m1 is delivered once
    and comes back, which spends the limit. On 4.0 a return of a closing channel travels with
    the dead letter (``dead`` hands it out redelivered, x-delivery-count 1), a requeue by
    basic.reject does not; 4.3 carries both; 3.10 neither (seed 151 of the randomized test)."""
    channel = await backend.channel()
    await dead_lettering_queue(channel, "quorum", dead_kind="quorum", x_delivery_limit=0)
    await publish_all(channel, "q", "m1")
    connection = await backend.connect()
    taking = await connection.channel()
    recorder = await holding(taking, "q")
    await backend.until(lambda: _count(recorder, 1), "m1 delivered")
    if returned_by == "a closing channel":
        await connection.close()
    else:
        await taking.reject(recorder.deliveries[0].delivery_tag, requeue=True)
    await settle(backend, channel, "dead", 1)
    dead = await channel.get("dead", no_ack=True)
    assert dead is not None
    rule = expected(backend.version, "dead-letter-carried-count")
    carried = rule == "basic.reject in any queue" or (
        rule == "quorum rejections" and returned_by == "a closing channel"
    )
    count = 1 if carried else (0 if rule == "none" else "absent")
    assert (dead.body, dead.redelivered, delivery_count(dead)) == (b"m1", carried, count)
    if not connection.is_closed:
        await connection.close()


async def test_what_a_closing_channel_gives_back_to_a_quorum_queue_and_in_what_order(
    backend: Backend,
) -> None:
    """A channel takes m1 with basic.get, m2 with a consumer (prefetch 1), m3 with basic.get,
    and its connection closes. RabbitMQ 3.10 puts back what basic.get took first (m1, m3, m2),
    4.0 what the consumer took first (m2, m1, m3); each in delivery order (seed 223)."""
    channel = await backend.channel()
    await channel.queue_declare("q", durable=True, arguments={"x-queue-type": "quorum"})
    connection = await backend.connect()
    taking = await connection.channel()
    await taking.qos(1)
    recorder = Recorder(taking, "hold")
    await publish_all(channel, "q", "m1")
    assert (await get_body(taking)) == b"m1"
    await taking.consume("q", recorder)
    await publish_all(channel, "q", "m2")
    await backend.until(lambda: _count(recorder, 1), "m2 delivered")
    await publish_all(channel, "q", "m3")
    assert (await get_body(taking)) == b"m3"
    await connection.close()
    await settle(backend, channel, "q", 3)
    order = ["m1", "m3", "m2"] if backend.version == "3.10" else ["m2", "m1", "m3"]
    assert await bodies(channel, "q") == order


def acquired_count(delivery: Delivery) -> FieldValue:
    """The ``x-acquired-count`` header (RabbitMQ 4.3), or ``"absent"``."""
    return (delivery.properties.headers or {}).get("x-acquired-count", "absent")


async def get_body(channel: Channel) -> bytes | None:
    delivery = await channel.get("q")
    return None if delivery is None else delivery.body


async def test_a_message_that_expired_while_out_expires_only_at_the_head(
    backend: Backend,
) -> None:
    """Classic q: m1, then m2 with a 1.5 s expiration. Channel A takes m2, then m1 (which
    another channel took first and gave back); both are out when m2's time is up. A's channel
    closes: m1 and m2 come back together, m1 at the head, so m2 stays (counted) until it is
    the head (seed 427)."""
    channel = await backend.channel()
    await channel.queue_declare("q")
    await publish_all(channel, "q", "m1")
    await channel.publish(
        b"m2", exchange="", routing_key="q", properties=Properties(expiration="1500")
    )
    other = await backend.channel(confirms=False)
    first = await other.get("q")
    assert first is not None
    closing = await backend.channel(confirms=False)
    assert await get_body(closing) == b"m2"
    await other.reject(first.delivery_tag, requeue=True)
    await settle(backend, channel, "q", 1)
    assert await get_body(closing) == b"m1"
    await backend.elapse(1.6)
    await closing.close()
    await settle(backend, channel, "q", 2)
    assert await bodies(channel, "q") == ["m1"]


async def test_a_quorum_queue_shows_its_own_count_once_it_counted_a_return(
    backend: Backend,
) -> None:
    """m1 rejected (no requeue) by quorum ``src`` reaches quorum ``q``; a consumer takes it
    twice, each time its connection closes. RabbitMQ 4.0 shows the count the dead letter came
    with (1), then its own (1, 2); 4.3 counts on from the carried one (1, 2, 3); 3.10 carries
    nothing (0, 1, 2 as basic.get and consumers show it: absent, 1, 2) (seed 279). 4.3's
    x-acquired-count shows the carried count until the queue counted a return of its own,
    then its own returns (1, 1, 2; seed 290)."""
    channel = await backend.channel()
    await channel.queue_declare("q", durable=True, arguments={"x-queue-type": "quorum"})
    await channel.queue_declare(
        "src",
        durable=True,
        arguments={
            "x-queue-type": "quorum",
            "x-dead-letter-exchange": "",
            "x-dead-letter-routing-key": "q",
        },
    )
    await publish_all(channel, "src", "m1")
    taken = await channel.get("src")
    assert taken is not None
    await channel.reject(taken.delivery_tag, requeue=False)
    await settle(backend, channel, "q", 1)
    shown, acquired = [], []
    for _ in range(2):
        connection = await backend.connect()
        taking = await connection.channel()
        recorder = await holding(taking, "q")
        await backend.until(lambda r=recorder: _count(r, 1), "m1 delivered")
        shown.append(delivery_count(recorder.deliveries[0]))
        acquired.append(acquired_count(recorder.deliveries[0]))
        await connection.close()
        await settle(backend, channel, "q", 1)
    last = await channel.get("q", no_ack=True)
    assert last is not None
    shown.append(delivery_count(last))
    acquired.append(acquired_count(last))
    assert shown == expected(backend.version, "quorum-count-after-a-carried-one")
    assert acquired == expected(backend.version, "quorum-acquired-after-a-carried-one")


@pytest.mark.parametrize("kind", ["classic", "quorum"])
async def test_a_full_quorum_queue_takes_every_dead_letter_sent_at_most_once(
    backend: Backend, kind: str
) -> None:
    """Quorum ``dead`` with x-max-length 1 and reject-publish; ``q`` (classic, or quorum
    dead-lettering at most once) rejects four messages to it: all four arrive, over the limit
    (the server sends such dead letters untracked; seed 673)."""
    channel = await backend.channel()
    await dead_lettering_queue(
        channel,
        kind,
        dead_kind="quorum",
        dead_arguments={"x-max-length": 1, "x-overflow": "reject-publish"},
    )
    await publish_all(channel, "q", "m1", "m2", "m3", "m4")
    for _ in range(4):
        taken = await channel.get("q")
        assert taken is not None
        await channel.reject(taken.delivery_tag, requeue=False)
    await settle(backend, channel, "dead", 4)
    assert await bodies(channel, "dead") == ["m1", "m2", "m3", "m4"]


async def test_the_message_that_takes_a_quorum_queue_over_stops_its_publishers(
    backend: Backend,
) -> None:
    """Quorum q, x-max-length 2, reject-publish: m1, m2, m3 are all taken (the third takes it
    over its limit); a basic.get brings it back to 2 ready, above the soft limit. Its publisher
    stays refused (m4 nacked); a channel new to the queue is not (m5 taken) (seed 980)."""
    channel = await backend.channel()
    await channel.queue_declare(
        "q",
        durable=True,
        arguments={"x-queue-type": "quorum", "x-max-length": 2, "x-overflow": "reject-publish"},
    )
    assert [await confirmed(channel, "q", body) for body in ("m1", "m2", "m3")] == [True] * 3
    taking = await backend.channel(confirms=False)
    assert await get_body(taking) == b"m1"
    await settle(backend, channel, "q", 2)
    assert not await confirmed(channel, "q", "m4")
    assert await confirmed(await backend.channel(), "q", "m5")
    assert await bodies(channel, "q") == ["m2", "m3", "m5"]


@pytest.mark.parametrize("kind", ["classic", "quorum"])
@pytest.mark.parametrize("deleted_by", ["queue.delete", "auto-delete"])
async def test_a_rejection_after_its_queue_was_deleted_dead_letters_nothing(
    backend: Backend, kind: str, deleted_by: str
) -> None:
    """m1 delivered from ``q`` (dead-lettering to ``dead``) and held; ``q`` is deleted (by
    queue.delete, or as an auto-delete classic queue once its consumer is cancelled); then m1
    is rejected without requeue. The server does nothing: ``dead`` stays empty (a
    differential run of 300 larger scenarios found the emulator dead-lettering it)."""
    if deleted_by == "auto-delete" and kind == "quorum":
        pytest.skip("a quorum queue cannot be auto-delete")
    channel = await backend.channel()
    await channel.queue_declare("dead", durable=True)
    await channel.queue_declare(
        "q",
        durable=kind == "quorum",
        auto_delete=deleted_by == "auto-delete",
        arguments={
            "x-queue-type": kind,
            "x-dead-letter-exchange": "",
            "x-dead-letter-routing-key": "dead",
        },
    )
    await publish_all(channel, "q", "m1")
    taking = await backend.channel(confirms=False)
    recorder = Recorder(taking, "hold")
    tag = await taking.consume("q", recorder)
    await backend.until(lambda: _count(recorder, 1), "m1 delivered")
    if deleted_by == "auto-delete":
        await taking.cancel(tag)
    else:
        await channel.queue_delete("q")

    async def gone() -> bool:
        try:
            await (await backend.channel()).queue_declare("q", passive=True)
        except NotFound:
            return True
        return False

    await backend.until(gone, "'q' deleted")
    await taking.reject(recorder.deliveries[0].delivery_tag, requeue=False)
    await backend.elapse(0.3)
    assert await depth(channel, "dead") == 0


@pytest.mark.parametrize("purged", [False, True], ids=["", "purged"])
async def test_messages_handed_straight_to_a_consumer_count_in_the_two_priorities_turns(
    backend: Backend, purged: bool
) -> None:
    """A quorum queue: a consumer (prefetch 2) takes m1 and m2, each handed to it at once;
    then m3 (no priority) and m4 (priority 9) wait. RabbitMQ 4.0 counts every message it
    hands out in its turns of two high for one low (rabbit_fifo_q's dequeue counter), those
    two included: the third turn serves the older of the two heads, m3. A purge (of the
    empty queue) before m3 starts the turns again: m4 first. 3.10 has no priorities (m3
    first), 4.3 strict ones (m4 first). Seed 9005 of the randomized test."""
    channel = await backend.channel()
    await channel.queue_declare("q", durable=True, arguments={"x-queue-type": "quorum"})
    consuming = await backend.channel()
    await consuming.qos(2)
    recorder = Recorder(consuming, "hold")
    await consuming.consume("q", recorder)
    for body in ("m1", "m2"):
        await channel.publish(body.encode(), routing_key="q", properties=Properties())
        await backend.until(lambda b=body: b.encode() in recorder.bodies, f"{body} delivered")
    if purged:
        assert await channel.queue_purge("q") == 0
    await channel.publish(b"m3", routing_key="q", properties=Properties())
    await channel.publish(b"m4", routing_key="q", properties=Properties(priority=9))
    await settle(backend, channel, "q", 2)
    levels = expected(backend.version, "quorum-priority-levels")
    high_first = levels == "strict" or (levels == "two" and purged)
    assert await bodies(channel, "q") == (["m4", "m3"] if high_first else ["m3", "m4"])
    assert recorder.bodies == [b"m1", b"m2"]
