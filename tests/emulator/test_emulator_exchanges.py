"""Exchanges on the emulator: each type, mandatory returns, confirms, alternate and delayed."""

from __future__ import annotations

import pytest

from rabbitctl_retry.emulator import (
    Delayed,
    EmulatedChannel,
    Emulator,
    Published,
    Released,
    Returned,
    Unroutable,
)
from rabbitctl_retry.errors import AccessRefused, PublishFailed
from rabbitctl_retry.fields import FieldValue
from rabbitctl_retry.transport.base import Properties


def bodies(emulator: Emulator, queue: str) -> list[bytes]:
    return [m.body for m in emulator.messages(queue)]


async def test_the_default_exchange_routes_by_queue_name(
    emulator: Emulator, channel: EmulatedChannel
) -> None:
    await channel.queue_declare("orders")
    await channel.publish(b"1", routing_key="orders")
    await channel.publish(b"2", routing_key="nobody")
    assert bodies(emulator, "orders") == [b"1"]
    assert emulator.events_of(Unroutable)[0].routing_key == "nobody"


async def test_system_exchanges_are_predeclared(emulator: Emulator) -> None:
    assert emulator.exchange_names() == [
        "",
        "amq.direct",
        "amq.fanout",
        "amq.headers",
        "amq.match",
        "amq.rabbitmq.trace",
        "amq.topic",
    ]


async def test_direct_exchange(emulator: Emulator, channel: EmulatedChannel) -> None:
    await channel.exchange_declare("x", type="direct")
    for name in ("q1", "q2", "q3"):
        await channel.queue_declare(name)
    await channel.queue_bind("q1", "x", "red")
    await channel.queue_bind("q2", "x", "red")
    await channel.queue_bind("q3", "x", "blue")
    await channel.queue_bind("q3", "x", "blue")  # binding twice is one binding
    await channel.publish(b"r", exchange="x", routing_key="red")
    await channel.publish(b"b", exchange="x", routing_key="blue")
    await channel.publish(b"g", exchange="x", routing_key="green")
    assert bodies(emulator, "q1") == [b"r"]
    assert bodies(emulator, "q2") == [b"r"]
    assert bodies(emulator, "q3") == [b"b"]
    assert len(emulator.bindings("x")) == 3


async def test_a_queue_bound_twice_gets_one_copy(
    emulator: Emulator, channel: EmulatedChannel
) -> None:
    await channel.exchange_declare("t", type="topic")
    await channel.queue_declare("q")
    await channel.queue_bind("q", "t", "a.*")
    await channel.queue_bind("q", "t", "#")
    await channel.publish(b"m", exchange="t", routing_key="a.b")
    assert bodies(emulator, "q") == [b"m"]


async def test_fanout_exchange_ignores_the_key(
    emulator: Emulator, channel: EmulatedChannel
) -> None:
    await channel.exchange_declare("f", type="fanout")
    await channel.queue_declare("q1")
    await channel.queue_declare("q2")
    await channel.queue_bind("q1", "f", "ignored")
    await channel.queue_bind("q2", "f")
    await channel.publish(b"m", exchange="f", routing_key="anything")
    assert bodies(emulator, "q1") == [b"m"]
    assert bodies(emulator, "q2") == [b"m"]
    published = emulator.events_of(Published)
    assert [e.queues for e in published] == [("q1", "q2")]


async def test_topic_exchange(emulator: Emulator, channel: EmulatedChannel) -> None:
    await channel.queue_declare("all")
    await channel.queue_declare("eu")
    await channel.queue_declare("one-word")
    await channel.queue_bind("all", "amq.topic", "#")
    await channel.queue_bind("eu", "amq.topic", "eu.#")
    await channel.queue_bind("one-word", "amq.topic", "*")
    for key in ("eu", "eu.fr.paris", "us.ny", ""):
        await channel.publish(key.encode(), exchange="amq.topic", routing_key=key)
    assert bodies(emulator, "all") == [b"eu", b"eu.fr.paris", b"us.ny", b""]
    assert bodies(emulator, "eu") == [b"eu", b"eu.fr.paris"]
    assert bodies(emulator, "one-word") == [b"eu"]


