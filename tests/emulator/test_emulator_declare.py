"""Declarations, deletions and the errors they raise: classes and texts as RabbitMQ 3.10.8's.

Every text below was read off the real server (aiormq against 3.10.8).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest

from rabbitctl_retry.emulator import EmulatedChannel, EmulatedConnection, Emulator
from rabbitctl_retry.errors import (
    AccessRefused,
    BrokerUnreachable,
    ChannelClosed,
    DataError,
    NotFound,
    PreconditionFailed,
    ResourceLocked,
    TransportError,
)
from rabbitctl_retry.fields import FieldValue

QQ: dict[str, FieldValue] = {"x-queue-type": "quorum", "x-delivery-limit": 4}


CODES: dict[type[TransportError], int] = {
    AccessRefused: 403,
    NotFound: 404,
    ResourceLocked: 405,
    PreconditionFailed: 406,
}


async def expect(
    channel: EmulatedChannel,
    error: type[TransportError],
    text: str,
    operation: object,
    what: str | None = None,
) -> None:
    """``operation`` raises ``error`` worded as the aiormq adapter words the server's ``text``."""
    assert callable(operation)
    with pytest.raises(error) as caught:
        await operation()
    message = str(caught.value)
    if what is not None:
        assert message == f"{what}: {text} ({CODES[error]})"
    else:
        assert message.endswith(f": {text} ({CODES[error]})")
    assert channel.is_closed


async def test_passive_declare_of_a_missing_queue_closes_the_channel(
    channel: EmulatedChannel,
) -> None:
    await expect(
        channel,
        NotFound,
        "NOT_FOUND - no queue 'missing' in vhost '/'",
        lambda: channel.queue_declare("missing", passive=True),
        what="declare queue 'missing'",
    )
    with pytest.raises(ChannelClosed) as caught:
        await channel.queue_declare("other")
    assert str(caught.value) == (
        "declare queue 'other': the channel was closed earlier: "
        "NOT_FOUND - no queue 'missing' in vhost '/' (404)"
    )


async def test_a_new_channel_works_after_a_channel_error(
    emulator: Emulator, connection: EmulatedConnection
) -> None:
    channel = await connection.channel()
    with pytest.raises(NotFound):
        await channel.exchange_declare("missing", passive=True)
    again = await connection.channel()
    await again.queue_declare("q")
    assert "q" in emulator.queue_names()


@pytest.mark.parametrize(
    ("arguments", "durable", "auto_delete", "text"),
    [
        (
            {"x-queue-type": "quorum", "x-delivery-limit": 5},
            True,
            False,
            "inequivalent arg 'x-delivery-limit' for queue 'qq' in vhost '/': "
            "received '5' but current is '4'",
        ),
        (
            {"x-queue-type": "quorum"},
            True,
            False,
            "inequivalent arg 'x-delivery-limit' for queue 'qq' in vhost '/': "
            "received none but current is the value '4' of type 'byte'",
        ),
        (
            {},
            True,
            False,
            "inequivalent arg 'x-queue-type' for queue 'qq' in vhost '/': "
            "received none but current is the value 'quorum' of type 'longstr'",
        ),
        (
            {"x-queue-type": "classic"},
            True,
            False,
            "inequivalent arg 'x-queue-type' for queue 'qq' in vhost '/': "
            "received 'classic' but current is 'quorum'",
        ),
        (
            {**QQ, "x-dead-letter-exchange": ""},
            True,
            False,
            "inequivalent arg 'x-dead-letter-exchange' for queue 'qq' in vhost '/': "
            "received the value '' of type 'longstr' but current is none",
        ),
    ],
)
async def test_quorum_redeclare_with_other_arguments(
    emulator: Emulator,
    connection: EmulatedConnection,
    arguments: dict[str, FieldValue],
    durable: bool,
    auto_delete: bool,
    text: str,
) -> None:
    setup = await connection.channel()
    await setup.queue_declare("qq", arguments=QQ)
    await setup.queue_declare("qq", arguments=QQ)  # the same declaration is fine
    channel = await connection.channel()
    await expect(
        channel,
        PreconditionFailed,
        f"PRECONDITION_FAILED - {text}",
        lambda: channel.queue_declare(
            "qq", durable=durable, auto_delete=auto_delete, arguments=arguments
        ),
    )
    await setup.queue_declare("qq", passive=True)  # passive ignores arguments


