"""``rr run`` under a fault, with every message id counted (the fault suite's harness).

A run: a :class:`Service` with default settings consumes ``work`` through the test's fault
proxy; the test publishes messages with unique ids straight to the node, injects its fault
while they are being handled, and waits until every id reached its planned end (see
``tests/ledger.py``). The result counts, per fault: lost ids, duplicated work (handler calls
beyond the plan, dead letters twice, acked and dead), and the recovery time (from the end of
the fault to the next handler call). Each result also goes into :data:`REPORT`, printed at
the end of the session (docs/reference/runtime.md quotes it).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from rabbitctl_retry.errors import NotFound, TransportError
from rabbitctl_retry.runtime.handlers import Subscriber
from rabbitctl_retry.runtime.loader import HandlerSet
from rabbitctl_retry.runtime.service import RunOptions, Service
from rabbitctl_retry.topology.load import load_text
from rabbitctl_retry.transport import amqp, clients
from rabbitctl_retry.transport.base import Connection, Properties
from tests.faults.conftest import FaultVhost
from tests.ledger import (
    Ledger,
    OutcomeOf,
    Verdict,
    duplicate_window,
    message_ids,
    publish_ids,
    take_ids,
)

TOPOLOGY = """
[queues.work]
type = "{type}"
max_attempts = 3
dead_letter = "work.dead"
delay = "{delay}"
"""

PREFETCH = RunOptions().prefetch
"""The in-flight window of one consumer at the default settings."""


@dataclass
class FaultResult:
    fault: str
    queue_type: str
    messages: int
    verdict: Verdict
    recovery_s: float | None
    connections: int
    consumer_restarts: int
    ended_before_fault: frozenset[str] = frozenset()
    """The ids whose handler had returned their final outcome when the fault began."""

    @property
    def duplicated_ids(self) -> set[str]:
        """Messages (ids) with duplicated work: handled more often than planned, dead-lettered
        twice, or both acked and dead-lettered."""
        verdict = self.verdict
        return set(verdict.extra_calls) | set(verdict.dead_twice) | set(verdict.acked_and_dead)

    @property
    def duplicated(self) -> int:
        return len(self.duplicated_ids)

    def row(self) -> str:
        recovery = "-" if self.recovery_s is None else f"{self.recovery_s:.1f} s"
        return (
            f"{self.fault:<42} {self.queue_type:<8} {self.messages:>6} "
            f"{len(self.verdict.lost):>5} {self.duplicated:>6} {recovery:>9} "
            f"{self.connections:>5} {self.consumer_restarts:>8}"
        )


REPORT: list[FaultResult] = []
REPORT_HEADER = (
    f"{'fault':<42} {'queue':<8} {'msgs':>6} {'lost':>5} {'dupl.':>6} {'recovery':>9} "
    f"{'conns':>5} {'restarts':>8}"
)


@dataclass
class Timeline:
    """When the handler ran (loop time), to measure recovery."""

    calls: list[float] = field(default_factory=list)

    def first_call_after(self, moment: float) -> float | None:
        later = [at for at in self.calls if at >= moment]
        return min(later) - moment if later else None


def timed(ledger: Ledger, timeline: Timeline) -> Callable[..., Awaitable[object]]:
    handle = ledger.handler()

    async def handler(msg: object) -> object:
        timeline.calls.append(asyncio.get_running_loop().time())
        return await handle(msg)  # type: ignore[arg-type]

    return handler


@asynccontextmanager
async def serving(
    url: str,
    topology_text: str,
    handler: Callable[..., Awaitable[object]],
    options: RunOptions | None = None,
) -> AsyncIterator[Service]:
    async def connect() -> Connection:
        return await clients.connect(url, client_name="rr-fault-service")

    service = Service(
        HandlerSet(module="faults", subscribers=(Subscriber("work", handler, "faults:work"),)),
        topology=load_text(topology_text),
        connect=connect,
        options=options or RunOptions(),
    )
    async with service.running():
        yield service


async def hold(url: str, ids: list[str]) -> None:
    """Publish ``ids`` to ``work.held``: no TTL, no consumer, dead-lettering into ``work``.
    They reach rr only when :func:`release_held` lets them go."""
    connection = await direct(url)()
    try:
        channel = await connection.channel(confirms=True)
        await channel.queue_declare(
            "work.held",
            arguments={"x-dead-letter-exchange": "", "x-dead-letter-routing-key": "work"},
        )
        for message_id in ids:
            properties = Properties(message_id=message_id, delivery_mode=2)
            await channel.publish(
                message_id.encode(), routing_key="work.held", properties=properties, mandatory=True
            )
    finally:
        await connection.close()


async def release_held(url: str) -> int:
    """Move every message of ``work.held`` into ``work`` by the broker itself: a consumer
    rejects each without requeue, and ``work.held`` dead-letters it into ``work``. The
    connection only consumes and rejects, so a memory alarm does not block it (RabbitMQ
    blocks a connection when it publishes): rr gets these messages, and publishes their
    retry copies, while the alarm is on. Returns how many were released."""
    connection = await direct(url)()
    try:
        channel = await connection.channel()
        held = (await channel.queue_declare("work.held", passive=True)).message_count
        released = 0
        while (delivery := await channel.get("work.held")) is not None:
            await channel.reject(delivery.delivery_tag, requeue=False)
            released += 1
        assert released == held, (released, held)
        return released
    finally:
        await connection.close()


def direct(url: str) -> Callable[[], Awaitable[Connection]]:
    async def connect() -> Connection:
        return await amqp.connect(url, client_name="rr-fault-test")

    return connect


class Collector:
    """Takes the dead letters out as they arrive (by id), tolerating broker faults, and
    tells whether the work queues are empty."""

    def __init__(self, url: str, queue: str = "work.dead") -> None:
        self.connect = direct(url)
        self.queue = queue
        self.dead: Counter[str] = Counter()

    async def collect(self) -> None:
        # the broker may be down or closing connections: then look again later
        with contextlib.suppress(TransportError):
            self.dead.update(await take_ids(self.connect, self.queue))

    async def exists(self, queue: str) -> bool:
        try:
            connection = await self.connect()
        except TransportError:
            return False
        try:
            channel = await connection.channel()
            await channel.queue_declare(queue, passive=True)
        except TransportError:
            return False
        finally:
            await connection.close()
        return True

    async def queued(self, *queues: str) -> int | None:
        """Messages in ``queues`` (missing ones count 0), or None if the broker is away."""
        try:
            connection = await self.connect()
        except TransportError:
            return None
        total = 0
        try:
            for queue in queues:
                channel = await connection.channel()
                try:
                    total += (await channel.queue_declare(queue, passive=True)).message_count
                except NotFound:
                    pass
                finally:
                    await channel.close()
        except TransportError:
            return None
        finally:
            await connection.close()
        return total


async def wait_all_ended(
    ledger: Ledger, ids: list[str], collector: Collector, *, timeout_s: float
) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while True:
        await collector.collect()
        if (
            ledger.settled(ids, collector.dead) == len(ids)
            and await collector.queued("work", "work.retry") == 0
        ):
            return
        if loop.time() > deadline:
            done = ledger.settled(ids, collector.dead)
            depths = {q: await collector.queued(q) for q in ("work", "work.retry", "work.dead")}
            unended = [i for i in ids if not ledger.acked[i] and not collector.dead[i]]
            attempts = {i: ledger.attempts.get(i) for i in unended[:5]}
            raise AssertionError(
                f"after {timeout_s:g} s only {done} of {len(ids)} ids ended; queues {depths}; "
                f"not ended, with the attempts their handler saw: {attempts}"
            )
        await asyncio.sleep(0.5)


async def wait_handled(ledger: Ledger, at_least: int, *, timeout_s: float = 60) -> None:
    """Until the handler has run ``at_least`` times (the fault then hits work in flight)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while sum(ledger.calls.values()) < at_least:
        if loop.time() > deadline:
            raise AssertionError(f"the handler ran {sum(ledger.calls.values())} times only")
        await asyncio.sleep(0.05)


