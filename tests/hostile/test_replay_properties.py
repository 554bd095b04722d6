"""Property: whatever the dead letters hold, ``rr dlq replay`` ends every one exactly once,
either in its target queue or still in the dead-letter queue, never in a wait queue, and its
report counts what the broker then holds (docs/how-to/after-an-outage.md, "When something does not
go back").

Headers are drawn from every AMQP field type pamqp encodes (text, Unicode digits, bytes,
integers up to signed 64 bits, booleans, finite 32-bit floats, decimals,
timestamps, void, tables and arrays a few levels deep), under the names rr reads:
``rr-origin-queue`` (a target, a missing queue, a wait queue, the dead-letter queue itself, a
300-byte name, or any value of any type), ``x-death`` (entries of every shape),
``rr-replayed-count``, the retry header and ``x-delivery-count`` (huge and Unicode-digit
counts). The replay runs through the CLI (``rr dlq replay -o json``), with or without a
``--where``. On the emulator with a budget of examples; on RabbitMQ with a smaller one, each
example in queues of its own.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
from collections import Counter
from decimal import Decimal
from typing import Any
from uuid import uuid4

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pamqp import encode

from rabbitctl_retry.fields import FieldValue
from rabbitctl_retry.retry.headers import DEFAULT_RETRY_HEADER
from rabbitctl_retry.transport.base import Properties
from tests.backends import Backend, EmulatorBackend, RabbitBackend
from tests.dlq.support import declare, publish_all, rr
from tests.hostile.field_values import DIGITS, INT64, TIMES, field_values
from tests.observe import peek

VALUES = field_values(decimals=True)

UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
"""What no output may hold raw (tab and line feed are fine)."""

TARGETS = ("@t1", "@t2")
WAIT_QUEUES = ("@t1.retry", "@t2.retry.30s")
TOKENS = (*TARGETS, *WAIT_QUEUES, "@ghost", "@dead", "@long")
"""Queue names as the strategies draw them; each example gives them a prefix of its own."""

TOKEN = st.sampled_from(TOKENS)
QUEUE = st.one_of(TOKEN, TOKEN.map(lambda name: name.encode()), st.text(max_size=10), VALUES)
"""A queue name as a header may hold it: mostly one of this example's queues."""
COUNT = st.one_of(
    INT64,
    DIGITS,
    st.just("9" * 5000),
    st.just(2**63 - 1),
    st.decimals(min_value=0, max_value=10**6, places=0),
    VALUES,
)
DEATH = st.fixed_dictionaries(
    {},
    optional={
        "queue": QUEUE,
        "reason": st.one_of(
            st.sampled_from(["rejected", "expired", "maxlen", "delivery_limit"]), VALUES
        ),
        "count": COUNT,
        "time": st.one_of(TIMES, VALUES),
        "exchange": VALUES,
        "routing-keys": VALUES,
    },
)
X_DEATH = st.one_of(
    st.lists(DEATH, min_size=1, max_size=3),
    st.lists(st.one_of(DEATH, VALUES), max_size=3),
    VALUES,
)
OPTIONAL = {
    "rr-origin-queue": QUEUE,
    "x-death": X_DEATH,
    "rr-replayed-count": COUNT,
    DEFAULT_RETRY_HEADER: COUNT,
    "x-delivery-count": COUNT,
    "x-tenant": st.one_of(st.sampled_from(["acme", "other"]), VALUES),
}
KNOWN = st.one_of(
    # half of them name one of this example's queues, as most dead letters do
    st.fixed_dictionaries(
        {"rr-origin-queue": st.one_of(TOKEN, TOKEN.map(lambda name: name.encode()))},
        optional={name: value for name, value in OPTIONAL.items() if name != "rr-origin-queue"},
    ),
    st.fixed_dictionaries({}, optional=OPTIONAL),
)
# CC and BCC would route the dead letter's own publish to other queues too (the copy never
# carries them: test_dlq_replay.py); every other name goes
OTHER = st.dictionaries(
    st.text(min_size=1, max_size=8).filter(lambda name: name not in ("CC", "BCC")),
    VALUES,
    max_size=3,
)


