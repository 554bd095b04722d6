"""Unroutable messages: returned (mandatory, on a confirm channel) or silently dropped."""

from __future__ import annotations

import pytest

from rabbitctl_retry.errors import PublishFailed
from tests.backends import Backend
from tests.contract.support import bodies


async def test_mandatory_unroutable_fails_and_plain_unroutable_is_dropped(
    backend: Backend,
) -> None:
    channel = await backend.channel(confirms=True)
    await channel.exchange_declare("x", type="direct")
    await channel.queue_declare("q")
    await channel.queue_bind("q", "x", "k")

    with pytest.raises(PublishFailed) as returned:
        await channel.publish(b"lost", exchange="x", routing_key="nope", mandatory=True)
    assert str(returned.value) == (
        "publish to exchange 'x' with routing key 'nope': the broker returned the message "
        "(312 NO_ROUTE: no queue is bound for it)"
    )
    assert not channel.is_closed  # a return is no channel error

    with pytest.raises(PublishFailed) as no_queue:
        await channel.publish(b"lost", routing_key="no-such-queue", mandatory=True)
    assert str(no_queue.value) == (
        "publish to the default exchange with routing key 'no-such-queue': the broker "
        "returned the message (312 NO_ROUTE: no queue is bound for it)"
    )

    await channel.publish(b"kept", exchange="x", routing_key="k", mandatory=True)
    await channel.publish(b"dropped", exchange="x", routing_key="nope")
    await channel.publish(b"dropped", routing_key="no-such-queue")
    await channel.publish(b"kept too", exchange="x", routing_key="k")
    assert not channel.is_closed
    assert await bodies(channel, "q") == ["kept", "kept too"]
