"""The words of every transport error, shared by both AMQP clients; driver errors become rr
errors through them.

Rule: no module outside ``transport/`` looks at an aiormq exception or an AMQP reply code.
rr's own client (``transport/native.py``) words what the broker and the network did here;
aiormq's exceptions become the same errors in ``transport/aiormq_errors.py`` (which needs the
``aiormq`` extra): the adapter in ``transport/amqp.py`` wraps every driver call with its
``map_amqp_errors`` (cold paths) or calls its ``to_rr_error`` in an ``except`` clause (hot
paths, where a context manager would cost time on every message). Callers see only
:mod:`rabbitctl_retry.errors` classes.

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

from pamqp import commands as spec

from rabbitctl_retry.errors import (
    BrokerUnreachable,
    PublishReturned,
    RrError,
    censor_url,
)
from rabbitctl_retry.transport.reply_codes import (
    REPLY_CODE_ERRORS,
    describe_reply,
    error_class_for,
)

__all__ = [
    "REPLY_CODE_ERRORS",
    "connection_close_error",
    "error_class_for",
    "join",
    "network_error",
    "returned_error",
    "words_of",
]


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
        return BrokerUnreachable(join(what, f"{detail}; {_NO_LEADER}"))
    return cls(join(what, detail))


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
    return BrokerUnreachable(join(what, f"{failed}: {reason}"))


def returned_error(frame: object, what: str | None) -> PublishReturned:
    """The error of a ``mandatory`` publish the broker returned (``frame``: its basic.return)."""
    if not isinstance(frame, spec.Basic.Return):  # pragma: no cover - aiormq always sets it
        return PublishReturned(join(what or "publish", "the broker returned the message"))
    target = what or _publish_target(frame.exchange, frame.routing_key or "")
    why = "no queue is bound for it" if frame.reply_code == 312 else "it could not be delivered"
    return PublishReturned(
        f"{target}: the broker returned the message ({frame.reply_code} {frame.reply_text}: {why})"
    )


def _publish_target(exchange: str, routing_key: str) -> str:
    where = f"exchange {exchange!r}" if exchange else "the default exchange"
    return f"publish to {where} with routing key {routing_key!r}"


_NO_LEADER = (
    "a quorum queue has no leader just now (a node went away and its members are electing "
    'another, which takes seconds): try again (rr docs cli "Several hosts")'
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
    return words_of(exc) or type(exc).__name__


_UNEXPECTED_CLOSE = "the connection closed unexpectedly"


def words_of(exc: BaseException) -> str:
    """An exception's arguments, as words."""
    return " ".join(str(arg) for arg in exc.args if arg is not None)


def join(what: str | None, detail: str) -> str:
    """``detail``, after the operation ``what`` when there is one."""
    return f"{what}: {detail}" if what else detail
