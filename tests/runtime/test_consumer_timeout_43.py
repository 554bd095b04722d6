"""RabbitMQ 4.3's own consumer timeout on quorum queues, and rr's handler timeouts
(docs/reference/runtime.md, "Handlers", "On RabbitMQ 4.3").

On 4.3 a quorum queue times its consumers out itself: a delivery not settled within the
queue's consumer timeout (here a ``consumer-timeout`` policy on ``work`` in the test's own
vhost) goes back to the queue *uncounted* (no ``x-delivery-count``; ``x-acquired-count``
grows), the server sends ``basic.cancel`` and the channel stays open. So:

* rr's handler timeout below the server's ends a hanging message after exactly
  ``max_attempts`` calls (its failures are counted returns), and the other messages go on;
* without it (or with a longer one) the server cancels rr's consumer, rr logs, counts and
  consumes again, and the hanging message comes back for ever at attempt 1, each time one
  more hung call;
* a handler that returns after the server's timeout must not revive the cancelled consumer:
  4.3 keeps a server-cancelled consumer and hands it messages again once its timed-out
  delivery is acked, which rr's client library drops (rr cancels it itself; none is lost).

On the 4.3 server (RR_TEST_BROKERS naming 4.3; the other servers' quorum queues leave
consumer timeouts to the channel) and on the emulator at 4.3, whose clock moves between two
looks of ``until`` at least as fast as real time (tests/ticking.py), so that the server's
timeout (virtual) passes before rr's handler timeout (real) as it does on the server
(emulator/consumer_timeout.py).
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest

from rabbitctl_retry import Message, Outcome
from rabbitctl_retry.retry.outcome import AnyOutcome
from rabbitctl_retry.runtime.handlers import Subscriber
from rabbitctl_retry.runtime.loader import HandlerSet
from rabbitctl_retry.runtime.metrics import RunMetrics
from rabbitctl_retry.runtime.service import RunOptions, Service
from rabbitctl_retry.server import Policy
from rabbitctl_retry.topology.load import load_text
from rabbitctl_retry.transport.base import Properties
from tests.backends import Backend, EmulatorBackend, RabbitBackend, backend_params, publish
from tests.observe import depth, peek
from tests.shared_node import require_broker
from tests.ticking import TickingEmulator

TOPOLOGY = '[queues.work]\ntype = "quorum"\nmax_attempts = {attempts}\ndead_letter = "work.dead"\n'
CANCELLED = "consumer stopped; starting it again"


@pytest.fixture(params=backend_params(emulated=("4.3",)))
async def rabbit43(request: pytest.FixtureRequest) -> AsyncIterator[Backend]:
    """The 4.3 server, in a fresh vhost (skips on the other servers; fails in CI when 4.3
    does not answer, as every broker test), or the emulator at 4.3."""
    backend: RabbitBackend | TickingEmulator
    kind, version = request.param
    if kind == "emulator":
        backend = TickingEmulator(version)
    elif version != "4.3":
        pytest.skip(
            f"RabbitMQ {version}: only 4.3's quorum queues time consumers out "
            "themselves (uncounted return, basic.cancel); this test is about 4.3"
        )
    else:
        backend = RabbitBackend(require_broker("4.3"))
        backend.setup()
    try:
        yield backend
    finally:
        await backend.close()


def set_consumer_timeout(backend: Backend, queue: str, timeout_ms: int) -> None:
    """A ``consumer-timeout`` policy on ``queue`` in the test's own vhost (never the node's
    global ``consumer_timeout``). A policy, not the queue argument ``x-consumer-timeout``:
    rr's declare would find the argument inequivalent to the topology's queue (406)."""
    if isinstance(backend, EmulatorBackend):
        policy = Policy.of(
            "rr-test-consumer-timeout",
            f"^{re.escape(queue)}$",
            {"consumer-timeout": timeout_ms},
            apply_to="quorum_queues",
        )
        backend.emulator.put_policy(policy)
        return
    assert isinstance(backend, RabbitBackend)
    result = backend.broker.run_ctl(
        "set_policy",
        "-p",
        backend.vhost,
        "--apply-to",
        "quorum_queues",
        "rr-test-consumer-timeout",
        f"^{re.escape(queue)}$",
        json.dumps({"consumer-timeout": timeout_ms}),
    )
    assert result.returncode == 0, result.stderr


@dataclass(frozen=True)
class Call:
    """One handler call, with what rr and the server said at that moment."""

    message_id: str | None
    attempt: int
    delivery_count: int | None
    acquired_count: int | None
    cancels_before: int
    """``rr_consumer_cancels_total`` when the call started."""
    in_flight: int
    """Deliveries being handled when the call started (itself included)."""


def service_of(
    backend: Backend, handler: object, *, attempts: int, handler_timeout_s: float | None
) -> Service:
    """rr run's service on ``work`` (max_attempts ``attempts``, prefetch 10)."""
    return Service(
        HandlerSet(module="t", subscribers=(Subscriber("work", handler, "t:work"),)),  # type: ignore[arg-type]
        topology=load_text(TOPOLOGY.format(attempts=attempts)),
        connect=backend.connect,
        options=RunOptions(prefetch=10, shutdown_timeout_s=1, handler_timeout_s=handler_timeout_s),
        clock=backend.clock,
    )


