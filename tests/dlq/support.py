"""Helpers for the dlq tests: realistic dead letters, reading queues, running the CLI."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from unittest import mock

from typer.testing import CliRunner, Result

from rabbitctl_retry import Message, Outcome
from rabbitctl_retry.cli import app
from rabbitctl_retry.cli._common import DEFAULT_URL, CliSettings
from rabbitctl_retry.cli.dlq import common as dlq_common
from rabbitctl_retry.errors import censor_url
from rabbitctl_retry.fields import FieldValue
from rabbitctl_retry.retry.headers import ACQUIRED_COUNT_HEADER, DELIVERY_COUNT_HEADER
from rabbitctl_retry.retry.outcome import AnyOutcome
from rabbitctl_retry.runtime.handlers import Subscriber
from rabbitctl_retry.runtime.loader import HandlerSet
from rabbitctl_retry.runtime.service import RunOptions, Service
from rabbitctl_retry.topology.load import load_text
from rabbitctl_retry.transport.base import Connection, Delivery, Properties
from tests.backends import Backend, EmulatorBackend, RabbitBackend
from tests.observe import depth

H = "x-ruststream-retry-count"
runner = CliRunner(env={"COLUMNS": "200"})

# refunds: classic, rr counts and moves the spent message itself (rr-origin-queue);
# payouts: quorum, the server counts (x-delivery-limit = 2) and dead-letters it; both wait in
# a TTL wait queue for retry_after, and share one dead-letter queue.
TOPOLOGY_TEXT = """
[queues.refunds]
max_attempts = 3
dead_letter = "dead"
delay = "dlx-ttl"

[queues.payouts]
type = "quorum"
max_attempts = 3
dead_letter = "dead"
delay = "dlx-ttl"

[queues.dead]
"""
TOPOLOGY = load_text(TOPOLOGY_TEXT)


async def declare(
    backend: Backend, *queues: str, arguments: dict[str, FieldValue] | None = None
) -> None:
    connection = await backend.connect()
    try:
        channel = await connection.channel()
        for queue in queues:
            await channel.queue_declare(queue, arguments=arguments)
    finally:
        await connection.close()


async def publish_all(
    backend: Backend, queue: str, messages: Sequence[tuple[bytes, Properties]], *, window: int = 500
) -> None:
    """Publish with confirms, many in flight, in order."""
    connection = await backend.connect()
    try:
        channel = await connection.channel(confirms=True)
        for start in range(0, len(messages), window):
            await asyncio.gather(
                *(
                    channel.publish(body, routing_key=queue, properties=properties, mandatory=True)
                    for body, properties in messages[start : start + window]
                )
            )
    finally:
        await connection.close()


async def wait_depth(backend: Backend, queue: str, count: int) -> None:
    for _ in range(600):
        if await depth(backend, queue) >= count:
            return
        await backend.elapse(0.05)
    raise AssertionError(f"{queue} never held {count} messages")


# ----------------------------------------------------------------- realistic dead letters


def death(queue: str, reason: str, time: datetime, count: int = 1) -> dict[str, FieldValue]:
    return {
        "count": count,
        "exchange": "",
        "queue": queue,
        "reason": reason,
        "routing-keys": [queue],
        "time": time,
    }


def synthesized(kind: str, number: int, now: datetime) -> tuple[bytes, Properties]:
    """A dead letter with the headers the runtime or the server would have given it."""
    when = now - timedelta(minutes=number % 90)
    match kind:
        case "rr":  # a classic queue's last attempt, moved by rr run
            origin = ("refunds", "orders")[number % 2]
            headers: dict[str, FieldValue] = {
                "rr-origin-queue": origin,
                "rr-failed-at": when.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
                "rr-error-type": "ValueError",
                "rr-error-message": f"declined {number}",
                H: "3",
                "x-tenant": "acme",
            }
        case "server":  # a quorum delivery limit, moved by RabbitMQ
            origin = ("payouts", "invoices")[number % 2]
            headers = {
                "x-death": [death(origin, "delivery_limit", when)],
                "x-first-death-exchange": "",
                "x-first-death-queue": origin,
                "x-first-death-reason": "delivery_limit",
            }
        case "waited":  # a quorum message that once waited in its wait queue
            origin = "payouts"
            headers = {
                "x-death": [
                    death(origin, "rejected", when),
                    death(f"{origin}.retry", "expired", when - timedelta(seconds=30), 2),
                ],
                "x-first-death-exchange": "",
                "x-first-death-queue": f"{origin}.retry",
                "x-first-death-reason": "expired",
                H: "2",
            }
        case _:
            raise ValueError(kind)
    body = json.dumps({"kind": kind, "n": number, "origin": origin}).encode()
    properties = Properties(
        message_id=f"s-{kind}-{number}",
        content_type="application/json",
        delivery_mode=2,
        headers=headers,
    )
    return body, properties


def origin_of(body: bytes) -> str:
    return str(json.loads(body)["origin"])


async def _handle(msg: Message) -> AnyOutcome:
    data = msg.json()
    if data["kind"] == "refund":
        if data["n"] % 2:
            raise ValueError(f"card {data['n']} declined")
        return Outcome.retry()
    if data["kind"] == "waited" and msg.retry_count == 0 and msg.delivery_count is None:
        return Outcome.retry_after(0.05)
    return Outcome.retry()


@dataclass(frozen=True)
class Made:
    """What :func:`run_to_dead` put in the dead-letter queue, by message id."""

    refunds: tuple[str, ...]
    payouts: tuple[str, ...]
    waited: tuple[str, ...]

    @property
    def total(self) -> int:
        return len(self.refunds) + len(self.payouts) + len(self.waited)


async def run_to_dead(backend: Backend, per_kind: int) -> Made:
    """Run the rr runtime on TOPOLOGY until ``3 * per_kind`` messages are dead letters.

    refunds (classic): every delivery fails; rr moves each after 3 attempts, with
    rr-origin-queue and, for odd numbers, rr-error-*. payouts (quorum): the server moves each
    after 3 deliveries (delivery_limit). waited payouts: retry_after once (they wait in
    payouts.retry and expire back), then fail until rr rejects them at attempt 3: their
    x-death lists payouts (rejected) and payouts.retry (expired), and x-first-death-queue
    names the wait queue.
    """
    service = Service(
        HandlerSet(
            module="dlq-tests",
            subscribers=(
                Subscriber("refunds", _handle, "t:refunds"),
                Subscriber("payouts", _handle, "t:payouts"),
            ),
        ),
        topology=TOPOLOGY,
        connect=backend.connect,
        options=RunOptions(prefetch=50, shutdown_timeout_s=5),
        clock=backend.clock,
    )
    task = asyncio.ensure_future(service.run())
    await service.wait_ready()
    made = Made(
        refunds=tuple(f"refund-{n}" for n in range(per_kind)),
        payouts=tuple(f"payout-{n}" for n in range(per_kind)),
        waited=tuple(f"waited-{n}" for n in range(per_kind)),
    )
    try:
        for kind, queue, ids in (
            ("refund", "refunds", made.refunds),
            ("payout", "payouts", made.payouts),
            ("waited", "payouts", made.waited),
        ):
            await publish_all(
                backend,
                queue,
                [
                    (
                        json.dumps({"kind": kind, "n": n, "origin": queue}).encode(),
                        Properties(
                            message_id=message_id,
                            content_type="application/json",
                            delivery_mode=2,
                            headers={"x-tenant": "acme"},
                        ),
                    )
                    for n, message_id in enumerate(ids)
                ],
            )
        await wait_depth(backend, "dead", made.total)
    finally:
        service.stop()
        await task
    return made


READ_COUNTS = (DELIVERY_COUNT_HEADER, ACQUIRED_COUNT_HEADER)
"""The headers a broker raises each time it hands a message out."""


def as_it_is(deliveries: list[Delivery]) -> list[tuple[str | None, bytes, dict[str, object]]]:
    """Each letter's id, body and headers (less the counts a read raises), in queue order."""
    return [
        (
            d.properties.message_id,
            d.body,
            {k: v for k, v in (d.properties.headers or {}).items() if k not in READ_COUNTS},
        )
        for d in deliveries
    ]


