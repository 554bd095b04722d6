"""rr run against messages it cannot handle, on RabbitMQ and on the emulator
(docs/reference/runtime.md, "Malformed messages").

* rr's own code fails for a delivery every time: it goes back to its queue once, then it is
  dead-lettered with ``rr-error-type = rr.InternalError``; the other messages are handled.
* A message whose properties the codec cannot decode (a ``timestamp`` in nanoseconds): the
  handler never sees it, it is moved to the dead-letter queue byte for byte (classic) or
  rejected to the queue's dead-letter route (quorum), and the connection stays up.
"""

from __future__ import annotations

import datetime
import logging
import struct
from typing import Any

import pytest
from pamqp import commands

from rabbitctl_retry import Message, Outcome
from rabbitctl_retry.ops.copies.publisher import CopyPublisher
from rabbitctl_retry.ops.copies.sent import SendResult
from rabbitctl_retry.retry.outcome import AnyOutcome
from rabbitctl_retry.transport.base import Delivery, Properties
from tests.backends import Backend, publish, running_work
from tests.observe import depth, peek

CLASSIC = '[queues.work]\nmax_attempts = 3\ndead_letter = "work.dead"\n[queues."work.dead"]\n'
QUORUM = (
    '[queues.work]\ntype = "quorum"\nmax_attempts = 3\ndead_letter = "work.dead"\n'
    '[queues."work.dead"]\n'
)
EPOCH_2020_S = 1_577_836_800


def nanosecond_timestamp(message_id: str) -> Properties:
    """Properties as a client that writes ``timestamp`` in nanoseconds sends them: pamqp
    cannot decode them (year 50001627). On the emulator, what rr's decoder makes of them."""
    good = commands.Basic.Properties(
        message_id=message_id,
        delivery_mode=2,
        timestamp=datetime.datetime.fromtimestamp(EPOCH_2020_S, tz=datetime.UTC),
    ).marshal()
    seconds = struct.pack(">Q", EPOCH_2020_S)
    at = good.index(seconds)
    raw = good[:at] + struct.pack(">Q", EPOCH_2020_S * 10**9) + good[at + 8 :]
    return Properties(message_id=message_id, delivery_mode=2, undecodable=("timestamp",), raw=raw)


def recording(seen: list[str], outcome: AnyOutcome) -> Any:
    async def handler(msg: Message) -> AnyOutcome:
        seen.append(msg.properties.message_id or "")
        return outcome

    return handler


async def wait_for(backend: Backend, queue: str, count: int) -> list[Delivery]:
    for _ in range(400):
        found = await peek(backend, queue)
        if len(found) >= count:
            return found
        await backend.elapse(0.05)
    raise AssertionError(f"timed out waiting for {count} messages in {queue}")


def always_failing_for(monkeypatch: pytest.MonkeyPatch, message_id: str) -> list[str]:
    """Every retry copy of ``message_id`` raises inside rr's own code (dead-letter copies go
    through); returns the ids it was raised for."""
    failed: list[str] = []
    real = CopyPublisher.publish

    async def publish_or_fail(
        self: CopyPublisher, copy: Any, original: Any, **kw: Any
    ) -> SendResult:
        if original.properties.message_id == message_id and copy.routing_key == "work":
            failed.append(message_id)
            raise RuntimeError("boom")
        return await real(self, copy, original, **kw)

    monkeypatch.setattr(CopyPublisher, "publish", publish_or_fail)
    return failed


