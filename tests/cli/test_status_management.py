"""``rr status`` with a management URL (docs/reference/cli.md, "rr status"): each queue's unacked
messages, its consumers' prefetch and its publish and deliver rates, and with nothing named
every queue of the vhost. On the emulator's twin and on RabbitMQ 4.3.6's API (the shared
3.10 and 4.0 have none: skipped); the server's statistics lag by up to 5 s, so the tests
wait for them to show."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import Result

from rabbitctl_retry.cli import app
from rabbitctl_retry.cli._common import CliSettings
from rabbitctl_retry.transport.base import Connection, Properties
from tests.backends import Backend, EmulatorBackend
from tests.broker.test_doctor_deprecated_on_servers import MANAGEMENT_URLS
from tests.dlq.support import declare, publish_all, runner
from tests.runtime.conftest import backend

__all__ = ["backend"]

TWIN_URL = "http://guest:guest@rr-no-such-host.invalid:15672/"
"""The twin's URL: only shown, never reached."""


async def managed(backend: Backend, *args: str) -> Result:
    """``rr ARGS --management-url URL`` against ``backend``: the emulator with its twin,
    RabbitMQ 4.3.6 with its API."""
    if isinstance(backend, EmulatorBackend):
        emulator = backend.emulator

        async def connect(url: str) -> Connection:
            return emulator.connect()

        settings = CliSettings(connector=connect, management=emulator.management)
        argv = [*args, "--management-url", TWIN_URL]
        return await asyncio.to_thread(runner.invoke, app, argv, obj=settings)
    url = MANAGEMENT_URLS.get(backend.version)
    if url is None:
        pytest.skip(f"the shared RabbitMQ {backend.version} has no management API")
    argv = [*args, "--url", backend.url, "--management-url", url]
    return await asyncio.to_thread(runner.invoke, app, argv)


def by_name(result: Result) -> dict[str, dict[str, Any]]:
    assert result.exit_code in (0, 1), result.output
    return {queue["name"]: queue for queue in json.loads(result.stdout)["queues"]}


async def test_unacked_prefetch_and_rates(backend: Backend) -> None:
    if not isinstance(backend, EmulatorBackend) and backend.version not in MANAGEMENT_URLS:
        pytest.skip(f"the shared RabbitMQ {backend.version} has no management API")
    await declare(backend, "work")
    await declare(backend, "jobs", arguments={"x-queue-type": "quorum"})
    await publish_all(backend, "work", [(b"w%d" % n, Properties()) for n in range(3)])
    holder = await backend.connect()
    channel = await holder.channel()

    async def hold(delivery: object) -> None:  # never acks
        return None

    await channel.qos(2)
    await channel.consume("work", hold)
    try:

        async def stated() -> bool:
            # the server states a queue's numbers from its first statistics sample on (4.0.5
            # stated none for the fresh quorum queue a moment after 'work's)
            queues = by_name(await managed(backend, "status", "work", "jobs", "-o", "json"))
            return (queues["work"]["unacked"], queues["work"]["prefetch"]) == (2, [2]) and (
                queues["jobs"]["unacked"] is not None
            )

        await backend.until(stated, "the API stating the unacked messages and the prefetch")
        queues = by_name(await managed(backend, "status", "work", "jobs", "-o", "json"))
        table = await managed(backend, "status", "work", "jobs")
    finally:
        await holder.close()

    fields = ("type", "messages", "unacked", "consumers", "prefetch")
    assert {name: tuple(queue[key] for key in fields) for name, queue in queues.items()} == {
        "work": ("classic", 1, 2, 1, [2]),
        "jobs": ("quorum", 0, 0, 0, []),
    }
    for queue in queues.values():
        for key in ("publish_per_s", "deliver_per_s"):
            rate = queue[key]
            if isinstance(backend, EmulatorBackend):  # the twin keeps no rates
                assert rate == 0.0
            else:  # null until the server's first sample of the queue's traffic
                assert rate is None or (isinstance(rate, float) and rate >= 0.0)
    lines = table.stdout.splitlines()
    assert [text.strip() for text in lines[0].split("┃")] == [
        "queue",
        "type",
        "messages",
        "unacked",
        "consumers",
        "prefetch",
        "publish/s",
        "deliver/s",
        "state",
        "role",
    ]
    rows = [[text.strip() for text in line.split("│")] for line in lines[2:4]]
    assert [row[:6] + row[8:] for row in rows] == [
        ["work", "classic", "1", "2", "1", "2", "exists", ""],
        ["jobs", "quorum", "0", "0", "0", "", "exists", ""],
    ]
    assert "give --management-url" not in table.stdout
    if isinstance(backend, EmulatorBackend):
        assert [row[6:8] for row in rows] == [["0.0", "0.0"], ["0.0", "0.0"]]


async def test_with_nothing_named_every_queue_of_the_vhost(
    backend: Backend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No queue, no --topology, no topology.toml here: with a management URL, every queue
    of the vhost, sorted by name, each with its type."""
    if not isinstance(backend, EmulatorBackend) and backend.version not in MANAGEMENT_URLS:
        pytest.skip(f"the shared RabbitMQ {backend.version} has no management API")
    monkeypatch.chdir(tmp_path)
    await declare(backend, "b.classic")
    await declare(backend, "a.quorum", arguments={"x-queue-type": "quorum"})

    result = await managed(backend, "status", "-o", "json")

    queues = by_name(result)
    assert result.exit_code == 0, result.output
    assert [(name, queue["type"], queue["present"]) for name, queue in queues.items()] == [
        ("a.quorum", "quorum", True),
        ("b.classic", "classic", True),
    ]
    assert result.stderr == ""
