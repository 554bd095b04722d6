"""basic.get, basic.consume, prefetch, acks, requeue order, returns on close."""

from __future__ import annotations

import asyncio
import sys

import pytest

from rabbitctl_retry.emulator import (
    Acked,
    Delivered,
    EmulatedChannel,
    EmulatedConnection,
    Emulator,
    Published,
    Requeued,
)
from rabbitctl_retry.errors import (
    AccessRefused,
    BrokerUnreachable,
    ChannelClosed,
    NotFound,
    ResourceLocked,
)
from rabbitctl_retry.transport.base import Delivery, Properties
from tests.observe import Recorder


async def publish_numbers(channel: EmulatedChannel, queue: str, count: int) -> None:
    for i in range(1, count + 1):
        await channel.publish(str(i).encode(), routing_key=queue)


async def test_get_takes_the_head_and_reports_what_is_left(
    emulator: Emulator, channel: EmulatedChannel
) -> None:
    await channel.queue_declare("q")
    assert await channel.get("q") is None
    await publish_numbers(channel, "q", 3)
    first = await channel.get("q")
    assert first is not None
    assert (first.body, first.message_count, first.redelivered) == (b"1", 2, False)
    assert (first.exchange, first.routing_key, first.consumer_tag) == ("", "q", None)
    assert first.delivery_tag == 1
    assert emulator.queue("q").ready == 2
    assert emulator.queue("q").unacked == 1
    await channel.ack(first.delivery_tag)
    assert emulator.queue("q").unacked == 0


async def test_get_no_ack_removes_at_once(emulator: Emulator, channel: EmulatedChannel) -> None:
    await channel.queue_declare("q")
    await publish_numbers(channel, "q", 1)
    delivery = await channel.get("q", no_ack=True)
    assert delivery is not None
    assert emulator.queue("q").ready == emulator.queue("q").unacked == 0
    await channel.ack(delivery.delivery_tag)  # nothing to ack: the server closes the channel
    assert channel.is_closed


async def test_declare_ok_counts_ready_messages_and_consumers(
    emulator: Emulator, channel: EmulatedChannel
) -> None:
    await channel.queue_declare("q")
    await publish_numbers(channel, "q", 3)
    await channel.get("q")
    info = await channel.queue_declare("q", passive=True)
    assert (info.name, info.message_count, info.consumer_count) == ("q", 2, 0)


async def test_prefetch_limits_unacked_deliveries_per_consumer(
    emulator: Emulator, channel: EmulatedChannel
) -> None:
    await channel.queue_declare("q")
    await publish_numbers(channel, "q", 5)
    await channel.qos(2)
    recorder = Recorder(channel)
    await channel.consume("q", recorder)
    await emulator.settle()
    assert recorder.bodies == [b"1", b"2"]
    await channel.ack(recorder.deliveries[0].delivery_tag)
    await emulator.settle()
    assert recorder.bodies == [b"1", b"2", b"3"]
    await channel.ack(recorder.deliveries[2].delivery_tag, multiple=True)
    await emulator.settle()
    assert recorder.bodies == [b"1", b"2", b"3", b"4", b"5"]
    assert emulator.queue("q").unacked == 2


async def test_a_consumer_acks_from_inside_its_callback(
    emulator: Emulator, channel: EmulatedChannel
) -> None:
    await channel.queue_declare("q")
    await channel.qos(1)
    recorder = Recorder(channel, "ack")
    tag = await channel.consume("q", recorder)
    await publish_numbers(channel, "q", 4)
    await emulator.settle()
    assert recorder.bodies == [b"1", b"2", b"3", b"4"]
    assert {d.consumer_tag for d in recorder.deliveries} == {tag}
    assert [d.delivery_tag for d in recorder.deliveries] == [1, 2, 3, 4]
    assert emulator.queue("q").ready == emulator.queue("q").unacked == 0


async def test_consumers_take_turns(emulator: Emulator, channel: EmulatedChannel) -> None:
    await channel.queue_declare("q")
    first, second = Recorder(channel, "ack"), Recorder(channel, "ack")
    await channel.consume("q", first)
    await channel.consume("q", second)
    await publish_numbers(channel, "q", 6)
    await emulator.settle()
    assert first.bodies == [b"1", b"3", b"5"]
    assert second.bodies == [b"2", b"4", b"6"]


