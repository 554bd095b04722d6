"""What a quorum queue counts toward ``x-max-length-bytes`` (issue #49, point 1;
docs/reference/testing.md, "What the emulator models"): the body on RabbitMQ 3.10 and 4.0;
on 4.3 the body plus the basic properties as the publisher encoded them (2 flag bytes and
each property present), whatever happened to the message since (dead-lettered with
``x-death``, given back by a closing channel): ``releases.ServerRelease.quorum_message_bytes``,
measured by ``scripts/measure_quorum_bytes.py`` on 3.10.8, 4.0.5 and 4.3.6. A classic queue
counts the body on every line.

``m1`` with ``message_id = "m1"`` is 2 bytes before 4.3 and 7 on 4.3 (2 + 2 flags + 3); with
no properties at all (flags 0), 2 and 4.
"""

from __future__ import annotations

import pytest

from rabbitctl_retry.errors import PublishFailed
from rabbitctl_retry.fields import FieldValue
from rabbitctl_retry.transport.base import Channel, Properties
from tests.backends import Backend
from tests.contract.support import bodies, settle
from tests.contract.versions import expected
from tests.observe import Recorder, depth

NO_PROPERTIES = Properties()
"""Flags 0: 2 bytes of properties."""
WITH_ID = Properties(message_id="m1")
"""2 flag bytes and the message id's 3: 5 bytes of properties."""


def counts_properties(backend: Backend) -> bool:
    return bool(expected(backend.version, "quorum-bytes-count-properties"))


async def limited(channel: Channel, max_bytes: int, **more: FieldValue) -> None:
    """Quorum queue ``q`` with ``x-max-length-bytes = max_bytes`` (and ``more``), dead-lettering
    what it drops to the classic queue ``dead`` (``dead`` sees every drop)."""
    await channel.queue_declare("dead", durable=True, arguments={"x-queue-type": "classic"})
    arguments: dict[str, FieldValue] = {
        "x-queue-type": "quorum",
        "x-max-length-bytes": max_bytes,
        "x-dead-letter-exchange": "",
        "x-dead-letter-routing-key": "dead",
    }
    arguments.update({name.replace("_", "-"): value for name, value in more.items()})
    await channel.queue_declare("q", durable=True, arguments=arguments)


async def confirmed(
    channel: Channel, body: str, properties: Properties, *, queue: str = "q"
) -> bool:
    """Publish ``body`` to ``queue`` on a confirm channel: True when acked, False when nacked."""
    try:
        await channel.publish(body.encode(), routing_key=queue, properties=properties)
    except PublishFailed:
        return False
    return True


@pytest.mark.parametrize("properties", [NO_PROPERTIES, WITH_ID], ids=["flags-only", "message-id"])
async def test_a_two_byte_message_under_a_four_byte_limit(
    backend: Backend, properties: Properties
) -> None:
    """m1 (2 bytes) into a drop-head quorum queue of 4 bytes: kept by 3.10 and 4.0; on 4.3 kept
    without properties (2 + 2 = 4) and dropped with a message id (2 + 7 > 4)."""
    channel = await backend.channel()
    await limited(channel, 4)
    assert await confirmed(channel, "m1", properties)
    dropped = counts_properties(backend) and properties.message_id is not None
    await settle(backend, channel, "dead" if dropped else "q", 1)
    assert await bodies(channel, "dead") == (["m1"] if dropped else [])
    assert await bodies(channel, "q") == ([] if dropped else ["m1"])


async def test_reject_publish_refuses_the_second_message_into_three_bytes(
    backend: Backend,
) -> None:
    """A reject-publish quorum queue of 3 bytes takes a message while it is not over its
    limit. m1 (no properties) takes it over on 4.3 (4 bytes): m2 is nacked. On 3.10 and 4.0
    m1 is 2 bytes, m2 is taken (over by one, 4 bytes), m3 nacked."""
    channel = await backend.channel()
    await limited(channel, 3, x_overflow="reject-publish")
    outcomes = [await confirmed(channel, body, NO_PROPERTIES) for body in ("m1", "m2", "m3")]
    taken = ["m1"] if counts_properties(backend) else ["m1", "m2"]
    assert outcomes == [body in taken for body in ("m1", "m2", "m3")]
    await settle(backend, channel, "q", len(taken))
    assert await bodies(channel, "q") == taken
    assert await depth(channel, "dead") == 0


async def test_a_dead_letter_given_back_by_a_closing_channel_under_six_bytes(
    backend: Backend,
) -> None:
    """m1 (``message_id`` m1) is rejected from quorum queue ``src`` and dead-lettered into
    ``q`` (6 bytes, drop-head), straight to a waiting consumer there (a message a consumer
    holds is not counted), which sees its ``x-death``. Its channel closes and gives it back:
    3.10 and 4.0 keep it (2 bytes); 4.3 counts 7 bytes, over the limit, and dead-letters it
    to ``dead`` at once (its x-death and delivery count take no bytes: 2 + 5 is all)."""
    channel = await backend.channel()
    await limited(channel, 6)
    source_arguments: dict[str, FieldValue] = {
        "x-queue-type": "quorum",
        "x-dead-letter-exchange": "",
        "x-dead-letter-routing-key": "q",
    }
    await channel.queue_declare("src", durable=True, arguments=source_arguments)
    connection = await backend.connect()
    consuming = await connection.channel()
    await consuming.qos(1)
    recorder = Recorder(consuming, "hold")
    await consuming.consume("q", recorder)
    assert await confirmed(channel, "m1", WITH_ID, queue="src")
    await settle(backend, channel, "src", 1)
    got = await channel.get("src")
    assert got is not None
    await channel.reject(got.delivery_tag, requeue=False)
    await backend.until(lambda: len(recorder.deliveries) == 1, "m1 dead-lettered to q's consumer")
    headers = recorder.deliveries[0].properties.headers or {}
    assert "x-death" in headers
    await consuming.close()
    dropped = counts_properties(backend)
    await settle(backend, channel, "dead" if dropped else "q", 1)
    assert await bodies(channel, "dead") == (["m1"] if dropped else [])
    assert await bodies(channel, "q") == ([] if dropped else ["m1"])
    await connection.close()