def recording(calls: list[Call], service: list[Service], hang: set[str]) -> object:
    """An async handler that records each call and never returns for the ids in ``hang``."""

    async def handle(msg: Message) -> AnyOutcome:
        (running,) = service
        calls.append(
            Call(
                msg.message_id,
                msg.attempt,
                msg.delivery_count,
                msg.acquired_count,
                running.stats.consumer_cancels,
                running.in_flight,
            )
        )
        if msg.message_id in hang:
            await asyncio.Event().wait()
        return Outcome.ack()

    return handle


def of(calls: list[Call], message_id: str) -> list[Call]:
    return [call for call in calls if call.message_id == message_id]


async def test_a_handler_timeout_below_the_servers_dead_letters_after_max_attempts(
    rabbit43: Backend,
) -> None:
    """rr's 0.5 s against the server's 30 s: three counted failures, the delivery limit, and
    the server never had to cancel anything."""
    set_consumer_timeout(rabbit43, "work", 30_000)
    calls: list[Call] = []
    running: list[Service] = []
    service = service_of(
        rabbit43, recording(calls, running, {"stuck"}), attempts=3, handler_timeout_s=0.5
    )
    running.append(service)
    async with service.running():
        await publish(rabbit43, "work", b"stuck", Properties(message_id="stuck"))
        await publish(rabbit43, "work", b"fine", Properties(message_id="fine"))

        async def dead() -> bool:
            return await depth(rabbit43, "work.dead") == 1

        await rabbit43.until(dead, "the hanging message dead-lettered")
        await rabbit43.until(lambda: bool(of(calls, "fine")), "fine handled")
        letters = await peek(rabbit43, "work.dead")
        assert service.stats.handler_timeouts == 3
        assert service.stats.consumer_cancels == 0
    assert await depth(rabbit43, "work") == 0
    stuck = [(c.attempt, c.delivery_count, c.acquired_count) for c in of(calls, "stuck")]
    assert stuck == [(1, None, None), (2, 1, 1), (3, 2, 2)]  # counted: x-delivery-count grows
    assert len(of(calls, "fine")) == 1  # handled once, while stuck hung: nothing held back
    (letter,) = letters
    assert letter.properties.message_id == "stuck"
    headers = letter.properties.headers or {}
    assert headers["x-death"][0]["reason"] == "delivery_limit"  # type: ignore[index]
    assert "x-delivery-count" not in headers  # 4.3 leaves the count behind in work