@pytest.mark.parametrize(
    ("kwargs", "text"),
    [
        (
            {"arguments": {"x-queue-type": "quorum"}},
            "inequivalent arg 'x-queue-type' for queue 'c' in vhost '/': "
            "received the value 'quorum' of type 'longstr' but current is none",
        ),
        (
            {"durable": False},
            "inequivalent arg 'durable' for queue 'c' in vhost '/': "
            "received 'false' but current is 'true'",
        ),
        (
            {"auto_delete": True},
            "inequivalent arg 'auto_delete' for queue 'c' in vhost '/': "
            "received 'true' but current is 'false'",
        ),
        (
            {"arguments": {"x-message-ttl": 1000}},
            "inequivalent arg 'x-message-ttl' for queue 'c' in vhost '/': "
            "received the value '1000' of type 'short' but current is none",
        ),
        (
            {"arguments": {"x-dead-letter-exchange": "x"}},
            "inequivalent arg 'x-dead-letter-exchange' for queue 'c' in vhost '/': "
            "received the value 'x' of type 'longstr' but current is none",
        ),
    ],
)
async def test_classic_redeclare_with_other_settings(
    connection: EmulatedConnection, kwargs: dict[str, object], text: str
) -> None:
    setup = await connection.channel()
    await setup.queue_declare("c")
    channel = await connection.channel()
    await expect(
        channel,
        PreconditionFailed,
        f"PRECONDITION_FAILED - {text}",
        lambda: channel.queue_declare("c", **kwargs),  # type: ignore[arg-type]
    )


async def test_classic_redeclare_ignores_what_the_server_ignores(
    channel: EmulatedChannel,
) -> None:
    await channel.queue_declare("c")
    await channel.queue_declare("c", arguments={"x-queue-type": "classic"})
    await channel.queue_declare("c", arguments={"x-foo": 1, "bar": "z"})
    await channel.queue_declare("c", arguments={"x-delivery-limit": 3})
    assert not channel.is_closed


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (2000, "received '2000' but current is '1000'"),
        ("1000", "received '1000' but current is '1000'"),  # a string is not an integer
        (None, "received none but current is the value '1000' of type 'short'"),
    ],
)
async def test_ttl_redeclare(connection: EmulatedConnection, value: FieldValue, text: str) -> None:
    setup = await connection.channel()
    await setup.queue_declare("c", arguments={"x-message-ttl": 1000})
    channel = await connection.channel()
    arguments = {} if value is None else {"x-message-ttl": value}
    await expect(
        channel,
        PreconditionFailed,
        "PRECONDITION_FAILED - inequivalent arg 'x-message-ttl' for queue 'c' in vhost '/': "
        + text,
        lambda: channel.queue_declare("c", arguments=arguments),
    )


@pytest.mark.parametrize(
    ("arguments", "text"),
    [
        (
            {"x-queue-type": "foo"},
            "invalid arg 'x-queue-type' for queue 'q' in vhost '/': "
            "\"unsupported queue type 'foo'\"",
        ),
        (
            {"x-message-ttl": "abc"},
            "invalid arg 'x-message-ttl' for queue 'q' in vhost '/': "
            '"expected integer, got longstr"',
        ),
        (
            {"x-message-ttl": -1},
            "invalid arg 'x-message-ttl' for queue 'q' in vhost '/': {value_negative,-1}",
        ),
        (
            {"x-queue-type": "quorum", "x-max-priority": 5},
            "invalid arg 'x-max-priority' for queue 'q' in vhost '/' of queue type "
            "rabbit_quorum_queue",
        ),
        (
            {"x-queue-type": "quorum", "x-queue-mode": "lazy"},
            "invalid arg 'x-queue-mode' for queue 'q' in vhost '/' of queue type "
            "rabbit_quorum_queue",
        ),
    ],
)
async def test_invalid_queue_arguments(
    emulator: Emulator, channel: EmulatedChannel, arguments: dict[str, FieldValue], text: str
) -> None:
    await expect(
        channel,
        PreconditionFailed,
        f"PRECONDITION_FAILED - {text}",
        lambda: channel.queue_declare("q", arguments=arguments),
    )
    assert "q" not in emulator.queue_names()


async def test_reserved_queue_names(channel: EmulatedChannel) -> None:
    await expect(
        channel,
        AccessRefused,
        "ACCESS_REFUSED - queue name 'amq.myq' contains reserved prefix 'amq.*'",
        lambda: channel.queue_declare("amq.myq"),
    )


async def test_exclusive_mismatch_is_resource_locked(connection: EmulatedConnection) -> None:
    setup = await connection.channel()
    await setup.queue_declare("c")
    channel = await connection.channel()
    with pytest.raises(ResourceLocked, match=r"^declare queue 'c': RESOURCE_LOCKED - cannot"):
        await channel.queue_declare("c", exclusive=True)


