"""``rr publish`` when its connection drops in the middle of the run, on RabbitMQ (3.10, 4.0,
4.3): exit 69, and a report that says which messages were confirmed before the cut, which
were sent and never answered (unconfirmed: they may have arrived) and how many were never
sent (docs/reference/cli.md, "rr publish").

The connection goes through a TCP proxy of the test's own (tests/faults/proxy.py): only that
connection is cut, never one of the shared servers' others. The broker's answers are held
back first, so the messages sent after that are in the queue without a confirm: the report
must count them unconfirmed, never confirmed.
"""

from __future__ import annotations

import asyncio
import base64
import json
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from rabbitctl_retry.cli import app
from tests.backends import Backend, RabbitBackend, vhost_url
from tests.dlq.support import declare, runner
from tests.faults.proxy import FaultProxy
from tests.observe import depth
from tests.observe import peek as read_all

MESSAGES = 2_000
RATE_PER_S = "40"
"""Slow enough that the cut comes long before the last message is sent."""


def export_file(path: Path) -> Path:
    """``MESSAGES`` lines, message ``n`` with ``message_id`` ``m<n>``."""
    lines = (
        json.dumps({"body": base64.b64encode(b"x").decode(), "properties": {"message_id": f"m{n}"}})
        for n in range(1, MESSAGES + 1)
    )
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


async def test_a_connection_cut_mid_run_is_exit_69_with_what_was_confirmed(
    backend: Backend, tmp_path: Path
) -> None:
    if not isinstance(backend, RabbitBackend):
        pytest.skip("a TCP proxy cuts the connection: the emulator has none")
    await declare(backend, "target")
    file = export_file(tmp_path / "many.jsonl")
    with FaultProxy(urlsplit(backend.url).port or 5672) as proxy:
        command = ["publish", "target", "--file", str(file), "--rate", RATE_PER_S, "-o", "json"]
        url = vhost_url(proxy.url, backend.vhost)
        run = asyncio.ensure_future(asyncio.to_thread(runner.invoke, app, [*command, "--url", url]))

        async def enqueued(count: int) -> bool:
            return await depth(backend, "target") >= count

        await backend.until(lambda: enqueued(5), "5 messages published")
        proxy.freeze_to_client()  # from now on no confirm reaches rr publish
        before_freeze = await depth(backend, "target")
        await backend.until(lambda: enqueued(before_freeze + 3), "3 more, not confirmed")
        proxy.cut()
        result = await run

    assert result.exit_code == 69, result.output
    report = json.loads(result.stdout)
    confirmed, not_sent = report["confirmed"], report["not_sent"]
    unconfirmed = [failure["message"] for failure in report["failures"]]
    assert report["messages"] == MESSAGES
    assert (report["returned"], report["refused"], report["unencodable"]) == (0, 0, 0)
    assert {failure["outcome"] for failure in report["failures"]} == {"unconfirmed"}
    assert report["unconfirmed"] == len(unconfirmed) >= 3
    assert confirmed >= 1  # the first message goes alone: confirmed before the second is sent
    assert confirmed + len(unconfirmed) + not_sent == MESSAGES
    # in order: 1..confirmed confirmed, the next ones unconfirmed, the rest never sent
    assert unconfirmed == list(range(confirmed + 1, confirmed + len(unconfirmed) + 1))
    assert [failure["message_id"] for failure in report["failures"]] == [
        f"m{n}" for n in unconfirmed
    ]
    assert report["error"]
    assert f"{MESSAGES - confirmed:,} of {MESSAGES:,} message(s) not confirmed" in result.stderr
    assert f"message {unconfirmed[0]} ({file}:{unconfirmed[0]}, message_id " in result.stderr

    # every confirmed message is in the queue once; of the unconfirmed ones, those that
    # arrived (at least the 3 counted after the freeze); none of those never sent
    held = [delivery.properties.message_id for delivery in await read_all(backend, "target")]
    arrived = len(held)
    assert confirmed + 3 <= arrived <= confirmed + len(unconfirmed)
    assert held == [f"m{n}" for n in range(1, arrived + 1)]
