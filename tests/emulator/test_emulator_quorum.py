"""Quorum queues: requeue order, x-delivery-count, x-delivery-limit, version defaults."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from rabbitctl_retry.emulator import (
    DEFAULT_START_S,
    DeadLettered,
    Dropped,
    EmulatedChannel,
    EmulatedConnection,
    Emulator,
)
from rabbitctl_retry.errors import PreconditionFailed
from rabbitctl_retry.fields import FieldValue
from rabbitctl_retry.transport.base import Delivery, Properties
from tests.observe import Recorder


def quorum(
    limit: int | None = None, dead_letter: str | None = "payouts.dead"
) -> dict[str, FieldValue]:
    arguments: dict[str, FieldValue] = {"x-queue-type": "quorum"}
    if limit is not None:
        arguments["x-delivery-limit"] = limit
    if dead_letter is not None:
        arguments["x-dead-letter-exchange"] = ""
        arguments["x-dead-letter-routing-key"] = dead_letter
    return arguments


def count_header(delivery: Delivery) -> FieldValue:
    return (delivery.properties.headers or {}).get("x-delivery-count", "absent")


async def always_retry(
    emulator: Emulator, channel: EmulatedChannel, arguments: dict[str, FieldValue]
) -> Recorder:
    await channel.queue_declare("payouts.dead")
    await channel.queue_declare("payouts", arguments=arguments)
    await channel.qos(1)
    recorder = Recorder(channel, "requeue")
    await channel.consume("payouts", recorder)
    await channel.publish(
        b"p", routing_key="payouts", properties=Properties(message_id="m1", headers={"a": "b"})
    )
    await emulator.settle()
    return recorder


async def test_limit_4_is_five_deliveries_then_the_dead_letter_queue(
    emulator: Emulator, channel: EmulatedChannel
) -> None:
    recorder = await always_retry(emulator, channel, quorum(limit=4))
    assert [count_header(d) for d in recorder.deliveries] == ["absent", 1, 2, 3, 4]
    assert [d.redelivered for d in recorder.deliveries] == [False, True, True, True, True]
    assert emulator.messages("payouts") == []
    (dead,) = emulator.messages("payouts.dead")
    assert (dead.exchange, dead.routing_key, dead.redelivered) == ("", "payouts.dead", False)
    assert dead.properties.message_id == "m1"
    # no x-delivery-count on the dead letter: it is a new message in the dead-letter queue
    assert dead.headers == {
        "a": "b",
        "x-death": [
            {
                "count": 1,
                "reason": "delivery_limit",
                "queue": "payouts",
                "time": datetime.fromtimestamp(DEFAULT_START_S, tz=UTC),
                "exchange": "",
                "routing-keys": ["payouts"],
            }
        ],
        "x-first-death-exchange": "",
        "x-first-death-queue": "payouts",
        "x-first-death-reason": "delivery_limit",
    }
    assert [(e.reason, e.from_queue, e.to_queues) for e in emulator.events_of(DeadLettered)] == [
        ("delivery_limit", "payouts", ("payouts.dead",))
    ]


async def test_limit_0_is_one_delivery(emulator: Emulator, channel: EmulatedChannel) -> None:
    recorder = await always_retry(emulator, channel, quorum(limit=0))
    assert [count_header(d) for d in recorder.deliveries] == ["absent"]
    assert len(emulator.messages("payouts.dead")) == 1


async def test_limit_without_a_dead_letter_route_drops_the_message(
    emulator: Emulator, channel: EmulatedChannel
) -> None:
    recorder = await always_retry(emulator, channel, quorum(limit=2, dead_letter=None))
    assert len(recorder.deliveries) == 3
    assert emulator.messages("payouts") == emulator.messages("payouts.dead") == []
    assert [(e.queue, e.cause) for e in emulator.events_of(Dropped)] == [
        ("payouts", "delivery_limit")
    ]


async def test_rabbitmq_4_defaults_the_limit_to_20() -> None:
    emulator = Emulator(server_version="4.1.0")
    channel = await emulator.connect().channel()
    recorder = await always_retry(emulator, channel, quorum())
    assert len(recorder.deliveries) == 21
    assert [count_header(d) for d in recorder.deliveries][-1] == 20
    assert len(emulator.messages("payouts.dead")) == 1


async def test_rabbitmq_3_has_no_default_limit(
    emulator: Emulator, channel: EmulatedChannel
) -> None:
    await channel.queue_declare("payouts", arguments=quorum())
    await channel.publish(b"p", routing_key="payouts")
    for expected in range(30):
        delivery = await channel.get("payouts")
        assert delivery is not None
        assert count_header(delivery) == expected  # basic.get shows 0 on 3.x
        await channel.reject(delivery.delivery_tag, requeue=True)
    assert len(emulator.messages("payouts")) == 1


async def test_basic_get_on_4_shows_no_count_before_a_return() -> None:
    emulator = Emulator(server_version="4.0.5")
    channel = await emulator.connect().channel()
    await channel.queue_declare("q", arguments=quorum())
    await channel.publish(b"p", routing_key="q")
    first = await channel.get("q")
    assert first is not None
    assert count_header(first) == "absent"


async def test_nack_counts_on_3_10_but_not_on_4_3() -> None:
    for version, expected in (("3.10.8", 3), ("4.3.0", None)):
        emulator = Emulator(server_version=version)
        channel = await emulator.connect().channel()
        await channel.queue_declare("payouts.dead")
        await channel.queue_declare("payouts", arguments=quorum(limit=2))
        await channel.publish(b"p", routing_key="payouts")
        deliveries = 0
        while deliveries < 10 and (delivery := await channel.get("payouts")) is not None:
            deliveries += 1
            await channel.nack(delivery.delivery_tag, requeue=True)
        assert (deliveries if deliveries < 10 else None) == expected, version


async def test_drop_dead_letters_as_rejected(emulator: Emulator, channel: EmulatedChannel) -> None:
    await channel.queue_declare("payouts.dead")
    await channel.queue_declare("payouts", arguments=quorum(limit=4))
    recorder = Recorder(channel, "drop")
    await channel.consume("payouts", recorder)
    await channel.publish(b"p", routing_key="payouts")
    await emulator.settle()
    assert len(recorder.deliveries) == 1
    (dead,) = emulator.messages("payouts.dead")
    assert dead.headers["x-first-death-reason"] == "rejected"


async def test_requeue_goes_to_the_back_and_a_closed_channel_counts(
    emulator: Emulator, connection: EmulatedConnection
) -> None:
    # measured on 3.10.8: get 1,2,3; reject 2 then 1 -> 4,5,2,1; close -> 3,4,5,2,1
    channel = await connection.channel()
    await channel.queue_declare("q", arguments=quorum())
    for i in range(1, 6):
        await channel.publish(str(i).encode(), routing_key="q")
    got = [await channel.get("q") for _ in range(3)]
    tags = [d.delivery_tag for d in got if d is not None]
    assert [count_header(d) for d in got if d is not None] == [0, 0, 0]
    await channel.reject(tags[1], requeue=True)
    await channel.reject(tags[0], requeue=True)
    assert [(m.body, m.delivery_count) for m in emulator.messages("q")] == [
        (b"4", 0),
        (b"5", 0),
        (b"2", 1),
        (b"1", 1),
    ]
    rest = [await channel.get("q") for _ in range(4)]
    assert [(d.body, d.redelivered, count_header(d)) for d in rest if d is not None] == [
        (b"4", False, 0),
        (b"5", False, 0),
        (b"2", True, 1),
        (b"1", True, 1),
    ]
    await channel.close()
    assert [(m.body, m.delivery_count, m.redelivered) for m in emulator.messages("q")] == [
        (b"3", 1, True),
        (b"4", 1, True),
        (b"5", 1, True),
        (b"2", 2, True),
        (b"1", 2, True),
    ]


async def test_a_consumer_dying_with_the_delivery_spends_an_attempt(emulator: Emulator) -> None:
    admin = await emulator.connect().channel()
    await admin.queue_declare("payouts.dead")
    await admin.queue_declare("payouts", arguments=quorum(limit=1))
    await admin.publish(b"p", routing_key="payouts")
    seen: list[FieldValue] = []
    for _ in range(2):
        connection = emulator.connect()
        worker = await connection.channel()
        recorder = Recorder(worker)  # takes it and never settles
        await worker.consume("payouts", recorder)
        await emulator.settle()
        seen.extend(count_header(d) for d in recorder.deliveries)
        await connection.close()
    assert seen == ["absent", 1]
    assert len(emulator.messages("payouts.dead")) == 1


@pytest.mark.parametrize(
    ("durable", "exclusive", "auto_delete", "prop"),
    [
        (False, False, False, "non-durable"),
        (True, True, False, "exclusive-owner"),
        (True, False, True, "auto-delete"),
    ],
)
async def test_quorum_queues_must_be_durable_shared_and_kept(
    emulator: Emulator,
    channel: EmulatedChannel,
    durable: bool,
    exclusive: bool,
    auto_delete: bool,
    prop: str,
) -> None:
    with pytest.raises(PreconditionFailed) as caught:
        await channel.queue_declare(
            "qq",
            durable=durable,
            exclusive=exclusive,
            auto_delete=auto_delete,
            arguments={"x-queue-type": "quorum"},
        )
    assert str(caught.value) == (
        f"declare queue 'qq': PRECONDITION_FAILED - invalid property '{prop}' for queue 'qq' "
        "in vhost '/' (406)"
    )
    assert channel.is_closed
    assert "qq" not in emulator.queue_names()


async def test_a_closing_channel_returns_to_the_front_a_reject_to_the_back(
    emulator: Emulator, connection: EmulatedConnection
) -> None:
    # measured on 3.10.8: get 1,2,3; reject 2 (requeue); get 4; close -> 1,3,4,5,2
    channel = await connection.channel()
    await channel.queue_declare("q", arguments=quorum())
    for i in range(1, 6):
        await channel.publish(str(i).encode(), routing_key="q")
    got = [await channel.get("q") for _ in range(3)]
    assert got[1] is not None
    await channel.reject(got[1].delivery_tag, requeue=True)
    fourth = await channel.get("q")
    assert fourth is not None
    assert fourth.body == b"4"
    await channel.close()
    assert [(m.body, m.delivery_count) for m in emulator.messages("q")] == [
        (b"1", 1),
        (b"3", 1),
        (b"4", 1),
        (b"5", 0),
        (b"2", 1),
    ]
    # the returned ones are the head: served first
    taker = await connection.channel()
    first = await taker.get("q")
    assert first is not None
    assert first.body == b"1"
