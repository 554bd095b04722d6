"""Failures mapped to outcomes through the real consumer runtime, on each backend
(docs/reference/handlers.md, "Failures mapped to outcomes").

Exact numbers: how many deliveries the handler saw, which headers the letter carries, and which
queue holds the message afterwards.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from rabbitctl_retry import Message, Outcome, subscriber
from rabbitctl_retry.retry.outcome import AnyOutcome
from rabbitctl_retry.runtime.handlers import Subscriber
from rabbitctl_retry.runtime.loader import HandlerSet
from rabbitctl_retry.runtime.service import RunOptions, Service
from rabbitctl_retry.topology.load import load_text
from rabbitctl_retry.transport.base import Properties
from tests.backends import Backend, publish
from tests.observe import depth
from tests.runtime.test_outcomes import _wait_for_messages
from tests.topologies import GUIDE

H = "x-ruststream-retry-count"


BODY = json.dumps({"id": 1, "card": "4111"}).encode()


class PaymentError(Exception):
    pass


class CardDeclined(PaymentError):
    pass


class StolenCard(CardDeclined):
    pass


class ProcessorBusy(PaymentError):
    pass


class InvalidRefund(ValueError):
    pass


def name(kind: type) -> str:
    """``rr-error-type`` of ``kind``: ``module.QualName``."""
    return f"{kind.__module__}.{kind.__qualname__}"


@asynccontextmanager
async def running(backend: Backend, queue: str, handler: Any) -> AsyncIterator[Service]:
    service = Service(
        HandlerSet(module="test", subscribers=(Subscriber(queue, handler, f"test:{queue}"),)),
        topology=load_text(GUIDE),
        connect=backend.connect,
        options=RunOptions(prefetch=10, shutdown_timeout_s=5),
        clock=backend.clock,
    )
    async with service.running():
        yield service


def raising(queue: str, error: BaseException, seen: list[int], **mapping: Any) -> Any:
    """A handler of ``queue`` that raises ``error`` on every delivery (each attempt recorded
    in ``seen``), mapped by ``mapping``."""

    @subscriber(queue, **mapping)
    async def handler(msg: Message) -> AnyOutcome:
        seen.append(msg.attempt)
        raise error

    return handler


async def publish_one(backend: Backend, queue: str) -> None:
    await publish(backend, queue, BODY, Properties(message_id="m-1"))


def assert_letter(letter: Any, *, origin: str, error_type: str, message: str) -> None:
    assert letter.body == BODY
    assert letter.properties.message_id == "m-1"
    headers = letter.properties.headers or {}
    assert headers["rr-error-type"] == error_type
    assert headers["rr-error-message"] == message
    assert headers["rr-origin-queue"] == origin
    assert headers["rr-handler"] == f"test:{origin}"
    assert headers[H] == "5"
    assert "x-death" not in headers  # rr's own copy, not the server's dead letter


async def test_dead_letter_on_ends_a_classic_message_after_one_delivery(backend: Backend) -> None:
    seen: list[int] = []
    handler = raising("refunds", InvalidRefund("amount < 0"), seen, dead_letter_on=(ValueError,))
    async with running(backend, "refunds", handler):
        await publish_one(backend, "refunds")
        dead = await _wait_for_messages(backend, "refunds.dead", 1)
    assert seen == [1]
    assert len(dead) == 1
    assert_letter(dead[0], origin="refunds", error_type=name(InvalidRefund), message="amount < 0")
    assert await depth(backend, "refunds") == 0
    assert await depth(backend, "refunds.retry") == 0


async def test_dead_letter_on_ends_a_quorum_message_with_its_reason(backend: Backend) -> None:
    seen: list[int] = []
    handler = raising("payouts", InvalidRefund("no iban"), seen, dead_letter_on=(InvalidRefund,))
    async with running(backend, "payouts", handler):
        await publish_one(backend, "payouts")
        dead = await _wait_for_messages(backend, "payouts.dead", 1)
    assert seen == [1]
    assert len(dead) == 1
    assert_letter(dead[0], origin="payouts", error_type=name(InvalidRefund), message="no iban")
    assert await depth(backend, "payouts") == 0


async def test_drop_on_a_subclass_drops_a_classic_message(backend: Backend) -> None:
    seen: list[int] = []
    handler = raising("refunds", StolenCard("lost card"), seen, drop_on=(CardDeclined,))
    async with running(backend, "refunds", handler) as service:
        await publish_one(backend, "refunds")
        await backend.until(lambda: service.stats.copies_published == 0 and seen == [1], "one")
        await backend.until(lambda: service.in_flight == 0, "settled")
    assert seen == [1]
    assert await depth(backend, "refunds") == 0
    assert await depth(backend, "refunds.dead") == 0
    assert await depth(backend, "refunds.retry") == 0


async def test_drop_on_a_quorum_queue_reaches_the_dead_letter_queue_with_its_reason(
    backend: Backend,
) -> None:
    seen: list[int] = []
    handler = raising("payouts", CardDeclined("do not honor"), seen, drop_on=(CardDeclined,))
    async with running(backend, "payouts", handler):
        await publish_one(backend, "payouts")
        dead = await _wait_for_messages(backend, "payouts.dead", 1)
    assert seen == [1]
    assert_letter(dead[0], origin="payouts", error_type=name(CardDeclined), message="do not honor")
    assert await depth(backend, "payouts") == 0


async def test_retry_after_on_waits_between_attempts_and_dead_letters_at_the_cap(
    backend: Backend,
) -> None:
    seen: list[int] = []
    times: list[float] = []

    @subscriber("refunds", drop_on=(CardDeclined,), retry_after_on={ProcessorBusy: 1})
    async def handler(msg: Message) -> AnyOutcome:
        seen.append(msg.attempt)
        times.append(backend.clock.now().timestamp())
        raise ProcessorBusy("429 too many requests")

    async with running(backend, "refunds", handler):
        await publish_one(backend, "refunds")
        await backend.until(lambda: len(seen) >= 1, "the first delivery")
        waiting = await _wait_for_messages(backend, "refunds.retry", 1)
        assert waiting[0].properties.expiration == "1000"
        for deliveries in range(2, 6):
            await backend.elapse(1.0)
            await backend.until(lambda n=deliveries: len(seen) >= n, f"delivery {deliveries}")
        dead = await _wait_for_messages(backend, "refunds.dead", 1)
    assert seen == [1, 2, 3, 4, 5]
    gaps = [later - earlier for earlier, later in itertools.pairwise(times)]
    assert all(gap >= 0.999 for gap in gaps), gaps
    assert_letter(
        dead[0], origin="refunds", error_type=name(ProcessorBusy), message="429 too many requests"
    )
    assert await depth(backend, "refunds") == 0
    assert await depth(backend, "refunds.retry") == 0


async def test_an_unmapped_exception_still_retries(backend: Backend) -> None:
    seen: list[int] = []
    handler = raising("payouts", KeyError("card"), seen, drop_on=(CardDeclined,))
    async with running(backend, "payouts", handler):
        await publish_one(backend, "payouts")
        dead = await _wait_for_messages(backend, "payouts.dead", 1)
    assert seen == [1, 2, 3, 4, 5]
    assert len(dead) == 1


async def test_outcome_dead_letter_carries_the_handlers_reason(backend: Backend) -> None:
    seen: list[int] = []

    @subscriber("refunds")
    async def handler(msg: Message) -> AnyOutcome:
        seen.append(msg.attempt)
        return Outcome.dead_letter("refund already paid out")

    async with running(backend, "refunds", handler):
        await publish_one(backend, "refunds")
        dead = await _wait_for_messages(backend, "refunds.dead", 1)
    assert seen == [1]
    assert_letter(
        dead[0], origin="refunds", error_type="rr.DeadLettered", message="refund already paid out"
    )
    assert await depth(backend, "refunds") == 0
