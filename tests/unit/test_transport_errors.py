"""The driver-error table: reply codes and aiormq exceptions -> rr errors. No broker."""

from __future__ import annotations

import asyncio
import socket
import ssl

import aiormq
import pytest
from aiormq.abc import DeliveredMessage
from pamqp import commands as spec
from pamqp.header import ContentHeader

from rabbitctl_retry.errors import (
    AccessRefused,
    BrokerRefused,
    BrokerUnreachable,
    ChannelClosed,
    ExitCode,
    NotFound,
    PreconditionFailed,
    PublishFailed,
    PublishReturned,
    ResourceLocked,
    RrError,
    TransportError,
    UsageError,
)
from rabbitctl_retry.transport.aiormq_errors import closed_error, map_amqp_errors, to_rr_error
from rabbitctl_retry.transport.errors import REPLY_CODE_ERRORS, error_class_for

URL = "amqp://guest:s3cret-pw@broker.example:5672/%2F"


def test_reply_code_table_is_exactly_this() -> None:
    assert dict(REPLY_CODE_ERRORS) == {
        200: ChannelClosed,
        312: PublishFailed,
        313: PublishFailed,
        320: BrokerUnreachable,
        402: AccessRefused,
        403: AccessRefused,
        404: NotFound,
        405: ResourceLocked,
        406: PreconditionFailed,
        501: BrokerUnreachable,
        502: BrokerUnreachable,
        503: BrokerUnreachable,
        504: BrokerUnreachable,
        505: BrokerUnreachable,
        506: BrokerUnreachable,
        530: AccessRefused,
        540: BrokerRefused,
        541: BrokerRefused,
    }


def test_reply_code_table_is_frozen() -> None:
    with pytest.raises(TypeError):
        REPLY_CODE_ERRORS[404] = ChannelClosed  # type: ignore[index]


@pytest.mark.parametrize(
    ("code", "connection", "expected"),
    [
        (404, False, NotFound),
        (404, True, NotFound),
        (530, True, AccessRefused),
        (320, True, BrokerUnreachable),
        (311, False, ChannelClosed),  # content-too-large: not in the table
        (311, True, BrokerUnreachable),  # ... but on a connection, the connection is gone
        (None, False, ChannelClosed),
        (None, True, BrokerUnreachable),
        (999, False, ChannelClosed),
    ],
)
def test_error_class_for(code: int | None, connection: bool, expected: type[RrError]) -> None:
    assert error_class_for(code, connection=connection) is expected