async def test_headers_exchange(emulator: Emulator, channel: EmulatedChannel) -> None:
    await channel.queue_declare("all")
    await channel.queue_declare("any")
    await channel.queue_bind("all", "amq.headers", arguments={"x-match": "all", "a": 1, "b": 2})
    await channel.queue_bind("any", "amq.headers", arguments={"x-match": "any", "a": 1, "b": 2})
    await channel.publish(
        b"ab", exchange="amq.headers", properties=Properties(headers={"a": 1, "b": 2})
    )
    await channel.publish(b"a", exchange="amq.headers", properties=Properties(headers={"a": 1}))
    await channel.publish(b"none", exchange="amq.headers")
    assert bodies(emulator, "all") == [b"ab"]
    assert bodies(emulator, "any") == [b"ab", b"a"]


async def test_mandatory_unroutable_is_returned_on_a_confirm_channel(
    emulator: Emulator, channel: EmulatedChannel
) -> None:
    with pytest.raises(PublishFailed, match="312 NO_ROUTE"):
        await channel.publish(b"m", routing_key="nowhere", mandatory=True)
    assert not channel.is_closed  # a return is not a channel error
    assert [(e.exchange, e.routing_key) for e in emulator.events_of(Returned)] == [("", "nowhere")]


async def test_non_mandatory_unroutable_is_confirmed_and_dropped(
    emulator: Emulator, channel: EmulatedChannel
) -> None:
    await channel.publish(b"m", routing_key="nowhere")
    assert emulator.events_of(Returned) == []
    assert len(emulator.events_of(Unroutable)) == 1


async def test_without_confirms_a_return_is_not_raised(emulator: Emulator) -> None:
    channel = await emulator.connect().channel()
    await channel.publish(b"m", routing_key="nowhere", mandatory=True)
    assert len(emulator.events_of(Returned)) == 1


async def test_routed_mandatory_publish_is_confirmed(
    emulator: Emulator, channel: EmulatedChannel
) -> None:
    await channel.queue_declare("q")
    await channel.publish(b"m", routing_key="q", mandatory=True)
    assert bodies(emulator, "q") == [b"m"]


async def test_reject_publish_overflow_nacks_the_publish(
    emulator: Emulator, channel: EmulatedChannel
) -> None:
    await channel.queue_declare("q", arguments={"x-max-length": 1, "x-overflow": "reject-publish"})
    await channel.publish(b"1", routing_key="q")
    with pytest.raises(PublishFailed, match=r"refused the message \(basic.nack\)"):
        await channel.publish(b"2", routing_key="q")
    assert bodies(emulator, "q") == [b"1"]


async def test_alternate_exchange_takes_what_the_exchange_cannot_route(
    emulator: Emulator, channel: EmulatedChannel
) -> None:
    await channel.exchange_declare("ae", type="fanout")
    await channel.queue_declare("unrouted")
    await channel.queue_bind("unrouted", "ae")
    await channel.exchange_declare("main", type="direct", arguments={"alternate-exchange": "ae"})
    await channel.queue_declare("known")
    await channel.queue_bind("known", "main", "k")
    await channel.publish(b"k", exchange="main", routing_key="k", mandatory=True)
    await channel.publish(b"other", exchange="main", routing_key="other", mandatory=True)
    assert bodies(emulator, "known") == [b"k"]
    assert bodies(emulator, "unrouted") == [b"other"]


async def test_delayed_message_exchange_delivers_after_x_delay(
    emulator: Emulator, channel: EmulatedChannel
) -> None:
    await channel.exchange_declare(
        "refunds.delay", type="x-delayed-message", arguments={"x-delayed-type": "direct"}
    )
    await channel.queue_declare("refunds")
    await channel.queue_bind("refunds", "refunds.delay", "refunds")
    await channel.publish(
        b"later",
        exchange="refunds.delay",
        routing_key="refunds",
        properties=Properties(headers={"x-delay": 5000, "h": "v"}),
    )
    await channel.publish(b"now", exchange="refunds.delay", routing_key="refunds")
    assert bodies(emulator, "refunds") == [b"now"]
    await emulator.advance(4.999)
    assert bodies(emulator, "refunds") == [b"now"]
    await emulator.advance(0.001)
    messages = emulator.messages("refunds")
    assert [m.body for m in messages] == [b"now", b"later"]
    later = messages[1]
    # the plugin negates x-delay on the way out, so the message is not delayed again
    assert later.headers == {"h": "v", "x-delay": -5000}
    assert (later.exchange, later.routing_key) == ("refunds.delay", "refunds")
    assert [e.delay_ms for e in emulator.events_of(Delayed)] == [5000]
    assert [(e.at_s - emulator.clock.now_s, e.queues) for e in emulator.events_of(Released)] == [
        (0.0, ("refunds",))
    ]


