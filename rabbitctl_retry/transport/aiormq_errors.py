"""aiormq's exceptions become rr errors here, and only here (the ``aiormq`` extra).

The adapter in ``transport/amqp.py`` wraps every driver call with :func:`map_amqp_errors`
(cold paths) or calls :func:`to_rr_error` in an ``except`` clause (hot paths, where a context
manager would cost time on every message). The words are ``transport/errors.py``'s, the same
as rr's own client's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from types import MappingProxyType

from aiormq import exceptions as amqp_exc
from aiormq.channel import EXCEPTION_MAPPING as _AIORMQ_CHANNEL_CODES
from aiormq.connection import EXCEPTION_MAPPING as _AIORMQ_CONNECTION_CODES

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
from rabbitctl_retry.transport.errors import (
    connection_close_error,
    join,
    network_error,
    returned_error,
    words_of,
)
from rabbitctl_retry.transport.reply_codes import describe_reply, error_class_for

__all__ = ["closed_error", "map_amqp_errors", "to_rr_error"]

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
                join(what or "publish", "the broker refused the message (basic.nack)")
            )
        case amqp_exc.DuplicateConsumerTag():
            return TransportError(join(what, "that consumer tag is already in use"))
        case amqp_exc.ChannelInvalidStateError():
            return ChannelClosed(join(what, "the channel is closed"))
        case amqp_exc.AMQPChannelError():
            code, text = _reply(exc)
            return error_class_for(code)(join(what, describe_reply(code, text)))
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
            return BrokerUnreachable(join(what, f"no answer from {where} in time"))
        case amqp_exc.AMQPConnectionError() | OSError():
            return network_error(exc, what=what, url=url)
        case amqp_exc.ProtocolSyntaxError():
            return BrokerUnreachable(
                join(what, f"{where} does not speak AMQP 0-9-1 as expected: {words_of(exc)}")
            )
        case amqp_exc.MethodNotImplemented():
            return TransportError(join(what, "the broker does not implement this method"))
        case amqp_exc.AMQPError():
            return TransportError(join(what, words_of(exc) or type(exc).__name__))
        case _:
            return None


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
        return ChannelClosed(join(what, f"the {resource} is closed"))
    if isinstance(reason, BrokerUnreachable | BrokerRefused):  # the connection is gone
        return BrokerUnreachable(join(what, reason.message))
    return ChannelClosed(join(what, f"the {resource} was closed earlier: {reason.message}"))


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


def _reply(exc: BaseException) -> tuple[int | None, str]:
    """(reply code, reply text) of an aiormq close exception."""
    code = _CODE_OF_AIORMQ_CLASS.get(type(exc))
    if code is not None:
        return code, str(exc.args[0]) if exc.args else ""
    # aiormq's generic ChannelClosed / ConnectionClosed carry (reply_code, reply_text).
    if len(exc.args) >= 2 and (exc.args[0] is None or isinstance(exc.args[0], int)):
        return exc.args[0], str(exc.args[1] or "")
    return None, words_of(exc)
