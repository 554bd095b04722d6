#!/usr/bin/env python3
"""Measure how RabbitMQ serves a queue declared with ``x-single-active-consumer = true``.

Each scenario runs on a classic and a quorum queue, its consumers each on a connection of
their own (aiormq, which sends consumer arguments such as ``x-priority``), in the vhost
``sac-measure`` (made beforehand: ``rabbitmqctl add_vhost sac-measure`` and
``set_permissions``). The script waits a moment where it looks for what did *not* happen
(a measurement, not a test: the contract tests wait for counts).

    python scripts/measure_single_active.py                                  # 4.3.6
    python scripts/measure_single_active.py amqp://guest:guest@127.0.0.1:5674/sac-measure
    python scripts/measure_single_active.py amqp://guest:guest@127.0.0.1:5672/sac-measure

Scenarios: three consumers (who gets what); the active one cancelled with and without
messages held; its channel closed while it holds two (who gets them, in which order, with
which redelivered flag and x-delivery-count); a consumer with a higher ``x-priority`` arriving
while the active one holds a message (``priority-later``, ``priority-quiescing``: then the
active one gives it back with requeue; ``priority-settles``: each way of settling), and while
it holds none (``priority-idle``); which
waiting consumer takes over by priority (``priority-cancel``); basic.get beside an active
consumer and on a queue without consumers; the active consumer's prefetch full; an exclusive
basic.consume. docs/measurements.md ("Single active consumer") holds the results.
"""

from __future__ import annotations

import asyncio
import sys
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import aiormq
from aiormq.abc import DeliveredMessage

URL = "amqp://guest:guest@127.0.0.1:5675/sac-measure"
QUIET_S = 0.4
"""How long the script waits to see that nothing more arrives."""