Fault = Callable[[Service, Ledger], Awaitable[float | None]]
"""Injects the fault while the run goes on; returns the loop time it ended at (or None)."""


async def run_with_fault(
    vhost: FaultVhost,
    *,
    fault_name: str,
    fault: Fault,
    queue_type: str = "classic",
    delay: str = "dlx-ttl",
    count: int = 2000,
    outcome_of: OutcomeOf,
    topology_text: str | None = None,
    start_after: int = 300,
    timeout_s: float = 90,
    options: RunOptions | None = None,
    settle_s: float = 0.0,
    held: int = 0,
) -> FaultResult:
    """One run of ``count`` messages with ``fault`` injected after ``start_after`` handler calls.

    ``held``: the last that many messages wait in ``work.held`` (:func:`hold`) until the
    fault lets them go (:func:`release_held`), so rr handles them, and publishes copies,
    while a fault that blocks publishers is on, however long it takes to raise it."""
    ledger = Ledger(outcome_of=outcome_of, max_attempts=3)
    timeline = Timeline()
    ids = message_ids(f"{fault_name}-{queue_type}", count)
    collector = Collector(vhost.url)
    text = topology_text or TOPOLOGY.format(type=queue_type, delay=delay)
    started = time.monotonic()
    async with serving(vhost.proxy_url, text, timed(ledger, timeline), options) as service:
        await asyncio.sleep(settle_s)  # a fresh quorum queue may lose messages on a crash
        on_time, later = ids[: count - held], ids[count - held :]
        if later:
            await hold(vhost.url, later)
        await publish_ids(direct(vhost.url), "work", on_time)
        await wait_handled(ledger, min(start_after, count))
        fault_began = asyncio.get_running_loop().time()
        ended_at = await fault(service, ledger)
        await wait_all_ended(ledger, ids, collector, timeout_s=timeout_s)
        await asyncio.sleep(1.0)  # anything still moving shows now
        await collector.collect()
    await collector.collect()
    result = FaultResult(
        fault=fault_name,
        queue_type=queue_type,
        messages=count,
        verdict=ledger.verdict(ids, collector.dead),
        recovery_s=None if ended_at is None else timeline.first_call_after(ended_at),
        connections=service.connections,
        consumer_restarts=service.stats.consumer_restarts,
        ended_before_fault=frozenset(ledger.ended_before(fault_began)),
    )
    REPORT.append(result)
    print(f"\n{REPORT_HEADER}\n{result.row()}  ({time.monotonic() - started:.0f} s)")
    return result


