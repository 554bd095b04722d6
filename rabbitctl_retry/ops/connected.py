"""A connection for one run of a command: ``Connect`` opens it, :func:`connected` closes it
after the run, whatever happens (the one rule every ``ops`` run and console read keeps)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

from rabbitctl_retry.transport.base import Connection

Connect = Callable[[], Awaitable[Connection]]
"""Opens a connection of its own for one run (the CLI's, bound to its URLs and profile)."""


@asynccontextmanager
async def connected(connect: Connect) -> AsyncIterator[Connection]:
    """The connection ``connect`` opens, closed when the block ends (a raised error is
    passed on once it is closed)."""
    connection = await connect()
    try:
        yield connection
    finally:
        await connection.close()