@pytest.mark.parametrize(
    ("kwargs", "text"),
    [
        (
            {"type": "fanout"},
            "inequivalent arg 'type' for exchange 'x' in vhost '/': "
            "received 'fanout' but current is 'direct'",
        ),
        (
            {"durable": False},
            "inequivalent arg 'durable' for exchange 'x' in vhost '/': "
            "received 'false' but current is 'true'",
        ),
        (
            {"auto_delete": True},
            "inequivalent arg 'auto_delete' for exchange 'x' in vhost '/': "
            "received 'true' but current is 'false'",
        ),
        (
            {"internal": True},
            "inequivalent arg 'internal' for exchange 'x' in vhost '/': "
            "received 'true' but current is 'false'",
        ),
        (
            {"arguments": {"alternate-exchange": "foo"}},
            "inequivalent arg 'alternate-exchange' for exchange 'x' in vhost '/': "
            "received the value 'foo' of type 'longstr' but current is none",
        ),
    ],
)
async def test_exchange_redeclare(
    connection: EmulatedConnection, kwargs: dict[str, object], text: str
) -> None:
    setup = await connection.channel()
    await setup.exchange_declare("x", type="direct")
    await setup.exchange_declare("x", type="direct", arguments={"x-other": 1})  # ignored
    await setup.exchange_declare("x", type="fanout", passive=True)  # passive ignores the type
    channel = await connection.channel()
    await expect(
        channel,
        PreconditionFailed,
        f"PRECONDITION_FAILED - {text}",
        lambda: channel.exchange_declare("x", **kwargs),  # type: ignore[arg-type]
    )


@pytest.mark.parametrize(
    ("operation", "error", "text"),
    [
        (
            lambda ch: ch.exchange_declare("missing", passive=True),
            NotFound,
            "NOT_FOUND - no exchange 'missing' in vhost '/'",
        ),
        (
            lambda ch: ch.exchange_declare("amq.foo"),
            AccessRefused,
            "ACCESS_REFUSED - exchange name 'amq.foo' contains reserved prefix 'amq.*'",
        ),
        (
            lambda ch: ch.exchange_declare("amq.direct", type="fanout"),
            PreconditionFailed,
            "PRECONDITION_FAILED - inequivalent arg 'type' for exchange 'amq.direct' in vhost "
            "'/': received 'fanout' but current is 'direct'",
        ),
        (
            lambda ch: ch.exchange_declare(""),
            AccessRefused,
            "ACCESS_REFUSED - operation not permitted on the default exchange",
        ),
        (
            lambda ch: ch.exchange_delete("amq.direct"),
            AccessRefused,
            "ACCESS_REFUSED - deletion of system exchange 'amq.direct' in vhost '/' not allowed",
        ),
        (
            lambda ch: ch.queue_bind("q", "", "x"),
            AccessRefused,
            "ACCESS_REFUSED - operation not permitted on the default exchange",
        ),
        (
            lambda ch: ch.queue_bind("q", "missing", "x"),
            NotFound,
            "NOT_FOUND - no exchange 'missing' in vhost '/'",
        ),
        (
            lambda ch: ch.queue_bind("missing", "amq.direct", "x"),
            NotFound,
            "NOT_FOUND - no queue 'missing' in vhost '/'",
        ),
        (
            lambda ch: ch.queue_purge("missing"),
            NotFound,
            "NOT_FOUND - no queue 'missing' in vhost '/'",
        ),
        (
            lambda ch: ch.get("missing"),
            NotFound,
            "NOT_FOUND - no queue 'missing' in vhost '/'",
        ),
        (
            lambda ch: ch.publish(b"m", exchange="missing"),
            NotFound,
            "NOT_FOUND - no exchange 'missing' in vhost '/'",
        ),
    ],
)
async def test_channel_errors(
    connection: EmulatedConnection, operation: object, error: type[TransportError], text: str
) -> None:
    setup = await connection.channel()
    await setup.queue_declare("q")
    channel = await connection.channel(confirms=True)
    assert callable(operation)
    await expect(channel, error, text, lambda: operation(channel))
    assert not setup.is_closed


