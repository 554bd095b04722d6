"""Pure. Broker URLs: checked before any socket opens (docs/reference/cli.md, "Connecting" and
"Malformed input").

:func:`parse_broker_url` accepts ``amqp://`` and ``amqps://`` URLs whose user name and
password are percent-encoded, and the query options rr documents, each with a checked value.
Anything else is a :class:`~rabbitctl_retry.errors.UsageError` whose message says what is
wrong and never repeats the URL: a URL that cannot be parsed may hold a password where a
parser expects a host, a path or a query, so no part of it is echoed (query option names and
values are named, since they can only follow the ``@``). The rules of the scheme, the user
name and password, the host and the port are those every URL rr takes shares, management
URLs too (``urls.py`` :func:`~rabbitctl_retry.urls.split_url`); the query
options are checked here.

Why so strict: aiormq reads what it cannot parse as "off" — ``no_verify_ssl=false`` (or
``no``, or an empty value) turns certificate verification off, ``heartbeat=abc``, ``-5`` or
``99999`` turns heartbeats off, an unknown or misspelt option is ignored.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import NoReturn
from urllib.parse import parse_qsl, unquote_to_bytes

from rabbitctl_retry.errors import censor_url
from rabbitctl_retry.urls import AMQP_URL, VHOST_MAX_BYTES, split_url

__all__ = [
    "DEFAULT_HEARTBEAT_S",
    "MAX_HEARTBEAT_S",
    "QUERY_OPTIONS",
    "TLS_OPTIONS",
    "BrokerUrl",
    "parse_broker_url",
]

DEFAULT_HEARTBEAT_S = 10
"""The heartbeat timeout rr asks for when the URL names none (aiormq's own default is 60 s,
which leaves a half-open connection unnoticed for about three minutes)."""

MAX_HEARTBEAT_S = 65535
"""The largest heartbeat timeout AMQP can carry (a 16-bit field of connection.tune-ok)."""

TLS_OPTIONS = ("cafile", "capath", "cadata", "certfile", "keyfile", "no_verify_ssl")
"""Query options that only mean something on ``amqps://``."""

QUERY_OPTIONS = (*TLS_OPTIONS, "auth", "heartbeat", "name")
"""Every query option rr accepts (docs/reference/cli.md, "Connecting"); any other is refused."""

NO_VERIFY_SSL_OFF = "1"
"""The one value of ``no_verify_ssl``: verification off. Leaving the option out verifies."""

AUTH_MECHANISMS = ("plain", "external")

_DIGITS = re.compile(r"[0-9]+")


@dataclass(frozen=True, slots=True)
class BrokerUrl:
    """A checked broker URL.

    ``url`` is what the driver gets: the URL as given, with ``heartbeat`` added when it names
    none. ``shown`` is the URL as messages may show it (password masked).
    """

    url: str
    shown: str
    tls: bool
    host: str
    port: int
    heartbeat_s: int
    verify_tls: bool
    connection_name: str | None
    options: Mapping[str, str] = field(default_factory=dict, compare=False)
    """The query options, checked (``QUERY_OPTIONS``); ``url`` holds them, so equality
    compares them through it."""


def parse_broker_url(url: str) -> BrokerUrl:
    """Check ``url``; raise :class:`UsageError` (without the URL) on what rr refuses."""
    parts = split_url(url, AMQP_URL)
    tls = parts.scheme == "amqps"
    path, _, query = parts.after.partition("?")
    vhost_bytes = len(unquote_to_bytes(path[1:]))
    if vhost_bytes > VHOST_MAX_BYTES:
        _refuse(
            f"has a vhost of {vhost_bytes} bytes: a vhost name is at most {VHOST_MAX_BYTES} "
            "bytes (AMQP carries it as a short string)"
        )
    options = _query_options(query, tls=tls)
    heartbeat_s = _heartbeat_s(options.get("heartbeat"))
    verify_tls = "no_verify_ssl" not in options
    return BrokerUrl(
        url=url if "heartbeat" in options else _with_query(url, f"heartbeat={heartbeat_s}"),
        shown=censor_url(url),
        tls=tls,
        host=parts.host,
        port=parts.port,
        heartbeat_s=heartbeat_s,
        verify_tls=verify_tls,
        connection_name=options.get("name"),
        options=options,
    )


def _refuse(problem: str) -> NoReturn:
    AMQP_URL.refuse(problem)


def _query_options(query: str, *, tls: bool) -> Mapping[str, str]:
    options: dict[str, str] = {}
    for key, value in parse_qsl(query, keep_blank_values=True):
        if key not in QUERY_OPTIONS:
            known = ", ".join(sorted(QUERY_OPTIONS))
            _refuse(f"has an unknown query option {key!r} (rr knows {known}; rr docs cli)")
        if key in options:
            _refuse(f"gives the query option {key} twice")
        if key in TLS_OPTIONS and not tls:
            _refuse(f"has the TLS option {key}, which needs amqps://")
        options[key] = value
        _check_option(key, value)
    if "keyfile" in options and "certfile" not in options:
        _refuse("has keyfile without certfile (the client certificate it is the key of)")
    return options


def _check_option(key: str, value: str) -> None:
    match key:
        case "no_verify_ssl":
            if value != NO_VERIFY_SSL_OFF:
                _refuse(
                    f"has no_verify_ssl={_shown(value)}: its only value is "
                    f"no_verify_ssl={NO_VERIFY_SSL_OFF} (turn TLS certificate verification off); "
                    "leave it out to verify"
                )
        case "heartbeat":
            _heartbeat_s(value)
        case "auth":
            if value.lower() not in AUTH_MECHANISMS:
                _refuse(f"has auth={_shown(value)}: auth is plain or external")
        case "cadata":
            try:
                base64.b64decode(value, validate=True)
            except binascii.Error:
                _refuse("has a cadata that is not base64 (percent-encode '+' as %2B)")
            if not value:
                _refuse("has an empty cadata")
        case _:  # cafile, capath, certfile, keyfile, name
            if not value:
                _refuse(f"has an empty {key}")


def _heartbeat_s(value: str | None) -> int:
    if value is None:
        return DEFAULT_HEARTBEAT_S
    if not _DIGITS.fullmatch(value) or int(value) > MAX_HEARTBEAT_S:
        _refuse(
            f"has heartbeat={_shown(value)}: heartbeat is a whole number of seconds "
            f"0..{MAX_HEARTBEAT_S} (0 turns heartbeats off)"
        )
    return int(value)


def _shown(value: str) -> str:
    """A query value as a message may show it: short, and quoted when odd."""
    clipped = value if len(value) <= 40 else value[:40] + "..."
    return clipped if clipped and clipped.isalnum() and clipped.isascii() else repr(clipped)


def _with_query(url: str, parameter: str) -> str:
    """``url`` (without a fragment) with ``parameter`` (``key=value``) added to its query."""
    if "?" not in url:
        return f"{url}?{parameter}"
    return f"{url}&{parameter}" if not url.endswith(("?", "&")) else f"{url}{parameter}"