class Taker:
    """One consumer on a connection of its own: what it was given, in order."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.got: list[DeliveredMessage] = []
        self.connection: aiormq.abc.AbstractConnection | None = None
        self.channel: aiormq.abc.AbstractChannel | None = None
        self.tag = ""

    async def start(
        self,
        url: str,
        queue: str,
        *,
        prefetch: int,
        priority: int | None = None,
        exclusive: bool = False,
    ) -> None:
        self.connection = await aiormq.connect(url)
        self.channel = await self.connection.channel()
        await self.channel.basic_qos(prefetch_count=prefetch)

        async def on_message(message: DeliveredMessage) -> None:
            self.got.append(message)

        arguments = {} if priority is None else {"x-priority": priority}
        ok = await self.channel.basic_consume(
            queue, on_message, exclusive=exclusive, arguments=arguments
        )
        self.tag = str(ok.consumer_tag)

    def seen(self) -> list[str]:
        """What it got: ``m1`` (redelivered: ``m1*``), with ``/N`` for an x-delivery-count."""
        out = []
        for message in self.got:
            text = message.body.decode() + ("*" if message.delivery.redelivered else "")
            headers = message.header.properties.headers or {}
            if "x-delivery-count" in headers:
                text += f"/{headers['x-delivery-count']}"
            out.append(text)
        return out

    async def ack_all(self) -> None:
        assert self.channel is not None
        for message in self.got:
            tag = message.delivery.delivery_tag
            assert tag is not None
            await self.channel.basic_ack(tag)

    async def close(self) -> None:
        if self.connection is not None and not self.connection.is_closed:
            await self.connection.close()


Scenario = Callable[[str, str, aiormq.abc.AbstractChannel], Awaitable[dict[str, Any]]]


async def publish(channel: aiormq.abc.AbstractChannel, queue: str, *bodies: str) -> None:
    for body in bodies:
        await channel.basic_publish(body.encode(), routing_key=queue)
    await asyncio.sleep(QUIET_S)


def state(*takers: Taker) -> dict[str, list[str]]:
    return {t.name: t.seen() for t in takers}


async def ready(channel: aiormq.abc.AbstractChannel, queue: str) -> int:
    ok = await channel.queue_declare(queue, passive=True)
    return int(ok.message_count or 0)


async def three_consumers(url: str, q: str, ch: aiormq.abc.AbstractChannel) -> dict[str, Any]:
    takers = [Taker(f"c{i}") for i in (1, 2, 3)]
    for t in takers:
        await t.start(url, q, prefetch=10)
    await publish(ch, q, "m1", "m2", "m3", "m4")
    out: dict[str, Any] = {"after m1..m4": state(*takers)}
    await takers[0].ack_all()
    assert takers[0].channel is not None
    await takers[0].channel.basic_cancel(takers[0].tag)
    await publish(ch, q, "m5", "m6")
    out["c1 acked, cancelled; then m5 m6"] = state(*takers)
    for t in takers:
        await t.close()
    return out


async def cancel_holding(url: str, q: str, ch: aiormq.abc.AbstractChannel) -> dict[str, Any]:
    """The active consumer is cancelled while it holds m1, m2 (prefetch 2); m3 waits."""
    c1, c2 = Taker("c1"), Taker("c2")
    await c1.start(url, q, prefetch=2)
    await c2.start(url, q, prefetch=10)
    await publish(ch, q, "m1", "m2", "m3")
    out: dict[str, Any] = {"held": state(c1, c2)}
    assert c1.channel is not None
    await c1.channel.basic_cancel(c1.tag)
    await asyncio.sleep(QUIET_S)
    out["c1 cancelled"] = state(c1, c2)
    await publish(ch, q, "m4")
    out["m4 published"] = state(c1, c2)
    await c1.channel.basic_reject(c1.got[0].delivery.delivery_tag or 0, requeue=True)
    await asyncio.sleep(QUIET_S)
    out["c1 rejects m1 requeue"] = state(c1, c2)
    await c1.close()
    await asyncio.sleep(QUIET_S)
    out["c1 closed (held m2)"] = state(c1, c2)
    await c2.close()
    return out


async def channel_closes(url: str, q: str, ch: aiormq.abc.AbstractChannel) -> dict[str, Any]:
    """The active consumer (prefetch 2) holds m1, m2; m3, m4 wait; its channel closes."""
    c1, c2, c3 = Taker("c1"), Taker("c2"), Taker("c3")
    await c1.start(url, q, prefetch=2)
    await c2.start(url, q, prefetch=10)
    await c3.start(url, q, prefetch=10)
    await publish(ch, q, "m1", "m2", "m3", "m4")
    out: dict[str, Any] = {"held": state(c1, c2, c3)}
    assert c1.channel is not None
    await c1.channel.close()
    await asyncio.sleep(QUIET_S)
    out["c1's channel closed"] = state(c1, c2, c3)
    for t in (c1, c2, c3):
        await t.close()
    return out


async def priority_later(url: str, q: str, ch: aiormq.abc.AbstractChannel) -> dict[str, Any]:
    """c1 (no priority, prefetch 1) holds m1, m2 waits; c2 (x-priority 10) comes; c1 acks."""
    c1, c2 = Taker("c1"), Taker("c2-prio10")
    await c1.start(url, q, prefetch=1)
    await publish(ch, q, "m1", "m2")
    await c2.start(url, q, prefetch=1, priority=10)
    await asyncio.sleep(QUIET_S)
    out: dict[str, Any] = {"c2 came while c1 holds m1": state(c1, c2)}
    await c1.ack_all()
    c1.got.clear()
    await asyncio.sleep(QUIET_S)
    out["c1 acked m1"] = state(c1, c2)
    await publish(ch, q, "m3")
    out["m3 published"] = state(c1, c2)
    await c1.close()
    await c2.close()
    return out


async def priority_idle(url: str, q: str, ch: aiormq.abc.AbstractChannel) -> dict[str, Any]:
    """c1 (no priority) holds nothing; c2 (x-priority 10) comes; then c3 (x-priority 5)."""
    c1, c2, c3 = Taker("c1"), Taker("c2-prio10"), Taker("c3-prio5")
    await c1.start(url, q, prefetch=10)
    await c2.start(url, q, prefetch=10, priority=10)
    await publish(ch, q, "m1")
    out: dict[str, Any] = {"m1 after c2 came": state(c1, c2)}
    await c3.start(url, q, prefetch=10, priority=5)
    await publish(ch, q, "m2")
    out["c3 came, m2"] = state(c1, c2, c3)
    for t in (c1, c2, c3):
        await t.close()
    return out


async def get_beside(url: str, q: str, ch: aiormq.abc.AbstractChannel) -> dict[str, Any]:
    """c1 (prefetch 1) holds m1; m2 waits; basic.get on another channel."""
    c1 = Taker("c1")
    await c1.start(url, q, prefetch=1)
    await publish(ch, q, "m1", "m2", "m3")
    got = await ch.basic_get(q, no_ack=False)
    out: dict[str, Any] = {"held": state(c1)}
    out["basic.get"] = None if got.body is None else got.body.decode()
    out["get message_count"] = got.delivery.message_count
    await ch.basic_reject(got.delivery.delivery_tag, requeue=True)
    await asyncio.sleep(QUIET_S)
    out["get rejected requeue"] = state(c1)
    out["ready"] = await ready(ch, q)
    await c1.close()
    return out


async def prefetch_full(url: str, q: str, ch: aiormq.abc.AbstractChannel) -> dict[str, Any]:
    """c1 (prefetch 1), c2 (prefetch 10): m1..m3 published."""
    c1, c2 = Taker("c1"), Taker("c2")
    await c1.start(url, q, prefetch=1)
    await c2.start(url, q, prefetch=10)
    await publish(ch, q, "m1", "m2", "m3")
    out: dict[str, Any] = {"m1..m3": state(c1, c2), "ready": await ready(ch, q)}
    await c1.ack_all()
    await asyncio.sleep(QUIET_S)
    out["c1 acked m1"] = state(c1, c2)
    await c1.close()
    await c2.close()
    return out


async def exclusive(url: str, q: str, ch: aiormq.abc.AbstractChannel) -> dict[str, Any]:
    """An exclusive basic.consume on an idle SAC queue, then a second plain one; and an
    exclusive one beside a plain consumer."""
    out: dict[str, Any] = {}
    first = Taker("x1")
    try:
        await first.start(url, q, prefetch=10, exclusive=True)
        out["exclusive first"] = "ok"
    except Exception as error:
        out["exclusive first"] = repr(error)
    second = Taker("plain2")
    try:
        await second.start(url, q, prefetch=10)
        out["plain second"] = "ok"
    except Exception as error:
        out["plain second"] = repr(error)
    await first.close()
    await second.close()
    plain, later = Taker("plain"), Taker("x-later")
    await plain.start(url, q, prefetch=10)
    try:
        await later.start(url, q, prefetch=10, exclusive=True)
        out["exclusive beside plain"] = "ok"
    except Exception as error:
        out["exclusive beside plain"] = repr(error)
    await plain.close()
    await later.close()
    return out


async def priority_quiescing(url: str, q: str, ch: aiormq.abc.AbstractChannel) -> dict[str, Any]:
    """c1 (no priority, prefetch 10) holds m1; c2 (x-priority 10) comes; m2 published; c1
    rejects m1 with requeue."""
    c1, c2 = Taker("c1"), Taker("c2-prio10")
    await c1.start(url, q, prefetch=10)
    await publish(ch, q, "m1")
    await c2.start(url, q, prefetch=10, priority=10)
    await publish(ch, q, "m2")
    out: dict[str, Any] = {"c2 came while c1 holds m1, then m2": state(c1, c2)}
    assert c1.channel is not None
    await c1.channel.basic_reject(c1.got[0].delivery.delivery_tag or 0, requeue=True)
    await asyncio.sleep(QUIET_S)
    out["c1 rejected m1 requeue"] = state(c1, c2)
    await c1.close()
    await c2.close()
    return out


async def priority_cancel(url: str, q: str, ch: aiormq.abc.AbstractChannel) -> dict[str, Any]:
    """c1 (x-priority 10), c2 (x-priority 1), c3 (x-priority 5), c4 (none): c1 cancelled."""
    takers = [Taker("c1-prio10"), Taker("c2-prio1"), Taker("c3-prio5"), Taker("c4")]
    for taker, priority in zip(takers, (10, 1, 5, None), strict=True):
        await taker.start(url, q, prefetch=10, priority=priority)
    await publish(ch, q, "m1")
    out: dict[str, Any] = {"m1": state(*takers)}
    await takers[0].ack_all()
    assert takers[0].channel is not None
    await takers[0].channel.basic_cancel(takers[0].tag)
    await publish(ch, q, "m2")
    out["c1 cancelled, m2"] = state(*takers)
    for t in takers:
        await t.close()
    return out


async def get_idle(url: str, q: str, ch: aiormq.abc.AbstractChannel) -> dict[str, Any]:
    """basic.get on a SAC queue without consumers, one message in it."""
    await publish(ch, q, "m1")
    try:
        got = await ch.basic_get(q, no_ack=True)
        return {"basic.get": None if got.body is None else got.body.decode()}
    except Exception as error:
        return {"basic.get": repr(error)}


async def priority_settles(url: str, q: str, ch: aiormq.abc.AbstractChannel) -> dict[str, Any]:
    """As ``priority-quiescing``, c1 settling m1 each way in turn (a queue each), then m3
    published, then c1's connection closed."""
    out: dict[str, Any] = {}
    for how in ("reject", "nack", "ack", "reject-drop"):
        name = f"{q}-{how}"
        await ch.queue_declare(name, durable=True, arguments=await _same_arguments(ch, q))
        c1, c2 = Taker("c1"), Taker("c2-prio10")
        await c1.start(url, name, prefetch=10)
        await publish(ch, name, "m1")
        await c2.start(url, name, prefetch=10, priority=10)
        await publish(ch, name, "m2")
        assert c1.channel is not None
        tag = c1.got[0].delivery.delivery_tag or 0
        if how == "ack":
            await c1.channel.basic_ack(tag)
        elif how == "nack":
            await c1.channel.basic_nack(tag, requeue=True)
        else:
            await c1.channel.basic_reject(tag, requeue=how == "reject")
        await asyncio.sleep(QUIET_S)
        out[f"{how}: settled"] = state(c1, c2)
        await publish(ch, name, "m3")
        out[f"{how}: m3"] = state(c1, c2)
        await c1.close()
        await asyncio.sleep(QUIET_S)
        out[f"{how}: c1 closed"] = state(c1, c2)
        await c2.close()
        await ch.queue_delete(name)
    return out


