"""Routing through each exchange type: which queue gets which message, in order."""

from __future__ import annotations

from datetime import UTC, datetime

from rabbitctl_retry.fields import FieldTable
from rabbitctl_retry.transport.base import Properties
from tests.backends import Backend
from tests.contract.support import bodies
from tests.contract.versions import expected

# -- topic ----------------------------------------------------------------------------------

TOPIC_KEYS = ["", "a", "b", "a.b", "a.c", "a.b.c", "a.", "x.y.b", "a..c"]

TOPIC_PATTERNS = ["a.#", "#.b", "a.#.c", "a.*", "#", "*", "", "a.*.#", "#.#"]

EXPECTED_TOPIC: dict[str, list[str]] = {
    "a.#": ["a", "a.b", "a.c", "a.b.c", "a.", "a..c"],  # '#' matches zero words: "a"
    "#.b": ["b", "a.b", "x.y.b"],  # ... and "b"
    "a.#.c": ["a.c", "a.b.c", "a..c"],  # ... and "a.c"
    "a.*": ["a.b", "a.c", "a."],  # '*' is one word: not "a.b.c", not "a"; "a." has ["a", ""]
    "#": TOPIC_KEYS,  # everything, the empty key too
    "*": ["a", "b"],  # the empty key has no words: '*' does not match it
    "": [""],
    "a.*.#": ["a.b", "a.c", "a.b.c", "a.", "a..c"],
    "#.#": TOPIC_KEYS,
    "both": ["a", "a.b", "a.c", "a.b.c", "a.", "a..c"],  # bound with "a.#" and "#.c": once each
}


async def observe_topic_routing(backend: Backend) -> dict[str, list[str]]:
    """Bind one queue per pattern to a topic exchange, publish every key, drain the queues."""
    channel = await backend.channel()
    await channel.exchange_declare("events", type="topic")
    # queue names from numbers: the client library refuses a '*' in a name
    queues = {pattern: f"topic-{n}" for n, pattern in enumerate(TOPIC_PATTERNS)}
    for pattern, queue in queues.items():
        await channel.queue_declare(queue)
        await channel.queue_bind(queue, "events", pattern)
    await channel.queue_declare("topic-both")
    await channel.queue_bind("topic-both", "events", "a.#")
    await channel.queue_bind("topic-both", "events", "#.c")
    queues["both"] = "topic-both"
    for key in TOPIC_KEYS:
        await channel.publish(key.encode(), exchange="events", routing_key=key)
    return {pattern: await bodies(channel, queue) for pattern, queue in queues.items()}


async def test_topic_routing(backend: Backend) -> None:
    assert await observe_topic_routing(backend) == EXPECTED_TOPIC


# -- direct, default, fanout ----------------------------------------------------------------


async def test_direct_routing(backend: Backend) -> None:
    channel = await backend.channel()
    await channel.exchange_declare("orders", type="direct")
    for queue in ("d1", "d2", "d3"):
        await channel.queue_declare(queue)
    await channel.queue_bind("d1", "orders", "k1")
    await channel.queue_bind("d2", "orders", "k1")
    await channel.queue_bind("d2", "orders", "k2")
    await channel.queue_bind("d2", "orders", "k2")  # the same binding twice is one binding
    await channel.queue_bind("d3", "orders", "")
    for key in ("k1", "k2", "k3", "", "K1", "k1.x"):
        await channel.publish(f"<{key}>".encode(), exchange="orders", routing_key=key)
    # the default exchange routes by queue name, and only by it
    await channel.publish(b"to d1", routing_key="d1")
    await channel.publish(b"to nowhere", routing_key="orders")
    assert {q: await bodies(channel, q) for q in ("d1", "d2", "d3")} == {
        "d1": ["<k1>", "to d1"],
        "d2": ["<k1>", "<k2>"],
        "d3": ["<>"],
    }


async def test_unbind_removes_one_binding_and_missing_ones_are_no_error(backend: Backend) -> None:
    """queue.unbind removes exactly the binding named; a binding, queue or exchange that does
    not exist is answered unbind-ok (measured on 3.10.8, 4.0.5 and 4.3.6)."""
    channel = await backend.channel()
    await channel.exchange_declare("unbinds", type="direct")
    await channel.queue_declare("u1")
    await channel.queue_bind("u1", "unbinds", "k1")
    await channel.queue_bind("u1", "unbinds", "k2")
    await channel.queue_unbind("u1", "unbinds", "k1")
    await channel.queue_unbind("u1", "unbinds", "k1")  # again: no error
    await channel.queue_unbind("u1", "unbinds", "never-bound")
    await channel.queue_unbind("no-such-queue", "unbinds", "k1")
    await channel.queue_unbind("u1", "no-such-exchange", "k1")
    for key in ("k1", "k2"):
        await channel.publish(f"<{key}>".encode(), exchange="unbinds", routing_key=key)
    assert await bodies(channel, "u1") == ["<k2>"]
    assert not channel.is_closed


