"""Driver errors become rr errors here, and only here.

Rule: no other module looks at an aiormq exception or an AMQP reply code. The adapter in
``transport/amqp.py`` wraps every driver call with :func:`map_amqp_errors` (cold paths) or
calls :func:`to_rr_error` in an ``except`` clause (hot paths, where a context manager would
cost time on every message). Callers see only :mod:`rabbitctl_retry.errors` classes.

Reply codes (AMQP 0-9-1 §1.9 and RabbitMQ's use of them) map through
:data:`REPLY_CODE_ERRORS`; a code not in the table is :class:`ChannelClosed` when it closed a
channel and :class:`BrokerUnreachable` when it closed the connection (the connection is gone).

Messages keep the broker's reply text verbatim, because RabbitMQ names the queue or exchange
in it (``NOT_FOUND - no queue 'orders' in vhost '/'``); what such a text holds that a terminal
would act on (ESC, line breaks, bidi controls: a vhost name can hold any) is escaped where it
is printed, once: ``cli/_common.fail`` for the ``rr: error:`` line, the formatters of
``cli/logs.py`` for log lines. A URL in a message always goes through
:func:`~rabbitctl_retry.errors.censor_url`: no password ever reaches a message.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from types import MappingProxyType

from aiormq import exceptions as amqp_exc
from aiormq.channel import EXCEPTION_MAPPING as _AIORMQ_CHANNEL_CODES
from aiormq.connection import EXCEPTION_MAPPING as _AIORMQ_CONNECTION_CODES
from pamqp import commands as spec

from rabbitctl_retry.errors import (
    AccessRefused,
    BrokerRefused,
    BrokerUnreachable,
    ChannelClosed,
    PublishFailed,
    RrError,
    TransportError,
    censor_url,
)
from rabbitctl_retry.transport.reply_codes import (
    REPLY_CODE_ERRORS,
    describe_reply,
    error_class_for,
)

__all__ = [
    "REPLY_CODE_ERRORS",
    "closed_error",
    "connection_close_error",
    "error_class_for",
    "map_amqp_errors",
    "network_error",
    "returned_error",
    "to_rr_error",
]

# aiormq raises one class per well-known code and drops the code itself; read it back.
_CODE_OF_AIORMQ_CLASS: Mapping[type[BaseException], int] = MappingProxyType(
    {cls: code for code, cls in _AIORMQ_CHANNEL_CODES.items()}
    | {cls: code for code, cls in _AIORMQ_CONNECTION_CODES.items()}
)


def to_rr_error(
    exc: BaseException, *, what: str | None = None, url: str | None = None
) -> RrError | None:
    """The rr error for a driver exception, or None when ``exc`` is not a driver error.

    ``what`` names the operation (``"declare queue 'orders'"``) and prefixes the message;
    ``url`` (censored here) names the broker in connection errors. An :class:`RrError` comes
    back unchanged. Cancellation is never an error: ``CancelledError`` gives None.
    """
    if isinstance(exc, RrError):
        return exc
    if isinstance(exc, asyncio.CancelledError):
        return None
    where = censor_url(url) if url else "the broker"
    match exc:
        case amqp_exc.PublishError():
            return returned_error(exc.frame, what)
        case amqp_exc.DeliveryError():
            return PublishFailed(
                _join(what or "publish", "the broker refused the message (basic.nack)")
            )
        case amqp_exc.DuplicateConsumerTag():
            return TransportError(_join(what, "that consumer tag is already in use"))
        case amqp_exc.ChannelInvalidStateError():
            return ChannelClosed(_join(what, "the channel is closed"))
        case amqp_exc.AMQPChannelError():
            code, text = _reply(exc)
            return error_class_for(code)(_join(what, describe_reply(code, text)))
        case amqp_exc.ProbableAuthenticationError():
            _, text = _reply(exc)
            return AccessRefused(
                f"{where} refused the login (wrong user name or password?): {text}"
            )
        case amqp_exc.AuthenticationError():
            return AccessRefused(f"{where} offers no authentication mechanism rr can use: {exc}")
        case amqp_exc.ConnectionClosed():
            code, text = _reply(exc)
            return connection_close_error(code, text, what=what, where=where)
        case TimeoutError():  # before OSError: TimeoutError is one
            return BrokerUnreachable(_join(what, f"no answer from {where} in time"))
        case amqp_exc.AMQPConnectionError() | OSError():
            return network_error(exc, what=what, url=url)
        case amqp_exc.ProtocolSyntaxError():
            return BrokerUnreachable(
                _join(what, f"{where} does not speak AMQP 0-9-1 as expected: {_args(exc)}")
            )
        case amqp_exc.MethodNotImplemented():
            return TransportError(_join(what, "the broker does not implement this method"))
        case amqp_exc.AMQPError():
            return TransportError(_join(what, _args(exc) or type(exc).__name__))
        case _:
            return None


def connection_close_error(
    code: int | None, text: str, *, what: str | None = None, where: str = "the broker"
) -> RrError:
    """The error for a connection.close the broker sent (``where``: the broker's censored
    URL, or "the broker")."""
    cls = error_class_for(code, connection=True)
    if code == 530:
        detail = f"{where} refused the virtual host: {text}"
    else:
        detail = f"connection closed by {where}: {describe_reply(code, text)}"
    if code == 541 and "noproc" in text:  # a quorum queue electing: it will be back
        return BrokerUnreachable(_join(what, f"{detail}; {_NO_LEADER}"))
    return cls(_join(what, detail))


def network_error(
    exc: BaseException, *, what: str | None = None, url: str | None = None
) -> BrokerUnreachable:
    """The error for a connection the network failed (refused, reset, TLS, DNS, EOF)."""
    where = censor_url(url) if url else "the broker"
    failed = f"cannot connect to {where}" if url else "the connection to the broker failed"
    reason = _network_reason(exc)
    if reason == _UNEXPECTED_CLOSE and where.startswith("amqps:"):
        # With TLS 1.3 the client's handshake is done before the server checks the
        # client certificate; a refusal then reads as a plain close.
        reason += " (a TLS broker closes like this when it refuses the client certificate)"
    return BrokerUnreachable(_join(what, f"{failed}: {reason}"))


def closed_error(
    what: str | None, cause: BaseException | None, *, resource: str = "channel"
) -> TransportError:
    """The error for ``what`` on a channel (or connection) that ``cause`` closed earlier.

    Closed by the client: :class:`ChannelClosed`. Closed because the connection dropped or
    was closed by the broker: :class:`BrokerUnreachable`. Otherwise :class:`ChannelClosed`
    with the broker's reason (``NOT_FOUND - ...``).
    """
    reason = None if cause is None else to_rr_error(cause)
    if cause is None or reason is None or _closed_by_client(cause):
        return ChannelClosed(_join(what, f"the {resource} is closed"))
    if isinstance(reason, BrokerUnreachable | BrokerRefused):  # the connection is gone
        return BrokerUnreachable(_join(what, reason.message))
    return ChannelClosed(_join(what, f"the {resource} was closed earlier: {reason.message}"))


@contextmanager
def map_amqp_errors(*, what: str | None = None, url: str | None = None) -> Iterator[None]:
    """Re-raise driver exceptions in the block as rr errors (``from`` the original)."""
    try:
        yield
    except Exception as exc:
        error = to_rr_error(exc, what=what, url=url)
        if error is None or error is exc:
            raise
        raise error from exc


def _closed_by_client(cause: BaseException) -> bool:
    # aiormq closes with ChannelClosed(None, None) once the broker answered our close, and
    # the adapter passes code 200 (reply-success) when it closes on purpose.
    exact = type(cause) in (amqp_exc.ChannelClosed, amqp_exc.ConnectionClosed)
    return exact and _reply(cause)[0] in (None, 200)


def returned_error(frame: object, what: str | None) -> PublishFailed:
    """The error of a ``mandatory`` publish the broker returned (``frame``: its basic.return)."""
    if not isinstance(frame, spec.Basic.Return):  # pragma: no cover - aiormq always sets it
        return PublishFailed(_join(what or "publish", "the broker returned the message"))
    target = what or _publish_target(frame.exchange, frame.routing_key or "")
    why = "no queue is bound for it" if frame.reply_code == 312 else "it could not be delivered"
    return PublishFailed(
        f"{target}: the broker returned the message ({frame.reply_code} {frame.reply_text}: {why})"
    )


def _publish_target(exchange: str, routing_key: str) -> str:
    where = f"exchange {exchange!r}" if exchange else "the default exchange"
    return f"publish to {where} with routing key {routing_key!r}"


def _reply(exc: BaseException) -> tuple[int | None, str]:
    """(reply code, reply text) of an aiormq close exception."""
    code = _CODE_OF_AIORMQ_CLASS.get(type(exc))
    if code is not None:
        return code, str(exc.args[0]) if exc.args else ""
    # aiormq's generic ChannelClosed / ConnectionClosed carry (reply_code, reply_text).
    if len(exc.args) >= 2 and (exc.args[0] is None or isinstance(exc.args[0], int)):
        return exc.args[0], str(exc.args[1] or "")
    return None, _args(exc)


_NO_LEADER = (
    "a quorum queue has no leader just now (a node went away and its members are electing "
    'another, which takes seconds): try again (docs/cli.md, "Several hosts")'
)
"""Measured on RabbitMQ 3.10 (tests/cluster): while a quorum queue elects a leader, a
``basic.get`` on it closes the connection with 541 INTERNAL_ERROR ``... noproc``."""


def _network_reason(exc: BaseException) -> str:
    """The most specific cause in the chain: TLS failure, DNS, refused, reset, EOF."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        match current:
            case ssl.SSLCertVerificationError():
                return f"TLS certificate verification failed: {current.verify_message}"
            case ssl.SSLError():
                return f"TLS handshake failed: {current.reason or current}"
            case socket.gaierror():
                return f"cannot resolve the host name: {current.strerror}"
            case ConnectionRefusedError():
                return "connection refused (is the broker running, is the port right?)"
            case ConnectionResetError():
                return "connection reset by the peer"
            case FileNotFoundError() | PermissionError():
                name = current.filename or "a file named in the URL (cafile, certfile, keyfile)"
                return f"cannot read {name}: {current.strerror}"
            case asyncio.IncompleteReadError():
                return _UNEXPECTED_CLOSE
        current = current.__cause__ or current.__context__
    return _args(exc) or type(exc).__name__


_UNEXPECTED_CLOSE = "the connection closed unexpectedly"


def _args(exc: BaseException) -> str:
    return " ".join(str(arg) for arg in exc.args if arg is not None)


def _join(what: str | None, detail: str) -> str:
    return f"{what}: {detail}" if what else detail
