"""Pure. The console's access rules (docs/reference/console.md, "Security").

* Every request carries the token printed at start-up: in the ``rr_console`` cookie (set,
  ``HttpOnly`` and ``SameSite=Strict``, when a page is first opened with ``?token=``), or as
  ``Authorization: Bearer TOKEN``. A request without it gets 401 and nothing else.
* A state-changing request is a POST whose form holds ``csrf``, a value derived from the
  token (an HMAC), and whose ``Origin`` (when the browser sends one) is the console's own.
* The ``Host`` header must name the address the console listens on (or ``localhost`` for
  127.0.0.1): a page of another site that resolves its own name to 127.0.0.1 (DNS
  rebinding) is refused. A console on every address (``--bind 0.0.0.0`` or ``::``) takes
  the machine's own names (its host name, ``localhost``) and the address each request
  reached, as a literal: still no name of another site.
* The token may hold any printable ASCII character (``--token-file``): the cookie holds a
  value derived from it (an HMAC, hex), never the token itself.
* A request with the cookie must come from the console's own pages or be opened directly
  (``Sec-Fetch-Site``: :func:`fetch_site_refusal`): another page of the same machine cannot
  make the console read a queue by pointing an image or a fetch at it.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import secrets
from collections.abc import Iterable
from urllib.parse import urlsplit

COOKIE = "rr_console"
TOKEN_BYTES = 24
HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self'; "
        "frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
    # not no-referrer: with it a browser sends "Origin: null" on the console's own forms
    "Cache-Control": "no-store",
}
"""Sent with every answer: no script runs on a console page, none can frame it."""


def new_token() -> str:
    return secrets.token_urlsafe(TOKEN_BYTES)


def token_matches(given: str | None, token: str) -> bool:
    return given is not None and hmac.compare_digest(given.encode(), token.encode())


def bearer(authorization: str | None) -> str | None:
    if authorization is None:
        return None
    scheme, _, value = authorization.partition(" ")
    return value.strip() if scheme.lower() == "bearer" else None


def csrf_of(token: str) -> str:
    """The value every form of the console carries (the same for the whole run)."""
    return hmac.new(token.encode(), b"rr-console-csrf", hashlib.sha256).hexdigest()


def cookie_of(token: str) -> str:
    """The value of the ``rr_console`` cookie: derived from the token, so that a token's
    ``;``, ``"`` or space never reaches a ``Set-Cookie`` header."""
    return hmac.new(token.encode(), b"rr-console-cookie", hashlib.sha256).hexdigest()


def cookie_matches(given: str | None, token: str) -> bool:
    return given is not None and hmac.compare_digest(given.encode(), cookie_of(token).encode())


def csrf_matches(given: str | None, token: str) -> bool:
    return given is not None and hmac.compare_digest(given.encode(), csrf_of(token).encode())


FETCH_SITES = frozenset({"same-origin", "none"})
"""The ``Sec-Fetch-Site`` values of a request from the console's own pages (``same-origin``)
or typed, bookmarked or opened from the terminal (``none``)."""


def fetch_site_refusal(fetch_site: str | None) -> str | None:
    """Why a request that carries the cookie is refused, or None. A browser says in
    ``Sec-Fetch-Site`` where a request comes from, and a page cannot change it: a page of
    another site, or of another port of 127.0.0.1 (``same-site``: the ``SameSite=Strict``
    cookie does not tell ports apart), gets nothing. A browser too old to say is refused
    too (a script uses ``Authorization: Bearer``)."""
    if fetch_site is None:
        return (
            "this browser does not say where the request comes from (Sec-Fetch-Site): use a "
            "current Chromium, Firefox or Safari, or send Authorization: Bearer TOKEN"
        )
    if fetch_site.lower() not in FETCH_SITES:
        return f"a request from another page (Sec-Fetch-Site: {fetch_site[:40]})"
    return None


LOOPBACK = frozenset({"127.0.0.1", "::1", "localhost"})
WILDCARDS = frozenset({"0.0.0.0", "::", "[::]"})


def allowed_hosts(bind: str, port: int, own_names: Iterable[str] = ()) -> frozenset[str]:
    """The ``Host`` values a request may carry; ``own_names``: the machine's host names,
    taken when the console listens on every address (a wildcard ``bind``)."""
    names = {bind}
    if bind in LOOPBACK or bind in WILDCARDS:
        names |= {"127.0.0.1", "localhost", "[::1]"}
    if bind in WILDCARDS:
        names |= {name.lower() for name in own_names if name}
    if ":" in bind and not bind.startswith("["):
        names.add(f"[{bind}]")
    return frozenset(f"{name}:{port}" for name in names)


def reached_host(sockname: object) -> str | None:
    """The address a request reached (its socket's local address), as a ``Host`` value: a
    wildcard console takes it, since no other site's name can be an address literal. An
    IPv4 address seen through an IPv6 socket (``::ffff:10.0.0.5``) is the IPv4 one."""
    if not isinstance(sockname, tuple) or len(sockname) < 2:
        return None
    try:
        address = ipaddress.ip_address(str(sockname[0]).partition("%")[0])
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    name = f"[{address}]" if address.version == 6 else str(address)
    return f"{name}:{sockname[1]}"


def host_allowed(host: str | None, allowed: frozenset[str], reached: str | None = None) -> bool:
    """``reached``: the address this request reached (:func:`reached_host`), for a console
    on every address; None otherwise."""
    if host is None:
        return False
    host = host.lower()
    return host in allowed or (reached is not None and host == reached)


def origin_allowed(origin: str | None, allowed: frozenset[str], reached: str | None = None) -> bool:
    """A POST's ``Origin``: absent (an old browser, a script with the bearer token) or the
    console's own."""
    if origin is None:
        return True
    parts = urlsplit(origin)
    return parts.scheme == "http" and host_allowed(parts.netloc, allowed, reached)
