"""How rr's own client (``transport/native.py``) logs in: the user, password, vhost and
client properties of a broker URL, and the TLS context of an ``amqps://`` URL's options
(docs/reference/cli.md, "Connecting"). The same URLs as the aiormq adapter (``transport/url.py``).
"""

from __future__ import annotations

import base64
import binascii
import importlib.metadata
import platform
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit

from rabbitctl_retry.errors import UsageError
from rabbitctl_retry.transport.url import BrokerUrl

__all__ = ["Login", "tls_context"]


@dataclass(frozen=True, slots=True)
class Login:
    """What rr's own client logs in with, read from a broker URL (:meth:`of`)."""

    user: str
    password: str
    vhost: str
    external: bool
    heartbeat_s: int
    options: Mapping[str, str]
    client_properties: dict[str, Any]

    @staticmethod
    def of(target: BrokerUrl, client_name: str) -> Login:
        parts = urlsplit(target.url)
        options = target.options
        path = parts.path[1:] if parts.path.startswith("/") else parts.path
        name = options.get("name") or client_name
        return Login(
            user=unquote(parts.username) if parts.username is not None else "guest",
            password=unquote(parts.password) if parts.password is not None else "guest",
            vhost=unquote(path) if path else "/",
            external=options.get("auth", "plain").lower() == "external",
            heartbeat_s=target.heartbeat_s,
            options=options,
            client_properties={
                "product": "rr",
                "version": _rr_version(),
                "platform": f"Python {platform.python_version()}",
                "connection_name": name,
                "capabilities": {
                    "authentication_failure_close": True,
                    "basic.nack": True,
                    "connection.blocked": True,
                    "consumer_cancel_notify": True,
                    "publisher_confirms": True,
                },
            },
        )


def _rr_version() -> str:
    try:
        return importlib.metadata.version("rabbitctl-retry")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def tls_context(options: Mapping[str, str]) -> ssl.SSLContext:
    """The TLS context of an ``amqps://`` URL's options (docs/reference/cli.md, "Connecting")."""
    cadata = options.get("cadata")
    try:
        ca_bytes = base64.b64decode(cadata) if cadata else None
    except binascii.Error:
        raise UsageError("broker URL cannot be read: cadata is not base64 (rr docs cli)") from None
    ca: str | bytes | None = ca_bytes
    if ca_bytes is not None and ca_bytes.lstrip().startswith(b"-----"):
        ca = ca_bytes.decode("ascii", "replace")  # PEM text; DER stays bytes
    context = ssl.create_default_context(
        ssl.Purpose.SERVER_AUTH,
        cafile=options.get("cafile"),
        capath=options.get("capath"),
        cadata=ca,
    )
    if options.get("certfile"):
        context.load_cert_chain(options["certfile"], options.get("keyfile"))
    if "no_verify_ssl" in options:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context
