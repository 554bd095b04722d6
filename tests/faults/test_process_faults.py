"""The ``rr run`` process itself under faults: SIGTERM mid-run, and SIGTERM while the broker
blocks the connection (a memory alarm). Every message id is counted through a file the
handler appends to."""

from __future__ import annotations

import asyncio
import time
from contextlib import AbstractContextManager
from pathlib import Path

import pytest

from tests.faults import process
from tests.faults.conftest import FaultVhost
from tests.faults.harness import Collector, assert_no_loss_in, direct
from tests.faults.node import PrivateNode
from tests.faults.process import RrRun, handled, stop, until
from tests.ledger import Ledger, always_retry, message_ids, mixed_outcome, publish_ids

pytestmark = [pytest.mark.faults, pytest.mark.timeout(300)]

TOPOLOGY = """
[queues.work]
max_attempts = 3
dead_letter = "work.dead"
delay = "dlx-ttl"
"""

HANDLERS = """
import asyncio, os
from rabbitctl_retry import Message, subscriber
from tests import ledger

CALLS = os.environ["RR_FAULT_CALLS"]
OUTCOME = getattr(ledger, os.environ["RR_FAULT_OUTCOME"])
SLEEP_S = float(os.environ["RR_FAULT_SLEEP_S"])

@subscriber("work")
async def handle(msg: Message):
    outcome = OUTCOME(msg.properties.message_id, msg.attempt)
    with open(CALLS, "a") as calls:
        calls.write(f"{msg.properties.message_id} {msg.attempt} {type(outcome).__name__}\\n")
    await asyncio.sleep(SLEEP_S)
    return outcome
"""


def ledger_from(path: Path, outcome_name: str) -> Ledger:
    outcome_of = mixed_outcome if outcome_name == "mixed_outcome" else always_retry
    return process.ledger_of(path, outcome_of)


def rr_run(
    tmp_path: Path, url: str, outcome: str, *, sleep_s: float, shutdown_timeout_s: float
) -> AbstractContextManager[RrRun]:
    return process.rr_run(
        tmp_path,
        url,
        topology=TOPOLOGY,
        handlers=HANDLERS,
        env={"RR_FAULT_OUTCOME": outcome, "RR_FAULT_SLEEP_S": str(sleep_s)},
        args=["--shutdown-timeout", str(shutdown_timeout_s)],
    )


async def declared(collector: Collector) -> None:
    """Until rr run has declared its topology."""
    deadline = time.monotonic() + 60
    while not await collector.exists("work.retry"):
        assert time.monotonic() < deadline, "rr run did not declare its queues"
        await asyncio.sleep(0.1)


async def test_sigterm_mid_run_then_a_new_rr_run_loses_nothing(
    fault_vhost: FaultVhost, tmp_path: Path
) -> None:
    """SIGTERM while ~100 handlers run: rr run stops cleanly (exit 0); a second rr run
    finishes the work; every id ends as planned, duplicates within the window."""
    calls = tmp_path / "calls.txt"
    ids = message_ids("sigterm", 2000)
    collector = Collector(fault_vhost.url)
    with rr_run(
        tmp_path, fault_vhost.proxy_url, "mixed_outcome", sleep_s=0.02, shutdown_timeout_s=30
    ) as first:
        await declared(collector)
        await publish_ids(direct(fault_vhost.url), "work", ids)
        await until(lambda: handled(calls) >= 500, "500 handler calls")
        code, took_s, output = await stop(first)
    assert code == 0, output
    in_between = handled(calls)
    with rr_run(
        tmp_path, fault_vhost.proxy_url, "mixed_outcome", sleep_s=0.0, shutdown_timeout_s=30
    ) as second:
        ledger = ledger_from(calls, "mixed_outcome")
        deadline = time.monotonic() + 120
        while True:
            await collector.collect()
            ledger = ledger_from(calls, "mixed_outcome")
            if (
                ledger.settled(ids, collector.dead) == len(ids)
                and await collector.queued("work", "work.retry") == 0
            ):
                break
            assert time.monotonic() < deadline, f"{ledger.settled(ids, collector.dead)} ended"
            await asyncio.sleep(0.5)
        code, _, output = await stop(second)
    assert code == 0, output
    await collector.collect()
    result = assert_no_loss_in(
        "SIGTERM of rr run, then a new rr run", ledger, ids, collector.dead, interruptions=1
    )
    print(f"\nSIGTERM: exited in {took_s:.1f} s after {in_between} calls; {result.row()}")


async def test_sigterm_while_blocked_by_a_memory_alarm_keeps_the_shutdown_timeout(
    fault_node: PrivateNode, fault_vhost: FaultVhost, tmp_path: Path
) -> None:
    """The broker blocks the connection (memory alarm): copies cannot be published, handlers
    wait. SIGTERM must still end rr run within --shutdown-timeout (plus the bounded close),
    and nothing is lost: unsettled deliveries go back and a later run finishes them."""
    calls = tmp_path / "calls.txt"
    ids = message_ids("blocked", 3000)
    collector = Collector(fault_vhost.url)
    shutdown_timeout_s = 3.0
    with rr_run(
        tmp_path,
        fault_vhost.proxy_url,
        "always_retry",
        sleep_s=0.1,
        shutdown_timeout_s=shutdown_timeout_s,
    ) as blocked:
        await declared(collector)
        await publish_ids(direct(fault_vhost.url), "work", ids)
        await until(lambda: handled(calls) >= 100, "100 handler calls")
        await asyncio.to_thread(fault_node.set_memory_alarm, True)
        await asyncio.sleep(3)  # rr's copies now wait for the broker
        try:
            code, took_s, output = await stop(blocked)
        finally:
            await asyncio.to_thread(fault_node.set_memory_alarm, False)
    assert code == 0, output
    assert "the broker blocked the connection" in output
    # the shutdown timeout, then at most the bounded close of the connection (5 s), and room
    # for a busy machine: this catches a stop that waits without bound, not a slow one
    assert took_s < shutdown_timeout_s + 5 + 15, output
    with rr_run(
        tmp_path, fault_vhost.proxy_url, "always_retry", sleep_s=0.0, shutdown_timeout_s=30
    ) as second:
        deadline = time.monotonic() + 90
        while True:
            await collector.collect()
            ledger = ledger_from(calls, "always_retry")
            if ledger.settled(ids, collector.dead) == len(ids):
                break
            assert time.monotonic() < deadline, f"{ledger.settled(ids, collector.dead)} ended"
            await asyncio.sleep(0.5)
        code, _, output = await stop(second)
    assert code == 0, output
    result = assert_no_loss_in(
        "SIGTERM while blocked (memory alarm)", ledger, ids, collector.dead, interruptions=1
    )
    print(f"\nSIGTERM while blocked: exited in {took_s:.1f} s; {result.row()}")
