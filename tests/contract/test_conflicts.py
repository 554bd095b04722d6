"""Channel errors: the class, the server's text, and the channel closed afterwards."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from rabbitctl_retry.errors import RrError
from rabbitctl_retry.transport.base import Channel
from tests.backends import Backend
from tests.contract.versions import expected as expected_on

Operation = Callable[[Channel], Awaitable[object]]


@dataclass(frozen=True)
class Case:
    name: str
    setup: Operation | None
    failing: Operation
    error: str
    """``ClassName: message``; ``{vhost}`` stands for the backend's vhost, ``{versioned}`` for
    the case's text in versions.py's ``x-queue-type-redeclare`` (it differs on 4.0)."""


async def _declare_ttl_queue(channel: Channel) -> None:
    await channel.queue_declare("ttl", arguments={"x-message-ttl": 1000})


async def _declare_plain_queue(channel: Channel) -> None:
    await channel.queue_declare("plain")


async def _declare_capped_queue(channel: Channel) -> None:
    await channel.queue_declare("capped", arguments={"x-max-length": 5})


async def _declare_quorum_queue(channel: Channel) -> None:
    await channel.queue_declare("qq", arguments={"x-queue-type": "quorum"})


async def _declare_direct_exchange(channel: Channel) -> None:
    await channel.exchange_declare("x", type="direct")


CASES = [
    Case(
        "another TTL",
        _declare_ttl_queue,
        lambda c: c.queue_declare("ttl", arguments={"x-message-ttl": 2000}),
        "PreconditionFailed: declare queue 'ttl': PRECONDITION_FAILED - inequivalent arg "
        "'x-message-ttl' for queue 'ttl' in vhost '{vhost}': received '2000' but current is "
        "'1000' (406)",
    ),
    Case(
        "not durable",
        _declare_plain_queue,
        lambda c: c.queue_declare("plain", durable=False),
        "PreconditionFailed: declare queue 'plain': PRECONDITION_FAILED - inequivalent arg "
        "'durable' for queue 'plain' in vhost '{vhost}': received 'false' but current is "
        "'true' (406)",
    ),
    Case(
        "quorum over classic",
        _declare_plain_queue,
        lambda c: c.queue_declare("plain", arguments={"x-queue-type": "quorum"}),
        "PreconditionFailed: declare queue 'plain': PRECONDITION_FAILED - inequivalent arg "
        "'x-queue-type' for queue 'plain' in vhost '{vhost}': {versioned} (406)",
    ),
    Case(
        "classic over quorum",
        _declare_quorum_queue,
        lambda c: c.queue_declare("qq"),
        "PreconditionFailed: declare queue 'qq': PRECONDITION_FAILED - inequivalent arg "
        "'x-queue-type' for queue 'qq' in vhost '{vhost}': {versioned} (406)",
    ),
    Case(
        "an argument left out",
        _declare_capped_queue,
        lambda c: c.queue_declare("capped"),
        "PreconditionFailed: declare queue 'capped': PRECONDITION_FAILED - inequivalent arg "
        "'x-max-length' for queue 'capped' in vhost '{vhost}': received none but current is "
        "the value '5' of type 'byte' (406)",
    ),
    Case(
        "another exchange type",
        _declare_direct_exchange,
        lambda c: c.exchange_declare("x", type="topic"),
        "PreconditionFailed: declare exchange 'x': PRECONDITION_FAILED - inequivalent arg "
        "'type' for exchange 'x' in vhost '{vhost}': received 'topic' but current is "
        "'direct' (406)",
    ),
    Case(
        "passive declare of a missing queue",
        None,
        lambda c: c.queue_declare("missing", passive=True),
        "NotFound: declare queue 'missing': NOT_FOUND - no queue 'missing' in vhost "
        "'{vhost}' (404)",
    ),
    Case(
        "passive declare of a missing exchange",
        None,
        lambda c: c.exchange_declare("missing", passive=True),
        "NotFound: declare exchange 'missing': NOT_FOUND - no exchange 'missing' in vhost "
        "'{vhost}' (404)",
    ),
    Case(
        "bind a missing queue",
        _declare_direct_exchange,
        lambda c: c.queue_bind("missing", "x", "k"),
        "NotFound: bind queue 'missing' to exchange 'x' ('k'): NOT_FOUND - no queue "
        "'missing' in vhost '{vhost}' (404)",
    ),
    Case(
        "publish to a missing exchange",
        None,
        lambda c: c.publish(b"m", exchange="missing", routing_key="k"),
        "NotFound: publish to exchange 'missing' with routing key 'k': NOT_FOUND - no "
        "exchange 'missing' in vhost '{vhost}' (404)",
    ),
    Case(
        "get from a missing queue",
        None,
        lambda c: c.get("missing"),
        "NotFound: get from queue 'missing': NOT_FOUND - no queue 'missing' in vhost "
        "'{vhost}' (404)",
    ),
]


def described(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"


async def test_channel_errors(backend: Backend) -> None:
    """Each case on a channel of its own: the error, then the channel is closed, and its
    next operation says why; the connection and other channels carry on."""
    connection = await backend.connect()
    observed: list[tuple[str, str, bool, str]] = []
    expected: list[tuple[str, str, bool, str]] = []
    for case in CASES:
        setup = await connection.channel(confirms=True)
        if case.setup is not None:
            await case.setup(setup)
        channel = await connection.channel(confirms=True)
        try:
            await case.failing(channel)
        except RrError as error:
            raised = described(error)
        else:
            raised = "nothing raised"
        try:
            await channel.queue_declare("plain")
        except RrError as error:
            after = described(error)
        else:
            after = "nothing raised"
        observed.append((case.name, raised, channel.is_closed, after))
        versioned = expected_on(backend.version, "x-queue-type-redeclare").get(case.name)
        text = case.error.format(vhost=backend.vhost, versioned=versioned)
        reason = text.split(": ", 2)[2]
        expected.append(
            (
                case.name,
                text,
                True,
                f"ChannelClosed: declare queue 'plain': the channel was closed earlier: {reason}",
            )
        )
        assert not setup.is_closed
        await setup.close()
    assert observed == expected
    assert not connection.is_closed


CLIENT_REFUSALS: list[tuple[str, Operation, str]] = [
    (
        "a '*' in a queue name",
        lambda c: c.queue_declare("a*b"),
        "DataError: declare queue 'a*b': cannot encode: Invalid value for queue",
    ),
    (
        "a queue name of 257 characters",
        lambda c: c.queue_declare("q" * 257),
        f"DataError: declare queue '{'q' * 257}': cannot encode: Max length exceeded for queue",
    ),
    (
        "a '!' in an exchange name",
        lambda c: c.exchange_declare("x!"),
        "DataError: declare exchange 'x!': cannot encode: Invalid value for exchange",
    ),
    (
        "bind with a '?' in the queue name",
        lambda c: c.queue_bind("q?", "amq.direct", "k"),
        "DataError: bind queue 'q?' to exchange 'amq.direct' ('k'): cannot encode: Invalid "
        "value for queue",
    ),
    (
        "get from a queue name with a space and a '%'",
        lambda c: c.get("a %"),
        "DataError: get from queue 'a %': cannot encode: Invalid value for queue",
    ),
    (
        "consume from a queue name with a '*'",
        lambda c: c.consume("q*", _ignore),
        "DataError: consume from queue 'q*': cannot encode: Invalid value for queue",
    ),
    (
        "purge a queue name with a '$'",
        lambda c: c.queue_purge("q$"),
        "DataError: purge queue 'q$': cannot encode: Invalid value for queue",
    ),
    (
        "delete a queue name with a '*'",
        lambda c: c.queue_delete("q*"),
        "DataError: delete queue 'q*': cannot encode: Invalid value for queue",
    ),
    (
        "delete an exchange name with a '*'",
        lambda c: c.exchange_delete("x*"),
        "DataError: delete exchange 'x*': cannot encode: Invalid value for exchange",
    ),
    (
        "publish to an exchange name with a '*'",
        lambda c: c.publish(b"m", exchange="x*", routing_key="k"),
        "DataError: publish to exchange 'x*' with routing key 'k': cannot encode: Invalid "
        "value for exchange",
    ),
    (
        "publish with a routing key of 256 characters",
        lambda c: c.publish(b"m", routing_key="k" * 256),
        f"DataError: publish to the default exchange with routing key '{'k' * 256}': cannot "
        "encode: Routing key too long (max 255 bytes)",
    ),
]


async def _ignore(delivery: object) -> None:
    """A consumer callback that is never called."""


async def test_names_the_client_refuses_to_send(backend: Backend) -> None:
    """The client library checks names before anything goes on the wire: a DataError, and
    the channel stays open (the broker never heard of it)."""
    channel = await backend.channel()
    observed = []
    for name, operation, _ in CLIENT_REFUSALS:
        try:
            await operation(channel)
        except RrError as error:
            observed.append((name, described(error), channel.is_closed))
        else:
            observed.append((name, "nothing raised", channel.is_closed))
    assert observed == [(name, error, False) for name, _, error in CLIENT_REFUSALS]
    # names of every allowed character go through
    allowed = "aZ09-_.:@#,/+ "
    await channel.queue_declare(allowed)
    await channel.publish(b"m", routing_key=allowed)
    assert (await channel.queue_declare(allowed, passive=True)).message_count == 1