async def test_a_full_consumer_is_skipped(emulator: Emulator, channel: EmulatedChannel) -> None:
    await channel.queue_declare("q")
    await channel.qos(1)
    slow = Recorder(channel)  # never acks
    fast = Recorder(channel, "ack")
    await channel.consume("q", slow)
    await channel.consume("q", fast)
    await publish_numbers(channel, "q", 4)
    await emulator.settle()
    assert slow.bodies == [b"1"]
    assert fast.bodies == [b"2", b"3", b"4"]


async def test_cancel_stops_deliveries_but_keeps_unacked(
    emulator: Emulator, channel: EmulatedChannel
) -> None:
    await channel.queue_declare("q")
    recorder = Recorder(channel)
    tag = await channel.consume("q", recorder)
    await publish_numbers(channel, "q", 1)
    await emulator.settle()
    await channel.cancel(tag)
    await publish_numbers(channel, "q", 1)
    await emulator.settle()
    assert recorder.bodies == [b"1"]
    assert emulator.queue("q").unacked == 1
    await channel.ack(recorder.deliveries[0].delivery_tag)
    assert emulator.queue("q").ready == 1


async def test_no_ack_consumer_takes_everything(
    emulator: Emulator, channel: EmulatedChannel
) -> None:
    await channel.queue_declare("q")
    await channel.qos(1)
    recorder = Recorder(channel)
    await channel.consume("q", recorder, no_ack=True)
    await publish_numbers(channel, "q", 3)
    await emulator.settle()
    assert recorder.bodies == [b"1", b"2", b"3"]
    assert emulator.queue("q").unacked == 0


async def test_classic_requeue_goes_back_to_the_original_position(
    emulator: Emulator, connection: EmulatedConnection
) -> None:
    # measured on 3.10.8: get 1,2,3; reject 2 then 1 -> 1,2,4,5; close -> 1,2,3,4,5
    channel = await connection.channel()
    await channel.queue_declare("q")
    await publish_numbers(channel, "q", 5)
    got = [await channel.get("q") for _ in range(3)]
    assert all(d is not None for d in got)
    tags = [d.delivery_tag for d in got if d is not None]
    await channel.reject(tags[1], requeue=True)
    await channel.reject(tags[0], requeue=True)
    assert [m.body for m in emulator.messages("q")] == [b"1", b"2", b"4", b"5"]
    assert [m.redelivered for m in emulator.messages("q")] == [True, True, False, False]
    again = [await channel.get("q") for _ in range(4)]
    await channel.close()
    assert all(d is not None for d in again)
    assert [m.body for m in emulator.messages("q")] == [b"1", b"2", b"3", b"4", b"5"]
    assert all(m.redelivered for m in emulator.messages("q"))


async def test_nack_multiple_requeues_in_order(
    emulator: Emulator, channel: EmulatedChannel
) -> None:
    await channel.queue_declare("q")
    await publish_numbers(channel, "q", 4)
    got = [await channel.get("q") for _ in range(3)]
    last = got[-1]
    assert last is not None
    await channel.nack(last.delivery_tag, multiple=True, requeue=True)
    assert [m.body for m in emulator.messages("q")] == [b"1", b"2", b"3", b"4"]
    assert [e.cause for e in emulator.events_of(Requeued)] == ["nack", "nack", "nack"]


async def test_unacked_deliveries_return_when_the_channel_closes(
    emulator: Emulator, connection: EmulatedConnection
) -> None:
    channel = await connection.channel()
    await channel.queue_declare("q")
    recorder = Recorder(channel)
    await channel.consume("q", recorder)
    await publish_numbers(channel, "q", 2)
    await emulator.settle()
    assert emulator.queue("q").unacked == 2
    await channel.close()
    assert channel.is_closed
    assert [m.body for m in emulator.messages("q")] == [b"1", b"2"]
    assert all(m.redelivered for m in emulator.messages("q"))
    assert emulator.queue("q").consumers == 0
    assert [e.cause for e in emulator.events_of(Requeued)] == ["channel_closed"] * 2
    with pytest.raises(ChannelClosed):
        await channel.ack(1)


async def test_unacked_deliveries_return_when_the_connection_closes(emulator: Emulator) -> None:
    admin = await emulator.connect().channel()
    await admin.queue_declare("q")
    await publish_numbers(admin, "q", 1)
    connection = emulator.connect()
    worker = await connection.channel()
    delivery = await worker.get("q")
    assert delivery is not None
    await connection.close()
    assert connection.is_closed
    assert worker.is_closed
    again = await admin.get("q")
    assert again is not None
    assert (again.body, again.redelivered) == (b"1", True)