async def _same_arguments(ch: aiormq.abc.AbstractChannel, q: str) -> dict[str, Any]:
    """The arguments of the scenario's queue ``q`` (its type read back by its name)."""
    return sac_arguments("quorum" if "-quorum-" in q else "classic")


SCENARIOS: dict[str, Scenario] = {
    "three-consumers": three_consumers,
    "cancel-holding": cancel_holding,
    "channel-closes": channel_closes,
    "priority-later": priority_later,
    "priority-idle": priority_idle,
    "get-beside": get_beside,
    "prefetch-full": prefetch_full,
    "exclusive": exclusive,
    "priority-quiescing": priority_quiescing,
    "priority-cancel": priority_cancel,
    "get-idle": get_idle,
    "priority-settles": priority_settles,
}


def sac_arguments(kind: str) -> dict[str, Any]:
    arguments: dict[str, Any] = {"x-single-active-consumer": True}
    if kind == "quorum":
        arguments["x-queue-type"] = "quorum"
    return arguments


async def run_scenarios(
    url: str,
    only: list[str],
    scenarios: dict[str, Scenario],
    prefix: str,
    arguments_of: Callable[[str], dict[str, Any]],
) -> None:
    """Run each of ``scenarios`` (those named in ``only``, if any) on a classic and a quorum
    queue of its own (``prefix-NAME-KIND-RANDOM``, declared with ``arguments_of(kind)``),
    printing what it returns."""
    admin = await aiormq.connect(url)
    print("server:", admin.server_properties.get("version"))
    for name, scenario in scenarios.items():
        if only and name not in only:
            continue
        for kind in ("classic", "quorum"):
            ch = await admin.channel()
            q = f"{prefix}-{name}-{kind}-{uuid.uuid4().hex[:6]}"
            await ch.queue_declare(q, durable=True, arguments=arguments_of(kind))
            try:
                result = await scenario(url, q, ch)
            except Exception as error:
                result = {"failed": repr(error)}
            print(f"{name} [{kind}]")
            for key, value in result.items():
                print(f"    {key}: {value}")
            ch = await admin.channel()
            await ch.queue_delete(q)
    await admin.close()


async def main(url: str, only: list[str]) -> None:
    await run_scenarios(url, only, SCENARIOS, "sac", sac_arguments)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else URL, sys.argv[2:]))
