"""A consumer timeout before RabbitMQ 4.3 closes rr's channel (docs/reference/runtime.md,
"Handlers"): on 4.0 a delivery held past its queue's timeout (here a ``consumer-timeout``
policy of 2 s) closes the channel (406, on the server's minute tick), every delivery of the
channel goes back counted, and rr opens a new channel and consumes again: the hung message
comes back at attempt 2, and ``max_attempts`` ends it like any failure.

On the 4.0 server and on the emulator at 4.0 (emulator/consumer_timeout.py), whose clock
moves between two looks of ``until`` (tests/ticking.py).
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator

import pytest

from rabbitctl_retry import Message, Outcome
from rabbitctl_retry.retry.outcome import AnyOutcome
from rabbitctl_retry.runtime.handlers import Subscriber
from rabbitctl_retry.runtime.loader import HandlerSet
from rabbitctl_retry.runtime.service import RunOptions, Service
from rabbitctl_retry.server import Policy
from rabbitctl_retry.topology.load import load_text
from rabbitctl_retry.transport.base import Properties
from tests.backends import Backend, EmulatorBackend, RabbitBackend, backend_params, publish
from tests.observe import depth
from tests.shared_node import require_broker
from tests.ticking import TickingEmulator

TOPOLOGY = '[queues.work]\ntype = "quorum"\nmax_attempts = 3\ndead_letter = "work.dead"\n'
SERVER_DEADLINE_S = 150.0
"""How long the 4.0 server may take: it checks its channels once a minute."""


@pytest.fixture(params=backend_params(emulated=("4.0",)))
async def rabbit40(request: pytest.FixtureRequest) -> AsyncIterator[Backend]:
    """The 4.0 server in a fresh vhost (skips on the others), or the emulator at 4.0."""
    backend: RabbitBackend | TickingEmulator
    kind, version = request.param
    if kind == "emulator":
        backend = TickingEmulator(version)
    elif version != "4.0":
        pytest.skip(
            f"RabbitMQ {version}: 3.10 ignores the queue's timeout, 4.3 cancels the "
            "consumer instead (test_consumer_timeout_43.py)"
        )
    else:
        backend = RabbitBackend(require_broker("4.0"), deadline_s=SERVER_DEADLINE_S)
        backend.setup()
    try:
        yield backend
    finally:
        await backend.close()


def set_consumer_timeout(backend: Backend, timeout_ms: int) -> None:
    """A ``consumer-timeout`` policy on ``work`` in the test's own vhost."""
    pattern, definition = f"^{re.escape('work')}$", {"consumer-timeout": timeout_ms}
    if isinstance(backend, EmulatorBackend):
        backend.emulator.put_policy(Policy.of("rr-test-consumer-timeout", pattern, definition))
        return
    assert isinstance(backend, RabbitBackend)
    result = backend.broker.run_ctl(
        "set_policy",
        "-p",
        backend.vhost,
        "rr-test-consumer-timeout",
        pattern,
        json.dumps(definition),
    )
    assert result.returncode == 0, result.stderr


async def test_the_channel_closes_and_rr_consumes_again_counting_the_return(
    rabbit40: Backend,
) -> None:
    set_consumer_timeout(rabbit40, 2000)
    calls: list[tuple[str | None, int, int | None]] = []

    async def handle(msg: Message) -> AnyOutcome:
        calls.append((msg.message_id, msg.attempt, msg.delivery_count))
        if msg.message_id == "stuck" and len(calls) == 1:
            await asyncio.Event().wait()  # the first call hangs for good
        return Outcome.ack()

    service = Service(
        HandlerSet(module="t", subscribers=(Subscriber("work", handle, "t:work"),)),
        topology=load_text(TOPOLOGY),
        connect=rabbit40.connect,
        options=RunOptions(prefetch=10, shutdown_timeout_s=1),
        clock=rabbit40.clock,
    )
    async with service.running():
        await publish(rabbit40, "work", b"stuck", Properties(message_id="stuck"))
        await rabbit40.until(lambda: len(calls) == 2, "the channel closed and stuck again")
        await rabbit40.until(lambda: service.in_flight <= 1, "the second call acked")
        assert (service.stats.consumer_restarts, service.stats.consumer_cancels) == (1, 0)
    assert calls == [("stuck", 1, None), ("stuck", 2, 1)]  # counted: the channel closed
    assert await depth(rabbit40, "work") == 0
