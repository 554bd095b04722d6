"""The public harness: TestBroker and the rr_broker fixture of the pytest plugin."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from rabbitctl_retry import Message, Outcome, subscriber
from rabbitctl_retry.emulator.events import DeadLettered, Delivered, Expired
from rabbitctl_retry.errors import ConflictError
from rabbitctl_retry.testing import TestBroker

TOPOLOGY = """
[queues.orders]
max_attempts = 3
dead_letter = "orders.dead"
delay = "dlx-ttl"
"""

seen: list[int] = []


@subscriber("orders")
async def always_later(msg: Message) -> Outcome:
    seen.append(msg.attempt)
    return Outcome.retry_after(60)


@pytest.mark.rr_topology(TOPOLOGY)
async def test_the_fixture_declares_the_marked_topology_and_runs_handlers(
    rr_broker: TestBroker,
) -> None:
    seen.clear()
    await rr_broker.run(always_later)
    await rr_broker.publish("orders", {"id": 1})
    assert seen == [1]
    await rr_broker.advance(59.999)
    assert seen == [1]
    await rr_broker.advance(0.001)
    assert seen == [1, 2]
    await rr_broker.advance(60)
    assert seen == [1, 2, 3]
    assert len(rr_broker.messages("orders.dead")) == 1
    assert rr_broker.messages("orders.dead")[0].headers["x-ruststream-retry-count"] == "3"
    expired = rr_broker.events_of(Expired)
    assert [(e.queue, e.at_s - expired[0].at_s) for e in expired] == [
        ("orders.retry", 0.0),
        ("orders.retry", 60.0),
    ]
    assert [d.queue for d in rr_broker.events_of(Delivered)] == ["orders"] * 3
    assert [d.from_queue for d in rr_broker.events_of(DeadLettered)] == ["orders.retry"] * 2


async def test_a_conflicting_declare_raises() -> None:
    async with TestBroker(TOPOLOGY) as broker:
        with pytest.raises(ConflictError, match="orders"):
            await broker.declare(
                TOPOLOGY.replace("max_attempts = 3", 'max_attempts = 3\ntype = "quorum"')
            )


async def test_publish_takes_json_text_and_bytes() -> None:
    async with TestBroker("[queues.q]\n") as broker:
        await broker.publish("q", {"a": 1})
        await broker.publish("q", "text")
        await broker.publish("q", b"\x00\x01")
        assert broker.bodies("q") == [{"a": 1}, "text", b"\x00\x01"]
        assert [m.properties.content_type for m in broker.messages("q")] == [
            "application/json",
            "text/plain",
            None,
        ]


async def test_memory_delays_run_on_the_virtual_clock() -> None:
    calls: list[float] = []

    @subscriber("jobs")
    async def later(msg: Message) -> Outcome | None:
        calls.append(broker.clock.now_s)
        return Outcome.retry_after(30) if len(calls) == 1 else None

    async with TestBroker('[queues.jobs]\nmax_attempts = 2\ndead_letter = "jobs.dead"\n') as broker:
        await broker.run(later)
        await broker.publish("jobs", {"id": 1})
        await broker.advance(29)
        assert len(calls) == 1
        await broker.advance(1)
        assert len(calls) == 2
        assert calls[1] - calls[0] == 30
        assert broker.messages("jobs.dead") == []


def test_the_rr_topology_mark_reads_its_file_beside_the_test(tmp_path: Path) -> None:
    """docs/how-to/test-a-service.md, "The pytest fixture": the path is relative to the test file,
    not to the directory pytest runs in."""
    suite = tmp_path / "service" / "tests"
    suite.mkdir(parents=True)
    (suite / "topology.toml").write_text("[queues.orders]\nmax_attempts = 2\n")
    (suite / "test_beside.py").write_text(
        "import pytest\n\n\n"
        '@pytest.mark.rr_topology("topology.toml")\n'
        "async def test_declared(rr_broker):\n"
        '    assert "orders" in rr_broker.emulator.queue_names()\n'
    )
    (tmp_path / "pytest.ini").write_text("[pytest]\nasyncio_mode = auto\n")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "service/tests"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout


@pytest.mark.rr_topology('[broker]\nsettings = "policy"\n' + TOPOLOGY)
async def test_a_policy_held_topology_gets_its_policies_from_the_fixture(
    rr_broker: TestBroker,
) -> None:
    """settings = "policy" (docs/how-to/migrate-to-quorum.md, "Changing a topology"): the wait
    queue's settings are in rr's policy, and its copies still come back to their queue."""
    seen.clear()
    assert {policy.name for policy in rr_broker.emulator.policies()} == {"rr.orders.retry"}
    # only its type stays in the declare (docs/reference/topology.md, "The queue's type")
    assert rr_broker.emulator.queue("orders.retry").arguments == {"x-queue-type": "classic"}
    await rr_broker.run(always_later)
    await rr_broker.publish("orders", {"id": 1})
    await rr_broker.advance(120)
    assert seen == [1, 2, 3]
    assert len(rr_broker.messages("orders.dead")) == 1