def assert_no_loss_in(
    fault: str,
    ledger: Ledger,
    ids: list[str],
    dead: Counter[str],
    *,
    interruptions: int,
    queue_type: str = "classic",
) -> FaultResult:
    """Record a run the test drove itself, and check it as :func:`assert_no_loss` does."""
    result = FaultResult(
        fault=fault,
        queue_type=queue_type,
        messages=len(ids),
        verdict=ledger.verdict(ids, dead),
        recovery_s=None,
        connections=0,
        consumer_restarts=0,
    )
    REPORT.append(result)
    assert_no_loss(result, interruptions=interruptions)
    return result


def assert_no_loss(
    result: FaultResult,
    *,
    interruptions: int,
    crashes: int = 0,
    killed: bool = False,
    memory_delays: bool = False,
) -> None:
    """0 lost; duplicated work only on messages of the in-flight window (the prefetch, and
    with ``memory_delays`` the delayed copies being published) of each interruption (a
    redelivered message may also take another path: a quorum queue counts the redelivery as
    an attempt), and, for each crash or stop of the broker, of the
    dead letters its quorum wait queues were moving back at least once (a move the crash or
    stop cut is made again). ``killed``: the broker was killed (SIGKILL), so a classic queue
    may deliver again any message whose work was over before it."""
    verdict = result.verdict
    assert verdict.lost == [], verdict.summary()
    if interruptions == 0:
        assert verdict.wrong_place == [], verdict.summary()
    window = duplicate_window(
        interruptions=interruptions, broker_stops=crashes, memory_delays=memory_delays
    )
    duplicated = result.duplicated_ids
    if killed and result.queue_type == "classic":
        # a classic queue writes acks to disk lazily: after a crash of the broker it delivers
        # again messages acked just before it (docs/explanation/guarantees.md, "What is
        # guaranteed"), however many the consumer acked then; only those whose work was over when
        # the fault began
        resurrected = duplicated & result.ended_before_fault
        duplicated -= resurrected
    assert len(duplicated) <= window, verdict.summary()
