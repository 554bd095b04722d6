"""Pure. How much of the machine the console's web server lets its clients hold
(docs/reference/console.md, "Limits"): how long a connection may stay without a whole request, how
many may be open at once, and which one goes to make room, so that sockets left open (idle,
or a request never finished) neither hold the console's open files for good nor lock out the
people on call.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import TypeVar

IDLE_CLOSE_S = 10.0
"""A connection that brings no whole request for this long is closed: idle (a browser's
keep-alive, a socket that says nothing), a request whose head never ends, a form whose body
stops coming."""
LINGER_S = 2.0
"""After an answer to a request whose body did not all come: how long the rest is read
(and thrown away) before the connection closes."""
MAX_CONNECTIONS = 512
"""At most this many connections at once (fewer under a low limit of open files)."""
KEPT_FILES = 64
"""Open files kept for everything else (the broker connections, the log, the keep-dir)."""
MIN_CONNECTIONS = 8


def connection_limit(open_files: int | None) -> int:
    """How many connections the console holds at once, under a limit of ``open_files`` (the
    process's ``RLIMIT_NOFILE``; None: no limit): half of what is left once
    :data:`KEPT_FILES` are set aside, at most :data:`MAX_CONNECTIONS`."""
    if open_files is None or open_files <= 0:
        return MAX_CONNECTIONS
    return max(MIN_CONNECTIONS, min(MAX_CONNECTIONS, (open_files - KEPT_FILES) // 2))


T = TypeVar("T")


def to_close(open_: Sequence[T], busy: Collection[T], limit: int) -> T | None:
    """The connection to close so that a new one fits, or None: with ``limit`` or more open
    (oldest first), the oldest that is not answering a request (idle, or with its request
    not all there). A new connection is always taken: the one that waits longest goes."""
    if len(open_) < limit:
        return None
    return next((connection for connection in open_ if connection not in busy), None)