async def test_fanout_routing(backend: Backend) -> None:
    channel = await backend.channel()
    await channel.exchange_declare("broadcast", type="fanout")
    for queue, key in (("f1", "x"), ("f2", ""), ("f3", "#")):
        await channel.queue_declare(queue)
        await channel.queue_bind(queue, "broadcast", key)
    await channel.queue_declare("f4")  # not bound
    for key in ("x", "", "y.z"):
        await channel.publish(f"<{key}>".encode(), exchange="broadcast", routing_key=key)
    everything = ["<x>", "<>", "<y.z>"]
    assert {q: await bodies(channel, q) for q in ("f1", "f2", "f3", "f4")} == {
        "f1": everything,
        "f2": everything,
        "f3": everything,
        "f4": [],
    }


# -- headers --------------------------------------------------------------------------------

STAMP = datetime(2024, 1, 1, tzinfo=UTC)
SECONDS = int(STAMP.timestamp())

HEADER_BINDINGS: dict[str, FieldTable] = {
    "all": {"x-match": "all", "type": "report", "format": "pdf"},
    "any": {"x-match": "any", "type": "report", "format": "pdf"},
    "default-all": {"type": "report"},
    "x-ignored": {"x-match": "all", "x-tag": "t", "type": "report"},
    "presence": {"present": None},
    "int": {"n": 1},
    "float": {"n": 1.0},
    "string-one": {"n": "1"},
    "bytes-one": {"n": b"1"},
    "bool": {"flag": True},
    "stamp": {"at": STAMP},
    "millis": {"at": SECONDS * 1000},
    "array": {"list": [1]},
    "nothing-all": {"x-match": "all"},
    "nothing-any": {"x-match": "any"},
}

HEADER_MESSAGES: dict[str, FieldTable | None] = {
    "pdf-report": {"type": "report", "format": "pdf"},
    "report": {"type": "report"},
    "pdf": {"format": "pdf"},
    "none": None,
    "empty": {},
    "pdf-report+": {"type": "report", "format": "pdf", "extra": 1, "x-tag": "other"},
    "invoice": {"type": "invoice", "format": "pdf"},
    "n-int": {"n": 1},
    "n-big": {"n": 100000},
    "n-float": {"n": 1.0},
    "n-string": {"n": "1"},
    "n-bytes": {"n": b"1"},
    "present": {"present": "anything"},
    "present-void": {"present": None},
    "flag-true": {"flag": True},
    "flag-one": {"flag": 1},
    "at-stamp": {"at": STAMP},
    "at-seconds": {"at": SECONDS},
    "at-millis": {"at": SECONDS * 1000},
    "list-int": {"list": [1]},
    "list-float": {"list": [1.0]},
    "list-string": {"list": ["1"]},
}


def expected_headers(version: str) -> dict[str, list[str]]:
    """Binding -> the messages it takes, on the release line ``version``."""
    numbers = expected(version, "headers-numbers")
    return {
        "all": ["pdf-report", "pdf-report+"],
        "any": ["pdf-report", "report", "pdf", "pdf-report+", "invoice"],
        "default-all": ["pdf-report", "report", "pdf-report+"],
        "x-ignored": ["pdf-report", "report", "pdf-report+"],
        "presence": ["present", "present-void"],
        "int": numbers["int"],  # 3.10: 1 matches 1.0; 4.0: not
        "float": numbers["float"],
        "string-one": ["n-string", "n-bytes"],  # a long string matches a byte array
        "bytes-one": ["n-string", "n-bytes"],
        "bool": ["flag-true"],  # not the integer 1
        "stamp": numbers["stamp"],  # a timestamp compares as a number (4.0: ms on the message)
        "millis": numbers["millis"],
        "array": ["list-int"],  # inside an array, types count: [1] is not [1.0]
        "nothing-all": list(HEADER_MESSAGES),
        "nothing-any": [],
    }


async def observe_headers_routing(backend: Backend) -> dict[str, list[str]]:
    """Bind one queue per binding to a headers exchange, publish every message, drain."""
    channel = await backend.channel()
    await channel.exchange_declare("by-headers", type="headers")
    for name, arguments in HEADER_BINDINGS.items():
        await channel.queue_declare(f"h:{name}")
        await channel.queue_bind(f"h:{name}", "by-headers", "ignored", arguments=arguments)
    for body, headers in HEADER_MESSAGES.items():
        await channel.publish(
            body.encode(),
            exchange="by-headers",
            routing_key="any-key",
            properties=Properties(headers=headers),
        )
    return {name: await bodies(channel, f"h:{name}") for name in HEADER_BINDINGS}


async def test_headers_routing(backend: Backend) -> None:
    assert await observe_headers_routing(backend) == expected_headers(backend.version)
