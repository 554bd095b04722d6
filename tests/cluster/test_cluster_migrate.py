"""``rr migrate`` on the local three-node RabbitMQ 3.10 cluster (docs/how-to/migrate-to-quorum.md,
"Migrating a queue"): a classic queue mirrored by an ``ha-mode: all`` policy — the queues RabbitMQ
4.0 stops replicating — with a wait queue and a dead-letter route becomes a quorum queue with
``replicas = 3``. The command is killed (SIGKILL) in the middle of its drain, a node that is
not the one rr talks to stops while rr refills the rebuilt queue, and the same command finishes
the job; then every message id is counted in the quorum queue: none lost."""

from __future__ import annotations

import asyncio
import base64
import json
import signal
import subprocess
import urllib.request
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import pytest

from rabbitctl_retry.topology.migration import Step, holding_name
from tests.cluster.conftest import LocalCluster
from tests.faults.harness import Collector, direct
from tests.faults.process import rr_process
from tests.ledger import message_ids, publish_ids, take_ids

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(900)]

BEFORE = """
[exchanges.events]
type = "direct"

[queues.jobs]
max_attempts = 5
dead_letter = "jobs.dead"
delay_tiers = ["30s"]
bindings = [{ exchange = "events", routing_key = "job" }]
"""
AFTER = BEFORE.replace("max_attempts = 5", 'max_attempts = 5\ntype = "quorum"\nreplicas = 3')
READY = 3_000
WAITING = 300
WAIT_QUEUE = "jobs.retry.30s"


@pytest.fixture
def vhost(cluster: LocalCluster) -> Iterator[str]:
    """A vhost of the test's own whose ``ha-all`` policy mirrors ``jobs`` on every node."""
    with cluster.own_vhost("rr-migrate") as name:
        cluster.ctl(
            1,
            "set_policy",
            "-p",
            name,
            "--apply-to",
            "queues",
            "ha-all",
            "^jobs$",
            '{"ha-mode":"all","ha-sync-mode":"automatic"}',
        )
        yield name


def queue_info(cluster: LocalCluster, vhost: str, name: str) -> dict[str, Any] | None:
    """Node 1's management API on one queue, or None when it does not exist."""
    base = urlsplit(cluster.management_url(1))
    request = urllib.request.Request(
        f"{base.scheme}://{base.hostname}:{base.port}/api/queues/"
        f"{quote(vhost, safe='')}/{quote(name, safe='')}"
    )
    token = base64.b64encode(f"{base.username}:{base.password}".encode()).decode()
    request.add_header("Authorization", f"Basic {token}")
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            info: dict[str, Any] = json.load(answer)
            return info
    except urllib.error.HTTPError as error:
        if error.code == 404:
            return None
        raise


async def until(check: Any, what: str, process: subprocess.Popen[bytes], log: Path) -> None:
    """Wait for ``check()`` (progress: a step line, a depth), failing if rr ended first."""
    for _ in range(6000):
        if await check():
            return
        if process.poll() is not None:
            raise AssertionError(f"rr migrate ended before {what}:\n{log.read_text()[-3000:]}")
        await asyncio.sleep(0.05)
    raise AssertionError(f"never saw {what}:\n{log.read_text()[-3000:]}")


def began(log: Path, step: Step) -> bool:
    return f"rr: migrate jobs: {step.value}\n" in log.read_text(errors="replace")


async def test_a_mirrored_classic_queue_becomes_a_quorum_queue_on_three_nodes(
    cluster: LocalCluster, vhost: str, tmp_path: Path
) -> None:
    url = cluster.url(2, vhost)
    (tmp_path / "before.toml").write_text(BEFORE)
    (tmp_path / "after.toml").write_text(AFTER)
    declare_log = tmp_path / "declare.log"
    declared = rr_process(tmp_path, "declare", "before.toml", "--url", url, log=declare_log)
    assert await asyncio.to_thread(declared.wait, 120) == 0, declare_log.read_text()
    for _ in range(600):  # the management API shows the policy once its stats are in
        info = queue_info(cluster, vhost, "jobs")
        if info is not None and info.get("policy") == "ha-all":
            break
        await asyncio.sleep(0.1)
    assert info is not None
    assert info.get("policy") == "ha-all", info
    ready, waiting = message_ids("ready", READY), message_ids("waiting", WAITING)
    connect = direct(url)
    await publish_ids(connect, "jobs", ready)
    await publish_ids(connect, WAIT_QUEUE, waiting)
    collector = Collector(url)
    # --force: no management URL is given (nothing publishes by name while it runs)
    migrate = ("migrate", "after.toml", "--yes", "--force", "-o", "json", "--url", url)

    # 1. killed in the middle of the drain
    log = tmp_path / "migrate-1.log"
    process = rr_process(tmp_path, *migrate, log=log)
    try:

        async def draining() -> bool:
            if not began(log, Step.DRAIN):
                return False
            return (await collector.queued(holding_name("jobs")) or 0) >= READY // 3

        await until(draining, "a third of the queue in the holding queue", process, log)
        process.send_signal(signal.SIGKILL)
        assert await asyncio.to_thread(process.wait, 60) == -signal.SIGKILL
    finally:
        if process.poll() is None:
            process.kill()

    # 2. node 3 stops while rr (on node 2) refills the rebuilt queue; the same command again
    log = tmp_path / "migrate-2.log"
    process = rr_process(tmp_path, *migrate, log=log)
    try:

        async def refilling() -> bool:
            return began(log, Step.REFILL)

        await until(refilling, "the refill", process, log)
        await asyncio.to_thread(cluster.stop_app, 3)
        await asyncio.to_thread(process.wait, 600)
    finally:
        if process.poll() is None:
            process.kill()
        await asyncio.to_thread(cluster.start_app, 3)

    # 3. runs until done (the second may have finished already: then this one plans nothing)
    outputs = []
    for attempt in range(3, 6):
        log = tmp_path / f"migrate-{attempt}.log"
        process = rr_process(tmp_path, *migrate, log=log)
        code = await asyncio.to_thread(process.wait, 600)
        outputs.append(log.read_text(errors="replace"))
        if code == 0:
            break
    assert code == 0, "\n".join(outputs)[-5000:]
    text = outputs[-1]
    report = json.loads(text[text.index("{") : text.rindex("}") + 1])
    assert report["conflicts_left"] == []

    # the queue: quorum, a member on every node, no holding queue left
    info = queue_info(cluster, vhost, "jobs")
    assert info is not None
    assert info["type"] == "quorum"
    assert sorted(info["members"]) == sorted(cluster.nodes)
    assert queue_info(cluster, vhost, holding_name("jobs")) is None
    assert queue_info(cluster, vhost, holding_name(WAIT_QUEUE)) is None
    # every id: the ready ones in the queue, the waiting ones once their wait is over
    found: Counter[str] = Counter()
    for _ in range(1200):
        found += await take_ids(connect, "jobs")
        if set(ready) | set(waiting) <= set(found):
            break
        await asyncio.sleep(0.1)
    lost = (set(ready) | set(waiting)) - set(found)
    assert not lost, f"{len(lost)} lost, e.g. {sorted(lost)[:5]}"
    assert set(found) == set(ready) | set(waiting)