@pytest.mark.parametrize("handler_timeout_s", [None, 5.0], ids=["no-rr-timeout", "rr-5s"])
async def test_the_servers_timeout_cancels_rr_which_consumes_again_but_never_counts(
    rabbit43: Backend, caplog: pytest.LogCaptureFixture, handler_timeout_s: float | None
) -> None:
    """The server's 2 s below rr's timeout (or none): each delivery of the hanging message
    ends in a server cancel; rr logs and counts it, consumes again, handles the next
    message; the message comes back uncounted (attempt 1, no x-delivery-count, only
    x-acquired-count grows), so even max_attempts = 2 never dead-letters it."""
    caplog.set_level(logging.INFO, logger="rr")
    set_consumer_timeout(rabbit43, "work", 2_000)
    calls: list[Call] = []
    running: list[Service] = []
    service = service_of(
        rabbit43,
        recording(calls, running, {"stuck"}),
        attempts=2,
        handler_timeout_s=handler_timeout_s,
    )
    running.append(service)
    metrics = RunMetrics()
    metrics.watch(service)
    async with service.running():
        await publish(rabbit43, "work", b"stuck", Properties(message_id="stuck"))
        await rabbit43.until(lambda: len(of(calls, "stuck")) == 2, "a server cancel")
        await publish(rabbit43, "work", b"next", Properties(message_id="next"))
        await rabbit43.until(lambda: bool(of(calls, "next")), "the next message handled")
        await rabbit43.until(lambda: len(of(calls, "stuck")) == 4, "three server cancels")
        if handler_timeout_s is not None:
            await rabbit43.until(lambda: service.stats.handler_timeouts >= 1, "rr's timeout")
        assert await depth(rabbit43, "work.dead") == 0
    stuck = of(calls, "stuck")[:4]
    assert [(c.attempt, c.delivery_count, c.acquired_count) for c in stuck] == [
        (1, None, None),
        (1, None, 1),
        (1, None, 2),
        (1, None, 3),
    ]
    # Each delivery came after one more server cancel, counted before rr consumed again.
    assert [c.cancels_before for c in stuck] == [0, 1, 2, 3]
    if handler_timeout_s is None:  # nothing ends a hung call: one more per server timeout
        assert [c.in_flight for c in stuck] == [1, 2, 3, 4]
    (after,) = of(calls, "next")
    assert (after.attempt, after.delivery_count, after.acquired_count) == (1, None, None)
    cancels = service.stats.consumer_cancels
    assert cancels >= 3
    warnings = [r for r in caplog.records if r.name == "rr.runtime" and r.getMessage() == CANCELLED]
    assert len(warnings) == cancels
    assert all("cancelled the consumer" in r.rr["reason"] for r in warnings)  # type: ignore[attr-defined]
    page = metrics.page().decode()
    assert f"rr_consumer_cancels_total {float(cancels)}" in page.splitlines()
    assert any(r.getMessage() == "consuming again" for r in caplog.records)


async def test_a_handler_that_returns_after_the_servers_timeout_loses_no_message(
    rabbit43: Backend,
) -> None:
    """``slow`` returns (acked) only after the server timed it out and cancelled the
    consumer. On 4.3 that ack revives the cancelled consumer, and the server would hand it
    messages rr's client drops; a later ``basic.ack(multiple=true)`` would then ack them
    unhandled. rr cancels a server-cancelled consumer itself: each of the six messages after
    is handled once, none stays behind."""
    set_consumer_timeout(rabbit43, "work", 2_000)
    release = asyncio.Event()
    handled: list[str | None] = []

    async def slow(msg: Message) -> AnyOutcome:
        handled.append(msg.message_id)
        if msg.message_id == "slow":
            await release.wait()
        return Outcome.ack()

    service = service_of(rabbit43, slow, attempts=3, handler_timeout_s=None)
    async with service.running():
        await publish(rabbit43, "work", b"slow", Properties(message_id="slow"))
        await rabbit43.until(lambda: handled.count("slow") == 2, "the server's cancel")
        release.set()  # both calls return: the timed-out delivery is acked too
        await rabbit43.until(lambda: service.in_flight == 0, "both calls settled")
        ids = [f"m{n}" for n in range(1, 7)]
        for message_id in ids:
            await publish(rabbit43, "work", message_id.encode(), Properties(message_id=message_id))
        await rabbit43.until(lambda: set(ids) <= set(handled), "every message handled")
        await rabbit43.until(lambda: service.in_flight == 0, "every message settled")
        assert service.stats.consumer_cancels == 1
    assert sorted(handled) == sorted(["slow", "slow", *ids])
    assert await depth(rabbit43, "work") == 0
    assert await depth(rabbit43, "work.dead") == 0
