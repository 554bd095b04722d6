"""Messages expire from the head only: a short TTL behind a long one waits for it."""

from __future__ import annotations

import time

import pytest

from rabbitctl_retry.transport.base import Properties
from tests.backends import Backend
from tests.contract.support import death, drain, first_death, view
from tests.contract.versions import last_death
from tests.observe import depth


async def head_of_line(backend: Backend, long_ms: int, short_ms: int) -> None:
    """A (``long_ms``) then B (``short_ms``) in one wait queue dead-lettering to 'work'."""
    channel = await backend.channel()
    await channel.queue_declare("work")
    await channel.queue_declare(
        "wait", arguments={"x-dead-letter-exchange": "", "x-dead-letter-routing-key": "work"}
    )
    for body, ttl in (("A", long_ms), ("B", short_ms)):
        await channel.publish(
            body.encode(), routing_key="wait", properties=Properties(expiration=str(ttl))
        )
    # long after B's TTL, before A's: B waits behind A, nothing has reached 'work'
    halfway_s = long_ms / 2000
    await backend.elapse(halfway_s)
    assert (await depth(channel, "work"), await depth(channel, "wait")) == (0, 2)
    await backend.elapse(long_ms / 1000 - halfway_s)

    async def both_arrived() -> bool:
        return await depth(channel, "work") == 2

    await backend.until(both_arrived, "A and B in 'work'")
    expired = {
        **first_death("expired", "wait", ""),
        **last_death(backend.version, "expired", "wait", ""),
    }
    assert [view(d) for d in await drain(channel, "work")] == [
        {
            "body": body,
            "exchange": "",
            "routing_key": "work",
            "redelivered": False,
            "headers": {
                "x-death": [
                    death(
                        "expired",
                        "wait",
                        exchange="",
                        routing_keys=["wait"],
                        original_expiration=str(ttl),
                    )
                ],
                **expired,
            },
            "expiration": None,
        }
        for body, ttl in (("A", long_ms), ("B", short_ms))
    ]


async def test_head_of_line_expiry(backend: Backend) -> None:
    await head_of_line(backend, long_ms=2000, short_ms=200)


@pytest.mark.parametrize(
    "backend",
    [pytest.param(("emulator", v), id=f"emulator-{v}") for v in ("3.10", "4.0")],
    indirect=True,
)
async def test_head_of_line_expiry_at_minutes_takes_no_real_time(backend: Backend) -> None:
    started = time.monotonic()
    await head_of_line(backend, long_ms=60_000, short_ms=1_000)
    assert time.monotonic() - started < 5.0
