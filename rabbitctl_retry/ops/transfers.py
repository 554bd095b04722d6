"""``rr dlq replay`` and ``rr dlq move``: one run over their sources, one after the other, on
the transfer engine (``ops/transfer.py``).

The run opens the connection, reads each source's state, lets the command warn and ask (its
hooks), checks the target, declares the set-aside queues, then dry-runs or transfers each
source under a progress bar; the first Ctrl-C (or SIGTERM) ends it cleanly. What it did is in
:class:`Transfers`, filled as each source ends, so that it is known however the run ended.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import signal
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field

from rabbitctl_retry.dlq.choice import Chooser
from rabbitctl_retry.dlq.replay import set_aside_queue
from rabbitctl_retry.dlq.report import TransferKind, TransferReport
from rabbitctl_retry.ops.connected import connected
from rabbitctl_retry.ops.dlq import ProgressSink, target_drops
from rabbitctl_retry.ops.probe import Connect, QueueState, queue_missing, queue_state
from rabbitctl_retry.ops.transfer import TransferOptions, dry_run, transfer
from rabbitctl_retry.topology.expand import CLASSIC_ARGUMENTS
from rabbitctl_retry.transport.base import Connection


@dataclass(frozen=True, slots=True)
class TransferRun:
    """What to run: each ``(source, chooser)`` in order."""

    jobs: Sequence[tuple[str, Chooser]]
    kind: TransferKind
    options: TransferOptions
    dry_run: bool
    target: str | None = None
    """A ``--to`` looked at first: does it drop what it confirmed (``dlq/target.py``)?"""
    set_aside: Sequence[str] = ()
    """Sources whose ``.undecodable`` queue is declared (durable, classic) before the first
    letter moves (docs/reference/dlq.md, "Undecodable")."""
    create: Sequence[str] = ()
    """Targets declared (durable, classic, no argument) before the first message moves when
    they do not exist (``rr dlq move --create``)."""


@dataclass(frozen=True, slots=True)
class TransferHooks:
    """What the command says and asks on the way."""

    reading: Callable[[list[QueueState], str], Awaitable[None]]
    """A dry run: told each source's state and the server's version before the first read."""
    dropping: Callable[[str, str], None]
    """The target and how it drops copies: the command refuses (raises) or notes it."""
    agreed: Callable[[list[QueueState]], Awaitable[None]]
    """A real run: told each source's state once the target is checked; asks, or raises."""
    bar: Callable[[], AbstractContextManager[ProgressSink]]
    stopping: Callable[[], None]
    """The first Ctrl-C came: the run stops after the copies under way."""


@dataclass(slots=True)
class Transfers:
    """What the run did: one report per source it ran, and whether Ctrl-C stopped it."""

    reports: list[TransferReport] = field(default_factory=list)
    stop: asyncio.Event = field(default_factory=asyncio.Event)


async def transfer_sources(
    connect: Connect,
    run: TransferRun,
    hooks: TransferHooks,
    done: Transfers,
    *,
    signals: bool = True,
) -> None:
    """Run (or dry-run) each source of ``run`` on the engine, one after the other, into
    ``done``; the first interrupted report, or a stop, ends the run. ``signals``: the first
    Ctrl-C (or SIGTERM) sets ``done.stop`` (:func:`stop_on_interrupt`); a caller that owns
    the signals (``rr console``) sets it itself."""
    options = dataclasses.replace(run.options, stop=done.stop)
    async with connected(connect) as connection:
        states = [await queue_state(connection, source) for source, _ in run.jobs]
        if run.dry_run:
            await hooks.reading(states, str(connection.server_version))
        if run.target is not None:
            drops = await target_drops(connection, run.target)
            if drops is not None:
                hooks.dropping(run.target, drops)
        if not run.dry_run:
            await hooks.agreed(states)
            made = [set_aside_queue(source) for source in run.set_aside]
            made += [name for name in run.create if await queue_missing(connection, name)]
            if made:
                await _declare_durable(connection, made)
        interrupts = (
            stop_on_interrupt(done.stop, hooks.stopping) if signals else contextlib.nullcontext()
        )
        with hooks.bar() as progress, interrupts:
            for source, choose in run.jobs:
                act = dry_run if run.dry_run else transfer
                report = await act(
                    connection, source, choose, options, kind=run.kind, progress=progress
                )
                done.reports.append(report)
                if report.interrupted or done.stop.is_set():
                    break


async def _declare_durable(connection: Connection, names: Sequence[str]) -> None:
    """Durable classic queues without other arguments than their type (``x-queue-type``,
    whatever the vhost's default; a declare of one that exists alike is a no-op)."""
    channel = await connection.channel()
    try:
        for name in names:
            await channel.queue_declare(name, durable=True, arguments=CLASSIC_ARGUMENTS)
    finally:
        await channel.close()


@contextmanager
def stop_on_interrupt(stop: asyncio.Event, stopping: Callable[[], None]) -> Iterator[None]:
    """The first Ctrl-C (or SIGTERM) ends the run cleanly: copies under way finish and their
    messages are acked, the report is printed. A second Ctrl-C quits at once."""
    loop = asyncio.get_running_loop()
    installed: list[signal.Signals] = []

    def first(signum: signal.Signals) -> None:
        stop.set()
        stopping()
        loop.remove_signal_handler(signum)

    for signum in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(signum, first, signum)
        except (NotImplementedError, RuntimeError, ValueError):  # not the main thread
            continue
        installed.append(signum)
    try:
        yield
    finally:
        for signum in installed:
            loop.remove_signal_handler(signum)


__all__ = ["TransferHooks", "TransferRun", "Transfers", "stop_on_interrupt", "transfer_sources"]