@pytest.mark.parametrize(
    ("exc", "expected", "message"),
    [
        (
            aiormq.ChannelNotFoundEntity("NOT_FOUND - no queue 'orders' in vhost '/'"),
            NotFound,
            "declare queue 'orders': NOT_FOUND - no queue 'orders' in vhost '/' (404)",
        ),
        (
            aiormq.ChannelPreconditionFailed(
                "PRECONDITION_FAILED - inequivalent arg 'x-max-length' for queue 'q' in vhost "
                "'/': received '5' but current is '4'"
            ),
            PreconditionFailed,
            "declare queue 'orders': PRECONDITION_FAILED - inequivalent arg 'x-max-length' for "
            "queue 'q' in vhost '/': received '5' but current is '4' (406)",
        ),
        (
            aiormq.ChannelAccessRefused("ACCESS_REFUSED - queue name 'amq.x' contains reserved"),
            AccessRefused,
            "declare queue 'orders': ACCESS_REFUSED - queue name 'amq.x' contains reserved (403)",
        ),
        (
            aiormq.ChannelLockedResource("RESOURCE_LOCKED - cannot obtain exclusive access"),
            ResourceLocked,
            "declare queue 'orders': RESOURCE_LOCKED - cannot obtain exclusive access (405)",
        ),
        (
            aiormq.ChannelClosed(406, "PRECONDITION_FAILED - unknown delivery tag 9"),
            PreconditionFailed,
            "declare queue 'orders': PRECONDITION_FAILED - unknown delivery tag 9 (406)",
        ),
        (
            aiormq.ChannelClosed(311, "CONTENT_TOO_LARGE - message size 9 larger than max"),
            ChannelClosed,
            "declare queue 'orders': CONTENT_TOO_LARGE - message size 9 larger than max (311)",
        ),
        (
            aiormq.ChannelInvalidStateError("<Channel 1> closed"),
            ChannelClosed,
            "declare queue 'orders': the channel is closed",
        ),
        (
            aiormq.DuplicateConsumerTag(1),
            TransportError,
            "declare queue 'orders': that consumer tag is already in use",
        ),
        (
            aiormq.ConnectionClosed(320, "CONNECTION_FORCED - broker forced connection closure"),
            BrokerUnreachable,
            "declare queue 'orders': connection closed by the broker: CONNECTION_FORCED - broker "
            "forced connection closure (320)",
        ),
        (
            aiormq.ConnectionCommandInvalid("COMMAND_INVALID - unknown exchange type 'x'"),
            BrokerUnreachable,
            "declare queue 'orders': connection closed by the broker: COMMAND_INVALID - unknown "
            "exchange type 'x' (503)",
        ),
        (
            TimeoutError(),
            BrokerUnreachable,
            "declare queue 'orders': no answer from the broker in time",
        ),
        (
            aiormq.ConnectionClosed(
                541,
                "INTERNAL_ERROR - Cannot get a message from queue 'queue 'p' in vhost '/'': noproc",
            ),
            BrokerUnreachable,
            "declare queue 'orders': connection closed by the broker: INTERNAL_ERROR - Cannot get "
            "a message from queue 'queue 'p' in vhost '/'': noproc (541); a quorum queue has no "
            "leader just now (a node went away and its members are electing another, which "
            'takes seconds): try again (rr docs cli "Several hosts")',
        ),
        (  # RabbitMQ 4.3 denying a deprecated feature: it answered, and refused (exit 1)
            aiormq.ConnectionClosed(
                541, "INTERNAL_ERROR - Feature `queue_master_locator` is deprecated."
            ),
            BrokerRefused,
            "declare queue 'orders': connection closed by the broker: INTERNAL_ERROR - Feature "
            "`queue_master_locator` is deprecated. (541)",
        ),
    ],
)
def test_channel_operation_errors(
    exc: BaseException, expected: type[RrError], message: str
) -> None:
    error = to_rr_error(exc, what="declare queue 'orders'")
    assert type(error) is expected
    assert str(error) == message


def _chained(outer: BaseException, cause: BaseException) -> BaseException:
    outer.__cause__ = cause
    return outer


@pytest.mark.parametrize(
    ("exc", "expected", "message"),
    [
        (
            aiormq.ProbableAuthenticationError(
                "ACCESS_REFUSED - Login was refused using authentication mechanism PLAIN."
            ),
            AccessRefused,
            "amqp://guest:******@broker.example:5672/%2F refused the login (wrong user name or "
            "password?): ACCESS_REFUSED - Login was refused using authentication mechanism PLAIN.",
        ),
        (
            aiormq.ConnectionClosed(530, "NOT_ALLOWED - vhost orders not found"),
            AccessRefused,
            "amqp://guest:******@broker.example:5672/%2F refused the virtual host: NOT_ALLOWED - "
            "vhost orders not found",
        ),
        (
            aiormq.ConnectionNotAllowed("NOT_ALLOWED - access to vhost 'x' refused for user 'u'"),
            AccessRefused,
            "amqp://guest:******@broker.example:5672/%2F refused the virtual host: NOT_ALLOWED - "
            "access to vhost 'x' refused for user 'u'",
        ),
        (
            _chained(
                aiormq.AMQPConnectionError(111, "Connect call failed"),
                ConnectionRefusedError(111, "Connect call failed"),
            ),
            BrokerUnreachable,
            "cannot connect to amqp://guest:******@broker.example:5672/%2F: connection refused "
            "(is the broker running, is the port right?)",
        ),
        (
            _chained(
                aiormq.AMQPConnectionError(-2, "Name or service not known"),
                socket.gaierror(-2, "Name or service not known"),
            ),
            BrokerUnreachable,
            "cannot connect to amqp://guest:******@broker.example:5672/%2F: cannot resolve the "
            "host name: Name or service not known",
        ),
        (
            _chained(
                aiormq.AMQPConnectionError("Server connection unexpectedly closed"),
                asyncio.IncompleteReadError(b"", 1),
            ),
            BrokerUnreachable,
            "cannot connect to amqp://guest:******@broker.example:5672/%2F: the connection closed "
            "unexpectedly",
        ),
        (
            ConnectionResetError(104, "Connection reset by peer"),
            BrokerUnreachable,
            "cannot connect to amqp://guest:******@broker.example:5672/%2F: connection reset by "
            "the peer",
        ),
        (
            FileNotFoundError(2, "No such file or directory", "/etc/rr/ca.pem"),
            BrokerUnreachable,
            "cannot connect to amqp://guest:******@broker.example:5672/%2F: cannot read "
            "/etc/rr/ca.pem: No such file or directory",
        ),
        (
            aiormq.IncompatibleProtocolError("bad header"),
            BrokerUnreachable,
            "cannot connect to amqp://guest:******@broker.example:5672/%2F: bad header",
        ),
        (
            aiormq.AuthenticationError(["AMQPLAIN"], ["PLAIN", "EXTERNAL"]),
            AccessRefused,
            None,
        ),
    ],
)
def test_connect_errors(exc: BaseException, expected: type[RrError], message: str | None) -> None:
    error = to_rr_error(exc, url=URL)
    assert type(error) is expected
    if message is not None:
        assert str(error) == message
    assert "s3cret-pw" not in str(error)


