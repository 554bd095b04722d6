"""What the contract scenarios observe, in plain values both backends can be compared on.

Only things a client sees through the port: bodies, routing, flags, headers. One value differs
by nature between the backends and is checked, then set aside: the ``time`` of an ``x-death``
entry (a real or a virtual instant: it must be an aware ``datetime``). A message published
without a ``message_id`` has none on either (rr's clients add none).
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

import pytest

from rabbitctl_retry.errors import PreconditionFailed
from rabbitctl_retry.fields import FieldTable, FieldValue
from rabbitctl_retry.transport.base import Channel, Delivery
from tests.contract.versions import expected

if TYPE_CHECKING:
    from tests.backends import Backend

TIME = "<datetime>"
"""Stands for the ``time`` of an ``x-death`` entry once it was checked to be a datetime."""


def plain_headers(headers: FieldTable | None) -> FieldTable | None:
    """``headers`` with each ``x-death`` ``time`` checked and replaced by :data:`TIME`."""
    if headers is None:
        return None
    result = dict(headers)
    deaths = result.get("x-death")
    if isinstance(deaths, list):
        entries: list[FieldValue] = []
        for entry in deaths:
            assert isinstance(entry, dict), f"an x-death entry is not a table: {entry!r}"
            entry = dict(entry)
            when = entry.get("time")
            assert isinstance(when, datetime), f"x-death time is not a datetime: {when!r}"
            assert when.tzinfo is not None, f"x-death time is naive: {when!r}"
            entry["time"] = TIME
            entries.append(entry)
        result["x-death"] = entries
    return result


def view(delivery: Delivery) -> dict[str, Any]:
    """A delivery as the scenarios compare it."""
    return {
        "body": delivery.body.decode(),
        "exchange": delivery.exchange,
        "routing_key": delivery.routing_key,
        "redelivered": delivery.redelivered,
        "headers": plain_headers(delivery.properties.headers),
        "expiration": delivery.properties.expiration,
    }


def death(
    reason: str,
    queue: str,
    *,
    exchange: str,
    routing_keys: list[str],
    count: int = 1,
    original_expiration: str | None = None,
) -> dict[str, FieldValue]:
    """One expected ``x-death`` entry (``time`` checked by :func:`plain_headers`)."""
    entry: dict[str, FieldValue] = {
        "count": count,
        "reason": reason,
        "queue": queue,
        "time": TIME,
        "exchange": exchange,
        "routing-keys": list(routing_keys),
    }
    if original_expiration is not None:
        entry["original-expiration"] = original_expiration
    return entry


def first_death(reason: str, queue: str, exchange: str) -> dict[str, FieldValue]:
    return {
        "x-first-death-exchange": exchange,
        "x-first-death-queue": queue,
        "x-first-death-reason": reason,
    }


def delivery_count(delivery: Delivery) -> FieldValue:
    """The ``x-delivery-count`` header, or ``"absent"``."""
    return (delivery.properties.headers or {}).get("x-delivery-count", "absent")


async def drain(channel: Channel, queue: str) -> list[Delivery]:
    """Take every message of ``queue``, head first (basic.get, no ack)."""
    taken = []
    while (delivery := await channel.get(queue, no_ack=True)) is not None:
        taken.append(delivery)
    return taken


async def bodies(channel: Channel, queue: str) -> list[str]:
    return [delivery.body.decode() for delivery in await drain(channel, queue)]


async def counted_return(version: str, channel: Channel, tag: int) -> None:
    """Give a delivery back so that its quorum queue counts it: basic.nack with requeue, or
    basic.reject where a nack is not counted (versions.py 'counted-return')."""
    if expected(version, "counted-return") == "nack":
        await channel.nack(tag, requeue=True)
    else:
        await channel.reject(tag, requeue=True)


async def settle(backend: Backend, channel: Channel, queue: str, ready: int) -> None:
    """Wait until ``queue`` holds ``ready`` ready messages."""

    async def there() -> bool:
        return (await channel.queue_declare(queue, passive=True)).message_count == ready

    await backend.until(there, f"{ready} ready in {queue!r}")


def declare_refusal(queue: str, vhost: str, detail: str) -> str:
    """How rr words the server's refusal of a queue declare: ``detail`` is the server's text
    after ``PRECONDITION_FAILED - ``, with ``{vhost}`` for the vhost."""
    return f"declare queue '{queue}': PRECONDITION_FAILED - {detail.format(vhost=vhost)} (406)"


async def refused_declare(channel: Channel, queue: str, arguments: FieldTable) -> str:
    """Declare durable ``queue`` with ``arguments``, which the server must refuse; its text."""
    with pytest.raises(PreconditionFailed) as refused:
        await channel.queue_declare(queue, durable=True, arguments=arguments)
    return str(refused.value)
