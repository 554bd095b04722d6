"""``rr run --wait-for-broker SECONDS`` (docs/reference/runtime.md, "Running it"): a service started
before its broker keeps trying the first connection with a growing pause, logged, and then
consumes; without it, or once the time is up, the first failure ends the run; refused
credentials end it at once."""

from __future__ import annotations

import asyncio
import logging

import pytest

from rabbitctl_retry import Message, Outcome
from rabbitctl_retry.errors import AccessRefused, BrokerUnreachable
from rabbitctl_retry.runtime.handlers import Subscriber
from rabbitctl_retry.runtime.loader import HandlerSet
from rabbitctl_retry.runtime.service import RunOptions, Service
from rabbitctl_retry.topology.load import load_text
from rabbitctl_retry.transport.base import Connection
from tests.backends import EmulatorBackend
from tests.ledger import publish_ids

TOPOLOGY = load_text("[queues.work]\nmax_attempts = 3\n")


class LateBroker:
    """Connections fail ``refusals`` times (unreachable, or refused credentials), then work."""

    def __init__(self, backend: EmulatorBackend, refusals: int, *, error: type = BrokerUnreachable):
        self.backend = backend
        self.refusals = refusals
        self.error = error
        self.attempts = 0

    async def connect(self) -> Connection:
        self.attempts += 1
        if self.attempts <= self.refusals:
            raise self.error("cannot connect: the broker is not up yet")
        return await self.backend.connect()


def service(broker: LateBroker, wait_s: float, seen: list[str]) -> Service:
    async def handle(msg: Message) -> Outcome:
        seen.append(msg.properties.message_id or "")
        return Outcome.ack()

    return Service(
        HandlerSet(module="t", subscribers=(Subscriber("work", handle, "t:work"),)),
        topology=TOPOLOGY,
        connect=broker.connect,
        options=RunOptions(prefetch=10, wait_for_broker_s=wait_s, reconnect_max_s=1.0),
        clock=broker.backend.clock,
    )


async def test_a_service_started_before_its_broker_waits_and_then_consumes(
    caplog: pytest.LogCaptureFixture,
) -> None:
    backend = EmulatorBackend()
    broker = LateBroker(backend, refusals=3)
    seen: list[str] = []
    caplog.set_level(logging.WARNING, logger="rr.runtime")
    run = service(broker, 60.0, seen)
    task = await run.start()
    try:
        ids = [f"m-{n}" for n in range(20)]
        await publish_ids(backend.connect, "work", ids)
        await backend.until(lambda: len(seen) == len(ids), "every message handled")
        assert sorted(seen) == sorted(ids)
    finally:
        run.stop()
        await task
    assert broker.attempts == 4
    waits = [
        r for r in caplog.records if r.getMessage() == "the broker does not answer yet; waiting"
    ]
    assert len(waits) == 3
    pauses = [r.rr["retry_in_s"] for r in waits]  # type: ignore[attr-defined]
    assert pauses == sorted(pauses)  # a growing pause


async def test_without_waiting_the_first_failure_ends_the_run() -> None:
    broker = LateBroker(EmulatorBackend(), refusals=1)
    with pytest.raises(BrokerUnreachable):
        await service(broker, 0.0, []).start()
    assert broker.attempts == 1


async def test_the_wait_has_an_end() -> None:
    broker = LateBroker(EmulatorBackend(), refusals=10_000)
    with pytest.raises(BrokerUnreachable):
        await asyncio.wait_for(service(broker, 1.2, []).start(), 60)
    assert 1 < broker.attempts < 10_000


async def test_refused_credentials_are_not_waited_for() -> None:
    broker = LateBroker(EmulatorBackend(), refusals=1, error=AccessRefused)
    with pytest.raises(AccessRefused):
        await service(broker, 60.0, []).start()
    assert broker.attempts == 1
