"""What the console reads from and does on the broker, each on a connection of its own, through
the operations the ``rr dlq`` commands use: the queues' depths (``ops/probe.py``), a queue's
groups (``dlq/groups.py`` over ``scan_messages``), one letter, and the transfer engine's
runs for a group and for an edited letter (``ops/transfer.py``)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial

from rabbitctl_retry.console.letter_list import GroupLetters
from rabbitctl_retry.dlq.choice import Chooser
from rabbitctl_retry.dlq.filters import parse_where
from rabbitctl_retry.dlq.groups import Grouping, Seen
from rabbitctl_retry.dlq.letter import Letter, Read, numbered_letters
from rabbitctl_retry.dlq.move import MovePlan, choose_move
from rabbitctl_retry.dlq.move import to_problem as move_to_problem
from rabbitctl_retry.dlq.origin import WaitQueues
from rabbitctl_retry.dlq.purge import PurgePlan, choose_purge
from rabbitctl_retry.dlq.replay import ReplayPlan
from rabbitctl_retry.dlq.replay import choose as choose_replay
from rabbitctl_retry.dlq.report import TransferKind, TransferReport
from rabbitctl_retry.dlq.same_id import LetterPick, SameId
from rabbitctl_retry.errors import RrError, TransportError, UsageError
from rabbitctl_retry.ops import transfer as engine
from rabbitctl_retry.ops.connected import connected
from rabbitctl_retry.ops.dlq import NO_PROGRESS, ProgressSink, ScanResult, scan_messages
from rabbitctl_retry.ops.probe import Connect, QueueState, queue_state
from rabbitctl_retry.ops.transfer import TransferOptions
from rabbitctl_retry.ops.transfers import TransferHooks, TransferRun, Transfers, transfer_sources
from rabbitctl_retry.transport.base import Delivery
from rabbitctl_retry.transport.management import ManagementApi, ManagementConnector


@dataclass(frozen=True, slots=True)
class Settings:
    """What every read takes from the topology (or its defaults)."""

    retry_header: str
    wait_queues: WaitQueues = field(default_factory=WaitQueues)


async def queue_states(
    connect: Connect, queues: list[str]
) -> tuple[str, list[tuple[str, QueueState | None, str | None]]]:
    """The server's version and each queue's state (or why it could not be read)."""
    async with connected(connect) as connection:
        found: list[tuple[str, QueueState | None, str | None]] = []
        for queue in queues:
            try:
                # a page view reads nothing: not even the get that confirms a depth of 0
                state = await queue_state(connection, queue, confirm_empty=False)
                found.append((queue, state, None))
            except TransportError as error:
                found.append((queue, None, error.message))
        return str(connection.server_version), found


def management_for(connector: ManagementConnector, url: str, *, vhost: str) -> ManagementApi:
    """The management API the console counts the letters other readers hold with."""
    return connector(url, vhost=vhost)


async def held_by_readers(management: ManagementApi | None) -> dict[str, int] | str | None:
    """Each queue's letters held by a reader (``messages_unacknowledged``, as the management
    API last sampled it), by name; None without a management API; the problem, as text, when
    it did not answer."""
    if management is None:
        return None
    try:
        activity = await management.queue_activity()
    except RrError as error:
        return str(error)
    return {queue.name: queue.unacked or 0 for queue in activity}


async def read_groups(
    connect: Connect,
    queue: str,
    settings: Settings,
    now: datetime,
    grouping: Grouping | None = None,
    keep: Callable[[Letter[Read]], bool] | None = None,
) -> tuple[Grouping, ScanResult]:
    """Every dead letter of ``queue`` in its group (of ``grouping``, which may hold other
    queues' letters already: the all-queues view); only those ``keep`` keeps (a search,
    console/search.py) when given; none taken."""
    grouping = grouping if grouping is not None else Grouping()
    letters = numbered_letters(retry_header=settings.retry_header, wait_queues=settings.wait_queues)

    def take(delivery: Delivery) -> bool:
        letter = letters(delivery)
        if keep is None or keep(letter):
            grouping.add(Seen.of(queue, letter))
        return True

    return grouping, await _scan(connect, queue, take)


async def read_group_letters(
    connect: Connect, queue: str, settings: Settings, listing: GroupLetters
) -> ScanResult:
    """Every dead letter of ``queue`` handed to ``listing`` (one page of a group); none
    taken."""
    letters = numbered_letters(retry_header=settings.retry_header, wait_queues=settings.wait_queues)

    def take(delivery: Delivery) -> bool:
        listing.add(letters(delivery))
        return True

    return await _scan(connect, queue, take)


async def letter_at(
    connect: Connect, queue: str, position: int
) -> tuple[Delivery | None, ScanResult]:
    """The dead letter at ``position`` of ``queue`` (1: the head), or None; none taken."""
    found: list[Delivery] = []
    seen = 0

    def take(delivery: Delivery) -> bool:
        nonlocal seen
        seen += 1
        if seen == position:
            found.append(delivery)
            return False
        return True

    scan = await _scan(connect, queue, take)
    return (found[0] if found else None), scan


async def _scan(connect: Connect, queue: str, take: Callable[[Delivery], bool]) -> ScanResult:
    """Every message of ``queue`` handed to ``take``, none taken, on a connection of its
    own."""
    async with connected(connect) as connection:
        return await scan_messages(connection, queue, take)


async def find_letter(
    connect: Connect, queue: str, message_id: str, nth: int = 1
) -> SameId[Delivery]:
    """The ``nth`` dead letter of ``queue`` with ``message_id`` (``letter`` None: not
    there); none taken."""
    found: SameId[Delivery] = SameId(message_id, nth)
    await _scan(connect, queue, found.look)
    return found


async def pick_letter(connect: Connect, queue: str, pick: LetterPick[Delivery]) -> None:
    """Read ``queue`` up to the letter ``pick`` looks for (its ``letter``: that letter, as it
    was read before; else its ``problem``); none taken."""
    await _scan(connect, queue, pick.look)


def group_chooser(
    queue: str, group_id: str, action: str, settings: Settings, to: str = ""
) -> tuple[Chooser, TransferKind]:
    """Retry (a replay to each letter's origin), move (to ``to``, as they are) or discard (a
    purge) the letters of one group (``parse_where`` checks the id, ``to_problem`` the
    target: a ``UsageError`` when one is wrong)."""
    conditions = (parse_where(f"group={group_id}"),)
    if action == "move":
        problem = move_to_problem(queue, to)
        if problem is not None:
            raise UsageError(problem)
        moving = MovePlan(
            source=queue,
            to=to,
            conditions=conditions,
            retry_header=settings.retry_header,
            wait_queues=settings.wait_queues,
        )
        return partial(choose_move, moving), TransferKind.MOVE
    if action == "discard":
        plan = PurgePlan(source=queue, conditions=conditions, wait_queues=settings.wait_queues)
        return partial(choose_purge, plan), TransferKind.PURGE
    replay = ReplayPlan(
        source=queue,
        run_id=engine.new_run_id(),
        retry_header=settings.retry_header,
        wait_queues=settings.wait_queues,
        conditions=conditions,
    )
    return partial(choose_replay, replay), TransferKind.REPLAY


def group_run(
    queue: str, choose: Chooser, kind: TransferKind, options: TransferOptions, *, to: str = ""
) -> TransferRun:
    """One group's retry, move or discard as ``rr dlq replay/move/purge --where group=ID``
    runs it (``ops/transfers.py``): a move's target is checked first."""
    return TransferRun(
        jobs=[(queue, choose)], kind=kind, options=options, dry_run=False, target=to or None
    )


