"""Headers other clients write keep their types through rr (docs/how-to/other-clients.md, "Header
types"; docs/explanation/attempts.md, "What a copy keeps"): a message pika or Node's amqplib
published with a header of each type that client writes goes through ``rr run``'s retry copies to
its dead letter, and
``rr dlq move`` moves that on; read over a raw socket (tests/wire_headers.py), each application
header of both copies has the type tag and bytes of the same message as RabbitMQ hands it out
untouched by rr. Compared by tag and bytes, never by Python equality."""

from __future__ import annotations

import asyncio
import datetime
import decimal

import pika

from rabbitctl_retry import Message, Outcome
from rabbitctl_retry.retry.outcome import AnyOutcome
from tests.backends import RabbitBackend, running_work
from tests.dlq.support import rr
from tests.interop.conftest import amqplib
from tests.observe import depth
from tests.wire_headers import Field, as_the_server_writes_it, take_typed

WORK = """
[queues.work]
max_attempts = 3
dead_letter = "work.dead"
"""

PIKA_HEADERS = {
    "p-decimal": decimal.Decimal("123.45"),
    "p-int": 5,
    "p-long": 2**40,
    "p-text": "héllo",
    "p-bytes": b"\x00\x01\x02",
    "p-time": datetime.datetime(2026, 1, 1, 12, 0),
    "p-bool": True,
    "p-void": None,
    "p-table": {"inner": 1, "also": "x"},
    "p-array": [1, "a", True],
}
"""pika's types: D, I, l, S, x, T, t, V, F and A (pika writes no float)."""


def _pika_publish(url: str, queues: tuple[str, ...], message_id: str) -> None:
    connection = pika.BlockingConnection(pika.URLParameters(url))
    try:
        channel = connection.channel()
        channel.confirm_delivery()
        for queue in queues:
            channel.basic_publish(
                "",
                queue,
                message_id.encode(),
                pika.BasicProperties(message_id=message_id, headers=PIKA_HEADERS),
            )
    finally:
        connection.close()


async def _always_retry(message: Message) -> AnyOutcome:
    return Outcome.retry()


def _application(fields: list[Field]) -> dict[str, tuple[str, bytes]]:
    """The headers another client wrote (not rr's, not RabbitMQ's), by name: tag and bytes,
    ``L`` written as ``l`` as RabbitMQ does once it writes a table again."""
    kept = [f for f in fields if not f.name.startswith(("rr-", "x-"))]
    again = as_the_server_writes_it(kept, written_again=True, sorted_names=False)
    return {f.name: (f.tag, f.data) for f in again}


async def _through_rr(rabbit: RabbitBackend) -> None:
    """``work``'s message through rr run (3 attempts, then rr's dead-letter copy), then moved
    by ``rr dlq move`` to ``parked``."""
    async with running_work(rabbit, WORK, _always_retry):
        await rabbit.until(lambda: _holds(rabbit, "work.dead", 1), "the dead letter")
    channel = await rabbit.channel()
    await channel.queue_declare("parked", durable=True)
    moved = await rr(rabbit, "dlq", "move", "work.dead", "--to", "parked", "--yes")
    assert moved.exit_code == 0, moved.output


async def _holds(rabbit: RabbitBackend, queue: str, count: int) -> bool:
    return await depth(rabbit, queue) == count


async def test_pikas_header_types_through_rr(rabbit: RabbitBackend) -> None:
    channel = await rabbit.channel()
    for queue in ("original", "work"):
        await channel.queue_declare(queue, durable=True)
    await asyncio.to_thread(_pika_publish, rabbit.url, ("original", "work"), "p1")
    original = await take_typed(rabbit, "original")
    assert original is not None
    tags = {f.name: f.tag for f in original.fields}
    assert [tags[name] for name in PIKA_HEADERS] == list("DIlSxTtVFA")
    await _through_rr(rabbit)
    (moved,) = [await take_typed(rabbit, "parked")]
    assert moved is not None
    assert moved.message_id == "p1"
    assert _application(moved.fields) == _application(original.fields)


async def test_amqplibs_header_types_through_rr(rabbit: RabbitBackend) -> None:
    channel = await rabbit.channel()
    for queue in ("original", "work"):
        await channel.queue_declare(queue, durable=True)
    for queue in ("original", "work"):
        assert await amqplib(rabbit.url, "publish-typed", queue, "n1") == {"ok": True}
    original = await take_typed(rabbit, "original")
    assert original is not None
    tags = {f.name: f.tag for f in original.fields}
    assert tags["a-decimal"] == "D"
    assert tags["a-float"] == "f"
    assert tags["a-int8"] == "b"
    assert tags["a-int16"] == "s"
    await _through_rr(rabbit)
    moved = await take_typed(rabbit, "parked")
    assert moved is not None
    assert moved.message_id == "n1"
    assert _application(moved.fields) == _application(original.fields)