def _wire(value: Any) -> Any:
    """``value`` as pamqp takes it: bytes as a byte array."""
    if isinstance(value, bytes):
        return bytearray(value)
    if isinstance(value, dict):
        return {key: _wire(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_wire(item) for item in value]
    return value


def _encodes(headers: dict[str, Any]) -> bool:
    try:
        encode.field_table(_wire(headers))
    except (TypeError, ValueError, OverflowError):
        return False
    return True


HEADERS = st.builds(lambda known, other: {**other, **known}, KNOWN, OTHER).filter(_encodes)
LETTERS = st.lists(HEADERS, min_size=1, max_size=6)
WHERE = st.one_of(
    st.none(), st.sampled_from(["header.x-tenant=acme", "origin!=@t2", "reason=rejected"])
)


def _names(prefix: str) -> dict[str, str]:
    names = {token: f"{prefix}{token[1:]}" for token in TOKENS}
    names["@long"] = prefix + "L" * 300
    return names


def _resolve(value: Any, names: dict[str, str], *, emulator: bool) -> Any:
    """``value`` with every token a queue name of this example. On the emulator a decimal is
    the float a client decodes from the wire (the emulator's tables hold no decimals)."""
    if isinstance(value, str):
        return names.get(value, value)
    if isinstance(value, bytes):
        text = value.decode("utf-8", "replace")
        return names[text].encode() if text in names else value
    if isinstance(value, Decimal) and emulator:
        return float(value)
    if isinstance(value, dict):
        return {key: _resolve(item, names, emulator=emulator) for key, item in value.items()}
    if isinstance(value, list):
        return [_resolve(item, names, emulator=emulator) for item in value]
    return value


async def _ids_in(backend: Backend, queue: str) -> list[str | None]:
    return [delivery.properties.message_id for delivery in await peek(backend, queue)]


async def _scenario(backend: Backend, letters: list[dict[str, Any]], where: str | None) -> None:
    names = _names(f"p{uuid4().hex[:8]}.")
    emulator = isinstance(backend, EmulatorBackend)
    dead = names["@dead"]
    targets = [names[token] for token in TARGETS]
    waits = [names[token] for token in WAIT_QUEUES]
    await declare(backend, dead, *targets, *waits)
    ids = [f"m{number}" for number in range(len(letters))]
    messages = [
        (
            message_id.encode(),
            Properties(message_id=message_id, headers=_resolve(headers, names, emulator=emulator)),
        )
        for message_id, headers in zip(ids, letters, strict=True)
    ]
    await publish_all(backend, dead, messages)
    options = [] if where is None else ["--where", where.replace("@t2", names["@t2"])]

    result = await rr(backend, "dlq", "replay", dead, "--yes", "-o", "json", *options)

    assert "Traceback" not in result.output
    assert UNSAFE.search(result.output) is None, repr(result.output)
    document = json.loads(result.stdout)
    held = {queue: await _ids_in(backend, queue) for queue in (dead, *targets, *waits)}
    everywhere = Counter(message_id for found in held.values() for message_id in found)
    assert everywhere == Counter(ids), ("each exactly once", held, document)
    assert all(held[queue] == [] for queue in waits), ("never in a wait queue", held)
    results = document["results"]
    assert [r["message_id"] for r in results] == ids  # every letter read, in queue order
    for entry in results:
        if entry["outcome"] == "replayed":
            assert entry["message_id"] in held[entry["to"]], (entry, held)
        else:
            assert entry["message_id"] in held[dead], (entry, held)
    assert held[dead] == [r["message_id"] for r in results if r["outcome"] != "replayed"]
    replayed = sum(len(held[queue]) for queue in targets)
    assert document["replayed"] == replayed
    assert document["failed"] + document["skipped"] == len(held[dead])
    assert (document["replayed"], document["skipped"], document["failed"]) == tuple(
        Counter(r["outcome"] for r in results)[outcome]
        for outcome in ("replayed", "skipped", "failed")
    )
    expected_exit = 0 if document["failed"] == 0 else 3 if replayed else 1
    assert result.exit_code == expected_exit, result.output
    if where is None:
        assert document["skipped"] == 0


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(letters=LETTERS, where=WHERE)
def test_every_dead_letter_ends_once_in_its_target_or_the_dlq_on_the_emulator(
    letters: list[dict[str, FieldValue]], where: str | None
) -> None:
    async def scenario() -> None:
        backend = EmulatorBackend()
        try:
            await _scenario(backend, letters, where)
        finally:
            await backend.close()

    asyncio.run(scenario())


@pytest.mark.broker
def test_every_dead_letter_ends_once_in_its_target_or_the_dlq_on_rabbitmq(amqp_url: str) -> None:
    rabbit = RabbitBackend(amqp_url)
    rabbit.setup()
    budget = int(os.environ.get("RR_HOSTILE_BROKER_EXAMPLES", "15"))

    @settings(max_examples=budget, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(letters=LETTERS, where=WHERE)
    def check(letters: list[dict[str, FieldValue]], where: str | None) -> None:
        asyncio.run(_scenario(rabbit, letters, where))

    try:
        check()
    finally:
        asyncio.run(rabbit.close())
