"""Property: whatever headers a message carries, ``rr run`` with a failing handler ends every
message exactly once in the dead-letter queue, after at most ``max_attempts`` handler calls,
and nothing else is disturbed (docs/reference/runtime.md, "Malformed messages").

Headers are drawn from every AMQP field type rr's transport carries (text, Unicode digits,
integers of any signed 64-bit size, floats, booleans, bytes, timestamps, nested tables and
arrays, void), under the very names rr reads: the retry header, ``x-delivery-count``,
``rr-replayed-count``, ``x-death``, ``rr-origin-queue``. On the emulator with a budget of
examples; on RabbitMQ with the known hostile cases and a smaller budget. (One of them, a
malformed ``x-death`` on a quorum queue, crashes RabbitMQ 3.10's dead-letter worker for the
whole node if rr lets the broker dead-letter it; rr copies it instead.)
"""

from __future__ import annotations

import asyncio
import os
from collections import Counter
from typing import Any
from uuid import uuid4

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rabbitctl_retry import Message
from rabbitctl_retry.fields import FieldValue
from rabbitctl_retry.retry.headers import DEFAULT_RETRY_HEADER, attempt_of
from rabbitctl_retry.runtime.handlers import Subscriber
from rabbitctl_retry.runtime.loader import HandlerSet
from rabbitctl_retry.runtime.service import RunOptions, Service
from rabbitctl_retry.topology.load import load_text
from rabbitctl_retry.transport.base import Properties
from tests.backends import Backend, EmulatorBackend, RabbitBackend, publish
from tests.hostile.field_values import field_values
from tests.observe import depth, peek

VALUES = field_values(decimals=False)

MAX_ATTEMPTS = 3
KNOWN_HOSTILE: list[list[dict[str, FieldValue] | None]] = [
    [{"x-death": [16039]}],  # crashed RabbitMQ 3.10's dead-letter worker (quorum)
    [{"x-death": [{"queue": "q", "reason": "rejected", "count": "2"}]}],
    [{"x-death": "not a list", "x-delivery-count": "\u00b2"}],
    [{DEFAULT_RETRY_HEADER: 3.4028235677973366e38}],  # pamqp wrote floats as 32 bits
    [{DEFAULT_RETRY_HEADER: "9" * 5000, "rr-replayed-count": 2**63 - 1}],
]
NAMES = st.sampled_from(
    [DEFAULT_RETRY_HEADER, "x-delivery-count", "rr-replayed-count", "x-death", "rr-origin-queue"]
)
HEADERS = st.dictionaries(
    st.one_of(NAMES, st.text(min_size=1, max_size=10)), VALUES, max_size=5
).map(lambda table: table or None)
MESSAGES = st.lists(HEADERS, min_size=1, max_size=5)


def _topology(prefix: str, queue_type: str) -> str:
    return (
        f'[queues."{prefix}work"]\ntype = "{queue_type}"\nmax_attempts = {MAX_ATTEMPTS}\n'
        f'dead_letter = "{prefix}work.dead"\n[queues."{prefix}work.dead"]\n'
    )


async def _scenario(
    backend: Backend, queue_type: str, messages: list[dict[str, FieldValue] | None]
) -> None:
    prefix = f"p{uuid4().hex[:8]}."
    work, dead_queue = f"{prefix}work", f"{prefix}work.dead"
    calls: Counter[str] = Counter()

    async def failing(msg: Message) -> Any:
        calls[msg.properties.message_id or ""] += 1
        raise RuntimeError("the handler always fails")

    service = Service(
        HandlerSet(module="test", subscribers=(Subscriber(work, failing, "test:failing"),)),
        topology=load_text(_topology(prefix, queue_type)),
        connect=backend.connect,
        options=RunOptions(prefetch=10, shutdown_timeout_s=5),
        clock=backend.clock,
    )
    ids = [f"m{number}" for number in range(len(messages))]
    async with service.running():
        for message_id, headers in zip(ids, messages, strict=True):
            await publish(
                backend, work, b"body", Properties(message_id=message_id, headers=headers)
            )
        for _ in range(400):
            dead = await peek(backend, dead_queue)
            if len(dead) >= len(ids):
                break
            await backend.elapse(0.05)
        await backend.elapse(0.2)  # anything more would show up now
        dead = await peek(backend, dead_queue)
    assert sorted(d.properties.message_id or "" for d in dead) == ids, "each exactly once"
    assert await depth(backend, work) == 0
    for message_id, headers in zip(ids, messages, strict=True):
        assert 1 <= calls[message_id] <= MAX_ATTEMPTS, (message_id, headers, calls)
        if queue_type == "classic":  # rr counts: attempt = 1 + retry header + x-delivery-count
            first_attempt = attempt_of(headers, DEFAULT_RETRY_HEADER, work)
            assert calls[message_id] == max(1, MAX_ATTEMPTS - first_attempt + 1), (
                message_id,
                headers,
            )


@pytest.mark.parametrize("queue_type", ["classic", "quorum"])
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(messages=st.one_of(st.sampled_from(KNOWN_HOSTILE), MESSAGES))
def test_every_message_ends_dead_lettered_once_on_the_emulator(
    queue_type: str, messages: list[dict[str, FieldValue] | None]
) -> None:
    async def scenario() -> None:
        backend = EmulatorBackend()
        try:
            await _scenario(backend, queue_type, messages)
        finally:
            await backend.close()

    asyncio.run(scenario())


@pytest.mark.parametrize("queue_type", ["classic", "quorum"])
def test_every_message_ends_dead_lettered_once_on_rabbitmq(amqp_url: str, queue_type: str) -> None:
    rabbit = RabbitBackend(amqp_url)
    rabbit.setup()
    budget = int(os.environ.get("RR_HOSTILE_BROKER_EXAMPLES", "8"))

    @settings(max_examples=budget, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(messages=MESSAGES)
    def check(messages: list[dict[str, FieldValue] | None]) -> None:
        asyncio.run(_scenario(rabbit, queue_type, messages))

    try:
        for messages in KNOWN_HOSTILE:
            asyncio.run(_scenario(rabbit, queue_type, messages))
        check()
    finally:
        asyncio.run(rabbit.close())
