"""What rr run does when its own code fails for one delivery, or the broker takes away its
channel or its consumer; on the emulator and on the real broker.

* An unexpected error (or a cancellation that is not the task's own) while rr carries out a
  decision: that delivery goes back to its queue once (dead-lettered if it fails again: see
  tests/hostile/test_run_poison.py), it is logged with its message id, and the others are
  not held back.
* The consumer's channel closes, or the broker cancels the consumer (its queue deleted): rr
  says why, declares what it needs again, and consumes again on the same connection.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import pytest

from rabbitctl_retry import Message, Outcome
from rabbitctl_retry.ops.copies.publisher import CopyPublisher
from rabbitctl_retry.ops.copies.sent import SendResult
from rabbitctl_retry.retry.outcome import AnyOutcome
from rabbitctl_retry.runtime.service import Service
from rabbitctl_retry.transport.base import Properties
from tests.backends import Backend, publish, running_work
from tests.observe import depth, peek

TOPOLOGY = '[queues.work]\nmax_attempts = 3\ndead_letter = "work.dead"\n'


def recording(seen: list[tuple[str, int]], outcome: Callable[[Message], AnyOutcome]) -> Any:
    async def handler(msg: Message) -> AnyOutcome:
        seen.append((msg.properties.message_id or "", msg.attempt))
        return outcome(msg)

    return handler


def failing_once(monkeypatch: pytest.MonkeyPatch, error: BaseException) -> list[str]:
    """The first copy rr publishes raises ``error`` (inside rr's own code, not the
    handler's); returns the message ids it was raised for."""
    failed: list[str] = []
    real = CopyPublisher.publish

    async def publish_or_fail(
        self: CopyPublisher, copy: Any, original: Any, **kw: Any
    ) -> SendResult:
        if not failed:
            failed.append(original.properties.message_id)
            raise error
        return await real(self, copy, original, **kw)

    monkeypatch.setattr(CopyPublisher, "publish", publish_or_fail)
    return failed


@pytest.mark.parametrize(
    "error", [RuntimeError("boom"), asyncio.CancelledError()], ids=["exception", "cancelled"]
)
async def test_an_error_in_rr_code_sends_only_that_delivery_back(
    backend: Backend,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    error: BaseException,
) -> None:
    caplog.set_level(logging.INFO, logger="rr")
    failed = failing_once(monkeypatch, error)
    seen: list[tuple[str, int]] = []

    def retry_a_acks_b(msg: Message) -> AnyOutcome:
        return Outcome.retry() if msg.properties.message_id == "a" else Outcome.ack()

    async with running_work(backend, TOPOLOGY, recording(seen, retry_a_acks_b)):
        await publish(backend, "work", b"a", Properties(message_id="a"))
        await publish(backend, "work", b"b", Properties(message_id="b"))
        await _handled(backend, seen, 5, "a three times (and once more) and b once")
        dead = await _dead(backend)
    assert failed == ["a"]
    # a: attempt 1 (its copy failed inside rr: back to the queue), attempt 1 again, 2, 3
    assert [attempt for message_id, attempt in seen if message_id == "a"] == [1, 1, 2, 3]
    assert [attempt for message_id, attempt in seen if message_id == "b"] == [1]
    assert [d.properties.message_id for d in dead] == ["a"]
    assert await depth(backend, "work") == 0
    errors = [r for r in caplog.records if r.name == "rr.runtime" and r.levelno >= logging.ERROR]
    assert [r.getMessage() for r in errors] == [
        "rr failed on this delivery; it goes back to its queue once"
    ]
    assert errors[0].rr["message_id"] == "a"  # type: ignore[attr-defined]


async def _dead(backend: Backend) -> list[Any]:
    for _ in range(200):
        found = await peek(backend, "work.dead")
        if found:
            return found
        await backend.elapse(0.05)
    return []


async def _handled(backend: Backend, seen: list[Any], count: int, what: str) -> None:
    for _ in range(400):
        if len(seen) >= count:
            return
        await backend.elapse(0.05)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.mark.parametrize("how", ["channel closed", "queue deleted"])
async def test_the_consumer_starts_again_when_the_broker_takes_it_away(
    backend: Backend, caplog: pytest.LogCaptureFixture, how: str
) -> None:
    caplog.set_level(logging.INFO, logger="rr")
    seen: list[tuple[str, int]] = []
    async with running_work(backend, TOPOLOGY, recording(seen, lambda m: Outcome.ack())) as service:
        await publish(backend, "work", b"1", Properties(message_id="before"))
        await _handled(backend, seen, 1, "the first message")
        # the handler has returned; its ack is written a turn later: wait for it, or the
        # broker rightly delivers "before" again when the channel closes under it
        await _until(
            backend,
            lambda: service.in_flight == 0 and service.consumers[0].unsettled == 0,
            "the first message's ack",
        )
        if how == "channel closed":
            channel = service.consumers[0].channel
            assert channel is not None
            await channel.close()
        else:
            connection = await backend.connect()
            other = await connection.channel()
            await other.queue_delete("work")
            await connection.close()
        await _until(backend, lambda: service.stats.consumer_restarts == 1, "a restart")
        await _until_ready(backend, service)
        await publish(backend, "work", b"2", Properties(message_id="after"))
        await _handled(backend, seen, 2, "the message after")
    assert seen == [("before", 1), ("after", 1)]
    assert service.connections == 1
    messages = [r.getMessage() for r in caplog.records if r.name == "rr.runtime"]
    assert "consumer stopped; starting it again" in messages
    assert "consuming again" in messages


async def _until(backend: Backend, predicate: Callable[[], bool], what: str) -> None:
    for _ in range(400):
        if predicate():
            return
        await backend.elapse(0.05)
    raise AssertionError(f"timed out waiting for {what}")


async def _until_ready(backend: Backend, service: Service) -> None:
    """Until the consumer consumes again (its queue exists again)."""

    async def exists() -> bool:
        connection = await backend.connect()
        try:
            channel = await connection.channel()
            return (await channel.queue_declare("work", passive=True)).consumer_count == 1
        except Exception:
            return False
        finally:
            await connection.close()

    for _ in range(400):
        if await exists():
            return
        await backend.elapse(0.05)
    raise AssertionError("the consumer did not come back")


async def test_malformed_count_headers_count_as_zero_and_are_logged(
    backend: Backend, caplog: pytest.LogCaptureFixture
) -> None:
    """A retry header rr cannot read ("²", 5,000 digits) counts 0 and is logged with the
    message id; the message is retried and dead-lettered like any other, and the others
    are not affected."""
    caplog.set_level(logging.INFO, logger="rr")
    seen: list[tuple[str, int]] = []
    header = "x-ruststream-retry-count"
    poison = {"superscript": "²", "long": "9" * 5000}
    async with running_work(backend, TOPOLOGY, recording(seen, lambda m: Outcome.retry())):
        for message_id, value in poison.items():
            props = Properties(message_id=message_id, headers={header: value})
            await publish(backend, "work", message_id.encode(), props)
        await publish(backend, "work", b"good", Properties(message_id="good"))
        await _handled(backend, seen, 9, "three deliveries of each message")
        dead = await _dead_all(backend, 3)
    for message_id in (*poison, "good"):
        assert [a for m, a in seen if m == message_id] == [1, 2, 3], message_id
    assert sorted(d.properties.message_id for d in dead) == ["good", "long", "superscript"]
    warned = [
        r.rr["message_id"]  # type: ignore[attr-defined]
        for r in caplog.records
        if r.getMessage() == "malformed count header; it counts as 0"
    ]
    assert sorted(warned) == ["long", "superscript"]


async def _dead_all(backend: Backend, count: int) -> list[Any]:
    found: list[Any] = []
    for _ in range(200):
        found = await peek(backend, "work.dead")
        if len(found) >= count:
            break
        await backend.elapse(0.05)
    return found


class Odd(BaseException):
    """Not an Exception: a handler that raises it still only fails its message."""


@pytest.mark.parametrize(
    "raised",
    [asyncio.CancelledError(), GeneratorExit(), SystemExit(3), KeyboardInterrupt(), Odd("odd")],
    ids=["CancelledError", "GeneratorExit", "SystemExit", "KeyboardInterrupt", "BaseException"],
)
async def test_a_handler_raising_a_base_exception_fails_only_its_message(
    backend: Backend, caplog: pytest.LogCaptureFixture, raised: BaseException
) -> None:
    """Treated as the handler's failure (retried, logged); the service goes on."""
    caplog.set_level(logging.INFO, logger="rr")
    seen: list[tuple[str, int]] = []

    async def handler(msg: Message) -> AnyOutcome:
        seen.append((msg.properties.message_id or "", msg.attempt))
        if msg.properties.message_id == "bad" and msg.attempt == 1:
            raise raised
        return Outcome.ack()

    async with running_work(backend, TOPOLOGY, handler):  # its exit raises if the service died
        await publish(backend, "work", b"bad", Properties(message_id="bad"))
        await publish(backend, "work", b"good", Properties(message_id="good"))
        await _handled(backend, seen, 3, "bad twice, good once")
    assert sorted(seen) == [("bad", 1), ("bad", 2), ("good", 1)]
    retried = [r for r in caplog.records if r.getMessage() == "retried"]
    assert len(retried) == 1
    assert retried[0].rr["error_type"].endswith(type(raised).__name__)  # type: ignore[attr-defined]
    assert await depth(backend, "work") == 0


async def test_a_delay_longer_than_rabbitmq_accepts_is_refused_alone(
    backend: Backend, caplog: pytest.LogCaptureFixture
) -> None:
    """retry_after(1e30) raises in the handler (a clear message): that message is retried
    at once; the others' copies are not disturbed."""
    caplog.set_level(logging.INFO, logger="rr")
    seen: list[tuple[str, int]] = []

    async def handler(msg: Message) -> AnyOutcome:
        seen.append((msg.properties.message_id or "", msg.attempt))
        if msg.attempt == 1:
            return Outcome.retry_after(1e30 if msg.properties.message_id == "far" else 0)
        return Outcome.ack()

    async with running_work(backend, TOPOLOGY, handler):
        for message_id in ("far", "near"):
            await publish(backend, "work", message_id.encode(), Properties(message_id=message_id))
        await _handled(backend, seen, 4, "each message twice")
    assert sorted(seen) == [("far", 1), ("far", 2), ("near", 1), ("near", 2)]
    retried = [r for r in caplog.records if r.getMessage() == "retried"]
    errors = [r.rr.get("error", "") for r in retried]  # type: ignore[attr-defined]
    assert any("at most 4,294,967 seconds" in error for error in errors), errors
