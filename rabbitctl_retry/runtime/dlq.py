"""The shell of ``rr dlq``: read, export, import and purge dead letters on a broker.

Decisions come from the pure core (``rabbitctl_retry.dlq``); this module only carries them out
on the transport port, so the same code runs on RabbitMQ and on the emulator.

Reading without taking (inspect, export, dry-run replay)
    ``basic.consume`` with a prefetch of exactly the messages wanted (``min(--limit, the
    queue's depth at the start)``), never acking; once they are in, the channel is closed and
    RabbitMQ returns every unacked delivery to its queue. A classic queue puts each back where
    it was (measured on RabbitMQ 3.10: same messages, same order); a quorum queue returns them
    ahead of its other messages, in order, but counts each return as a delivery
    (``x-delivery-count`` + 1), which can trip its delivery limit: the CLI says so and asks
    first. (``basic.nack(requeue=true)`` would move quorum messages to the back: not used.)

Publishing many copies at once (import, and replay in ``runtime/replay.py``)
    Two publishes with the same ``message_id`` are never in flight at once on a channel
    (:class:`MessageIdGuard`): aiormq matches a ``basic.return`` to its publish by
    ``message_id``, so with two in flight a returned copy's failure could land on the other
    one. aiormq also gives a message published without a ``message_id`` a random one, which
    the copy then carries.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TextIO

from rabbitctl_retry.dlq.jsonl import PROPERTY_NAMES, Record, parse_record, record_line
from rabbitctl_retry.errors import (
    BrokerUnreachable,
    DataError,
    NotFound,
    PreconditionFailed,
    PublishFailed,
    TransportError,
)
from rabbitctl_retry.runtime.message_ids import MessageIdGuard
from rabbitctl_retry.topology.inequivalence import Declaration, adopt_current, parse_inequivalence
from rabbitctl_retry.transport.base import Connection, Delivery, Properties

MAX_PREFETCH = 65535
"""basic.qos takes a 16-bit prefetch count; 0 means no limit."""

REPLAY_WINDOW = 500
"""Dead letters a replay, or copies an import, holds at once."""

IDLE_S = 3.0
"""A read or a replay that gets no delivery for this long stops: another consumer on the
queue is taking the rest."""

_NOT_FOUND = re.compile(r"NOT_FOUND - (?P<text>.*?)(?: \(404\))?$")


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


@dataclass(frozen=True, slots=True)
class QueueState:
    """What rr knows about a queue before it touches its messages."""

    name: str
    message_count: int
    quorum: bool | None
    """True for a quorum queue, False for any other, None when the broker would not say."""
    delivery_limit: int | None = None


def missing_queue_error(error: NotFound, queue: str) -> NotFound:
    """``no queue 'X' in vhost 'V'``: the broker's own words, without the operation prefix."""
    found = _NOT_FOUND.search(error.message)
    return NotFound(found.group("text") if found else f"no queue {queue!r}: {error.message}")


async def queue_state(connection: Connection, queue: str) -> QueueState:
    """The queue's depth and type; :class:`NotFound` (exit 1) when it does not exist.

    The type comes from re-declaring the queue as a quorum queue on throwaway channels and
    taking the broker's value for each argument it refuses (the same probe ``rr declare``
    uses), until the broker accepts: the accepted ``x-queue-type`` is the queue's. An
    equivalent re-declare changes nothing.
    """
    channel = await connection.channel()
    try:
        info = await channel.queue_declare(queue, passive=True)
    except NotFound as error:
        raise missing_queue_error(error, queue) from None
    finally:
        await channel.close()
    quorum, limit = await _probe_type(connection, queue)
    return QueueState(
        name=queue, message_count=info.message_count, quorum=quorum, delivery_limit=limit
    )


async def _probe_type(connection: Connection, queue: str) -> tuple[bool | None, int | None]:
    declaration = Declaration(durable=True, arguments={"x-queue-type": "quorum"})
    for _ in range(32):
        channel = await connection.channel()
        try:
            await channel.queue_declare(
                queue,
                durable=declaration.durable,
                auto_delete=declaration.auto_delete,
                arguments=declaration.arguments,
            )
        except PreconditionFailed as error:
            found = parse_inequivalence(str(error))
            adopted = adopt_current(declaration, found) if found is not None else None
            if adopted is None:
                return None, None
            declaration = adopted
            continue
        except TransportError:
            return None, None
        finally:
            await channel.close()
        arguments = declaration.arguments
        limit = arguments.get("x-delivery-limit")
        quorum = arguments.get("x-queue-type") == "quorum"
        return quorum, limit if isinstance(limit, int) and not isinstance(limit, bool) else None
    return None, None


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
class ReadResult:
    in_queue: int
    """Messages ready in the queue when the read started."""
    deliveries: tuple[Delivery, ...]
    complete: bool
    """False when the read stopped early: no delivery came for a while (another consumer)."""


