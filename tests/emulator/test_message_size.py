"""emulator/message_size.py: a message's property bytes as rr's client writes them (what
RabbitMQ 4.3's quorum queues count toward ``x-max-length-bytes`` beside the body;
docs/reference/testing.md, "What the emulator models")."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from rabbitctl_retry.emulator.message_size import property_bytes
from rabbitctl_retry.releases import RABBITMQ_3_10, RABBITMQ_4_0, RABBITMQ_4_3
from rabbitctl_retry.transport.base import TRANSIENT, Properties
from rabbitctl_retry.transport.native_state import publish_frames

SENT = [
    Properties(),
    TRANSIENT,
    Properties(message_id="m1"),
    Properties(delivery_mode=2, message_id="m1", priority=5, expiration="100000"),
    Properties(timestamp=datetime(2026, 1, 1, tzinfo=UTC), type="t", app_id="rr", user_id="u"),
    Properties(content_type="text/plain", content_encoding="gzip", correlation_id="c"),
    Properties(reply_to="amq.rabbitmq.reply-to", headers={"h": "v", "hh": "vvvv"}),
    Properties(headers={"n": 5, "x-death": [{"count": 1, "reason": "rejected"}], "f": 1.5}),
    Properties(headers={}),
]


def _written(properties: Properties) -> int:
    """The bytes of the frames rr's client writes to publish an empty body with
    ``properties`` (the method and the content header)."""
    return len(publish_frames(1, "publish", b"", "", "q", properties, False, 131072))


def test_flags_alone_take_two_bytes() -> None:
    assert property_bytes(Properties()) == 2


@pytest.mark.parametrize("properties", SENT)
def test_the_size_is_what_rrs_client_writes(properties: Properties) -> None:
    """Each property adds to the content header what :func:`property_bytes` says."""
    added = _written(properties) - _written(Properties())
    assert property_bytes(properties) == 2 + added


def test_only_43_counts_them_in_a_quorum_queue() -> None:
    sent = property_bytes(Properties(message_id="m1"))
    assert sent == 5
    assert [row.quorum_message_bytes(2, sent) for row in (RABBITMQ_3_10, RABBITMQ_4_0)] == [2, 2]
    assert RABBITMQ_4_3.quorum_message_bytes(2, sent) == 7
