"""What the servers do to a message's header table, byte for byte, and the emulator alike
(docs/reference/testing.md, "Headers"): a table with one header of each of the 18 field types
RabbitMQ takes (tests/wire_headers.py; over a raw socket on RabbitMQ), handed out through each path
a message takes in rr's topologies: classic and quorum queues (``basic.get`` and a consumer), a
quorum queue's return, a dead-lettering, sender-selected routing. Each type tag and its bytes
come out as published, but for what the server does itself (``headers-as-served``,
tests/contract/versions.py): ``L`` written as ``l``, top-level names sorted. The headers the
server adds are typed as RabbitMQ types them.
"""

from __future__ import annotations

import asyncio
import struct

from rabbitctl_retry.transport.base import Delivery
from tests.backends import Backend
from tests.contract.versions import expected
from tests.wire_headers import (
    TYPED_NAMES,
    TYPED_TABLE,
    Field,
    as_the_server_writes_it,
    field,
    parse,
    publish_typed,
    take_typed,
)


def as_served(backend: Backend, path: str, table: bytes = TYPED_TABLE) -> list[Field]:
    again, sorted_names = expected(backend.version, "headers-as-served")[path]
    return as_the_server_writes_it(parse(table), written_again=again, sorted_names=sorted_names)


def typed(fields: list[Field]) -> list[Field]:
    return [f for f in fields if f.name in TYPED_NAMES]


async def consumed(backend: Backend, queue: str) -> list[Field]:
    """The header fields of the next delivery to a consumer of ``queue`` (acked): the bytes
    the client read, as rr's clients keep them (an ``EncodedTable``)."""
    channel = await backend.channel(confirms=False)
    got: asyncio.Future[Delivery] = asyncio.get_running_loop().create_future()

    async def first(delivery: Delivery) -> None:
        if not got.done():
            got.set_result(delivery)

    tag = await channel.consume(queue, first, no_ack=True)
    await backend.until(got.done, f"a delivery from {queue}")
    await channel.cancel(tag)
    encoded = getattr(got.result().properties.headers, "encoded", None)
    assert isinstance(encoded, bytes)
    return parse(encoded)


async def test_classic_and_quorum_queues_hand_the_table_out_as_measured(
    backend: Backend,
) -> None:
    channel = await backend.channel()
    await channel.queue_declare("classic")
    await channel.queue_declare("quorum", arguments={"x-queue-type": "quorum"})

    for queue in ("classic", "quorum"):
        await publish_typed(backend, queue, b"got")
        got = await take_typed(backend, queue)
        assert got is not None
        assert typed(got.fields) == as_served(backend, f"{queue} get")
        await publish_typed(backend, queue, b"consumed")
        assert typed(await consumed(backend, queue)) == as_served(backend, f"{queue} consume")

    await publish_typed(backend, "quorum", b"returned")
    held = await channel.get("quorum")
    assert held is not None
    await channel.reject(held.delivery_tag, requeue=True)
    again = await take_typed(backend, "quorum")
    assert again is not None
    assert typed(again.fields) == as_served(backend, "quorum requeued")
    count = {f.name: f for f in again.fields}["x-delivery-count"]
    assert (count.tag, count.data) == ("l", struct.pack(">q", 1))  # the server's long
    assert [f.name for f in again.fields] == sorted(f.name for f in again.fields)


async def test_a_dead_letter_keeps_each_type_and_the_servers_headers_are_typed(
    backend: Backend,
) -> None:
    channel = await backend.channel()
    await channel.queue_declare("dead")
    await channel.queue_declare(
        "waiting",
        arguments={
            "x-message-ttl": 0,
            "x-dead-letter-exchange": "",
            "x-dead-letter-routing-key": "dead",
        },
    )
    await publish_typed(backend, "waiting", b"expired")
    await backend.until(lambda: _depth(backend, "dead"), "the dead letter")
    letter = await take_typed(backend, "dead")
    assert letter is not None
    assert typed(letter.fields) == as_served(backend, "dead-lettered")
    names = [f.name for f in letter.fields]
    assert names == sorted(names)
    added = {f.name: f for f in letter.fields if f.name not in TYPED_NAMES}
    assert {name: f.tag for name, f in added.items() if name.startswith("x-first")} == {
        "x-first-death-exchange": "S",
        "x-first-death-queue": "S",
        "x-first-death-reason": "S",
    }
    (entry,) = _items(added["x-death"].data[4:])
    assert entry[0] == "F"
    tags = {f.name: f.tag for f in parse(entry[1][4:])}
    assert {name: tags[name] for name in ("count", "reason", "queue", "time", "exchange")} == {
        "count": "l",
        "reason": "S",
        "queue": "S",
        "time": "T",
        "exchange": "S",
    }
    assert tags["routing-keys"] == "A"


async def test_sender_selected_routing_removes_bcc_and_keeps_each_type(backend: Backend) -> None:
    channel = await backend.channel()
    for queue in ("to", "bcc"):
        await channel.queue_declare(queue)
    to_bcc = b"S" + struct.pack(">I", 3) + b"bcc"
    bcc = field("BCC", "A", struct.pack(">I", len(to_bcc)) + to_bcc)
    await publish_typed(backend, "to", b"routed", table=TYPED_TABLE + bcc)
    for queue in ("to", "bcc"):
        got = await take_typed(backend, queue)
        assert got is not None
        assert got.fields == as_served(backend, "BCC removed")  # BCC is gone from both


async def _depth(backend: Backend, queue: str) -> bool:
    channel = await backend.channel()
    return (await channel.queue_declare(queue, passive=True)).message_count > 0


def _items(array: bytes) -> list[tuple[str, bytes]]:
    items = []
    at = 0
    while at < len(array):
        tag = chr(array[at])
        assert tag == "F", "x-death holds tables"
        (size,) = struct.unpack_from(">I", array, at + 1)
        items.append((tag, array[at + 1 : at + 5 + size]))
        at += 5 + size
    return items
