"""``rr migrate`` and a publisher by name, on RabbitMQ 3.10.8, 4.0.5 and 4.3.6
(docs/topology.md, "Migrating a queue"): a publisher by name (``mandatory``, publisher
confirms, 50 msg/s) can lose a message the broker confirmed when its queue is deleted (issue
#40). Without the management API every run is refused unless ``--force``; with it (4.3.6),
while the default exchange's rate is above 0. Run seven times in a row; every id counted
afterwards: nothing lost, nothing returned.

Only 4.3.6 has a management API here: the other servers run the AMQP-only path. The CLI runs
in this process (in a thread: it runs its own event loop); every wait is for progress.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from rabbitctl_retry.cli import app
from rabbitctl_retry.errors import NotFound, PublishFailed
from rabbitctl_retry.transport.base import Properties
from rabbitctl_retry.transport.management_http import HttpManagementApi
from tests.backends import RabbitBackend
from tests.broker.test_doctor_deprecated_on_servers import MANAGEMENT_URLS
from tests.ledger import message_ids, publish_ids, take_ids

pytestmark = pytest.mark.broker

runner = CliRunner(env={"COLUMNS": "200", "RR_URL": None, "RR_MANAGEMENT_URL": None})

BEFORE = """
[exchanges.events]
type = "direct"

[queues.jobs]
max_attempts = 5
dead_letter = "jobs.dead"
delay_tiers = ["10s"]
bindings = [{ exchange = "events", routing_key = "job" }]
"""

AFTER = BEFORE.replace("max_attempts = 5", 'max_attempts = 5\ntype = "quorum"')

RUNS = 7
"""Runs of the by-name scenario (the issue saw a loss in 3 of 7)."""

RATE_PER_S = 50


@pytest.fixture
async def backend(amqp_url: str) -> AsyncIterator[RabbitBackend]:
    """The server of ``amqp_url`` in a fresh vhost, with the old topology declared."""
    rabbit = RabbitBackend(amqp_url)
    rabbit.setup()
    try:
        yield rabbit
    finally:
        await rabbit.close()


def rr(backend: RabbitBackend, folder: Path, text: str, command: str, *args: str) -> Result:
    topology = folder / f"{command}.toml"
    topology.write_text(text, encoding="utf-8")
    return runner.invoke(app, [command, str(topology), "--url", backend.url, *args])


async def rr_async(
    backend: RabbitBackend, folder: Path, text: str, command: str, *args: str
) -> Result:
    return await asyncio.to_thread(rr, backend, folder, text, command, *args)


def said(result: Result) -> str:
    """stderr on one line (an error line may be folded)."""
    return " ".join(result.stderr.split())


def management_ways(backend: RabbitBackend) -> list[tuple[str, ...]]:
    """``--management-url`` where the server has one (4.3.6)."""
    url = MANAGEMENT_URLS.get(backend.version)
    return [] if url is None else [("--management-url", url)]


async def exists(backend: RabbitBackend, queue: str) -> bool:
    channel = await backend.channel()
    try:
        await channel.queue_declare(queue, passive=True)
    except NotFound:
        return False
    return True


async def as_before(backend: RabbitBackend, folder: Path) -> None:
    """jobs is as the old file says (a classic queue, no x-max-length): ``rr declare`` of it
    changes nothing and finds no conflict; and no holding queue is left."""
    result = await rr_async(backend, folder, BEFORE, "declare")
    assert result.exit_code == 0, result.output
    assert not await exists(backend, "jobs.rr-migrating")


@dataclass
class ByName:
    """Publishes ``byname-N`` to the default exchange with routing key ``jobs``, mandatory,
    persistent, on a confirm channel, at 50 a second; keeps what became of each."""

    backend: RabbitBackend
    confirmed: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    """Returned or nacked: the publisher knows."""
    stop: asyncio.Event = field(default_factory=asyncio.Event)

    async def run(self) -> None:
        connection = await self.backend.connect()
        channel = await connection.channel(confirms=True)
        number = 0
        while not self.stop.is_set():
            message_id = f"byname-{number:06d}"
            number += 1
            try:
                await channel.publish(
                    message_id.encode(),
                    routing_key="jobs",
                    properties=Properties(message_id=message_id, delivery_mode=2),
                    mandatory=True,
                )
                self.confirmed.append(message_id)
            except PublishFailed:
                self.refused.append(message_id)
            await asyncio.sleep(1 / RATE_PER_S)

    async def more(self, count: int) -> None:
        """Wait until ``count`` more are confirmed: the publisher goes on between runs."""
        wanted = len(self.confirmed) + count
        await self.backend.until(
            lambda: len(self.confirmed) >= wanted, f"{count} more published by name"
        )


async def rate_seen(api: HttpManagementApi) -> bool:
    return bool(await api.publish_rate(""))


async def test_a_publisher_by_name_loses_nothing_run_after_run(
    backend: RabbitBackend, tmp_path: Path
) -> None:
    assert (await rr_async(backend, tmp_path, BEFORE, "declare")).exit_code == 0
    ready = message_ids("ready", 20)
    await publish_ids(backend.connect, "jobs", ready)
    publisher = ByName(backend)
    publishing = asyncio.ensure_future(publisher.run())
    try:
        await publisher.more(10)
        for _ in range(RUNS):
            result = await rr_async(backend, tmp_path, AFTER, "migrate", "--yes")
            assert result.exit_code == 1, result.output
            assert "cannot be checked without the management API" in said(result), said(result)
            assert "nothing was changed" in said(result)
            assert "rr: migrate jobs:" not in result.stderr
            await publisher.more(5)
        for way in management_ways(backend):
            api = HttpManagementApi(way[1], vhost=backend.vhost)
            backend.deadline_s = 60.0  # the server samples its rates every 5 s
            await backend.until(partial(rate_seen, api), "the default exchange's rate above 0")
            for _ in range(RUNS):
                result = await rr_async(backend, tmp_path, AFTER, "migrate", "--yes", *way)
                assert result.exit_code == 1, result.output
                assert "messages are being published by name (the default exchange" in said(
                    result
                ), said(result)
                assert "rr: migrate jobs:" not in result.stderr
                await publisher.more(5)
    finally:
        publisher.stop.set()
        with contextlib.suppress(Exception):
            await publishing
    await as_before(backend, tmp_path)
    found = await take_ids(backend.connect, "jobs")
    expected = set(ready) | set(publisher.confirmed)
    lost = expected - set(found)
    assert not lost, f"{len(lost)} lost, e.g. {sorted(lost)[:5]}"
    assert found == dict.fromkeys(sorted(expected), 1)
    assert publisher.refused == []
