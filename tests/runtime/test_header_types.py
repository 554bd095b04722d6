"""Every copy ``rr run`` makes keeps each application header's type tag and bytes, on the wire
(docs/explanation/attempts.md, "What a copy keeps"): a message published with one header of each of
the field types RabbitMQ takes (tests/wire_headers.py, over a raw socket) goes through delayed and
retry copies to its dead letter, on a classic queue (copies in memory, or through the wait
queue of ``delay = "dlx-ttl"``) and a quorum queue; the dead letter's bytes, read over a raw
socket, hold every one of them as it was published (as RabbitMQ itself writes a table again:
``L`` as ``l``, names sorted, where it does), rr's own headers after them. A message without a
``message_id`` keeps none: the handler and the log name it alike at every attempt.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pytest

from rabbitctl_retry import Message, Outcome
from rabbitctl_retry.retry.outcome import AnyOutcome
from rabbitctl_retry.runtime.handlers import Subscriber
from rabbitctl_retry.runtime.loader import HandlerSet
from rabbitctl_retry.runtime.service import RunOptions, Service
from rabbitctl_retry.topology.load import load_text
from tests.backends import Backend
from tests.observe import depth
from tests.wire_headers import (
    TYPED_NAMES,
    TYPED_TABLE,
    as_the_server_writes_it,
    parse,
    publish_typed,
    sorted_by_the_server,
    take_typed,
    written_again,
)

H = "x-ruststream-retry-count"
ATTEMPTS = 3
COPIED_DEAD_LETTER = frozenset({H, "rr-origin-queue", "rr-failed-at"})
"""What rr writes on the dead letter it copies (its handler asked for retries to the end)."""
SERVER_DEAD_LETTER = frozenset({H, "x-death"})
"""A quorum queue's dead letter, dead-lettered by the server: rr's count and its history."""


@dataclass(frozen=True, slots=True)
class Path:
    """One way through ``rr run``: the queue's settings, and what the server does on it."""

    toml: str
    quorum: bool
    dead_lettered_by_the_server: bool
    """A wait queue or the quorum queue's delivery limit dead-letters the message on the way."""
    added: frozenset[str]
    """The headers the dead letter carries besides the application's."""


PATHS = {
    "classic, delays in memory": Path(
        f"""
[queues.work]
max_attempts = {ATTEMPTS}
dead_letter = "work.dead"
""",
        quorum=False,
        dead_lettered_by_the_server=False,
        added=COPIED_DEAD_LETTER,
    ),
    "classic, dlx-ttl wait queue": Path(
        f"""
[queues.work]
max_attempts = {ATTEMPTS}
dead_letter = "work.dead"
delay = "dlx-ttl"
""",
        quorum=False,
        dead_lettered_by_the_server=True,
        added=COPIED_DEAD_LETTER,
    ),
    "quorum, dlx-ttl wait queue": Path(
        f"""
[queues.work]
type = "quorum"
max_attempts = {ATTEMPTS}
dead_letter = "work.dead"
delay = "dlx-ttl"
""",
        quorum=True,
        dead_lettered_by_the_server=True,
        added=SERVER_DEAD_LETTER,
    ),
}


@dataclass
class Seen:
    message_ids: list[str | None] = field(default_factory=list)
    decimals: list[object] = field(default_factory=list)


@asynccontextmanager
async def running(backend: Backend, toml: str, handler: Any) -> AsyncIterator[Service]:
    service = Service(
        HandlerSet(module="test", subscribers=(Subscriber("work", handler, "test:work"),)),
        topology=load_text(toml),
        connect=backend.connect,
        options=RunOptions(prefetch=10, shutdown_timeout_s=5),
        clock=backend.clock,
    )
    async with service.running():
        yield service


@pytest.mark.parametrize("path", list(PATHS.values()), ids=list(PATHS))
async def test_every_copy_keeps_each_header_type_and_no_message_id_is_added(
    backend: Backend, path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    seen = Seen()

    async def handler(msg: Message) -> AnyOutcome:
        seen.message_ids.append(msg.message_id)
        seen.decimals.append(msg.headers["D-decimal"])
        return Outcome.retry_after(timedelta(milliseconds=50))

    caplog.set_level(logging.INFO, logger="rr")
    async with running(backend, path.toml, handler):
        await publish_typed(backend, "work", b"typed")
        await _dead_letter_in(backend, "work.dead")
    letter = await take_typed(backend, "work.dead")
    assert letter is not None
    assert letter.body == b"typed"

    version = getattr(backend, "version", "3.10")
    again = written_again(
        version, quorum=path.quorum, dead_lettered=path.dead_lettered_by_the_server
    )
    in_order = not sorted_by_the_server(
        version, dead_lettered=path.dead_lettered_by_the_server, read_from_quorum=False
    )
    expected = as_the_server_writes_it(
        parse(TYPED_TABLE), written_again=again, sorted_names=not in_order
    )
    kept = [f for f in letter.fields if f.name in TYPED_NAMES]
    assert kept == expected  # every type tag and its bytes, nested tables and arrays included
    names = [f.name for f in letter.fields]
    if in_order:  # a 3.10 classic queue keeps the bytes: rr's own headers come after
        assert names == [*TYPED_NAMES, *(n for n in names if n not in TYPED_NAMES)]
    assert set(names) >= path.added

    # no id added on the way: the handler and the log name the message alike every time
    assert seen.message_ids == [None] * ATTEMPTS
    assert seen.decimals == [123.45] * ATTEMPTS  # the handler sees plain values
    assert letter.message_id is None
    ids = [
        getattr(record, "rr", {}).get("message_id", "absent")
        for record in caplog.records
        if "message_id" in getattr(record, "rr", {})
    ]
    assert len(ids) >= ATTEMPTS  # one line per attempt at least
    assert set(ids) == {None}


async def _dead_letter_in(backend: Backend, queue: str) -> None:
    """Until ``queue`` holds a message, letting the delays pass (virtual time on the emulator);
    at most 600 steps of 0.1 s."""
    for _ in range(600):
        if await depth(backend, queue) >= 1:
            return
        await backend.elapse(0.1)
    pytest.fail(f"no dead letter reached {queue}")
