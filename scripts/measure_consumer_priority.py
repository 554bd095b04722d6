#!/usr/bin/env python3
"""Measure how RabbitMQ serves consumers of different ``x-priority`` on a plain queue (no
single active consumer).

Each scenario runs on a classic and a quorum queue, each consumer on a connection of its own
(aiormq), in the vhost ``sac-measure`` (made beforehand: ``rabbitmqctl add_vhost
sac-measure`` and ``set_permissions``), as scripts/measure_single_active.py, whose consumers
and helpers it uses. The script waits a moment where it looks for what did *not* happen
(a measurement, not a test: the contract tests wait for counts).

    python scripts/measure_consumer_priority.py                                  # 4.3.6
    python scripts/measure_consumer_priority.py amqp://guest:guest@127.0.0.1:5674/sac-measure

Scenarios: consumers of three priorities with room for some (who gets what, and who gets the
next once a higher one acks); two of one priority beside a lower one (turns); a negative
priority; a higher one arriving while a lower one is served; a full higher consumer freed by
an ack while a lower one is free too; an argument that is not an integer. docs/measurements.md
("Consumer priorities") holds the results.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import aiormq
from measure_single_active import Scenario, Taker, publish, run_scenarios, state

URL = "amqp://guest:guest@127.0.0.1:5675/sac-measure"


async def started(url: str, q: str, *specs: tuple[str, int | None, int]) -> list[Taker]:
    """Consumers named, with ``x-priority`` (None: none) and prefetch, in that order."""
    takers = []
    for name, priority, prefetch in specs:
        taker = Taker(name)
        await taker.start(url, q, prefetch=prefetch, priority=priority)
        takers.append(taker)
    return takers


async def ack_first(taker: Taker) -> None:
    assert taker.channel is not None
    await taker.channel.basic_ack(taker.got[0].delivery.delivery_tag or 0)
    await asyncio.sleep(0.4)


async def close(*takers: Taker) -> None:
    for taker in takers:
        await taker.close()


async def three_priorities(url: str, q: str, ch: aiormq.abc.AbstractChannel) -> dict[str, Any]:
    """c0 (no priority, prefetch 10), c10 (10, prefetch 2), c5 (5, prefetch 1); m1..m6; c10
    acks its first; m7; c5 acks; m8."""
    c0, c10, c5 = await started(url, q, ("c0", None, 10), ("c10", 10, 2), ("c5", 5, 1))
    await publish(ch, q, *(f"m{n}" for n in range(1, 7)))
    out: dict[str, Any] = {"m1..m6": state(c0, c10, c5)}
    await ack_first(c10)
    out["c10 acked its first"] = state(c0, c10, c5)
    await publish(ch, q, "m7")
    out["m7"] = state(c0, c10, c5)
    await ack_first(c5)
    await publish(ch, q, "m8")
    out["c5 acked, m8"] = state(c0, c10, c5)
    await close(c0, c10, c5)
    return out


async def equal_turns(url: str, q: str, ch: aiormq.abc.AbstractChannel) -> dict[str, Any]:
    """a5, b5 (priority 5), low (none), all prefetch 10; m1..m5."""
    takers = await started(url, q, ("a5", 5, 10), ("low", None, 10), ("b5", 5, 10))
    await publish(ch, q, *(f"m{n}" for n in range(1, 6)))
    out: dict[str, Any] = {"m1..m5": state(*takers)}
    await close(*takers)
    return out


async def negative(url: str, q: str, ch: aiormq.abc.AbstractChannel) -> dict[str, Any]:
    """neg (-5, prefetch 10) first, then plain (none, prefetch 2); m1..m4."""
    takers = await started(url, q, ("neg", -5, 10), ("plain", None, 2))
    await publish(ch, q, "m1", "m2", "m3", "m4")
    out: dict[str, Any] = {"m1..m4": state(*takers)}
    await close(*takers)
    return out


async def ready_first(url: str, q: str, ch: aiormq.abc.AbstractChannel) -> dict[str, Any]:
    """m1..m4 wait in the queue; c0 (none, prefetch 1) consumes, then c10 (10, prefetch 2);
    c0 acks."""
    await publish(ch, q, "m1", "m2", "m3", "m4")
    (c0,) = await started(url, q, ("c0", None, 1))
    (c10,) = await started(url, q, ("c10", 10, 2))
    await asyncio.sleep(0.4)
    out: dict[str, Any] = {"c0 then c10 came": state(c0, c10)}
    await ack_first(c0)
    out["c0 acked"] = state(c0, c10)
    await close(c0, c10)
    return out


async def later_higher(url: str, q: str, ch: aiormq.abc.AbstractChannel) -> dict[str, Any]:
    """c0 (none, prefetch 10) takes m1, m2; c10 (10, prefetch 10) comes; m3, m4."""
    (c0,) = await started(url, q, ("c0", None, 10))
    await publish(ch, q, "m1", "m2")
    (c10,) = await started(url, q, ("c10", 10, 10))
    await publish(ch, q, "m3", "m4")
    out: dict[str, Any] = {"c10 came; m3 m4": state(c0, c10)}
    await close(c0, c10)
    return out


async def freed(url: str, q: str, ch: aiormq.abc.AbstractChannel) -> dict[str, Any]:
    """c10 (10, prefetch 1), c0 (none, prefetch 1): m1..m4; c10 acks; then c0 acks; then
    both ack."""
    c10, c0 = await started(url, q, ("c10", 10, 1), ("c0", None, 1))
    await publish(ch, q, "m1", "m2", "m3", "m4")
    out: dict[str, Any] = {"m1..m4": state(c10, c0)}
    await ack_first(c10)
    c10.got.pop(0)
    out["c10 acked"] = state(c10, c0)
    await ack_first(c0)
    c0.got.pop(0)
    out["c0 acked"] = state(c10, c0)
    await close(c10, c0)
    return out


async def not_integer(url: str, q: str, ch: aiormq.abc.AbstractChannel) -> dict[str, Any]:
    """x-priority as a string, then as a float."""
    out: dict[str, Any] = {}
    for value in ("high", 2.5):
        connection = await aiormq.connect(url)
        channel = await connection.channel()
        try:

            async def ignore(_: object) -> None:
                return None

            await channel.basic_consume(q, ignore, arguments={"x-priority": value})
            out[repr(value)] = "ok"
        except Exception as error:
            out[repr(value)] = repr(error)
        if not connection.is_closed:
            await connection.close()
    return out


SCENARIOS: dict[str, Scenario] = {
    "three-priorities": three_priorities,
    "equal-turns": equal_turns,
    "negative": negative,
    "ready-first": ready_first,
    "later-higher": later_higher,
    "freed": freed,
    "not-integer": not_integer,
}


async def main(url: str, only: list[str]) -> None:
    await run_scenarios(url, only, SCENARIOS, "prio", lambda kind: {"x-queue-type": kind})


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else URL, sys.argv[2:]))
