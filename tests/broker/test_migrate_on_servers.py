"""``rr migrate`` keeps every message or does not start, on RabbitMQ 3.10.8, 4.0.5 and 4.3.6
(docs/how-to/migrate-to-quorum.md, "Migrating a queue" and "Holding queues"): the three ways it lost
messages (issue #40), each now refused before any step, every message id counted afterwards.

* ``x-max-length = 10`` added to a classic queue holding 50: refused in the plan, with the
  numbers; and messages that reach the holding queue during a run are never moved into a
  rebuilt queue that would drop them (the refill's own check);
* a publisher by name (``mandatory``, publisher confirms, 50 msg/s): without the management
  API every run is refused unless ``--force``; with it (4.3.6), while the default exchange's
  rate is above 0. Run seven times in a row; nothing lost, nothing returned;
* another application's ``jobs.rr-migrating`` holding 5: a conflict, whether the file needs a
  rebuild or not, with or without the management API: its 5 messages stay where they are.

Only 4.3.6 has a management API here: the other servers run the AMQP-only paths. The CLI runs
in this process (in a thread: it runs its own event loop); every wait is for progress.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from rabbitctl_retry.cli import app
from rabbitctl_retry.errors import NotFound, PublishFailed
from rabbitctl_retry.ops import migrate as migrate_shell
from rabbitctl_retry.transport import clients
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


def with_arguments(arguments: str) -> str:
    """BEFORE with ``arguments`` for jobs: a rebuild (RabbitMQ changes no x- argument)."""
    return BEFORE.replace("max_attempts = 5", f"max_attempts = 5\narguments = {{ {arguments} }}")


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


async def test_x_max_length_10_on_a_classic_queue_of_50_is_refused_before_any_step(
    backend: RabbitBackend, tmp_path: Path
) -> None:
    assert (await rr_async(backend, tmp_path, BEFORE, "declare")).exit_code == 0
    ids = message_ids("m", 50)
    await publish_ids(backend.connect, "jobs", ids)
    limited = with_arguments('"x-max-length" = 10')
    for extra in [("--force",), ("--force", "--dry-run"), *management_ways(backend)]:
        result = await rr_async(backend, tmp_path, limited, "migrate", "--yes", *extra)
        assert result.exit_code == 1, (extra, result.output)
        assert (
            "rr: error: rr migrate: jobs would hold at most 10 messages (x-max-length = 10), and "
            "the rebuild puts 50 back into it (jobs 50); nothing was changed"
        ) in said(result), said(result)
        assert "rr: migrate jobs:" not in result.stderr  # no step began
        await as_before(backend, tmp_path)
    found = await take_ids(backend.connect, "jobs")
    assert found == dict.fromkeys(ids, 1)


async def test_messages_that_come_during_the_run_are_not_refilled_into_a_queue_that_drops(
    backend: RabbitBackend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The plan saw jobs empty (a drop-head limit was no loss then); 12 messages come through
    the exchange while the binding is the holding queue's: the refill stops before it moves
    one, and they wait in the holding queue until a file with reject-publish finishes."""
    assert (await rr_async(backend, tmp_path, BEFORE, "declare")).exit_code == 0
    late = message_ids("late", 12)
    real_after = migrate_shell._Run.after

    async def after(self: Any) -> None:
        await publish_ids(
            lambda: clients.connect(backend.url), "job", late, exchange="events"
        )  # in rr's own event loop, as the run reaches ``declare``
        await real_after(self)

    monkeypatch.setattr(migrate_shell._Run, "after", after)
    dropping = with_arguments('"x-max-length" = 10')
    stopped = await rr_async(backend, tmp_path, dropping, "migrate", "--yes", "--force")
    assert stopped.exit_code == 1, stopped.output
    assert (
        "rr: error: rr migrate: the refill jobs.rr-migrating -> jobs stopped before it moved a "
        "message: the rebuilt jobs has x-max-length = 10 with x-overflow = drop-head"
    ) in said(stopped), said(stopped)
    assert "its 12 messages stay in jobs.rr-migrating, none dropped" in said(stopped)
    monkeypatch.undo()
    keeping = with_arguments('"x-max-length" = 20, "x-overflow" = "reject-publish"')
    finished = await rr_async(backend, tmp_path, keeping, "migrate", "--yes", "--force")
    assert finished.exit_code == 0, finished.output
    assert not await exists(backend, "jobs.rr-migrating")
    assert await take_ids(backend.connect, "jobs") == dict.fromkeys(late, 1)


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


async def test_another_application_s_holding_named_queue_is_left_alone(
    backend: RabbitBackend, tmp_path: Path
) -> None:
    """The issue's case: another application's jobs.rr-migrating holding 5, and a file that
    needs no change (and one that needs a rebuild): a conflict each time, nothing moved."""
    assert (await rr_async(backend, tmp_path, BEFORE, "declare")).exit_code == 0
    ids = message_ids("m", 7)
    await publish_ids(backend.connect, "jobs", ids)
    channel = await backend.channel()
    await channel.queue_declare("jobs.rr-migrating", durable=True)
    theirs = message_ids("theirs", 5)
    await publish_ids(backend.connect, "jobs.rr-migrating", theirs)
    for extra in [(), ("--force",), *management_ways(backend)]:
        for text in (BEFORE, AFTER):
            result = await rr_async(backend, tmp_path, text, "migrate", "--yes", *extra)
            assert result.exit_code == 1, (extra, result.output)
            assert (
                "rr: error: rr migrate: 'jobs.rr-migrating': named as rr names its holding "
                "queues, but not declared by rr"
            ) in said(result), said(result)
            assert "nothing was changed" in said(result)
            assert "rr: migrate jobs:" not in result.stderr
    assert await take_ids(backend.connect, "jobs.rr-migrating") == dict.fromkeys(theirs, 1)
    assert await take_ids(backend.connect, "jobs") == dict.fromkeys(ids, 1)
    result = await rr_async(backend, tmp_path, BEFORE, "declare")
    assert result.exit_code == 0, result.output  # jobs as it was: still classic
