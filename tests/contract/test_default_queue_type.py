"""A vhost whose default queue type is quorum (``rabbitmqctl add_vhost --default-queue-type
quorum``, which 3.10.8, 4.0.5 and 4.3.6 all take): what a declare with and without
``x-queue-type`` makes and is compared with there, on each server and the emulator
(docs/reference/topology.md, "The queue's type"). rr sends the type with every declare because of
it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

from rabbitctl_retry.errors import PreconditionFailed
from rabbitctl_retry.transport.base import Channel
from tests.backends import Backend, EmulatorBackend, RabbitBackend, vhost_pool
from tests.contract.conftest import UNTIL_DEADLINE_S


@asynccontextmanager
async def quorum_by_default(backend: Backend) -> AsyncIterator[Backend]:
    """A backend of ``backend``'s kind and version whose vhost's default queue type is
    quorum (a fresh vhost made so, or an emulator set so), closed after the block."""
    typed: Backend
    if isinstance(backend, RabbitBackend):
        pool = vhost_pool(backend.broker)
        typed = RabbitBackend(
            backend.broker,
            pool=pool,
            vhost=pool.take_typed("quorum"),
            deadline_s=UNTIL_DEADLINE_S,
        )
    else:
        assert isinstance(backend, EmulatorBackend)
        typed = EmulatorBackend(backend.version, rounds=1, default_queue_type="quorum")
    try:
        yield typed
    finally:
        await typed.close()


async def refusal(channel: Channel, queue: str, queue_type: str | None) -> str | None:
    """The server's words when it refuses a redeclare of ``queue`` with ``queue_type`` (None:
    without ``x-queue-type``), else None."""
    arguments = {} if queue_type is None else {"x-queue-type": queue_type}
    try:
        await channel.queue_declare(queue, arguments=arguments)
    except PreconditionFailed as error:
        return str(error)
    return None


async def test_a_declare_without_a_type_makes_a_quorum_queue_there(backend: Backend) -> None:
    async with quorum_by_default(backend) as typed:
        channel = await typed.channel()
        await channel.queue_declare("untyped")
        await channel.queue_declare("classic", arguments={"x-queue-type": "classic"})
        vhost = typed.vhost

        # the untyped one is a quorum queue: taken again as one, refused as a classic one
        assert await refusal(await typed.channel(), "untyped", "quorum") is None
        assert await refusal(await typed.channel(), "untyped", None) is None
        assert await refusal(await typed.channel(), "untyped", "classic") == (
            "declare queue 'untyped': PRECONDITION_FAILED - inequivalent arg 'x-queue-type' "
            f"for queue 'untyped' in vhost '{vhost}': received 'classic' but current is "
            "'quorum' (406)"
        )
        # the typed one is classic: taken with its type, refused without it (the vhost's
        # default then), so another client must name the type or declare passively
        assert await refusal(await typed.channel(), "classic", "classic") is None
        assert await refusal(await typed.channel(), "classic", None) == (
            "declare queue 'classic': PRECONDITION_FAILED - inequivalent arg 'x-queue-type' "
            f"for queue 'classic' in vhost '{vhost}': received 'quorum' but current is "
            "'classic' (406)"
        )


async def test_an_untyped_classic_queue_takes_a_redeclare_with_its_type(
    backend: Backend,
) -> None:
    """What rr's x-queue-type = "classic" meets on a queue an older rr (or another client)
    declared without a type, in a vhost without a default type: it is taken, on every
    server, so that queue is no conflict."""
    channel = await backend.channel()
    await channel.queue_declare("old")
    assert await refusal(await backend.channel(), "old", "classic") is None
    assert await refusal(await backend.channel(), "old", None) is None


@pytest.mark.parametrize("queue_type", ["classic", None])
async def test_a_quorum_queue_refuses_a_classic_redeclare(
    backend: Backend, queue_type: str | None
) -> None:
    """In a vhost without a default type a quorum queue refuses a classic redeclare, typed or
    not; the words differ: 3.10 compares an untyped one with none."""
    channel = await backend.channel()
    await channel.queue_declare("qq", arguments={"x-queue-type": "quorum"})
    refused = await refusal(await backend.channel(), "qq", queue_type)
    assert refused is not None
    received = (
        "none but current is the value 'quorum' of type 'longstr'"
        if queue_type is None and backend.version == "3.10"
        else "'classic' but current is 'quorum'"
    )
    assert refused == (
        "declare queue 'qq': PRECONDITION_FAILED - inequivalent arg 'x-queue-type' for queue "
        f"'qq' in vhost '{backend.vhost}': received {received} (406)"
    )
