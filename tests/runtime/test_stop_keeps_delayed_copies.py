"""A stop never loses an in-memory delayed copy (docs/explanation/guarantees.md, "What is
guaranteed"): it publishes every pending copy at once, pipelined, each exactly once; a stop while rr
waits to reconnect connects again only to publish them; and what the broker has not confirmed by the
end of ``--shutdown-timeout`` is saved to a file that ``rr dlq import`` publishes.

The fault suite (tests/faults/test_stop_faults.py) does the same to an ``rr run`` process
with thousands of copies, a SIGTERM and a broker that is stopped or blocks publishers."""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from rabbitctl_retry import Message, Outcome
from rabbitctl_retry.errors import BrokerUnreachable
from rabbitctl_retry.ops.dlq import import_file
from rabbitctl_retry.retry.outcome import AnyOutcome
from rabbitctl_retry.runtime.handlers import Subscriber
from rabbitctl_retry.runtime.loader import HandlerSet
from rabbitctl_retry.runtime.service import RunOptions, Service
from rabbitctl_retry.topology.load import load_text
from rabbitctl_retry.transport.base import Connection
from tests.backends import Backend, EmulatorBackend
from tests.ledger import publish_ids, take_ids

TOPOLOGY = '[queues.work]\nmax_attempts = 3\ndead_letter = "work.dead"\ndelay = "memory"\n'
H = "x-ruststream-retry-count"


def delay_the_first_attempt(seen: Counter[str]) -> Callable[[Message], AnyOutcome]:
    """retry_after(1 h) at attempt 1 (the copy waits in rr), ack after."""

    async def handle(msg: Message) -> AnyOutcome:
        seen[msg.properties.message_id or ""] += 1
        return Outcome.retry_after(3600) if msg.attempt == 1 else Outcome.ack()

    return handle  # type: ignore[return-value]


