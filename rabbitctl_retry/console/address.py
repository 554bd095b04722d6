"""Pure. What ``rr console --bind ADDRESS --port PORT`` means (docs/reference/console.md,
"Security"; docs/reference/exit-codes.md, "Exit codes"): an address refused before anything listens,
a wildcard, the address printed at start-up, and what a failed listen says and exits with.

* ``--bind ''`` (or blanks) is refused: it would listen on every address of the machine
  while saying nothing of it (exit 2).
* A name that does not resolve, or an address that is not one of this machine's, is a
  mistake in ``--bind`` (exit 2); a port in use, or one the user may not take, is a failure
  of the start (exit 1, as ``rr run --metrics-port`` on a taken port). One line each, naming
  the address.
"""

from __future__ import annotations

import errno
import ipaddress
import socket
from urllib.parse import quote

from rabbitctl_retry.errors import RrError, UsageError

LOOPBACK_NAMES = frozenset({"localhost"})


def bind_problem(bind: str) -> str | None:
    """Why ``--bind`` is refused before anything listens, or None."""
    if not bind.strip():
        return (
            "--bind '': give the address to listen on (127.0.0.1 by default; 0.0.0.0 or :: "
            "for every address of this machine)"
        )
    if bind != bind.strip() or not bind.isprintable():
        return f"--bind {bind!r}: not an address or a host name"
    return None


def _ip(bind: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(bind.removeprefix("[").removesuffix("]"))
    except ValueError:
        return None


def is_loopback(bind: str) -> bool:
    if bind in LOOPBACK_NAMES:
        return True
    address = _ip(bind)
    return address is not None and address.is_loopback


def is_wildcard(bind: str) -> bool:
    """``0.0.0.0`` or ``::``: every address of the machine."""
    address = _ip(bind)
    return address is not None and address.is_unspecified


def url_host(bind: str) -> str:
    """``bind`` as the host of a URL: an IPv6 address in brackets; a wildcard as the
    loopback address of its family (the one address of the machine sure to answer)."""
    if is_wildcard(bind):
        return "[::1]" if ":" in bind else "127.0.0.1"
    if ":" in bind and not bind.startswith("["):
        return f"[{bind}]"
    return bind


def base_address(bind: str, port: int) -> str:
    """The console's address, without a token: ``http://127.0.0.1:8765``."""
    return f"http://{url_host(bind)}:{port}"


def address_with_token(base: str, token: str) -> str:
    """The address printed at start-up for a token rr made: the token URL-encoded, so that
    the console reads back exactly the token (a ``+``, ``#``, ``&`` or ``%`` included)."""
    return f"{base}/?token={quote(token, safe='')}"


def address_for_token_file(base: str, token_file: str) -> str:
    """The line printed for a token read from a file: the address without the token (a
    service manager keeps stderr in its logs), and where the token is."""
    return (
        f"{base}/ (the token is the one in {token_file}: open {base}/?token=TOKEN, the "
        "token URL-encoded, or send Authorization: Bearer TOKEN)"
    )


def listen_error(bind: str, port: int, error: OSError) -> RrError:
    """What a failed listen on ``bind`` ``port`` says, as the error rr exits with."""
    where = f"{bind} port {port}"
    if isinstance(error, socket.gaierror):
        return UsageError(f"--bind {bind}: no such host name (it does not resolve)")
    if error.errno == errno.EADDRNOTAVAIL:
        return UsageError(f"--bind {bind}: not an address of this machine")
    if error.errno == errno.EADDRINUSE:
        return RrError(
            f"cannot listen on {where}: the port is in use (another program, or another rr "
            "console, listens there; choose another --port, or 0 for any free one)"
        )
    if error.errno == errno.EACCES:
        return RrError(f"cannot listen on {where}: permission denied (a port below 1024?)")
    return RrError(f"cannot listen on {where}: {error.strerror or error}")
