"""Pure. AMQP reply codes -> rr's error classes (docs/reference/exit-codes.md, "Exit codes").

The one table both transports raise from: rr's own client and the aiormq adapter
(``transport/errors.py``, ``transport/aiormq_errors.py``) for what the broker said, and the
emulator for what it says itself. No driver import here, so the emulator and ``TestBroker``
work without aiormq installed.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from rabbitctl_retry.errors import (
    AccessRefused,
    BrokerRefused,
    BrokerUnreachable,
    ChannelClosed,
    NotFound,
    PreconditionFailed,
    PublishFailed,
    ResourceLocked,
    TransportError,
)

REPLY_CODE_ERRORS: Mapping[int, type[TransportError]] = MappingProxyType(
    {
        200: ChannelClosed,  # reply-success: closed on purpose while an operation waited
        312: PublishFailed,  # no-route: a mandatory message was returned
        313: PublishFailed,  # no-consumers: an immediate message was returned
        320: BrokerUnreachable,  # connection-forced: broker shutdown or an operator's close
        402: AccessRefused,  # invalid-path: unknown virtual host
        403: AccessRefused,  # access-refused: login, or no permission on a resource
        404: NotFound,  # not-found: queue or exchange does not exist
        405: ResourceLocked,  # resource-locked: exclusive queue of another connection
        406: PreconditionFailed,  # precondition-failed: inequivalent re-declare, unknown tag
        501: BrokerUnreachable,  # frame-error          (these close the connection)
        502: BrokerUnreachable,  # syntax-error
        503: BrokerUnreachable,  # command-invalid
        504: BrokerUnreachable,  # channel-error
        505: BrokerUnreachable,  # unexpected-frame
        506: BrokerUnreachable,  # resource-error
        530: AccessRefused,  # not-allowed: RabbitMQ's answer to a missing or forbidden vhost
        540: BrokerRefused,  # not-implemented: e.g. queue.delete if-unused on a quorum queue
        541: BrokerRefused,  # internal-error: e.g. a deprecated feature RabbitMQ 4.3 denies
    }
)
"""AMQP reply code -> rr error class. Frozen: the emulator raises from the same table."""


def error_class_for(reply_code: int | None, *, connection: bool = False) -> type[TransportError]:
    """The rr class for ``reply_code``; unknown codes by what they closed (see module doc)."""
    default: type[TransportError] = BrokerUnreachable if connection else ChannelClosed
    if reply_code is None:
        return default
    return REPLY_CODE_ERRORS.get(reply_code, default)


def describe_reply(code: int | None, text: str) -> str:
    """A broker's reply as rr words it: RabbitMQ's text, then the code in parentheses
    (``NOT_FOUND - no queue 'q' in vhost '/' (404)``), unless already there. A text may hold
    the digits elsewhere: a vhost named ``rr-test-4069`` must not cost its reply the code."""
    if not text:
        return f"reply code {code}"
    if code is None or text.endswith(f"({code})"):
        return text
    return f"{text} ({code})"