async def fail_back(backend: Backend, queue: str, dead: str) -> None:
    """The one message in ``queue`` fails again: rr run moves it to ``dead`` with its failure
    headers (docs/reference/runtime.md)."""
    connection = await backend.connect()
    try:
        channel = await connection.channel(confirms=True)
        delivery = await channel.get(queue)
        assert delivery is not None
        headers = {
            **(delivery.properties.headers or {}),
            "rr-origin-queue": queue,
            "rr-error-type": "ValueError",
            "rr-error-message": "declined again",
            H: "3",
        }
        properties = dataclasses.replace(delivery.properties, headers=headers)
        await channel.publish(
            delivery.body, routing_key=dead, properties=properties, mandatory=True
        )
        await channel.ack(delivery.delivery_tag)
        assert await channel.get(queue) is None
    finally:
        await connection.close()


# ----------------------------------------------------------------- the CLI


def cli_arguments(backend: Backend) -> tuple[list[str], dict[str, Any]]:
    """The URL arguments and ``invoke`` keywords that point the CLI at ``backend``: on the
    emulator the CLI is handed the emulator's connector (``CliSettings``)."""
    if isinstance(backend, RabbitBackend):
        return ["--url", backend.url], {}
    assert isinstance(backend, EmulatorBackend)
    emulator = backend.emulator

    async def connect(url: str) -> Connection:
        return emulator.connect()

    return [], {"obj": CliSettings(connector=connect)}


async def rr(backend: Backend, *args: str, input: str | None = None) -> Result:
    """Run ``rr ARGS`` (in a thread: the CLI runs its own event loop) against ``backend``."""
    url, extra = cli_arguments(backend)
    return await asyncio.to_thread(runner.invoke, app, [*args, *url], input=input, **extra)


def shown_broker(backend: Backend) -> str:
    """The masked URL a changing command names for ``backend`` (its ``rr: on`` line and its
    JSON ``"broker"``; docs/reference/cli.md, "Where the broker is"): on the emulator, the default
    URL (the CLI settings seam connects to the emulator whatever the URL)."""
    return censor_url(backend.url if isinstance(backend, RabbitBackend) else DEFAULT_URL)


def target_line(backend: Backend) -> str:
    """The ``rr: on URL`` line a changing command prints first on stderr for ``backend``."""
    return f"rr: on {shown_broker(backend)}"


def json_of(result: Result) -> Any:
    assert result.exit_code in (0, 1, 3, 69), (result.exit_code, result.output)
    return json.loads(result.stdout)


def interactive(answer: bool) -> Any:
    """Pretend stdin is (or is not) a terminal."""
    return mock.patch.object(dlq_common, "interactive", return_value=answer)