async def test_a_mandatory_delayed_message_is_returned_and_still_delivered(
    emulator: Emulator, channel: EmulatedChannel
) -> None:
    # the plugin routes nothing at publish time (rabbitmq-delayed-message-exchange#7)
    await channel.exchange_declare(
        "d", type="x-delayed-message", arguments={"x-delayed-type": "direct"}
    )
    await channel.queue_declare("q")
    await channel.queue_bind("q", "d", "q")
    with pytest.raises(PublishFailed):
        await channel.publish(
            b"m",
            exchange="d",
            routing_key="q",
            properties=Properties(headers={"x-delay": 1000}),
            mandatory=True,
        )
    await emulator.advance(1)
    assert bodies(emulator, "q") == [b"m"]


async def test_delayed_messages_leave_in_due_order(
    emulator: Emulator, channel: EmulatedChannel
) -> None:
    await channel.exchange_declare(
        "d", type="x-delayed-message", arguments={"x-delayed-type": "fanout"}
    )
    await channel.queue_declare("q")
    await channel.queue_bind("q", "d")
    for body, delay_ms in ((b"3s", 3000), (b"1s", 1000), (b"2s", "2000")):
        await channel.publish(
            body, exchange="d", properties=Properties(headers={"x-delay": delay_ms})
        )
    await emulator.advance(10)
    assert bodies(emulator, "q") == [b"1s", b"2s", b"3s"]


async def test_publishing_to_an_internal_exchange_is_refused(
    emulator: Emulator, channel: EmulatedChannel
) -> None:
    with pytest.raises(AccessRefused) as caught:
        await channel.publish(b"m", exchange="amq.rabbitmq.trace", routing_key="k")
    assert str(caught.value) == (
        "publish to exchange 'amq.rabbitmq.trace' with routing key 'k': ACCESS_REFUSED - "
        "cannot publish to internal exchange 'amq.rabbitmq.trace' in vhost '/' (403)"
    )


async def test_a_missing_alternate_exchange_leaves_the_message_unroutable(
    emulator: Emulator, channel: EmulatedChannel
) -> None:
    await channel.exchange_declare("main", arguments={"alternate-exchange": "missing"})
    with pytest.raises(PublishFailed, match="312 NO_ROUTE"):
        await channel.publish(b"m", exchange="main", routing_key="nobody", mandatory=True)


async def confirm_all(channel: EmulatedChannel, queue: str, count: int) -> list[str]:
    outcomes = []
    for i in range(count):
        try:
            await channel.publish(str(i).encode(), routing_key=queue)
            outcomes.append("ack")
        except PublishFailed:
            outcomes.append("nack")
    return outcomes


@pytest.mark.parametrize(
    ("max_length", "first", "ready", "after_taking_one"),
    [
        (1, ["ack", "ack", "nack", "nack", "nack"], 2, ["nack", "nack", "nack"]),
        (2, ["ack", "ack", "ack", "nack", "nack"], 3, ["nack", "nack", "nack"]),
    ],
)
async def test_a_quorum_queue_overshoots_by_one_then_refuses(
    emulator: Emulator,
    channel: EmulatedChannel,
    max_length: int,
    first: list[str],
    ready: int,
    after_taking_one: list[str],
) -> None:
    # measured on 3.10.8: refusal starts once over the limit, ends below 80 % of it
    arguments: dict[str, FieldValue] = {
        "x-queue-type": "quorum",
        "x-max-length": max_length,
        "x-overflow": "reject-publish",
    }
    await channel.queue_declare("q", arguments=arguments)
    assert await confirm_all(channel, "q", 5) == first
    assert emulator.queue("q").ready == ready
    await channel.get("q", no_ack=True)
    assert await confirm_all(channel, "q", 3) == after_taking_one
    while await channel.get("q", no_ack=True) is not None:
        pass
    assert await confirm_all(channel, "q", 1) == ["ack"]


async def test_a_quorum_queue_treats_reject_publish_dlx_as_drop_head(
    emulator: Emulator, channel: EmulatedChannel
) -> None:
    await channel.queue_declare("dead")
    arguments: dict[str, FieldValue] = {
        "x-queue-type": "quorum",
        "x-max-length": 2,
        "x-overflow": "reject-publish-dlx",
        "x-dead-letter-exchange": "",
        "x-dead-letter-routing-key": "dead",
    }
    await channel.queue_declare("q", arguments=arguments)
    assert await confirm_all(channel, "q", 5) == ["ack"] * 5
    assert [m.body for m in emulator.messages("q")] == [b"3", b"4"]
    assert len(emulator.messages("dead")) == 3
