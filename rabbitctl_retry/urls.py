"""Pure. The syntax of the URLs rr takes, checked before any socket opens (docs/reference/cli.md,
"Malformed input"): broker URLs (``amqp://``, whose query options
``transport/url.py`` checks) and the management API's URL (``http://``, parsed here by
:func:`parse_management_url`; docs/how-to/run-on-a-cluster.md, "Replicas").

Both follow one set of rules, with the same messages: user name and password are
percent-encoded, so an unencoded ``/``, ``?``, ``#`` or ``@`` in them is refused rather than
read as a path, a query, a fragment or a host; the host is a name or a bracketed IPv6
address; the port a number 1..65535. A URL rr refuses is a
:class:`~rabbitctl_retry.errors.UsageError` naming what is wrong and never repeating the
URL: a URL that cannot be parsed may hold a password where a parser expects a host, a port
or a path, so no part of it is echoed.

The topology model checks ``[broker] management_url`` with it (``rr topology validate``
refuses what ``rr declare`` would), and the transport its URLs: so it sits beside the pure
core, which imports it, not in it (docs/architecture.md, "Layers").
"""

from __future__ import annotations

import base64
import ipaddress
import re
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import NoReturn

from rabbitctl_retry.errors import UsageError, censor_url

__all__ = [
    "AMQP_URL",
    "MANAGEMENT_URL",
    "PERCENT_HINT",
    "VHOST_MAX_BYTES",
    "ManagementUrl",
    "UrlKind",
    "UrlParts",
    "parse_management_url",
    "split_url",
    "vhost_problem",
]

VHOST_MAX_BYTES = 255
"""The longest vhost name: AMQP 0-9-1 carries it as a short string (Connection.Open)."""

PERCENT_HINT = "percent-encode / ? # @ in the user name and password as %2F %3F %23 %40"


@dataclass(frozen=True, slots=True)
class UrlKind:
    """What a message calls a kind of URL, and the schemes it takes."""

    what: str
    """How a message names it: ``broker URL``."""
    default_ports: Mapping[str, int]
    """Scheme (lower case) -> the port when the URL names none."""
    scheme_problem: str
    """What a URL with another scheme is told."""
    form: str
    """The URL's form, shown when it names no host."""

    def refuse(self, problem: str) -> NoReturn:
        raise UsageError(f"{self.what} {problem}")


AMQP_URL = UrlKind(
    what="broker URL",
    default_ports={"amqp": 5672, "amqps": 5671},
    scheme_problem="must start with amqp:// or amqps:// (AMQP URLs: rr docs cli 'Connecting')",
    form="amqp://USER:PASSWORD@HOST:PORT/VHOST",
)

MANAGEMENT_URL = UrlKind(
    what="management URL",
    default_ports={"http": 80, "https": 443},
    scheme_problem=(
        "must start with http:// or https:// (the management plugin's address: "
        "http://HOST:15672/, with the user name and password before the host; "
        "rr docs run-on-a-cluster)"
    ),
    form="http://USER:PASSWORD@HOST:15672/",
)


@dataclass(frozen=True, slots=True)
class UrlParts:
    """A URL split by :func:`split_url`; every part as written (still percent-encoded)."""

    scheme: str
    """Lower case."""
    userinfo: str | None
    """``USER:PASSWORD`` before the ``@``; None without an ``@``."""
    host: str
    """A host name, or an IPv6 address without its brackets."""
    port: int
    after: str
    """Everything after the host and port: the path and the query (``/vh?heartbeat=5``)."""

    @property
    def ipv6(self) -> bool:
        return ":" in self.host


_DIGITS = re.compile(r"[0-9]+")
_HOST_NAME = re.compile(r"[^/?#@\[\]:\\]+")


def split_url(url: str, kind: UrlKind) -> UrlParts:
    """Split ``url`` by the rules every URL rr takes follows; :class:`UsageError` (without
    the URL) on what breaks them."""
    if not url:
        kind.refuse("is empty")
    if not url.isprintable() or " " in url:
        kind.refuse("holds a space or a control character (percent-encode it)")
    scheme, separator, rest = url.partition("://")
    scheme = scheme.lower()
    if not separator or scheme not in kind.default_ports:
        kind.refuse(kind.scheme_problem)
    if "#" in rest:
        kind.refuse(
            f"holds a '#' (a {kind.what} has no #fragment: a '#' in the password? {PERCENT_HINT})"
        )
    authority_end = min((i for i in (rest.find("/"), rest.find("?")) if i >= 0), default=len(rest))
    authority, after = rest[:authority_end], rest[authority_end:]
    if "@" in after:
        kind.refuse(f"holds an '@' after the host (a '/' or '?' in the password? {PERCENT_HINT})")
    userinfo, at, host_port = authority.rpartition("@")
    if at and "@" in userinfo:
        kind.refuse(f"holds more than one '@' (an '@' in the password? {PERCENT_HINT})")
    host, port = _host_and_port(host_port, kind, kind.default_ports[scheme])
    return UrlParts(
        scheme=scheme, userinfo=userinfo if at else None, host=host, port=port, after=after
    )


