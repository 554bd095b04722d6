"""The shell of ``rr dlq``: read, export, import and purge dead letters on a broker.

Decisions come from the pure core (``rabbitctl_retry.dlq``); this module only carries them out
on the transport port, so the same code runs on RabbitMQ and on the emulator.

Reading without taking (inspect, export, groups, dry runs, the console)
    ``basic.consume`` with a prefetch of exactly the messages wanted (``min(--limit, the
    queue's depth at the start)``), never acking; once they are in, every delivery is handed
    back (``dlq/read_cost.py``): on RabbitMQ 4.3 and later the consumer is cancelled and one
    ``basic.nack(multiple, requeue=true)`` returns them all, which no queue counts as a
    delivery (measured on 4.3.6); on older servers the channel's close returns them, and a
    quorum queue counts each (``x-delivery-count`` + 1; 3.10 would put a nacked one at the
    back). A classic queue puts each back where it was; a quorum queue serves them first, in
    order, behind what it holds from an earlier hand-back (a read of its head only may
    rotate them: docs/reference/dlq.md, "Inspecting without taking"). Where a read can drop a letter
    the command says so and asks first.

Publishing many copies at once (import, like replay and move)
    Through the transfers' one sender (``ops/copies/sending.py``): the first message goes alone (a
    refused permission then proves nothing arrived), then many are in flight at once on one
    confirm channel; the AMQP adapters keep two a return would be matched alike (the same
    ``message_id``, or without one the same target and body) from being in flight together
    (``transport/message_ids.py``). A message without a ``message_id`` is published without
    one.

Importing all or nothing, then resuming (docs/reference/dlq.md, "Import")
    Every line is checked before the first publish: what RabbitMQ or the AMQP client would
    refuse (:func:`~rabbitctl_retry.dlq.jsonl.record_problem`, then a dry run of the AMQP
    transport's own encoder, whichever broker is behind the port) stops the import with
    nothing published. What cannot be checked ahead (the queue deleted meanwhile, a refused
    permission, a full queue) stops it at the first line the broker did not confirm; the
    report names that line, for ``--from-line``.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TextIO
from urllib.parse import parse_qs, unquote, urlsplit

from rabbitctl_retry.dlq.jsonl import (
    Record,
    parse_record,
    record_line,
    record_problem,
    short_string_problem,
    without_user_id,
)
from rabbitctl_retry.dlq.read_cost import GiveBack, give_back_for
from rabbitctl_retry.dlq.target import drops_on_overflow
from rabbitctl_retry.errors import (
    AccessRefused,
    BrokerUnreachable,
    DataError,
    NotFound,
    TransportError,
    UsageError,
)

# QueueState and queue_state are the CLI's (as ``shell.queue_state``); they live in probe.py.
from rabbitctl_retry.ops.copies.sending import CopySender, Turn
from rabbitctl_retry.ops.copies.sent import Sent
from rabbitctl_retry.ops.probe import (
    QueueState,
    depth_on,
    missing_queue_error,
    queue_arguments,
    queue_missing,
    queue_state,
)
from rabbitctl_retry.retry.headers import ROUTING_HEADERS, without_routing_headers
from rabbitctl_retry.retry.properties import PROPERTY_NAMES
from rabbitctl_retry.transport.base import Channel, Connection, Delivery, Properties
from rabbitctl_retry.transport.values import encoding_problem
from rabbitctl_retry.user_files import IMPORT_LINE_LIMIT_BYTES, FileRefused, read_lines

MAX_PREFETCH = 65535
"""basic.qos takes a 16-bit prefetch count; 0 means no limit."""

REPLAY_WINDOW = 500
"""Dead letters a replay, or copies an import, holds at once."""

IDLE_S = 3.0
"""A read or a replay that gets no delivery for this long stops: another consumer on the
queue is taking the rest."""


class ProgressSink(Protocol):
    """Where long work reports how far it got (the CLI's progress bar)."""

    def begin(self, total: int, description: str) -> None: ...

    def advance(self, count: int = 1) -> None: ...


class _NoProgress:
    def begin(self, total: int, description: str) -> None:
        pass

    def advance(self, count: int = 1) -> None:
        pass


NO_PROGRESS: ProgressSink = _NoProgress()


# --------------------------------------------------------------------------- queues


async def purge(connection: Connection, queue: str) -> int:
    """Purge ``queue``; return how many messages went. :class:`NotFound` if it is missing."""
    channel = await connection.channel()
    try:
        return await channel.queue_purge(queue)
    except NotFound as error:
        raise missing_queue_error(error, queue) from None
    finally:
        await channel.close()


# --------------------------------------------------------------------------- reading


@dataclass(frozen=True, slots=True)
class ScanResult:
    in_queue: int
    """Messages ready in the queue when the read started."""
    read: int
    """Deliveries handed to the callback."""
    complete: bool
    """False when the read stopped early: no delivery came for a while (another consumer)."""


@dataclass(frozen=True, slots=True)
class ReadResult:
    in_queue: int
    """Messages ready in the queue when the read started."""
    deliveries: tuple[Delivery, ...]
    complete: bool
    """False when the read stopped early: no delivery came for a while (another consumer)."""


async def scan_messages(
    connection: Connection,
    queue: str,
    on_delivery: Callable[[Delivery], bool],
    *,
    limit: int | None = None,
    progress: ProgressSink = NO_PROGRESS,
    idle_s: float = IDLE_S,
) -> ScanResult:
    """Hand up to ``limit`` messages of ``queue`` to ``on_delivery``, in queue order, without
    taking them (see the module doc); nothing keeps them here, so a caller that does not keep
    them reads any number in constant memory.

    ``on_delivery`` returning False stops the read after that delivery. Afterwards the queue
    holds every message again. :class:`NotFound` when the queue is missing.
    """
    channel = await connection.channel()
    try:
        info = await depth_on(connection, channel, queue)
        wanted = info.message_count if limit is None else min(limit, info.message_count)
        progress.begin(wanted, f"reading {queue}")
        if wanted <= 0:
            return ScanResult(info.message_count, 0, True)
        read = 0
        last_tag = 0
        enough = asyncio.Event()

        async def on_message(delivery: Delivery) -> None:
            nonlocal read, last_tag
            last_tag = max(last_tag, delivery.delivery_tag)  # before any await
            if enough.is_set():
                return  # past the end (only with prefetch 0): it is handed back too
            read += 1
            progress.advance()
            if not on_delivery(delivery) or read >= wanted:
                enough.set()

        await channel.qos(wanted if wanted <= MAX_PREFETCH else 0)
        consumer_tag = await channel.consume(queue, on_message)
        complete = await _wait_for(enough, connection, lambda: read, idle_s)
        if give_back_for(connection.server_version.release) is GiveBack.NACK:
            await nack_back(channel, consumer_tag, lambda: last_tag)
        return ScanResult(info.message_count, read, complete)
    finally:
        await channel.close()


async def nack_back(
    channel: Channel, consumer_tag: str | None, last_tag: Callable[[], int]
) -> None:
    """Hand back every delivery of ``channel`` uncounted (RabbitMQ 4.3 and later): cancel the
    consumer (so that nothing handed back comes to it again), one ``basic.nack(multiple,
    requeue=true)`` up to the last tag delivered, then a round trip that proves the broker
    processed it before the channel closes (RabbitMQ may drop settles sent just before a
    close: docs/reference/dlq.md, "Known limits"). ``last_tag`` is read after the cancel: a delivery
    that arrived before the cancel-ok has been counted by then. If the channel is lost on
    the way, its close returns the rest, as on older servers."""
    try:
        if consumer_tag is not None:
            await channel.cancel(consumer_tag)
        tag = last_tag()
        if tag:
            await channel.nack(tag, multiple=True, requeue=True)
            await channel.qos(0)
    except TransportError:
        return


async def read_messages(
    connection: Connection,
    queue: str,
    *,
    limit: int | None = None,
    keep_going: Callable[[Delivery], bool] | None = None,
    progress: ProgressSink = NO_PROGRESS,
    idle_s: float = IDLE_S,
) -> ReadResult:
    """:func:`scan_messages`, keeping the deliveries: returns them in queue order.

    ``keep_going`` is called with each delivery in order; returning False stops the read
    after that one.
    """
    got: list[Delivery] = []

    def keep(delivery: Delivery) -> bool:
        got.append(delivery)
        return keep_going(delivery) if keep_going is not None else True

    scan = await scan_messages(
        connection, queue, keep, limit=limit, progress=progress, idle_s=idle_s
    )
    return ReadResult(scan.in_queue, tuple(got), scan.complete)


async def _wait_for(
    event: asyncio.Event, connection: Connection, seen: Callable[[], int], idle_s: float
) -> bool:
    """Wait for ``event``; False if ``seen()`` stops growing for ``idle_s``. Raises
    :class:`BrokerUnreachable` if the connection drops meanwhile."""
    closed = asyncio.ensure_future(connection.wait_closed())
    try:
        while not event.is_set():
            before = seen()
            waiter = asyncio.ensure_future(event.wait())
            await asyncio.wait({waiter, closed}, timeout=idle_s, return_when="FIRST_COMPLETED")
            waiter.cancel()
            if event.is_set():
                break
            if closed.done():
                raise BrokerUnreachable("the connection to the broker closed while reading")
            if seen() == before:
                return False
        return True
    finally:
        closed.cancel()


async def target_drops(connection: Connection, queue: str) -> str | None:
    """How ``queue`` (a replay's or move's ``--to``) drops copies it confirmed, or ``None``:
    also when it does not exist yet or the broker will not say (``dlq/target.py``)."""
    if await queue_missing(connection, queue) is not None:
        return None
    arguments = await queue_arguments(connection, queue)
    return None if arguments is None else drops_on_overflow(arguments)


# --------------------------------------------------------------------------- export / import


def record_of(delivery: Delivery) -> Record:
    """A delivery as one export record."""
    return message_record(
        delivery.body,
        delivery.properties,
        exchange=delivery.exchange,
        routing_key=delivery.routing_key,
        redelivered=delivery.redelivered,
    )


def message_record(
    body: bytes,
    properties: Properties,
    *,
    exchange: str,
    routing_key: str,
    redelivered: bool = False,
) -> Record:
    """A message (its body, properties and where it goes or came from) as one export record."""
    values = {
        name: getattr(properties, name)
        for name in PROPERTY_NAMES
        if getattr(properties, name) is not None
    }
    return Record(
        body=body,
        exchange=exchange,
        routing_key=routing_key,
        redelivered=redelivered,
        properties=values,
        headers=properties.headers,
    )


def properties_of(record: Record) -> Properties:
    """An export record's properties, exactly (headers included, with their types)."""
    values: dict[str, Any] = dict(record.properties)
    headers = record.headers
    if not headers:
        return Properties(**values)
    return Properties(**values, headers=headers if isinstance(headers, dict) else dict(headers))


@dataclass(frozen=True, slots=True)
class ExportResult:
    in_queue: int
    """Messages ready in the queue when the read started."""
    exported: int
    """Messages written."""
    complete: bool
    """False when the read stopped early: no delivery came for a while (another consumer)."""


async def export_queue(
    connection: Connection,
    queue: str,
    out: TextIO,
    *,
    limit: int | None = None,
    progress: ProgressSink = NO_PROGRESS,
    keep: Callable[[Delivery], bool] | None = None,
) -> ExportResult:
    """Write up to ``limit`` messages of ``queue`` to ``out`` as JSON Lines, taking none;
    with ``keep``, only those it keeps (``--where``). Each is written as it is read: any
    number in constant memory. The first write that fails ends the read and is raised."""
    exported = 0
    failure: Exception | None = None

    def write(delivery: Delivery) -> bool:
        nonlocal exported, failure
        try:
            if keep is not None and not keep(delivery):
                return True
            out.write(record_line(record_of(delivery)) + "\n")
        except Exception as error:  # raised below: the transport would drop it here
            failure = error
            return False
        exported += 1
        return True

    scan = await scan_messages(connection, queue, write, limit=limit, progress=progress)
    if failure is not None:
        raise failure
    out.flush()
    return ExportResult(scan.in_queue, exported, scan.complete)


def read_records(path: Path) -> Iterator[tuple[int, Record]]:
    """(line number, record) of every non-blank line; :class:`DataError` on the first bad one.

    The file is a regular file read a line at a time, each line at most
    :data:`IMPORT_LINE_LIMIT_BYTES` (docs/reference/cli.md, "Files rr reads"): a FIFO or a device is
    refused unread, and the memory is that of one line whatever the file's size."""
    try:
        with read_lines(path, line_limit_bytes=IMPORT_LINE_LIMIT_BYTES) as lines:
            for number, line in lines:
                if line.strip():
                    yield number, parse_record(line, f"{path}:{number}")
    except FileRefused as refused:
        where = f"{path}:{refused.line}" if refused.line is not None else str(path)
        raise DataError(f"{where}: {refused.reason}") from None


def login_user(url: str) -> str | None:
    """The user rr logs in as with ``url`` (the AMQP client's default: ``guest``); None when
    the URL logs in with a client certificate (``auth=external``): then rr cannot tell."""
    parts = urlsplit(url)
    if "external" in [value.lower() for value in parse_qs(parts.query).get("auth", [])]:
        return None
    return unquote(parts.username) if parts.username else "guest"


def prepared(record: Record, user: str | None) -> tuple[Record, bool]:
    """``record`` as import publishes it, and whether its ``user_id`` was dropped: RabbitMQ
    refuses (406, closing the channel) a ``user_id`` other than the publisher's login, so one
    that is not ``user`` goes; and never with ``CC`` or ``BCC``, which would send it to the
    queues they name too (docs/reference/dlq.md, "Import")."""
    if record.headers and ROUTING_HEADERS & record.headers.keys():
        record = dataclasses.replace(record, headers=without_routing_headers(record.headers))
    user_id = record.properties.get("user_id")
    if user_id is None or (user is not None and user_id == user):
        return record, False
    return without_user_id(record), True


@dataclass(frozen=True, slots=True)
class CheckedFile:
    """An export file that import can publish whole: every line parses and encodes."""

    messages: int
    """Non-blank lines."""
    last_line: int
    """The line number of the last message (0: none)."""
    from_line: int
    to_publish: int
    """Messages on ``from_line`` or after."""
    user_ids_dropped: int
    """Messages to publish whose ``user_id`` goes (:func:`prepared`)."""


def _all_or_nothing(records: Iterator[tuple[int, Record]]) -> Iterator[tuple[int, Record]]:
    """``records``; a line that cannot be read says too that nothing was imported."""
    try:
        yield from records
    except DataError as error:
        raise DataError(f"{error.message}; nothing was imported") from None


def check_file(path: Path, to: str, *, from_line: int = 1, user: str | None) -> CheckedFile:
    """Check every line of ``path`` (also those before ``from_line``) for what the client or
    RabbitMQ would refuse; :class:`DataError` (exit 65) naming the first bad line and field.
    """
    problem = short_string_problem(to)
    if problem is not None:
        raise UsageError(f"--to: the queue name {problem}")
    if from_line < 1:
        raise UsageError(f"--from-line must be 1 or more, not {from_line}")
    messages = last_line = to_publish = dropped = 0
    for number, record in _all_or_nothing(read_records(path)):
        ready, user_id_dropped = prepared(record, user)
        problem = record_problem(record) or encoding_problem(properties_of(ready))
        if problem is not None:
            raise DataError(f"{path}:{number}: {problem}; nothing was imported")
        messages += 1
        last_line = number
        if number >= from_line:
            to_publish += 1
            dropped += user_id_dropped
    if from_line > 1 and from_line > last_line:
        raise UsageError(
            f"--from-line {from_line}: {path} has no message on that line or after "
            f"(its last message is on line {last_line}); nothing was imported"
        )
    return CheckedFile(messages, last_line, from_line, to_publish, dropped)


@dataclass(frozen=True, slots=True)
class ImportReport:
    to: str
    path: Path
    checked: CheckedFile
    published: int
    """Messages the broker confirmed."""
    first_not_imported: int | None = None
    """The first line (on ``from_line`` or after) the broker did not confirm; None when every
    one was."""
    reason: str | None = None
    """Why that line was not imported."""
    error: TransportError | None = None
    """The error that closed the channel or the connection, if one did."""
    unconfirmed: tuple[int, ...] = ()
    """Lines sent whose confirm never came (the channel or connection closed first): they may
    be in the queue."""
    confirmed_after: tuple[int, ...] = ()
    """Lines after ``first_not_imported`` that the broker confirmed all the same."""


async def import_file(
    connection: Connection,
    path: Path,
    to: str,
    *,
    from_line: int = 1,
    user: str | None = "guest",
    checked: CheckedFile | None = None,
    window: int = REPLAY_WINDOW,
    progress: ProgressSink = NO_PROGRESS,
) -> ImportReport:
    """Publish the messages of an export file on ``from_line`` or after to queue ``to``, with
    confirms, in order.

    The whole file is checked first (:func:`check_file`): nothing is published when a line
    would be refused. Then each message goes to the default exchange with routing key ``to``,
    ``mandatory``, with its body, properties and headers as exported (``user_id`` only when it
    is ``user``'s). The first message the broker refuses (returns, nacks) or cannot confirm
    stops the import: nothing more is sent, and the report names that line. ``checked``: the
    file was checked already (with the same ``to``, ``from_line`` and ``user``).
    """
    if checked is None:
        checked = check_file(path, to, from_line=from_line, user=user)
    state = await queue_missing(connection, to)
    if state is not None:
        raise NotFound(state)
    progress.begin(checked.to_publish, f"importing into {to}")
    channel = await connection.channel(confirms=True)
    sender = CopySender(channel)
    slots = asyncio.Semaphore(window)
    confirmed: set[int] = set()
    refused: dict[int, str] = {}
    unconfirmed: set[int] = set()
    closed: list[TransportError] = []
    pending: set[asyncio.Future[None]] = set()

    async def publish(number: int, record: Record, turn: Turn) -> None:
        with turn:
            try:
                await sender.wait(turn)
                sent = await sender.publish(turn, record.body, to, properties_of(record))
            finally:
                slots.release()
        match sent.outcome:
            case Sent.CONFIRMED:
                confirmed.add(number)
                progress.advance()
            case Sent.REFUSED | Sent.UNENCODABLE:
                refused[number] = str(sent.error)
                if isinstance(sent.error, AccessRefused):  # the channel is gone: exit 77
                    closed.append(sent.error)
            case Sent.CUT:
                assert isinstance(sent.error, TransportError)
                unconfirmed.add(number)
                closed.append(sent.error)

    try:
        for number, record in read_records(path):
            if number < from_line:
                continue
            await slots.acquire()
            if refused or unconfirmed:
                slots.release()
                break
            turn = sender.turn()  # in file order
            task = asyncio.ensure_future(publish(number, prepared(record, user)[0], turn))
            pending.add(task)
            task.add_done_callback(pending.discard)
        await asyncio.gather(*pending)
    finally:
        await channel.close()
    not_imported = sorted(refused.keys() | unconfirmed)
    first = not_imported[0] if not_imported else None
    reason: str | None = None
    if first is not None:
        reason = refused.get(first) or (str(closed[0]) if closed else None)
    return ImportReport(
        to=to,
        path=path,
        checked=checked,
        published=len(confirmed),
        first_not_imported=first,
        reason=reason,
        error=closed[0] if closed else None,
        unconfirmed=tuple(sorted(unconfirmed)),
        confirmed_after=tuple(sorted(n for n in confirmed if first is not None and n > first)),
    )


__all__ = [
    "IDLE_S",
    "NO_PROGRESS",
    "REPLAY_WINDOW",
    "CheckedFile",
    "ExportResult",
    "ImportReport",
    "ProgressSink",
    "QueueState",
    "ReadResult",
    "ScanResult",
    "check_file",
    "export_queue",
    "import_file",
    "login_user",
    "nack_back",
    "purge",
    "queue_state",
    "read_messages",
    "read_records",
    "record_of",
    "scan_messages",
]
