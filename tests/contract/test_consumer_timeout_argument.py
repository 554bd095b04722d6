"""``x-consumer-timeout`` as a queue argument, as each server takes it (measured on 3.10.8,
4.0.5 and 4.3.6; emulator/args.py and emulator/delayed_retry.py): 3.10 and 4.0 take any value
on any queue and never compare it; RabbitMQ 4.3's quorum queues apply it themselves, so 4.3
checks it as a non-negative integer, compares it on a redeclare (before the delayed-retry
arguments) and refuses it on a classic queue. What timing out does:
tests/contract/test_consumer_timeout.py."""

from __future__ import annotations

import pytest

from rabbitctl_retry.fields import FieldValue
from tests.backends import Backend
from tests.contract.support import declare_refusal, refused_declare
from tests.contract.versions import expected


@pytest.mark.parametrize(
    ("arguments", "detail"),
    [
        (
            {"x-queue-type": "classic", "x-consumer-timeout": 2000},
            "invalid arg 'x-consumer-timeout' for queue 'q' in vhost '{vhost}' of queue type "
            "rabbit_classic_queue",
        ),
        (
            {"x-consumer-timeout": 2000, "x-delayed-retry-min": 5},
            "invalid arg 'x-consumer-timeout' for queue 'q' in vhost '{vhost}' of queue type "
            "rabbit_classic_queue",
        ),
        (
            {"x-queue-type": "quorum", "x-consumer-timeout": -1},
            "invalid arg 'x-consumer-timeout' for queue 'q' in vhost '{vhost}': "
            "{{value_negative,-1}}",
        ),
        (
            {"x-queue-type": "quorum", "x-consumer-timeout": "2000"},
            "invalid arg 'x-consumer-timeout' for queue 'q' in vhost '{vhost}': "
            '"expected integer, got longstr"',
        ),
        (
            {"x-queue-type": "quorum", "x-consumer-timeout": True},
            "invalid arg 'x-consumer-timeout' for queue 'q' in vhost '{vhost}': "
            '"expected integer, got bool"',
        ),
        ({"x-queue-type": "quorum", "x-consumer-timeout": 0}, None),
        ({"x-queue-type": "quorum", "x-consumer-timeout": 2**40}, None),
    ],
    ids=["classic", "classic-first-named", "negative", "string", "bool", "zero", "huge"],
)
async def test_which_declares_4_3_refuses(
    backend: Backend, arguments: dict[str, FieldValue], detail: str | None
) -> None:
    channel = await backend.channel()
    if detail is None or not expected(backend.version, "delayed-retries"):
        await channel.queue_declare("q", durable=True, arguments=arguments)
        return
    assert await refused_declare(channel, "q", arguments) == declare_refusal(
        "q", backend.vhost, detail
    )


async def test_a_4_3_quorum_queue_compares_it_first_of_its_own(backend: Backend) -> None:
    base: dict[str, FieldValue] = {
        "x-queue-type": "quorum",
        "x-consumer-timeout": 2000,
        "x-delayed-retry-type": "all",
        "x-delayed-retry-min": 5,
    }
    channel = await backend.channel()
    await channel.queue_declare("q", durable=True, arguments=base)
    changed = {**base, "x-consumer-timeout": 3000, "x-delayed-retry-type": "failed"}
    again = await backend.channel()
    if not expected(backend.version, "delayed-retries"):
        await again.queue_declare("q", durable=True, arguments=changed)
        return
    assert await refused_declare(again, "q", changed) == declare_refusal(
        "q",
        backend.vhost,
        "inequivalent arg 'x-consumer-timeout' for queue 'q' in vhost '{vhost}': received "
        "'3000' but current is '2000'",
    )
