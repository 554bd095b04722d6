"""A replay whose connection is closed under it: it says so, and how many messages may now be
in two places; a rerun finishes the job; nothing is lost, and duplicates never exceed what it
reported."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from collections import Counter
from typing import Any

import pytest

from rabbitctl_retry.dlq.replay import ReplayPlan
from rabbitctl_retry.errors import BrokerUnreachable
from rabbitctl_retry.ops import transfer as shell
from rabbitctl_retry.transport.base import Channel, Connection, Properties
from tests.backends import EmulatorBackend, RabbitBackend
from tests.dlq.support import declare, publish_all
from tests.observe import depth
from tests.observe import peek as read_all

COUNT = 3000


def letters(count: int) -> list[tuple[bytes, Properties]]:
    return [
        (
            json.dumps({"n": n}).encode(),
            Properties(
                message_id=f"m{n}",
                delivery_mode=2,
                headers={"rr-origin-queue": "refunds", "x-ruststream-retry-count": "3"},
            ),
        )
        for n in range(count)
    ]


async def census(backend: Any, queue: str) -> Counter[str]:
    return Counter(str(d.properties.message_id) for d in await read_all(backend, queue))


@pytest.mark.broker
async def test_a_forced_close_on_rabbitmq_then_a_rerun(amqp_url: str) -> None:
    backend = RabbitBackend(amqp_url)
    backend.setup()
    try:
        await declare(backend, "dead", "refunds")
        await publish_all(backend, "dead", letters(COUNT))
        command = [sys.executable, "-m", "rabbitctl_retry", "dlq", "replay", "dead", "--yes"]
        command += ["--url", backend.url, "--output", "json"]
        # slowed down, then frozen (SIGSTOP) while the operator's close lands, so the close
        # falls in the middle of the run however slow rabbitmqctl is on a busy machine
        replay = subprocess.Popen(
            [*command, "--rate", "500"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "COLUMNS": "200"},
        )
        while await depth(backend, "refunds") < 600:
            assert replay.poll() is None, replay.communicate()
            await asyncio.sleep(0.02)
        replay.send_signal(signal.SIGSTOP)
        try:
            await asyncio.to_thread(backend.close_all_connections)
        finally:
            replay.send_signal(signal.SIGCONT)
        stdout, stderr = await asyncio.to_thread(replay.communicate, timeout=60)

        assert replay.returncode == 69, (stdout, stderr)
        assert "replay of 'dead' interrupted" in stderr
        assert "may now be duplicated" in stderr
        document = json.loads(stdout)
        possible = sum(
            1 for r in document["results"] if "possible duplicate" in (r["reason"] or "")
        )
        assert f"up to {possible:,} message(s) may now be duplicated" in stderr
        # every copy in refunds was confirmed (replayed) or is counted as a possible
        # duplicate (its confirm not read before the close: the replay was frozen)
        assert document["replayed"] + possible >= 600
        assert document["replayed"] < COUNT

        rerun = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
        assert rerun.returncode == 0, rerun.stderr
        assert await depth(backend, "dead") == 0
        landed = await census(backend, "refunds")
        assert set(landed) == {f"m{n}" for n in range(COUNT)}  # nothing lost
        duplicates = sum(landed.values()) - COUNT
        assert duplicates <= possible
    finally:
        await backend.close()


class _Flaky:
    """A connection whose confirm channel drops the whole connection on the Nth publish, as
    an operator closing it would: that copy never reaches the broker."""

    def __init__(self, backend: EmulatorBackend, connection: Connection, at: int) -> None:
        self._backend = backend
        self._connection = connection
        self._at = at
        self.published = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._connection, name)

    async def channel(self, *, confirms: bool = False) -> Channel:
        channel = await self._connection.channel(confirms=confirms)
        if not confirms:
            return channel
        outer = self
        publish = channel.publish

        async def flaky_publish(body: bytes, **kwargs: Any) -> None:
            outer.published += 1
            if outer.published == outer._at:
                outer._backend.emulator.drop_connections()
                raise BrokerUnreachable("connection closed by the broker: CONNECTION_FORCED")
            await publish(body, **kwargs)

        channel.publish = flaky_publish  # type: ignore[method-assign]
        return channel


async def test_a_dropped_connection_on_the_emulator_then_a_rerun() -> None:
    backend = EmulatorBackend()
    try:
        await declare(backend, "dead", "refunds")
        await publish_all(backend, "dead", letters(COUNT))
        flaky = _Flaky(backend, await backend.connect(), at=1200)
        report = await shell.replay_queue(
            flaky,
            ReplayPlan(source="dead", run_id="first"),
        )
        assert report.interrupted is not None
        assert "CONNECTION_FORCED" in report.interrupted or "closed" in report.interrupted
        assert report.possible_duplicates >= 1  # the copy under way when it dropped
        assert 0 < report.sent < COUNT
        marked = [r for r in report.results if r.reason and "possible duplicate" in r.reason]
        assert len(marked) == report.possible_duplicates

        connection = await backend.connect()
        again = await shell.replay_queue(connection, ReplayPlan(source="dead", run_id="second"))
        await connection.close()
        assert again.interrupted is None
        assert await depth(backend, "dead") == 0
        landed = await census(backend, "refunds")
        assert set(landed) == {f"m{n}" for n in range(COUNT)}
        assert sum(landed.values()) - COUNT <= report.possible_duplicates
    finally:
        await backend.close()


@pytest.mark.broker
async def test_ctrl_c_stops_cleanly_with_nothing_in_two_places(amqp_url: str) -> None:
    backend = RabbitBackend(amqp_url)
    backend.setup()
    try:
        await declare(backend, "dead", "refunds")
        await publish_all(backend, "dead", letters(COUNT))
        command = [sys.executable, "-m", "rabbitctl_retry", "dlq", "replay", "dead", "--yes"]
        replay = subprocess.Popen(
            [*command, "--url", backend.url, "--rate", "500"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "COLUMNS": "200"},
        )
        while await depth(backend, "refunds") < 300:
            assert replay.poll() is None, replay.communicate()
            await asyncio.sleep(0.02)
        replay.send_signal(signal.SIGINT)
        stdout, stderr = await asyncio.to_thread(replay.communicate, timeout=60)

        assert replay.returncode == 130, (stdout, stderr)
        assert "stopping: finishing the copies under way" in stderr
        assert "stopped early: stopped on request" in stdout
        moved = await census(backend, "refunds")
        left = await census(backend, "dead")
        assert f"replayed {sum(moved.values()):,} of" in stdout
        assert set(moved).isdisjoint(left)  # a clean stop: nothing in two places
        assert sum(moved.values()) + sum(left.values()) == COUNT
        assert max(moved.values()) == 1
    finally:
        await backend.close()
