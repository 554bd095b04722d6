"""Each ``rr dlq`` command's one operation (inspect, export, import, purge): open the
connection, read the queue's state, let the command warn or ask, do the work on the shell of
``ops/dlq.py``, close. What is said and asked on the way is the command's (its hooks); no
command opens a connection itself (docs/architecture.md, "How a command reads")."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractContextManager, asynccontextmanager
from pathlib import Path
from typing import TextIO

from rabbitctl_retry.dlq.choice import Chooser
from rabbitctl_retry.dlq.report import TransferReport
from rabbitctl_retry.ops.connected import connected
from rabbitctl_retry.ops.dlq import (
    CheckedFile,
    ExportResult,
    ImportReport,
    ProgressSink,
    ScanResult,
    export_queue,
    import_file,
    purge,
    scan_messages,
)
from rabbitctl_retry.ops.probe import Connect, QueueState, queue_state
from rabbitctl_retry.ops.transfer import TransferOptions, transfer
from rabbitctl_retry.transport.base import Connection, Delivery

Look = Callable[[QueueState, int, str], Awaitable[None]]
"""Told the queue's state, how many messages are about to be read and the server's version,
before the first is: the command warns of a quorum queue, asks, or ends the run."""
Bar = Callable[[], AbstractContextManager[ProgressSink]]
"""The command's progress bar, opened once its questions are answered."""


@asynccontextmanager
async def _looked_at(
    connect: Connect, queue: str, limit: int | None, look: Look
) -> AsyncIterator[Connection]:
    """A connection of its own, once ``look`` was told ``queue``'s state and how many of its
    messages (up to ``limit``) are about to be read; closed after."""
    async with connected(connect) as connection:
        state = await queue_state(connection, queue)
        count = state.message_count if limit is None else min(limit, state.message_count)
        await look(state, count, str(connection.server_version))
        yield connection


async def inspect(
    connect: Connect,
    queue: str,
    on_delivery: Callable[[Delivery], bool],
    *,
    limit: int | None,
    look: Look,
    bar: Bar,
) -> ScanResult:
    """``rr dlq inspect``: up to ``limit`` messages of ``queue`` handed to ``on_delivery``,
    none taken (:func:`~rabbitctl_retry.ops.dlq.scan_messages`)."""
    async with _looked_at(connect, queue, limit, look) as connection:
        with bar() as progress:
            return await scan_messages(
                connection, queue, on_delivery, limit=limit, progress=progress
            )


async def export(
    connect: Connect,
    queue: str,
    out: TextIO,
    *,
    limit: int | None,
    look: Look,
    bar: Bar,
    keep: Callable[[Delivery], bool] | None = None,
) -> ExportResult:
    """``rr dlq export``: up to ``limit`` messages of ``queue`` (those ``keep`` keeps) written
    to ``out`` as JSON Lines, none taken (:func:`~rabbitctl_retry.ops.dlq.export_queue`)."""
    async with _looked_at(connect, queue, limit, look) as connection:
        with bar() as progress:
            return await export_queue(
                connection, queue, out, limit=limit, progress=progress, keep=keep
            )


async def import_(
    connect: Connect,
    file: Path,
    to: str,
    *,
    from_line: int,
    user: str | None,
    checked: CheckedFile,
    bar: Bar,
) -> ImportReport:
    """``rr dlq import``: the checked file published to ``to``
    (:func:`~rabbitctl_retry.ops.dlq.import_file`)."""
    async with connected(connect) as connection:
        with bar() as progress:
            return await import_file(
                connection,
                file,
                to,
                from_line=from_line,
                user=user,
                checked=checked,
                progress=progress,
            )


async def transfer_one(
    connect: Connect, queue: str, choose: Chooser, options: TransferOptions
) -> TransferReport:
    """One run of the transfer engine on ``queue`` (``rr dlq edit``: the one letter
    ``options.only`` picks), on a connection of its own."""
    async with connected(connect) as connection:
        return await transfer(connection, queue, choose, options)


async def purge_queue(
    connect: Connect, queue: str, agree: Callable[[QueueState], Awaitable[None]]
) -> int:
    """``rr dlq purge``: ``queue`` emptied once ``agree`` (told its state) returns; how many
    messages went."""
    async with connected(connect) as connection:
        await agree(await queue_state(connection, queue))
        return await purge(connection, queue)


__all__ = ["Bar", "Look", "export", "import_", "inspect", "purge_queue", "transfer_one"]