def test_exit_codes_of_connect_errors() -> None:
    refused = to_rr_error(aiormq.ProbableAuthenticationError("ACCESS_REFUSED"), url=URL)
    unreachable = to_rr_error(ConnectionRefusedError(111, "refused"), url=URL)
    assert refused is not None
    assert unreachable is not None
    assert refused.exit_code == ExitCode.NO_PERMISSION == 77
    assert unreachable.exit_code == ExitCode.UNAVAILABLE == 69


def test_tls_errors_name_the_tls_problem() -> None:
    verify = ssl.SSLCertVerificationError(1, "certificate verify failed")
    verify.verify_message = "unable to get local issuer certificate"
    error = to_rr_error(_chained(aiormq.AMQPConnectionError(1, "x"), verify), url=URL)
    assert isinstance(error, BrokerUnreachable)
    assert str(error).endswith(
        "TLS certificate verification failed: unable to get local issuer certificate"
    )

    alert = ssl.SSLError(1, "[SSL: TLSV13_ALERT_CERTIFICATE_REQUIRED] alert")
    alert.reason = "TLSV13_ALERT_CERTIFICATE_REQUIRED"
    error = to_rr_error(alert, url=URL)
    assert isinstance(error, BrokerUnreachable)
    assert str(error).endswith("TLS handshake failed: TLSV13_ALERT_CERTIFICATE_REQUIRED")


def test_plain_close_over_tls_hints_at_the_client_certificate() -> None:
    closed = _chained(aiormq.AMQPConnectionError("x"), asyncio.IncompleteReadError(b"", 7))
    tls = to_rr_error(closed, url="amqps://u:p@host:5671/")
    plain = to_rr_error(closed, url="amqp://u:p@host:5672/")
    assert tls is not None
    assert plain is not None
    assert "refuses the client certificate" in str(tls)
    assert "refuses the client certificate" not in str(plain)


def _returned(exchange: str, routing_key: str) -> aiormq.PublishError:
    frame = spec.Basic.Return(
        reply_code=312, reply_text="NO_ROUTE", exchange=exchange, routing_key=routing_key
    )
    message = DeliveredMessage(delivery=frame, header=ContentHeader(), body=b"", channel=None)  # type: ignore[arg-type]
    return aiormq.PublishError(message, frame)


