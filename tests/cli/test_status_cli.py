"""``rr status`` (docs/cli.md, "rr status"): depth, consumers, type and drift of each queue,
on RabbitMQ (a fresh vhost each) and on the emulator, with exact numbers."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from rabbitctl_retry.transport.base import Properties
from tests.backends import Backend, RabbitBackend
from tests.dlq.support import declare, publish_all, rr
from tests.runtime.conftest import backend

__all__ = ["backend"]

EXAMPLE = Path(__file__).parents[2] / "examples" / "refunds" / "topology.toml"


def rows(document: dict[str, object]) -> dict[str, tuple[object, ...]]:
    queues = document["queues"]
    assert isinstance(queues, list)
    return {
        q["name"]: (q["type"], q["present"], q["messages"], q["consumers"], q["matches"])
        for q in queues
    }


async def test_every_queue_of_the_file_with_its_numbers(backend: Backend) -> None:
    declared = await rr(backend, "declare", str(EXAMPLE))
    assert declared.exit_code == 0, declared.output
    await publish_all(backend, "refunds", [(b"r%d" % n, Properties()) for n in range(3)])
    await publish_all(backend, "payouts.dead", [(b"p", Properties())])
    connection = await backend.connect()
    channel = await connection.channel()

    async def hold(delivery: object) -> None:  # a consumer that never acks
        return None

    await channel.qos(1)
    await channel.consume("refunds", hold)  # takes one of the three, unacked
    try:
        result = await rr(backend, "status", "-t", str(EXAMPLE), "-o", "json")
    finally:
        await connection.close()

    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert rows(document) == {
        "refunds.dead": ("classic", True, 0, 0, True),
        "refunds": ("classic", True, 2, 1, True),  # ready messages: one is with the consumer
        "refunds.retry": ("classic", True, 0, 0, True),
        "payouts.dead": ("classic", True, 1, 0, True),
        "payouts": ("quorum", True, 0, 0, True),
    }
    assert document["ok"] is True


async def test_a_missing_queue_and_a_drifted_one_exit_1(backend: Backend) -> None:
    await declare(backend, "payouts", arguments={"x-queue-type": "quorum", "x-delivery-limit": 9})
    result = await rr(backend, "status", "-t", str(EXAMPLE), "elsewhere", "-o", "json")

    assert result.exit_code == 1, result.output
    document = json.loads(result.stdout)
    assert document["ok"] is False
    by_name = {q["name"]: q for q in document["queues"]}
    assert by_name["refunds"]["present"] is False
    assert by_name["payouts"]["matches"] is False
    assert "x-delivery-limit: file 4, broker 9" in by_name["payouts"]["differences"]
    assert by_name["elsewhere"] == {
        "name": "elsewhere",
        "type": None,
        "role": None,
        "present": False,
        "messages": None,
        "consumers": None,
        "matches": None,
        "differences": None,
        "arguments": None,
    }

    table = await rr(backend, "status", "-t", str(EXAMPLE))
    assert table.exit_code == 1
    assert "differs: x-dead-letter-exchange" in table.stdout
    assert "not as expected" in table.stdout


async def test_nothing_to_show_is_a_usage_error(backend: Backend) -> None:
    result = await rr(backend, "status")
    assert result.exit_code == 2
    assert "name the queues to show, or give --topology" in result.stderr


@pytest.mark.broker
async def test_watch_shows_it_again_until_ctrl_c(amqp_url: str) -> None:
    backend = RabbitBackend(amqp_url)
    backend.setup()
    try:
        await declare(backend, "watched")
        await publish_all(backend, "watched", [(b"w", Properties())])
        command = [sys.executable, "-m", "rabbitctl_retry", "status", "watched", "--watch", "0.5"]
        process = subprocess.Popen(
            [*command, "-o", "json", "--url", backend.url],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ},
        )
        assert process.stdout is not None
        lines = [process.stdout.readline() for _ in range(2)]  # two refreshes
        process.send_signal(signal.SIGINT)
        process.communicate(timeout=30)
        assert process.returncode == 0
        assert [json.loads(line)["queues"][0]["messages"] for line in lines] == [1, 1]
    finally:
        await backend.close()
