"""``rr run`` declaring a transient (non-durable) queue: declared on every server, and from
RabbitMQ 4 (a deprecated feature there, docs/reference/topology.md "durable") one warning a run, not
one per connection."""

from __future__ import annotations

import asyncio
import logging

import pytest

from rabbitctl_retry import Message
from tests.backends import Backend, RabbitBackend, publish, running_work

TRANSIENT = "[queues.work]\ndurable = false\n"


async def test_rr_run_warns_once_a_run_about_transient_queues(
    backend: Backend, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="rr")
    handled: list[str] = []

    async def handle(msg: Message) -> None:
        handled.append(msg.text())

    async with running_work(backend, TRANSIENT, handle) as service:
        await publish(backend, "work", b"first")
        await backend.until(lambda: handled == ["first"], "the first message handled")
        if isinstance(backend, RabbitBackend):
            # a new connection declares the topology again: no second warning
            await asyncio.to_thread(backend.close_all_connections)
            await backend.until(lambda: service.connections >= 2, "rr run reconnected")
            await publish(backend, "work", b"second")
            await backend.until(
                lambda: handled == ["first", "second"], "a message handled after the reconnect"
            )

    warnings = [r.getMessage() for r in caplog.records if "is transient" in r.getMessage()]
    if int(backend.version.split(".")[0]) < 4:
        assert warnings == []
        return
    assert warnings == [
        "'work' is transient (durable = false): transient non-exclusive queues are a "
        "deprecated feature on RabbitMQ 4 (transient_nonexcl_queues), permitted by default on "
        "4.0.5 and 4.3.6, but a server configured to deny it closes the connection on their "
        "declare (541; rr checks the server's setting when given its management URL, "
        "rr docs run-on-a-cluster); make it durable"
    ]