async def read_messages(
    connection: Connection,
    queue: str,
    *,
    limit: int | None = None,
    keep_going: Callable[[Delivery], bool] | None = None,
    progress: ProgressSink = NO_PROGRESS,
    idle_s: float = IDLE_S,
) -> ReadResult:
    """Read up to ``limit`` messages of ``queue`` without taking them (see the module doc).

    ``keep_going`` is called with each delivery in order; returning False stops the read
    after that one. Returns the deliveries in queue order; afterwards the queue holds them
    again. :class:`NotFound` when the queue is missing.
    """
    channel = await connection.channel()
    try:
        try:
            info = await channel.queue_declare(queue, passive=True)
        except NotFound as error:
            raise missing_queue_error(error, queue) from None
        wanted = info.message_count if limit is None else min(limit, info.message_count)
        progress.begin(wanted, f"reading {queue}")
        if wanted <= 0:
            return ReadResult(info.message_count, (), True)
        got: list[Delivery] = []
        enough = asyncio.Event()

        async def on_delivery(delivery: Delivery) -> None:
            if enough.is_set():
                return  # past the end (only with prefetch 0): it goes back at close
            got.append(delivery)
            progress.advance()
            more = keep_going(delivery) if keep_going is not None else True
            if not more or len(got) >= wanted:
                enough.set()

        await channel.qos(wanted if wanted <= MAX_PREFETCH else 0)
        await channel.consume(queue, on_delivery)
        complete = await _wait_for(enough, connection, lambda: len(got), idle_s)
        return ReadResult(info.message_count, tuple(got), complete)
    finally:
        await channel.close()


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


# --------------------------------------------------------------------------- publishing


async def queue_missing(connection: Connection, queue: str) -> str | None:
    """None when ``queue`` exists, else why it cannot take a copy."""
    channel = await connection.channel()
    try:
        await channel.queue_declare(queue, passive=True)
    except NotFound as error:
        return missing_queue_error(error, queue).message
    finally:
        await channel.close()
    return None


# --------------------------------------------------------------------------- export / import


def record_of(delivery: Delivery) -> Record:
    """A delivery as one export record."""
    properties = delivery.properties
    values = {
        name: getattr(properties, name)
        for name in PROPERTY_NAMES
        if getattr(properties, name) is not None
    }
    return Record(
        body=delivery.body,
        exchange=delivery.exchange,
        routing_key=delivery.routing_key,
        redelivered=delivery.redelivered,
        properties=values,
        headers=properties.headers,
    )


def properties_of(record: Record) -> Properties:
    """An export record's properties, exactly (headers included)."""
    values: dict[str, Any] = dict(record.properties)
    return Properties(**values, headers=dict(record.headers) if record.headers else None)


async def export_queue(
    connection: Connection,
    queue: str,
    out: TextIO,
    *,
    limit: int | None = None,
    progress: ProgressSink = NO_PROGRESS,
) -> ReadResult:
    """Write up to ``limit`` messages of ``queue`` to ``out`` as JSON Lines, taking none."""
    read = await read_messages(connection, queue, limit=limit, progress=progress)
    for delivery in read.deliveries:
        out.write(record_line(record_of(delivery)))
        out.write("\n")
    out.flush()
    return read


def read_records(path: Path) -> Iterator[tuple[int, Record]]:
    """(line number, record) of every non-blank line; :class:`DataError` on the first bad one."""
    try:
        with path.open(encoding="utf-8") as lines:
            for number, line in enumerate(lines, start=1):
                if line.strip():
                    yield number, parse_record(line, f"{path}:{number}")
    except OSError as error:
        raise DataError(f"cannot read {path}: {error.strerror or error}") from None
    except UnicodeDecodeError as error:
        raise DataError(f"{path}: not UTF-8 text ({error.reason})") from None


@dataclass(frozen=True, slots=True)
class ImportReport:
    to: str
    in_file: int
    published: int
    failed: tuple[tuple[int, str], ...]
    """(line number, why) of each message the broker returned or refused."""
    interrupted: str | None = None


async def import_file(
    connection: Connection,
    path: Path,
    to: str,
    *,
    window: int = REPLAY_WINDOW,
    progress: ProgressSink = NO_PROGRESS,
) -> ImportReport:
    """Publish every message of an export file to queue ``to``, with confirms, in order.

    The whole file is checked first: a damaged line (:class:`DataError`, exit 65) stops the
    import before anything is published. Then each message goes to the default exchange with
    routing key ``to``, ``mandatory``, with its body, properties and headers as exported.
    """
    total = sum(1 for _ in read_records(path))
    state = await queue_missing(connection, to)
    if state is not None:
        raise NotFound(state)
    progress.begin(total, f"importing into {to}")
    channel = await connection.channel(confirms=True)
    slots = asyncio.Semaphore(window)
    guard = MessageIdGuard()
    failed: list[tuple[int, str]] = []
    published = 0
    interrupted: TransportError | None = None
    pending: set[asyncio.Future[None]] = set()

    async def publish(number: int, record: Record) -> None:
        nonlocal published, interrupted
        properties = properties_of(record)
        message_id = properties.message_id
        held = False
        try:
            if message_id is not None:
                await guard.acquire(message_id)
                held = True
            await channel.publish(
                record.body, routing_key=to, properties=properties, mandatory=True
            )
            published += 1
            progress.advance()
        except PublishFailed as error:
            failed.append((number, str(error)))
        except TransportError as error:
            interrupted = interrupted or error
        finally:
            if held and message_id is not None:
                guard.release(message_id)
            slots.release()

    try:
        for number, record in read_records(path):
            await slots.acquire()
            if interrupted is not None:
                slots.release()
                break
            task = asyncio.ensure_future(publish(number, record))
            pending.add(task)
            task.add_done_callback(pending.discard)
        await asyncio.gather(*pending)
    finally:
        await channel.close()
    return ImportReport(
        to=to,
        in_file=total,
        published=published,
        failed=tuple(sorted(failed)),
        interrupted=str(interrupted) if interrupted is not None else None,
    )


__all__ = [
    "IDLE_S",
    "NO_PROGRESS",
    "REPLAY_WINDOW",
    "ImportReport",
    "ProgressSink",
    "QueueState",
    "ReadResult",
    "export_queue",
    "import_file",
    "missing_queue_error",
    "purge",
    "queue_missing",
    "queue_state",
    "read_messages",
    "read_records",
    "record_of",
]
