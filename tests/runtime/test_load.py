"""Under load, at default settings, on the real broker: exact counts for every message id.

* 5,000 messages whose handler always retries, max_attempts 3, classic and quorum: each
  handled exactly 3 times, each in the dead-letter queue once, nothing left, and never more
  than one confirm channel open (``rabbitmqctl list_channels``).

In a calm run the service never loses its connection, and the counts are exact. Beside a CPU
hog it may (its event loop misses the heartbeats): then each test says which interruptions
it saw and holds the run to docs/reference/runtime.md's bound instead — nothing lost, and only the
deliveries in flight at each interruption handled once more (classic queues) or ended one
attempt early by the broker's count (quorum queues), dead-lettered twice, or both acked and
dead-lettered.
* 20,000 messages per queue type with mixed outcomes (70 % ack, 20 % retry, 10 %
  retry_after(1 s), a fixed function of id and attempt) at the default concurrency: per id,
  the exact number of handler calls and the exact end (acked, or dead-lettered once).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import threading
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import pytest

from rabbitctl_retry.runtime.handlers import Subscriber
from rabbitctl_retry.runtime.loader import HandlerSet
from rabbitctl_retry.runtime.service import RunOptions, Service
from rabbitctl_retry.topology.load import load_text
from rabbitctl_retry.transport import clients
from tests.backends import RabbitBackend
from tests.ledger import (
    Ledger,
    OutcomeOf,
    always_retry,
    message_ids,
    mixed_outcome,
    planned_end,
    publish_ids,
    take_ids,
    wait_progressing,
)
from tests.observe import depth
from tests.shared_node import ctl_command

# Each test keeps the service and the server busy for 10-20 s: one at a time under pytest-xdist
# (on one worker), so that they do not slow each other towards their deadlines.
# A run takes 10-40 s on an idle machine and minutes beside a CPU hog: the tests wait as long
# as messages keep ending (wait_progressing), within this bound.
pytestmark = [pytest.mark.broker, pytest.mark.xdist_group("load"), pytest.mark.timeout(900)]

PREFETCH = RunOptions().prefetch
"""The deliveries in flight on the consumer: what one interruption can deliver again."""

SERVICE_NAME = "rr-load-service"
"""The service's connection name (the test's own publisher and readers have another)."""

TOPOLOGY = """
[queues.work]
type = "{type}"
max_attempts = 3
dead_letter = "work.dead"
delay = "dlx-ttl"
"""


@pytest.fixture
async def rabbit(amqp_url: str) -> AsyncIterator[RabbitBackend]:
    backend = RabbitBackend(amqp_url)
    backend.setup()
    yield backend
    await backend.close()


def _listed(*command: str) -> list[dict[str, Any]]:
    result = subprocess.run(
        ctl_command("-q", *command, "--formatter", "json"),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    rows: list[dict[str, Any]] = json.loads(result.stdout)
    return rows


class ConfirmChannels:
    """Counts the confirm channels open now on the connections of ``vhost`` named
    ``connection_name``: one ``rabbitmqctl list_channels`` a sample; the connections are listed
    again only when a channel shows on one not seen before (each ``rabbitmqctl`` costs most of
    a second of CPU, which the service under load needs)."""

    def __init__(self, vhost: str, connection_name: str) -> None:
        self.vhost = vhost
        self.connection_name = connection_name
        self._named: dict[str, bool] = {}
        """Connection pid -> whether it is named ``connection_name``."""

    def __call__(self) -> int:
        channels = [
            row
            for row in _listed("list_channels", "connection", "vhost", "confirm")
            if row["vhost"] == self.vhost
        ]
        if any(row["connection"] not in self._named for row in channels):
            for row in _listed("list_connections", "pid", "vhost", "client_properties"):
                if row["vhost"] == self.vhost:
                    name = ["connection_name", "longstr", self.connection_name]
                    self._named[row["pid"]] = name in row["client_properties"]
        return sum(
            1 for row in channels if row["confirm"] and self._named.get(row["connection"], False)
        )


@contextmanager
def sampling(sample: Callable[[], int]) -> Iterator[list[int]]:
    """Call ``sample`` over and over in a thread while the block runs; yields the samples."""
    samples: list[int] = []
    done = threading.Event()

    def loop() -> None:
        while not done.is_set():
            samples.append(sample())
            done.wait(0.3)

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        yield samples
    finally:
        done.set()
        thread.join(timeout=70)


@asynccontextmanager
async def serving(rabbit: RabbitBackend, queue_type: str, ledger: Ledger) -> AsyncIterator[Service]:
    service = Service(
        HandlerSet(module="load", subscribers=(Subscriber("work", ledger.handler(), "load:work"),)),
        topology=load_text(TOPOLOGY.format(type=queue_type)),
        connect=lambda: clients.connect(rabbit.url, client_name=SERVICE_NAME),
        options=RunOptions(),  # the defaults: prefetch 100, concurrency = prefetch
    )
    async with service.running():
        yield service


async def run_load(
    rabbit: RabbitBackend, queue_type: str, count: int, outcome_of: OutcomeOf
) -> tuple[Ledger, list[str], Counter[str], Service]:
    ledger = Ledger(outcome_of=outcome_of, max_attempts=3)
    ids = message_ids(queue_type, count)
    dead: Counter[str] = Counter()
    async with serving(rabbit, queue_type, ledger) as service:
        await publish_ids(rabbit.connect, "work", ids)

        async def ended() -> int:
            dead.update(await take_ids(rabbit.connect, "work.dead"))
            return ledger.settled(ids, dead)

        await wait_progressing(ended, count, f"all {count} messages to end")
        await asyncio.sleep(0.5)  # anything still moving would show now
    dead.update(await take_ids(rabbit.connect, "work.dead"))
    return ledger, ids, dead, service


def interruptions(service: Service) -> int:
    """How often the service's connection or a consumer was cut: 0 in a calm run. On a
    starved machine (a CPU hog beside the suite) a service whose event loop misses its
    heartbeats loses the connection, and the broker delivers again what was in flight."""
    return service.connections - 1 + service.stats.consumer_restarts


@pytest.mark.parametrize("queue_type", ["classic", "quorum"])
async def test_5000_always_retry_messages_each_handled_3_times_and_dead_once(
    rabbit: RabbitBackend, queue_type: str
) -> None:
    with sampling(ConfirmChannels(rabbit.vhost, SERVICE_NAME)) as samples:
        ledger, ids, dead, service = await run_load(rabbit, queue_type, 5000, always_retry)
    assert await depth(rabbit, "work") == 0
    assert await depth(rabbit, "work.retry") == 0
    assert samples, "no channel sample was taken"
    # classic: one confirm channel carries every copy; quorum: the server counts, no copies
    assert max(samples) == (1 if queue_type == "classic" else 0), samples
    assert len(ledger.calls) == 5000
    assert set(dead) == set(ids)  # none lost
    cut = interruptions(service)
    if cut:  # the documented bound (docs/explanation/guarantees.md, "What is guaranteed")
        verdict = ledger.verdict(ids, dead)
        assert verdict.beyond_interruptions(interruptions=cut, window=PREFETCH) == []
        return
    assert set(ledger.calls.values()) == {3}, Counter(ledger.calls.values())
    assert dead == Counter(dict.fromkeys(ids, 1))
    assert service.stats.interrupted_deliveries == 0


@pytest.mark.parametrize("queue_type", ["classic", "quorum"])
async def test_20000_mixed_outcomes_end_exactly_as_planned(
    rabbit: RabbitBackend, queue_type: str
) -> None:
    ledger, ids, dead, service = await run_load(rabbit, queue_type, 20_000, mixed_outcome)
    verdict = ledger.verdict(ids, dead)
    assert verdict.lost == [], verdict.summary()
    assert await depth(rabbit, "work") == 0
    assert await depth(rabbit, "work.retry") == 0
    cut = interruptions(service)
    if cut:  # the documented bound (docs/explanation/guarantees.md, "What is guaranteed")
        assert verdict.beyond_interruptions(interruptions=cut, window=PREFETCH) == []
        return
    assert verdict.extra_calls == {}, verdict.summary()
    assert verdict.duplicates == 0, verdict.summary()
    assert verdict.wrong_place == [], verdict.summary()
    planned = {i: planned_end(i, 3, mixed_outcome) for i in ids}
    assert dict(ledger.calls) == {i: calls for i, (calls, _) in planned.items()}
    assert dead == Counter({i: 1 for i, (_, end) in planned.items() if end == "dead"})
    assert set(ledger.acked.values()) == {1}
    assert len(ledger.acked) == sum(1 for _, end in planned.values() if end == "acked")
    assert service.stats.interrupted_deliveries == 0