async def test_rr_failing_twice_on_a_message_dead_letters_it_and_no_other(
    backend: Backend, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="rr")
    failed = always_failing_for(monkeypatch, "poison")
    seen: list[str] = []

    def handler_outcome(msg: Message) -> AnyOutcome:
        seen.append(msg.properties.message_id or "")
        return Outcome.retry() if msg.properties.message_id == "poison" else Outcome.ack()

    async def handler(msg: Message) -> AnyOutcome:
        return handler_outcome(msg)

    async with running_work(backend, CLASSIC, handler):
        await publish(backend, "work", b"p", Properties(message_id="poison"))
        for number in range(5):
            await publish(backend, "work", b"g", Properties(message_id=f"good-{number}"))
        dead = await wait_for(backend, "work.dead", 1)
        await backend.until(lambda: len(seen) == 7, "7 handler calls")
    assert failed == ["poison", "poison"]
    assert sorted(seen) == ["good-0", "good-1", "good-2", "good-3", "good-4", "poison", "poison"]
    assert [d.properties.message_id for d in dead] == ["poison"]
    headers = dead[0].properties.headers or {}
    assert headers["rr-error-type"] == "rr.InternalError"
    assert headers["rr-error-message"] == "RuntimeError: boom"
    assert headers["rr-origin-queue"] == "work"
    assert await depth(backend, "work") == 0
    errors = [r for r in caplog.records if r.name == "rr.runtime" and r.levelno >= logging.ERROR]
    assert [r.getMessage() for r in errors] == [
        "rr failed on this delivery; it goes back to its queue once",
        "rr failed on this delivery; it is dead-lettered",
    ]
    assert {r.rr["message_id"] for r in errors} == {"poison"}  # type: ignore[attr-defined]


@pytest.mark.parametrize("topology", [CLASSIC, QUORUM], ids=["classic", "quorum"])
async def test_an_undecodable_message_is_set_aside_and_the_next_one_handled(
    backend: Backend, caplog: pytest.LogCaptureFixture, topology: str
) -> None:
    caplog.set_level(logging.INFO, logger="rr")
    seen: list[str] = []
    bad = nanosecond_timestamp("undecodable")
    async with running_work(backend, topology, recording(seen, Outcome.ack())) as service:
        await publish(backend, "work", b"raw body", bad)
        await publish(backend, "work", b"fine", Properties(message_id="good"))
        dead = await wait_for(backend, "work.dead", 1)
        await backend.until(lambda: seen == ["good"], "the good message")
        assert service.stats.connections == 1
        assert service.stats.undecodable_deliveries == 1
    assert await depth(backend, "work") == 0
    assert len(dead) == 1
    assert dead[0].body == b"raw body"
    assert dead[0].properties.message_id == "undecodable"
    assert dead[0].properties.undecodable == ("timestamp",)
    if backend.name == "rabbitmq":
        if topology == CLASSIC:  # rr moved it: the properties are the very bytes sent
            assert dead[0].properties.raw == bad.raw
        else:  # the broker dead-lettered it: its x-death is added, the timestamp kept
            assert dead[0].properties.raw is not None
            assert struct.pack(">Q", EPOCH_2020_S * 10**9) in dead[0].properties.raw
    errors = [r for r in caplog.records if r.name == "rr.runtime" and r.levelno >= logging.ERROR]
    assert [r.getMessage() for r in errors] == [
        "message properties cannot be decoded; it is dead-lettered"
    ]
    assert errors[0].rr["undecodable"] == ["timestamp"]  # type: ignore[attr-defined]


async def test_a_retry_copy_does_not_carry_cc_to_other_queues(backend: Backend) -> None:
    topology = CLASSIC + "[queues.audit]\n"
    seen: list[str] = []

    async def retry_once(msg: Message) -> AnyOutcome:
        seen.append(msg.properties.message_id or "")
        return Outcome.retry() if msg.attempt == 1 else Outcome.ack()

    async with running_work(backend, topology, retry_once):
        await publish(
            backend, "work", b"x", Properties(message_id="cc-1", headers={"CC": ["audit"]})
        )
        await backend.until(lambda: seen == ["cc-1", "cc-1"], "two attempts")
        await backend.elapse(0.2)
    audit = await peek(backend, "audit")
    # the original publish was also routed to audit (sender-selected distribution); the
    # retry copy must not be
    assert [d.properties.message_id for d in audit] == ["cc-1"]
    assert await depth(backend, "work") == 0