def _refuse_dropping(to: str, drops: str) -> None:
    """A target that confirms copies and then drops them is refused, as ``rr dlq move``
    refuses it (``dlq/target.py``); the console has no ``--force``."""
    raise UsageError(f"{to!r} {drops}; nothing was moved")


async def run_group(
    connect: Connect, run: TransferRun, progress: ProgressSink, stop: asyncio.Event
) -> TransferReport | None:
    """``run`` on the one operation of ``rr dlq replay``, ``move`` and ``purge``
    (``ops/transfers.py``: the same target check, the same engine, the same report), with
    ``progress`` as its bar and ``stop`` as its Ctrl-C; None when it ended before the first
    report."""

    async def nothing(*_: object) -> None:
        return None

    hooks = TransferHooks(
        reading=nothing,
        dropping=_refuse_dropping,
        agreed=nothing,
        bar=lambda: contextlib.nullcontext(progress),
        stopping=lambda: None,
    )
    done = Transfers(stop=stop)
    await transfer_sources(connect, run, hooks, done, signals=False)
    return done.reports[0] if done.reports else None


async def dry_run(connect: Connect, run: TransferRun) -> TransferReport | None:
    """``run`` as a plan: what it would do, reading without taking, the target checked as
    for the run (:func:`run_group`)."""
    return await run_group(
        connect, dataclasses.replace(run, dry_run=True), NO_PROGRESS, asyncio.Event()
    )


async def transfer(
    connect: Connect,
    queue: str,
    choose: Chooser,
    kind: TransferKind,
    options: TransferOptions,
    progress: ProgressSink,
) -> TransferReport:
    async with connected(connect) as connection:
        return await engine.transfer(
            connection, queue, choose, options, kind=kind, progress=progress
        )