async def test_another_consumer_gets_what_a_closed_channel_returns(
    emulator: Emulator, connection: EmulatedConnection
) -> None:
    crashing = await connection.channel()
    healthy = await connection.channel()
    await healthy.queue_declare("q")
    crashed = Recorder(crashing)
    await crashing.consume("q", crashed)
    await publish_numbers(healthy, "q", 1)
    await emulator.settle()
    survivor = Recorder(healthy, "ack")
    await healthy.consume("q", survivor)
    await crashing.close()
    await emulator.settle()
    assert crashed.bodies == [b"1"]
    assert [(d.body, d.redelivered) for d in survivor.deliveries] == [(b"1", True)]


async def test_unknown_delivery_tag_closes_the_channel(
    emulator: Emulator, channel: EmulatedChannel
) -> None:
    await channel.queue_declare("q")
    await publish_numbers(channel, "q", 1)
    delivery = await channel.get("q")
    assert delivery is not None
    await channel.ack(delivery.delivery_tag)
    await channel.ack(delivery.delivery_tag)  # no answer in AMQP: the channel closes
    assert channel.is_closed
    with pytest.raises(ChannelClosed) as caught:
        await channel.get("q")
    assert str(caught.value) == (
        "get from queue 'q': the channel was closed earlier: "
        "PRECONDITION_FAILED - unknown delivery tag 1 (406)"
    )


async def test_ack_multiple_zero_acks_everything(
    emulator: Emulator, channel: EmulatedChannel
) -> None:
    await channel.ack(0, multiple=True)  # nothing outstanding: fine
    await channel.queue_declare("q")
    await publish_numbers(channel, "q", 3)
    for _ in range(3):
        await channel.get("q")
    await channel.ack(0, multiple=True)
    assert emulator.queue("q").unacked == 0


async def test_callback_errors_are_logged_and_kept(
    emulator: Emulator, channel: EmulatedChannel
) -> None:
    async def broken(delivery: Delivery) -> None:
        raise RuntimeError("boom")

    await channel.queue_declare("q")
    await channel.consume("q", broken)
    await publish_numbers(channel, "q", 1)
    await emulator.settle()
    assert [str(e) for e in emulator.callback_errors] == ["boom"]


async def test_exclusive_consumer_refuses_company(
    emulator: Emulator, channel: EmulatedChannel
) -> None:
    await channel.queue_declare("q")
    await channel.consume("q", Recorder(channel), exclusive=True)
    with pytest.raises(AccessRefused, match="in exclusive use"):
        await channel.consume("q", Recorder(channel))


async def test_exclusive_queue_belongs_to_its_connection(emulator: Emulator) -> None:
    owner = emulator.connect()
    mine = await owner.channel()
    info = await mine.queue_declare("", exclusive=True, durable=False)
    assert info.name.startswith("amq.gen-")
    other = await emulator.connect().channel()
    await other.publish(b"m", routing_key=info.name)  # publishing is allowed
    with pytest.raises(ResourceLocked, match="cannot obtain exclusive access"):
        await other.get(info.name)
    assert other.is_closed
    await owner.close()
    assert info.name not in emulator.queue_names()


async def test_auto_delete_queue_goes_with_its_last_consumer(
    emulator: Emulator, channel: EmulatedChannel
) -> None:
    await channel.queue_declare("tmp", auto_delete=True, durable=False)
    tag = await channel.consume("tmp", Recorder(channel))
    assert "tmp" in emulator.queue_names()
    await channel.cancel(tag)
    assert "tmp" not in emulator.queue_names()
    with pytest.raises(NotFound):
        await channel.queue_declare("tmp", passive=True)


async def test_headers_handed_out_are_private_copies(
    emulator: Emulator, channel: EmulatedChannel
) -> None:
    headers: dict[str, object] = {"k": "v", "nested": {"b": 1, "a": [1]}}
    await channel.queue_declare("q")
    await channel.publish(b"m", routing_key="q", properties=Properties(headers=headers))  # type: ignore[arg-type]
    headers["k"] = "changed by the publisher"
    delivery = await channel.get("q")
    assert delivery is not None
    assert delivery.properties.headers is not None
    delivery.properties.headers["k"] = "changed by the consumer"
    await channel.reject(delivery.delivery_tag, requeue=True)
    stored = emulator.messages("q")[0].headers
    assert stored == {"k": "v", "nested": {"a": [1], "b": 1}}
    # a table arrives in the order rr's codec wrote it; nested ones in theirs on every server
    # (the emulator's default server, 4.0, sorts the top level only: docs/reference/testing.md)
    assert list(stored) == ["k", "nested"]
    nested = stored["nested"]
    assert isinstance(nested, dict)
    assert list(nested) == ["b", "a"]