def test_returned_publish_is_publish_failed_naming_the_route() -> None:
    error = to_rr_error(_returned("", "refunds"))
    assert type(error) is PublishReturned  # a PublishFailed: told from a nack
    assert isinstance(error, PublishFailed)
    assert str(error) == (
        "publish to the default exchange with routing key 'refunds': the broker returned the "
        "message (312 NO_ROUTE: no queue is bound for it)"
    )
    error = to_rr_error(_returned("events", "a.b"), what="copy to 'refunds.retry'")
    assert str(error) == (
        "copy to 'refunds.retry': the broker returned the message (312 NO_ROUTE: no queue is "
        "bound for it)"
    )


def test_nacked_publish_is_publish_failed() -> None:
    error = to_rr_error(
        aiormq.DeliveryError(None, spec.Basic.Nack(delivery_tag=3)),
        what="publish to the default exchange with routing key 'q'",
    )
    assert type(error) is PublishFailed
    assert str(error) == (
        "publish to the default exchange with routing key 'q': the broker refused the message "
        "(basic.nack)"
    )


@pytest.mark.parametrize(
    "exc", [ValueError("x"), KeyError("x"), asyncio.CancelledError(), RuntimeError("x")]
)
def test_non_driver_exceptions_are_not_mapped(exc: BaseException) -> None:
    assert to_rr_error(exc) is None


def test_rr_errors_pass_through_unchanged() -> None:
    original = UsageError("bad")
    assert to_rr_error(original) is original


def test_map_amqp_errors_raises_from_the_driver_error() -> None:
    driver = aiormq.ChannelNotFoundEntity("NOT_FOUND - no exchange 'ex' in vhost '/'")
    with pytest.raises(NotFound) as caught, map_amqp_errors(what="bind", url=URL):
        raise driver
    assert caught.value.__cause__ is driver
    assert str(caught.value) == "bind: NOT_FOUND - no exchange 'ex' in vhost '/' (404)"


def test_map_amqp_errors_lets_other_exceptions_through() -> None:
    with pytest.raises(KeyError), map_amqp_errors(what="x"):
        raise KeyError("not a driver error")
    original = NotFound("already mapped")
    with pytest.raises(NotFound) as caught, map_amqp_errors():
        raise original
    assert caught.value is original
    assert caught.value.__cause__ is None


@pytest.mark.parametrize(
    ("cause", "expected", "message"),
    [
        (None, ChannelClosed, "ack delivery 1: the channel is closed"),
        (aiormq.ChannelClosed(None, None), ChannelClosed, "ack delivery 1: the channel is closed"),
        (
            aiormq.ChannelClosed(200, "closed by the client"),
            ChannelClosed,
            "ack delivery 1: the channel is closed",
        ),
        (
            aiormq.ChannelNotFoundEntity("NOT_FOUND - no queue 'q' in vhost '/'"),
            ChannelClosed,
            "ack delivery 1: the channel was closed earlier: NOT_FOUND - no queue 'q' in vhost "
            "'/' (404)",
        ),
        (
            aiormq.ConnectionClosed(320, "CONNECTION_FORCED - shutdown"),
            BrokerUnreachable,
            "ack delivery 1: connection closed by the broker: CONNECTION_FORCED - shutdown (320)",
        ),
        (
            aiormq.AMQPConnectionError("Server connection reset"),
            BrokerUnreachable,
            "ack delivery 1: the connection to the broker failed: Server connection reset",
        ),
    ],
)
def test_closed_error(cause: BaseException | None, expected: type[RrError], message: str) -> None:
    error = closed_error("ack delivery 1", cause)
    assert type(error) is expected
    assert str(error) == message


def test_closed_error_names_the_connection() -> None:
    error = closed_error("open a channel", None, resource="connection")
    assert str(error) == "open a channel: the connection is closed"


def test_a_reply_keeps_its_code_whatever_digits_its_text_holds() -> None:
    """A vhost named rr-test-4069 made a 406's text lose its "(406)" (seen in CI)."""
    from rabbitctl_retry.transport.reply_codes import describe_reply

    text = "PRECONDITION_FAILED - inequivalent arg 'x' for queue 'q' in vhost 'rr-test-4069'"
    assert describe_reply(406, text) == text + " (406)"
    assert describe_reply(406, text + " (406)") == text + " (406)"
    assert describe_reply(404, "") == "reply code 404"
    assert describe_reply(None, "gone") == "gone"