class Switch:
    """A broker that can be made unreachable: connections fail while ``down``."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self.down = False
        self.refused = 0

    async def connect(self) -> Connection:
        if self.down:
            self.refused += 1
            raise BrokerUnreachable("cannot connect: the test took the broker away")
        return await self.backend.connect()


@asynccontextmanager
async def service_of(
    switch: Switch, seen: Counter[str], *, pending_dir: Path, timeout_s: float = 10
) -> AsyncIterator[tuple[Service, asyncio.Future[None]]]:
    """The service, running, and its task (which ends once it stopped)."""
    service = Service(
        HandlerSet(
            module="t", subscribers=(Subscriber("work", delay_the_first_attempt(seen), "t:w"),)
        ),
        topology=load_text(TOPOLOGY),
        connect=switch.connect,
        options=RunOptions(
            prefetch=50, shutdown_timeout_s=timeout_s, reconnect_max_s=0.2, pending_dir=pending_dir
        ),
        clock=switch.backend.clock,
    )
    task = await service.start()
    try:
        yield service, task
    finally:
        service.stop()
        await task


async def until(check: Callable[[], bool], what: str, timeout_s: float = 60) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not check():
        assert loop.time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.01)


async def copies_pending_and_broker_gone(
    backend: EmulatorBackend, switch: Switch, service: Service, ids: list[str]
) -> None:
    """Publish ``ids``, wait until the service holds a copy of each (the originals acked),
    then take the broker away: rr has lost its connection and failed to reconnect once."""
    await publish_ids(backend.connect, "work", ids)
    await until(lambda: len(service.delays) == len(ids), "the copies pending")
    await backend.emulator.settle()  # the originals' acks reach the broker
    switch.down = True
    backend.emulator.drop_connections()
    await until(lambda: switch.refused >= 1, "a failed reconnect")


def said(caplog: pytest.LogCaptureFixture) -> list[str]:
    return list(dict.fromkeys(r.getMessage() for r in caplog.records if r.name == "rr.runtime"))


@pytest.fixture
def logged(caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(logging.getLogger("rr"), "propagate", True)
    caplog.set_level(logging.INFO, logger="rr")


async def test_a_stop_publishes_thousands_of_pending_copies_once_each(
    backend: Backend, tmp_path: Path, caplog: pytest.LogCaptureFixture, logged: None
) -> None:
    seen: Counter[str] = Counter()
    ids = [f"m-{n:05d}" for n in range(2000)]
    switch = Switch(backend)
    async with service_of(switch, seen, pending_dir=tmp_path) as (service, task):
        await publish_ids(backend.connect, "work", ids)
        await until(lambda: len(service.delays) == len(ids), "2,000 copies pending")
        service.stop()
        await task
    waiting = await take_ids(backend.connect, "work")
    assert waiting == Counter(dict.fromkeys(ids, 1))  # every copy, once
    assert seen == Counter(dict.fromkeys(ids, 1))
    assert list(tmp_path.iterdir()) == []  # nothing had to be saved
    messages = said(caplog)
    assert "published pending delayed copies" in messages
    assert messages[-1] == "stopped"
    assert not [m for m in messages if "lost" in m]


async def test_a_stop_while_rr_waits_to_reconnect_publishes_on_a_new_connection(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, logged: None
) -> None:
    """Broker gone, copies pending, SIGTERM: rr connects again only to publish them (it
    exited at once before, without a word, and the copies were gone)."""
    backend = EmulatorBackend()
    seen: Counter[str] = Counter()
    ids = [f"m-{n}" for n in range(120)]
    switch = Switch(backend)
    try:
        async with service_of(switch, seen, pending_dir=tmp_path) as (service, task):
            await copies_pending_and_broker_gone(backend, switch, service, ids)
            service.stop()
            await until(lambda: switch.refused >= 2, "the stop trying to connect")
            switch.down = False
            await task
        waiting = await take_ids(backend.connect, "work")
    finally:
        await backend.close()
    assert waiting == Counter(dict.fromkeys(ids, 1))
    assert list(tmp_path.iterdir()) == []
    messages = said(caplog)
    for line in ("stopping", "connected to publish the delayed copies", "stopped"):
        assert line in messages, messages
    assert "published pending delayed copies" in messages


async def test_copies_the_broker_never_took_are_saved_and_rr_dlq_import_puts_them_back(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, logged: None
) -> None:
    backend = EmulatorBackend()
    seen: Counter[str] = Counter()
    ids = [f"m-{n}" for n in range(30)]
    switch = Switch(backend)
    try:
        async with service_of(switch, seen, pending_dir=tmp_path, timeout_s=0.5) as (service, task):
            await copies_pending_and_broker_gone(backend, switch, service, ids)
            service.stop()
            await task
        files = sorted(tmp_path.iterdir())
        assert [f.name.startswith("rr-pending-work-") for f in files] == [True]
        switch.down = False
        connection = await backend.connect()
        report = await import_file(connection, files[0], "work")
        await connection.close()
        assert report.published == len(ids)
        channel = await backend.channel()
        first = await channel.get("work", no_ack=True)
        waiting = await take_ids(backend.connect, "work")
    finally:
        await backend.close()
    assert first is not None
    assert (first.properties.headers or {})[H] == "1"  # the copy rr would have published
    waiting[first.properties.message_id or ""] += 1
    assert waiting == Counter(dict.fromkeys(ids, 1))
    records = [r for r in caplog.records if r.getMessage().startswith("delayed copies not")]
    assert len(records) == 1
    fields = records[0].rr  # type: ignore[attr-defined]
    assert (fields["queue"], fields["count"], fields["file"]) == ("work", 30, str(files[0]))
    assert not [m for m in said(caplog) if m.startswith("delayed copy lost")]


async def test_a_saved_file_is_named_at_the_next_start(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, logged: None
) -> None:
    (tmp_path / "rr-pending-work-20261201T204607Z-7.jsonl").write_text("")
    backend = EmulatorBackend()
    try:
        async with service_of(Switch(backend), Counter(), pending_dir=tmp_path) as (service, task):
            service.stop()
            await task
    finally:
        await backend.close()
    warned = [r for r in caplog.records if "saved by an earlier stop" in r.getMessage()]
    assert [r.rr["file"] for r in warned] == [  # type: ignore[attr-defined]
        str(tmp_path / "rr-pending-work-20261201T204607Z-7.jsonl")
    ]