async def test_prefetch_belongs_to_the_consumer_made_under_it(
    emulator: Emulator, channel: EmulatedChannel
) -> None:
    # measured on 3.10.8 (basic.qos global=false): qos 1, consume A, qos 3, consume B
    await channel.queue_declare("q")
    first, second = Recorder(channel), Recorder(channel)
    await channel.qos(1)
    await channel.consume("q", first)
    await channel.qos(3)
    await channel.consume("q", second)
    await publish_numbers(channel, "q", 10)
    await emulator.settle()
    assert first.bodies == [b"1"]
    assert second.bodies == [b"2", b"3", b"4"]


async def test_looking_at_a_queue_changes_nothing(
    emulator: Emulator, channel: EmulatedChannel
) -> None:
    await channel.queue_declare("q")
    await publish_numbers(channel, "q", 2)
    before = emulator.messages("q")
    assert emulator.messages("q") == before
    assert [m.redelivered for m in before] == [False, False]
    delivery = await channel.get("q")
    assert delivery is not None
    assert (delivery.body, delivery.redelivered) == (b"1", False)
    assert [m.body for m in emulator.unacked_messages("q")] == [b"1"]


async def test_the_event_history_tells_the_story(
    emulator: Emulator, channel: EmulatedChannel
) -> None:
    await channel.queue_declare("q")
    await channel.consume("q", Recorder(channel, "ack"), consumer_tag="c1")
    await channel.publish(b"m", routing_key="q")
    await emulator.settle()
    assert emulator.events == [
        Published(emulator.clock.now_s, 1, "", "q", ("q",)),
        Delivered(emulator.clock.now_s, 1, "q", 1, "c1", False, 0),
        Acked(emulator.clock.now_s, 1, "q", 1),
    ]


async def test_a_broker_shutdown_closes_connections_and_returns_messages(
    emulator: Emulator,
) -> None:
    connection = emulator.connect()
    channel = await connection.channel()
    await channel.queue_declare("q")
    await channel.consume("q", Recorder(channel))
    await publish_numbers(channel, "q", 1)
    await emulator.settle()
    waiter = asyncio.ensure_future(connection.wait_closed())
    await asyncio.sleep(0)
    assert not waiter.done()
    emulator.drop_connections()
    await waiter
    assert connection.is_closed
    with pytest.raises(BrokerUnreachable, match="CONNECTION_FORCED"):
        await channel.get("q")
    assert [(m.body, m.redelivered) for m in emulator.messages("q")] == [(b"1", True)]


async def test_client_defaults_match_the_adapters(
    emulator: Emulator, channel: EmulatedChannel
) -> None:
    await channel.queue_declare("q")
    await channel.publish(b"a", routing_key="q")
    await channel.publish(b"b", routing_key="q", properties=Properties(message_id="mine"))
    first, second = emulator.messages("q")
    assert first.properties.delivery_mode == 1  # the clients' default properties
    assert first.properties.message_id is None  # and no message id of their own
    assert (second.properties.delivery_mode, second.properties.message_id) == (None, "mine")


async def _calls_to_flow(count: int) -> int:
    """Python function calls the emulator makes to publish ``count`` messages to a consumer
    and settle them: a count of work, the same on a busy machine as on an idle one."""
    emulator = Emulator(server_version="3.10.8")
    channel = await emulator.connect().channel()
    await channel.queue_declare("q")
    await channel.qos(50)
    recorder = Recorder(channel, "ack")
    await channel.consume("q", recorder)
    calls = 0

    def count_call(frame: object, event: str, arg: object) -> None:
        nonlocal calls
        if event == "call":
            calls += 1

    sys.setprofile(count_call)
    try:
        for _ in range(count):
            await channel.publish(b"m", routing_key="q")
        await emulator.settle()
    finally:
        sys.setprofile(None)
    assert len(recorder.deliveries) == count
    return calls


async def test_many_messages_flow_in_linear_time() -> None:
    """Four times the messages, about four times the work (calls counted, not seconds: a
    quadratic step would make it sixteen)."""
    small, large = await _calls_to_flow(1_000), await _calls_to_flow(4_000)
    assert large / small < 5, (small, large)