async def test_unanswered_methods_fail_on_the_next_operation(
    connection: EmulatedConnection,
) -> None:
    # AMQP does not answer basic.ack/reject/nack, nor a publish without confirms: the
    # server's channel close is what the next operation runs into
    unanswered: list[Callable[[EmulatedChannel], Awaitable[None]]] = [
        lambda ch: ch.ack(7),
        lambda ch: ch.reject(7, requeue=True),
        lambda ch: ch.nack(7),
    ]
    for failing in unanswered:
        channel = await connection.channel()
        await failing(channel)
        assert channel.is_closed
        with pytest.raises(ChannelClosed) as caught:
            await channel.get("q")
        assert str(caught.value) == (
            "get from queue 'q': the channel was closed earlier: "
            "PRECONDITION_FAILED - unknown delivery tag 7 (406)"
        )
    channel = await connection.channel()
    await channel.publish(b"m", exchange="missing")
    with pytest.raises(ChannelClosed, match="closed earlier: NOT_FOUND - no exchange 'missing'"):
        await channel.queue_declare("q")
    await channel.close()
    with pytest.raises(ChannelClosed) as closed:
        await channel.queue_declare("q")
    assert str(closed.value) == (
        "declare queue 'q': the channel was closed earlier: "
        "NOT_FOUND - no exchange 'missing' in vhost '/' (404)"
    )
    by_client = await connection.channel()
    await by_client.close()
    with pytest.raises(ChannelClosed) as closed:
        await by_client.queue_declare("q")
    assert str(closed.value) == "declare queue 'q': the channel is closed"


async def test_deleting_what_is_missing_is_fine(channel: EmulatedChannel) -> None:
    assert await channel.queue_delete("missing") == 0
    await channel.exchange_delete("missing")
    assert not channel.is_closed


async def test_delete_guards(emulator: Emulator, connection: EmulatedConnection) -> None:
    setup = await connection.channel()
    await setup.queue_declare("q")
    await setup.publish(b"m", routing_key="q")
    channel = await connection.channel()
    await expect(
        channel,
        PreconditionFailed,
        "PRECONDITION_FAILED - queue 'q' in vhost '/' not empty",
        lambda: channel.queue_delete("q", if_empty=True),
    )
    await setup.consume("q", _ignore)
    channel = await connection.channel()
    await expect(
        channel,
        PreconditionFailed,
        "PRECONDITION_FAILED - queue 'q' in vhost '/' in use",
        lambda: channel.queue_delete("q", if_unused=True),
    )


async def _ignore(delivery: object) -> None:
    return None


async def test_purge_and_delete_count_ready_messages(
    emulator: Emulator, channel: EmulatedChannel
) -> None:
    await channel.exchange_declare("x", type="fanout")
    await channel.queue_declare("q")
    await channel.queue_bind("q", "x")
    for _ in range(3):
        await channel.publish(b"m", exchange="x")
    held = await channel.get("q")
    assert held is not None
    assert await channel.queue_purge("q") == 2
    await channel.publish(b"m", exchange="x")
    assert await channel.queue_delete("q") == 1
    assert "q" not in emulator.queue_names()
    assert emulator.bindings("x") == []
    await channel.ack(held.delivery_tag)  # acking a deleted queue's delivery is fine


async def test_unknown_exchange_type_closes_the_connection(
    emulator: Emulator, connection: EmulatedConnection
) -> None:
    channel = await connection.channel()
    with pytest.raises(BrokerUnreachable) as caught:
        await channel.exchange_declare("x", type="foo")
    assert str(caught.value) == (
        "declare exchange 'x': connection closed by the broker: "
        "COMMAND_INVALID - invalid exchange type 'foo' (503)"
    )
    assert connection.is_closed
    assert channel.is_closed
    with pytest.raises(BrokerUnreachable, match=r"^open a channel: connection closed by the"):
        await connection.channel()
    plain = Emulator(delayed_message_exchange=False)
    other = plain.connect()
    with pytest.raises(BrokerUnreachable, match="unknown exchange type 'x-delayed-message'"):
        await (await other.channel()).exchange_declare("d", type="x-delayed-message")
    assert other.is_closed


async def test_delayed_exchange_needs_its_type(channel: EmulatedChannel) -> None:
    with pytest.raises(PreconditionFailed, match="x-delayed-type"):
        await channel.exchange_declare("d", type="x-delayed-message")


async def test_names_the_client_library_would_not_encode(channel: EmulatedChannel) -> None:
    # aiormq/pamqp refuse these before sending: a DataError, and the channel stays open
    with pytest.raises(DataError) as caught:
        await channel.queue_declare("a*b")
    assert str(caught.value) == "declare queue 'a*b': cannot encode: Invalid value for queue"
    with pytest.raises(DataError, match="Max length exceeded for exchange"):
        await channel.exchange_declare("x" * 257)
    with pytest.raises(DataError, match=r"Routing key too long \(max 255 bytes\)"):
        await channel.publish(b"m", routing_key="k" * 256)
    assert not channel.is_closed
    await channel.queue_declare("aZ09-_.:@#,/+ ")
