"""What both AMQP adapters say the same way: the server's identity from its properties (and
a connection's part that tells it, :class:`Reached`), the words of a dead heartbeat and of
unverified TLS, and the last password guard on an error."""

from __future__ import annotations

from collections.abc import Mapping

from rabbitctl_retry.errors import RrError, censor_url, censor_urls
from rabbitctl_retry.server import ServerIdentity, ServerVersion

TLS_NOT_VERIFIED = "TLS certificate verification is off (no_verify_ssl=1)"
"""The warning each connection made with ``no_verify_ssl=1`` logs."""

HEARTBEAT_LOST = (
    "no frame from the broker for about three heartbeat timeouts ({seconds} s each): the "
    "connection is taken for dead (a half-open connection, or a frozen network or broker)"
)


def property_text(properties: Mapping[str, object], key: str) -> str | None:
    """A server property as text (a long string comes as ``str`` or ``bytes``), or None when
    the server sent none or something else."""
    value = properties.get(key)
    if isinstance(value, bytes | bytearray):
        value = value.decode("utf-8", "replace")
    return value if isinstance(value, str) and value else None


def identity_of_properties(properties: Mapping[str, object]) -> ServerIdentity:
    """The server's version, product and cluster name, from connection.start's properties."""
    return ServerIdentity(
        version=ServerVersion.parse(property_text(properties, "version") or ""),
        product=property_text(properties, "product"),
        cluster_name=property_text(properties, "cluster_name"),
    )


class Reached:
    """What a connection of either adapter knows once its handshake is done: where it went,
    and which server answered (the port's ``url``, ``server_version`` and
    ``server_identity``)."""

    __slots__ = ("_identity", "_url")

    def __init__(self, url: str, server_properties: Mapping[str, object]) -> None:
        self._url = censor_url(url)
        self._identity = identity_of_properties(server_properties)

    @property
    def url(self) -> str:
        """The broker URL, password censored."""
        return self._url

    @property
    def server_version(self) -> ServerVersion:
        return self._identity.version

    @property
    def server_identity(self) -> ServerIdentity:
        """The server's version, product and cluster name, from its server properties."""
        return self._identity


def without_password(error: RrError) -> RrError:
    """``error``, or a copy whose URL-looking words are censored (a last safety net: only
    URL-looking words, so the message's own words stay, whatever the password is)."""
    message = censor_urls(error.message)
    return error if message == error.message else type(error)(message)