def _host_and_port(host_port: str, kind: UrlKind, default_port: int) -> tuple[str, int]:
    if host_port.startswith("["):
        address, bracket, port_part = host_port[1:].partition("]")
        if not bracket:
            kind.refuse("has an IPv6 address without its closing ']'")
        try:
            ipaddress.IPv6Address(address)
        except ValueError:
            kind.refuse("has no valid IPv6 address between '[' and ']'")
        host = address
        if port_part and not port_part.startswith(":"):
            kind.refuse("has text after the IPv6 address's ']' (expected ':PORT')")
        port_text = port_part[1:] if port_part else None
    else:
        host, colon, port_text_or_empty = host_port.partition(":")
        port_text = port_text_or_empty if colon else None
        if not host:
            kind.refuse(f"names no host ({kind.form})")
        if not _HOST_NAME.fullmatch(host):
            kind.refuse("has a host name with characters a host name cannot hold")
    if port_text is None:
        return host, default_port
    if not _DIGITS.fullmatch(port_text) or not 1 <= int(port_text) <= 65535:
        kind.refuse("has a port that is not a number 1..65535")
    return host, int(port_text)


def vhost_problem(vhost: str) -> str | None:
    """Why ``vhost`` cannot be a vhost's name (empty, not printable, over
    :data:`VHOST_MAX_BYTES` bytes of UTF-8), or None (docs/reference/cli.md, "Malformed input")."""
    if not vhost or not vhost.isprintable():
        return "must be a vhost name (printable, not empty)"
    size = len(vhost.encode("utf-8", "surrogatepass"))
    if size > VHOST_MAX_BYTES:
        return (
            f"is {size} bytes long: a vhost name is at most {VHOST_MAX_BYTES} bytes (AMQP "
            "carries it as a short string)"
        )
    return None


# --- the management API's URL (docs/how-to/run-on-a-cluster.md, "Replicas") -------------------


@dataclass(frozen=True, slots=True)
class ManagementUrl:
    """A checked management URL, split into what a request needs.

    ``base`` holds no credentials (requests go to ``base + "/api/..."``); ``shown`` is the
    URL as messages may show it (password masked). The password is left out of ``repr``.
    """

    base: str
    """``http://HOST:PORT`` and the path (a proxy's prefix) without its trailing ``/``."""
    shown: str
    user: str | None
    """Decoded; None when the URL names no user (no ``Authorization`` header is sent)."""
    password: str = field(repr=False)
    """Decoded; empty when the URL names none."""

    @property
    def authorization(self) -> str | None:
        """The ``Authorization`` header's value (basic auth), or None without a user."""
        if self.user is None:
            return None
        token = base64.b64encode(f"{self.user}:{self.password}".encode()).decode("ascii")
        return f"Basic {token}"


_PERCENT_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})")


def parse_management_url(url: str) -> ManagementUrl:
    """Check ``url`` as the management API's address; :class:`UsageError` (without the URL)
    on what rr refuses.

    Beyond the rules of :func:`split_url`: only ASCII (an HTTP request line carries no
    other), a ``%`` only in a ``%XX`` escape, no query (rr adds the API's paths to the URL),
    and a user name without ``:`` (basic auth cannot carry one).
    """
    kind = MANAGEMENT_URL
    parts = split_url(url, kind)
    if not url.isascii():
        kind.refuse("holds a character that is not ASCII (percent-encode it)")
    if _PERCENT_ESCAPE.search(url):
        kind.refuse("has a '%' that is not a %XX escape (write a '%' itself as %25)")
    path, question, _ = parts.after.partition("?")
    if question:
        kind.refuse(
            "has a query ('?...'): it is the API's address, http://HOST:PORT/ or the path a "
            f"proxy serves it under ({PERCENT_HINT})"
        )
    user: str | None = None
    password = ""
    if parts.userinfo is not None:
        user_text, _, password_text = parts.userinfo.partition(":")
        user, password = _decoded(user_text, kind), _decoded(password_text, kind)
        if ":" in user:
            kind.refuse("has a ':' (%3A) in the user name, which basic auth cannot carry")
    host = f"[{parts.host}]" if parts.ipv6 else parts.host
    return ManagementUrl(
        base=f"{parts.scheme}://{host}:{parts.port}{path.rstrip('/')}",
        shown=censor_url(url),
        user=user,
        password=password,
    )


def _decoded(text: str, kind: UrlKind) -> str:
    try:
        return urllib.parse.unquote(text, errors="strict")
    except UnicodeDecodeError:
        kind.refuse("has a user name or password whose %XX escapes are not UTF-8")
