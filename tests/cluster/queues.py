"""Reading the queues of the local cluster while it fails over."""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable

from rabbitctl_retry.errors import TransportError
from rabbitctl_retry.transport.base import Connection


async def take_into(
    found: Counter[str], connect: Callable[[], Awaitable[Connection]], queue: str
) -> None:
    """Empty ``queue`` into ``found`` (by message id), as far as the cluster lets us now:
    while a quorum queue elects a new leader, a ``basic.get`` closes the connection (541
    INTERNAL_ERROR, ``noproc``); what was taken before that is kept, the rest waits for the
    next poll."""
    try:
        connection = await connect()
    except TransportError:
        return
    try:
        channel = await connection.channel()
        while (delivery := await channel.get(queue, no_ack=True)) is not None:
            found[delivery.properties.message_id or ""] += 1
    except TransportError:
        return
    finally:
        await connection.close()
