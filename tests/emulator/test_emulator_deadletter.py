"""Dead-lettering and TTL on the emulator, with x-death exactly as RabbitMQ 3.10.8 writes it."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from rabbitctl_retry.emulator import (
    DEFAULT_START_S,
    DeadLettered,
    Dropped,
    EmulatedChannel,
    Emulator,
    Expired,
    QueuedMessage,
)
from rabbitctl_retry.errors import PreconditionFailed, PublishFailed
from rabbitctl_retry.fields import FieldValue
from rabbitctl_retry.transport.base import Delivery, Properties
from tests.observe import Recorder

T0 = datetime.fromtimestamp(DEFAULT_START_S, tz=UTC)


def at(seconds: int) -> datetime:
    return datetime.fromtimestamp(DEFAULT_START_S + seconds, tz=UTC)


def dlx_to(queue: str, **more: FieldValue) -> dict[str, FieldValue]:
    return {"x-dead-letter-exchange": "", "x-dead-letter-routing-key": queue, **more}


async def take(channel: EmulatedChannel, queue: str) -> Delivery:
    delivery = await channel.get(queue)
    assert delivery is not None, f"{queue} is empty"
    return delivery


async def test_rejected(emulator: Emulator, channel: EmulatedChannel) -> None:
    await channel.queue_declare("dead")
    await channel.queue_declare("work", arguments=dlx_to("dead"))
    await channel.publish(
        b"m",
        routing_key="work",
        properties=Properties(message_id="m-1", headers={"tenant": "acme"}),
    )
    delivery = await take(channel, "work")
    await channel.reject(delivery.delivery_tag, requeue=False)
    dead = await take(channel, "dead")
    assert (dead.exchange, dead.routing_key, dead.redelivered) == ("", "dead", False)
    assert dead.properties.message_id == "m-1"
    assert dead.properties.headers == {
        "tenant": "acme",
        "x-death": [
            {
                "count": 1,
                "reason": "rejected",
                "queue": "work",
                "time": T0,
                "exchange": "",
                "routing-keys": ["work"],
            }
        ],
        "x-first-death-exchange": "",
        "x-first-death-queue": "work",
        "x-first-death-reason": "rejected",
    }
    # the server's key order: the table sorted, the very first entry in its own order
    assert dead.properties.headers is not None
    assert list(dead.properties.headers) == [
        "tenant",
        "x-death",
        "x-first-death-exchange",
        "x-first-death-queue",
        "x-first-death-reason",
    ]
    assert [e.reason for e in emulator.events_of(DeadLettered)] == ["rejected"]


async def test_nack_without_requeue_dead_letters_too(
    emulator: Emulator, channel: EmulatedChannel
) -> None:
    await channel.queue_declare("dead")
    await channel.queue_declare("work", arguments=dlx_to("dead"))
    for body in (b"1", b"2"):
        await channel.publish(body, routing_key="work")
    await take(channel, "work")
    second = await take(channel, "work")
    await channel.nack(second.delivery_tag, multiple=True, requeue=False)
    assert [m.body for m in emulator.messages("dead")] == [b"1", b"2"]


async def test_expired_per_message(emulator: Emulator, channel: EmulatedChannel) -> None:
    await channel.queue_declare("refunds")
    await channel.queue_declare("refunds.retry", arguments=dlx_to("refunds"))
    await channel.publish(
        b"m",
        routing_key="refunds.retry",
        properties=Properties(expiration="30000", headers={"x-ruststream-retry-count": "1"}),
    )
    await emulator.advance(29.999)
    assert emulator.messages("refunds") == []
    await emulator.advance(0.001)
    (message,) = emulator.messages("refunds")
    assert (message.exchange, message.routing_key, message.redelivered) == ("", "refunds", False)
    assert message.properties.expiration is None
    assert message.headers == {
        "x-death": [
            {
                "count": 1,
                "reason": "expired",
                "queue": "refunds.retry",
                "time": at(30),
                "exchange": "",
                "routing-keys": ["refunds.retry"],
                "original-expiration": "30000",
            }
        ],
        "x-first-death-exchange": "",
        "x-first-death-queue": "refunds.retry",
        "x-first-death-reason": "expired",
        "x-ruststream-retry-count": "1",
    }
    assert [(e.queue, e.at_s - DEFAULT_START_S) for e in emulator.events_of(Expired)] == [
        ("refunds.retry", 30.0)
    ]


async def test_expired_by_queue_ttl_has_no_original_expiration(
    emulator: Emulator, channel: EmulatedChannel
) -> None:
    await channel.queue_declare("dead")
    await channel.queue_declare("q", arguments=dlx_to("dead", **{"x-message-ttl": 2000}))
    await channel.publish(b"m", routing_key="q")
    await emulator.advance(2)
    (message,) = emulator.messages("dead")
    deaths = message.headers["x-death"]
    assert isinstance(deaths, list)
    assert deaths == [
        {
            "count": 1,
            "reason": "expired",
            "queue": "q",
            "time": at(2),
            "exchange": "",
            "routing-keys": ["q"],
        }
    ]


async def test_the_smaller_ttl_wins(emulator: Emulator, channel: EmulatedChannel) -> None:
    await channel.queue_declare("dead")
    await channel.queue_declare("q", arguments=dlx_to("dead", **{"x-message-ttl": 2000}))
    await channel.publish(b"long", routing_key="q", properties=Properties(expiration="3000"))
    await channel.publish(b"short", routing_key="q", properties=Properties(expiration="500"))
    await emulator.advance(1.999)
    assert emulator.messages("dead") == []
    await emulator.advance(0.001)
    # both at 2 s (measured on 3.10.8), in queue order, each with its own original-expiration
    dead = emulator.messages("dead")
    assert [m.body for m in dead] == [b"long", b"short"]
    assert [_first_death(m)["original-expiration"] for m in dead] == ["3000", "500"]


def _first_death(message: QueuedMessage) -> dict[str, FieldValue]:
    deaths = message.headers["x-death"]
    assert isinstance(deaths, list)
    assert isinstance(deaths[0], dict)
    return deaths[0]


async def test_head_of_line_expiry(emulator: Emulator, channel: EmulatedChannel) -> None:
    await channel.queue_declare("work")
    await channel.queue_declare("wait", arguments=dlx_to("work"))
    await channel.publish(b"A", routing_key="wait", properties=Properties(expiration="60000"))
    await channel.publish(b"B", routing_key="wait", properties=Properties(expiration="1000"))
    await emulator.advance(1)
    assert emulator.messages("work") == []
    assert [m.body for m in emulator.messages("wait")] == [b"A", b"B"]
    await emulator.advance(59)
    assert [m.body for m in emulator.messages("work")] == [b"A", b"B"]
    assert [(e.message, e.at_s - DEFAULT_START_S) for e in emulator.events_of(Expired)] == [
        (1, 60.0),
        (2, 60.0),
    ]


@pytest.mark.parametrize("kind", ["classic", "quorum"])
async def test_head_of_line_expiry_on_both_queue_types(
    emulator: Emulator, channel: EmulatedChannel, kind: str
) -> None:
    # measured on 3.10.8: a quorum queue also expires from the head only
    await channel.queue_declare("work")
    await channel.queue_declare("wait", arguments=dlx_to("work", **{"x-queue-type": kind}))
    await channel.publish(b"A", routing_key="wait", properties=Properties(expiration="3000"))
    await channel.publish(b"B", routing_key="wait", properties=Properties(expiration="500"))
    await emulator.advance(2.999)
    assert emulator.messages("work") == []
    await emulator.advance(0.001)
    assert [m.body for m in emulator.messages("work")] == [b"A", b"B"]


async def test_a_message_behind_a_delivered_head_expires_on_time(
    emulator: Emulator, channel: EmulatedChannel
) -> None:
    await channel.queue_declare("work")
    await channel.queue_declare("wait", arguments=dlx_to("work"))
    await channel.publish(b"A", routing_key="wait", properties=Properties(expiration="60000"))
    await channel.publish(b"B", routing_key="wait", properties=Properties(expiration="1000"))
    head = await take(channel, "wait")
    assert head.body == b"A"
    await emulator.advance(1)
    assert [m.body for m in emulator.messages("work")] == [b"B"]


async def test_expiration_zero(emulator: Emulator, channel: EmulatedChannel) -> None:
    await channel.queue_declare("work")
    await channel.queue_declare("zero", arguments=dlx_to("work"))
    await channel.publish(b"Z", routing_key="zero", properties=Properties(expiration="0"))
    # nobody waiting: dead-lettered at once, no time passes
    assert [m.body for m in emulator.messages("work")] == [b"Z"]
    recorder = Recorder(channel)
    await channel.consume("zero", recorder)
    await channel.publish(b"Z2", routing_key="zero", properties=Properties(expiration="0"))
    await emulator.settle()
    # a waiting consumer takes it
    assert recorder.bodies == [b"Z2"]
    assert [m.body for m in emulator.messages("work")] == [b"Z"]


async def test_a_requeued_message_keeps_its_expiry(
    emulator: Emulator, channel: EmulatedChannel
) -> None:
    await channel.queue_declare("dead")
    await channel.queue_declare("q", arguments=dlx_to("dead"))
    await channel.publish(b"m", routing_key="q", properties=Properties(expiration="10000"))
    delivery = await take(channel, "q")
    await emulator.advance(10)
    assert emulator.messages("dead") == []  # unacked messages do not expire
    await channel.reject(delivery.delivery_tag, requeue=True)
    assert [m.body for m in emulator.messages("dead")] == [b"m"]


async def test_invalid_expiration_closes_the_channel(
    emulator: Emulator, channel: EmulatedChannel
) -> None:
    await channel.queue_declare("q")
    with pytest.raises(PreconditionFailed) as caught:
        await channel.publish(b"m", routing_key="q", properties=Properties(expiration="abc"))
    assert str(caught.value) == (
        "publish to the default exchange with routing key 'q': "
        "PRECONDITION_FAILED - invalid expiration 'abc': no_integer (406)"
    )
    assert channel.is_closed
    other = await emulator.connect().channel(confirms=True)
    with pytest.raises(PreconditionFailed, match=r"invalid expiration '-5': \{value_negative,-5\}"):
        await other.publish(b"m", routing_key="q", properties=Properties(expiration="-5"))


async def test_maxlen_drops_the_head(emulator: Emulator, channel: EmulatedChannel) -> None:
    await channel.queue_declare("dead")
    await channel.queue_declare("q", arguments=dlx_to("dead", **{"x-max-length": 2}))
    await channel.publish(b"0", routing_key="q", properties=Properties(expiration="100000"))
    for body in (b"1", b"2", b"3"):
        await channel.publish(body, routing_key="q")
    assert [m.body for m in emulator.messages("q")] == [b"2", b"3"]
    first, second = emulator.messages("dead")
    assert (first.body, second.body) == (b"0", b"1")
    assert first.headers["x-death"] == [
        {
            "count": 1,
            "reason": "maxlen",
            "queue": "q",
            "time": T0,
            "exchange": "",
            "routing-keys": ["q"],
            "original-expiration": "100000",
        }
    ]
    assert first.headers["x-first-death-reason"] == "maxlen"


@pytest.mark.parametrize(
    ("kind", "ready", "dead"),
    [("classic", [b"3", b"4"], [b"1"]), ("quorum", [b"4", b"1"], [b"3"])],
)
async def test_maxlen_counts_ready_messages_only_and_applies_on_requeue(
    emulator: Emulator, channel: EmulatedChannel, kind: str, ready: list[bytes], dead: list[bytes]
) -> None:
    # measured on 3.10.8: 2 unacked + 2 new fit in max-length 2; a requeue then drops the head
    # (a classic queue puts the requeued message at the head, a quorum queue at the tail)
    await channel.queue_declare("dead")
    limits: dict[str, FieldValue] = {"x-max-length": 2, "x-queue-type": kind}
    await channel.queue_declare("q", arguments=dlx_to("dead", **limits))
    for body in (b"1", b"2"):
        await channel.publish(body, routing_key="q")
    one = await take(channel, "q")
    await take(channel, "q")
    for body in (b"3", b"4"):
        await channel.publish(body, routing_key="q")
    assert emulator.messages("dead") == []
    await channel.reject(one.delivery_tag, requeue=True)
    assert [m.body for m in emulator.messages("q")] == ready
    assert [m.body for m in emulator.messages("dead")] == dead


async def test_reject_publish_dlx_dead_letters_the_refused_message(
    emulator: Emulator, channel: EmulatedChannel
) -> None:
    await channel.queue_declare("dead")
    overflow: dict[str, FieldValue] = {"x-max-length": 1, "x-overflow": "reject-publish-dlx"}
    await channel.queue_declare("q", arguments=dlx_to("dead", **overflow))
    await channel.publish(b"1", routing_key="q")
    with pytest.raises(PublishFailed, match=r"refused the message \(basic.nack\)"):
        await channel.publish(b"2", routing_key="q")
    assert [m.body for m in emulator.messages("q")] == [b"1"]
    (dead,) = emulator.messages("dead")
    assert dead.body == b"2"
    assert dead.headers["x-first-death-reason"] == "maxlen"


async def test_x_death_merges_by_queue_and_reason(
    emulator: Emulator, channel: EmulatedChannel
) -> None:
    # the exact sequence measured on 3.10.8: A expires into B, B and A reject back and forth
    await channel.queue_declare("A", arguments=dlx_to("B"))
    await channel.queue_declare("B", arguments=dlx_to("A"))
    await channel.publish(b"m", routing_key="A", properties=Properties(expiration="1000"))
    await emulator.advance(1)
    a_expired = {
        "count": 1,
        "reason": "expired",
        "queue": "A",
        "time": at(1),
        "exchange": "",
        "routing-keys": ["A"],
        "original-expiration": "1000",
    }
    first = await take(channel, "B")
    assert first.properties.headers is not None
    assert first.properties.headers["x-death"] == [a_expired]
    await emulator.advance(2)
    await channel.reject(first.delivery_tag, requeue=False)  # B rejected at 3
    b_rejected = {
        "count": 1,
        "exchange": "",
        "queue": "B",
        "reason": "rejected",
        "routing-keys": ["B"],
        "time": at(3),
    }
    second = await take(channel, "A")
    assert second.properties.headers is not None
    assert second.properties.headers["x-death"] == [b_rejected, a_expired]
    assert (second.exchange, second.routing_key) == ("", "A")
    await emulator.advance(1)
    await channel.reject(second.delivery_tag, requeue=False)  # A rejected at 4
    a_rejected = {
        "count": 1,
        "exchange": "",
        "queue": "A",
        "reason": "rejected",
        "routing-keys": ["A"],
        "time": at(4),
    }
    third = await take(channel, "B")
    assert third.properties.headers is not None
    assert third.properties.headers["x-death"] == [a_rejected, a_expired, b_rejected]
    await emulator.advance(1)
    await channel.reject(third.delivery_tag, requeue=False)  # B rejected again at 5
    fourth = await take(channel, "A")
    headers = fourth.properties.headers
    assert headers is not None
    # one entry per (queue, reason): count 2, moved to the front, first time kept; the older
    # entries come out reversed each time the server regroups them (as measured)
    assert headers["x-death"] == [{**b_rejected, "count": 2}, a_expired, a_rejected]
    deaths = headers["x-death"]
    assert isinstance(deaths, list)
    assert isinstance(deaths[0], dict)
    assert list(deaths[0]) == ["count", "exchange", "queue", "reason", "routing-keys", "time"]
    # x-first-death-* written once
    assert (
        headers["x-first-death-queue"],
        headers["x-first-death-reason"],
        headers["x-first-death-exchange"],
    ) == ("A", "expired", "")


async def test_the_first_death_replaces_client_written_first_death_headers(
    emulator: Emulator, channel: EmulatedChannel
) -> None:
    await channel.queue_declare("dead")
    await channel.queue_declare("q", arguments=dlx_to("dead"))
    headers: dict[str, FieldValue] = {"x-first-death-queue": "zzz", "x-first-death-reason": "yyy"}
    await channel.publish(b"m", routing_key="q", properties=Properties(headers=headers))
    await channel.reject((await take(channel, "q")).delivery_tag, requeue=False)
    (dead,) = emulator.messages("dead")
    assert (dead.headers["x-first-death-queue"], dead.headers["x-first-death-reason"]) == (
        "q",
        "rejected",
    )


async def test_a_client_written_x_death_is_continued(
    emulator: Emulator, channel: EmulatedChannel
) -> None:
    # measured on 3.10.8: the count goes on, no time is added, no first-death headers appear
    await channel.queue_declare("dead")
    await channel.queue_declare("q", arguments=dlx_to("dead"))
    entry: dict[str, FieldValue] = {
        "count": 3,
        "reason": "rejected",
        "queue": "q",
        "exchange": "",
        "routing-keys": ["q"],
    }
    await channel.publish(
        b"m", routing_key="q", properties=Properties(headers={"x-death": [entry]})
    )
    await channel.reject((await take(channel, "q")).delivery_tag, requeue=False)
    (dead,) = emulator.messages("dead")
    assert dead.headers == {"x-death": [{**entry, "count": 4}]}


async def test_without_a_routing_key_the_original_keys_are_used(
    emulator: Emulator, channel: EmulatedChannel
) -> None:
    await channel.exchange_declare("orders", type="topic")
    await channel.exchange_declare("dlx", type="direct")
    await channel.queue_declare("eu", arguments={"x-dead-letter-exchange": "dlx"})
    await channel.queue_bind("eu", "orders", "eu.*")
    await channel.queue_declare("parked")
    await channel.queue_bind("parked", "dlx", "eu.fr")
    await channel.publish(b"m", exchange="orders", routing_key="eu.fr")
    await channel.reject((await take(channel, "eu")).delivery_tag, requeue=False)
    dead = await take(channel, "parked")
    assert (dead.exchange, dead.routing_key) == ("dlx", "eu.fr")
    assert dead.properties.headers is not None
    assert dead.properties.headers["x-death"] == [
        {
            "count": 1,
            "reason": "rejected",
            "queue": "eu",
            "time": T0,
            "exchange": "orders",
            "routing-keys": ["eu.fr"],
        }
    ]
    assert dead.properties.headers["x-first-death-exchange"] == "orders"


async def test_an_unroutable_dead_letter_is_gone(
    emulator: Emulator, channel: EmulatedChannel
) -> None:
    await channel.queue_declare("q", arguments=dlx_to("missing-queue"))
    await channel.queue_declare("r", arguments={"x-dead-letter-exchange": "missing-exchange"})
    await channel.queue_declare("s")  # no dead-letter exchange at all
    for queue in ("q", "r", "s"):
        await channel.publish(b"m", routing_key=queue)
        await channel.reject((await take(channel, queue)).delivery_tag, requeue=False)
    assert [(e.from_queue, e.exchange, e.to_queues) for e in emulator.events_of(DeadLettered)] == [
        ("q", "", ()),
        ("r", "missing-exchange", ()),
    ]
    assert [(e.queue, e.cause) for e in emulator.events_of(Dropped)] == [("s", "rejected")]
    assert all(emulator.messages(q) == [] for q in ("q", "r", "s"))


async def test_a_fully_automatic_cycle_is_dropped(
    emulator: Emulator, channel: EmulatedChannel
) -> None:
    # measured on 3.10.8: TTL 500 both ways, the message is gone after one round trip
    await channel.queue_declare("c1", arguments=dlx_to("c2", **{"x-message-ttl": 500}))
    await channel.queue_declare("c2", arguments=dlx_to("c1", **{"x-message-ttl": 500}))
    await channel.publish(b"m", routing_key="c1")
    await emulator.advance(0.5)
    assert [m.body for m in emulator.messages("c2")] == [b"m"]
    await emulator.advance(0.5)
    assert emulator.messages("c1") == emulator.messages("c2") == []
    assert [(e.queue, e.cause) for e in emulator.events_of(Dropped)] == [("c1", "cycle")]


async def test_server_3_13_also_writes_the_last_death() -> None:
    emulator = Emulator(server_version="3.13.7")
    channel = await emulator.connect().channel()
    await channel.queue_declare("dead")
    await channel.queue_declare("q", arguments=dlx_to("dead"))
    await channel.publish(b"m", routing_key="q")
    await channel.reject((await take(channel, "q")).delivery_tag, requeue=False)
    (dead,) = emulator.messages("dead")
    assert (
        dead.headers["x-last-death-reason"],
        dead.headers["x-last-death-queue"],
        dead.headers["x-last-death-exchange"],
    ) == ("rejected", "q", "")
    assert "x-last-death-reason" not in (await _dead_on(Emulator(server_version="3.10.8"))).headers


async def _dead_on(emulator: Emulator) -> QueuedMessage:
    channel = await emulator.connect().channel()
    await channel.queue_declare("dead")
    await channel.queue_declare("q", arguments=dlx_to("dead"))
    await channel.publish(b"m", routing_key="q")
    await channel.reject((await take(channel, "q")).delivery_tag, requeue=False)
    return emulator.messages("dead")[0]
