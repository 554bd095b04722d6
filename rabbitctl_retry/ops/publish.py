"""``rr publish``: messages built from the command line or an export file, checked whole,
then published with confirms, and what became of each (docs/reference/cli.md, "rr publish").

* **Built and checked first.** Every message is built as an export record (``dlq/jsonl.py``
  :class:`~rabbitctl_retry.dlq.jsonl.Record`): ``--header`` and ``--property`` values go
  through the export format's own parser, so a header's type is written as the export file
  writes it (``K=V`` a string, ``K:=JSON`` a JSON value or a typed one such as
  ``{"$int32": 5}``). A message the client or RabbitMQ would refuse stops the command before
  the first publish (:class:`~rabbitctl_retry.errors.UsageError` for an option's syntax,
  :class:`~rabbitctl_retry.errors.DataError` for a value or a file's line).
* **A message id.** A message without one gets a fresh one (a UUID): a return is matched to
  its publish by it (``transport/message_ids.py``), and the report names it.
* **Sent like a transfer's copies** (``ops/copies/sending.py``): ``mandatory``, on one
  confirm channel, in order, the first one alone, at most ``--rate`` a second. A returned or
  nacked message does not stop the others; a closed channel or connection does: what was
  sent and not confirmed is reported as unconfirmed, and what had not been sent when it
  closed (waiting for its turn or its ``--rate`` slot) as not sent; the waits end at once.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from rabbitctl_retry.dlq.jsonl import Record, parse_record, record_problem, short_string_problem
from rabbitctl_retry.dlq.rate import Pace
from rabbitctl_retry.errors import (
    AccessRefused,
    DataError,
    NotFound,
    PublishReturned,
    TransportError,
    UsageError,
)
from rabbitctl_retry.ops.connected import connected
from rabbitctl_retry.ops.copies.sending import CopySender, Turn
from rabbitctl_retry.ops.copies.sent import SendResult, Sent
from rabbitctl_retry.ops.dlq import NO_PROGRESS, ProgressSink, prepared, properties_of
from rabbitctl_retry.ops.dlq_runs import Bar
from rabbitctl_retry.ops.probe import Connect
from rabbitctl_retry.retry.properties import PROPERTY_NAMES
from rabbitctl_retry.transport.base import Connection, Properties
from rabbitctl_retry.transport.values import encoding_problem

if TYPE_CHECKING:
    from rabbitctl_retry.telemetry.tracing import Tracing

WINDOW = 500
"""Messages in flight at most (sent, not yet confirmed)."""

_INT_PROPERTIES = frozenset({"delivery_mode", "priority"})


# --------------------------------------------------------------------------- building


def _split(given: str, option: str, *, typed: bool) -> tuple[str, str, bool]:
    """``K=V`` (or, with ``typed``, ``K:=JSON``) as (key, value, is_json)."""
    if typed and ":=" in given and given.index(":=") < given.index("="):
        key, value = given.split(":=", 1)
        is_json = True
    elif "=" in given:
        key, value = given.split("=", 1)
        is_json = False
    else:
        form = "K=V or K:=JSON" if typed else "K=V"
        raise UsageError(f"{option} {given!r}: expected {form}")
    if not key:
        raise UsageError(f"{option} {given!r}: the name before '=' is empty")
    return key, value, is_json


def headers_document(given: Sequence[str]) -> dict[str, Any]:
    """``--header`` values as the export's ``headers`` object: ``K=V`` a string, ``K:=JSON``
    the JSON value (typed tags as in an export file: ``{"$int32": 5}``)."""
    document: dict[str, Any] = {}
    for item in given:
        key, value, is_json = _split(item, "--header", typed=True)
        if is_json:
            try:
                document[key] = json.loads(value)
            except ValueError as error:
                raise UsageError(f"--header {item!r}: the value is not JSON ({error})") from None
        else:
            document[key] = value
    return document


def properties_document(given: Sequence[str]) -> dict[str, Any]:
    """``--property`` values as the export's ``properties`` object (``delivery_mode`` and
    ``priority`` as integers, ``timestamp`` as ISO 8601, the others strings)."""
    document: dict[str, Any] = {}
    for item in given:
        name, value, _ = _split(item, "--property", typed=False)
        if name == "headers":
            raise UsageError(f"--property {item!r}: headers are given with --header")
        if name not in PROPERTY_NAMES:
            known = ", ".join(PROPERTY_NAMES)
            raise UsageError(f"--property {item!r}: unknown property {name!r} (known: {known})")
        if name in _INT_PROPERTIES:
            if not value.isdigit():
                raise UsageError(f"--property {item!r}: {name} must be an integer 0-255")
            document[name] = int(value)
        else:
            document[name] = value
    return document


PERSISTENT = 2
"""``delivery_mode`` of a message rr publishes from the command line unless told otherwise."""


def command_line_record(body: bytes, headers: Sequence[str], properties: Sequence[str]) -> Record:
    """One message of ``--body`` / ``--body-file``, with its ``--header`` and ``--property``
    values, read by the export format's parser (module doc); persistent unless told
    (``delivery_mode=1``), as ``rr.Publisher`` and handlers' outputs publish."""
    given = properties_document(properties)
    return _record(body, headers, {"delivery_mode": PERSISTENT, **given})


def _record(body: bytes, headers: Sequence[str], properties: dict[str, Any]) -> Record:
    import base64

    document = {
        "body": base64.b64encode(body).decode("ascii"),
        "properties": properties,
        "headers": headers_document(headers),
    }
    try:
        return parse_record(json.dumps(document), "the command line")
    except DataError as error:
        raise UsageError(str(error).replace("the command line: ", "", 1)) from None


def with_options(record: Record, headers: Sequence[str], properties: Sequence[str]) -> Record:
    """An export file's ``record`` with the command line's ``--header`` and ``--property``
    values set over its own (its other properties, ``delivery_mode`` too, as they are)."""
    if not headers and not properties:
        return record
    given = _record(b"", headers, properties_document(properties))
    merged_headers = {**(record.headers or {}), **(given.headers or {})}
    return replace(
        record,
        properties={**record.properties, **given.properties},
        headers=merged_headers or None,
    )


@dataclass(frozen=True, slots=True)
class Message:
    """One message ready to publish."""

    number: int
    """Its place: 1-based, in the order of publishing."""
    source: str
    """Where it came from (``--body``, ``FILE:LINE``)."""
    body: bytes
    properties: Properties


def checked_messages(
    records: Iterable[tuple[str, Record]],
    *,
    count: int,
    user: str | None,
) -> list[Message]:
    """Every message to publish: the records in their order, that whole sequence ``count``
    times over (records a, b with ``count`` 3: a b a b a b). Each record is checked first for
    what the client or RabbitMQ would refuse (:class:`DataError` naming the first bad one:
    nothing is published then). A message without a ``message_id`` gets a fresh one, each
    time it is repeated."""
    if count < 1:
        raise UsageError(f"--count must be 1 or more, not {count}")
    checked: list[tuple[str, Record]] = []
    for source, record in records:
        ready, _ = prepared(record, user)
        problem = record_problem(ready) or encoding_problem(properties_of(ready))
        if problem is not None:
            raise DataError(f"{source}: {problem}; nothing was published")
        checked.append((source, ready))
    messages: list[Message] = []
    for _ in range(count):
        for source, ready in checked:
            properties = properties_of(ready)
            if properties.message_id is None:
                properties = replace(properties, message_id=str(uuid.uuid4()))
            messages.append(Message(len(messages) + 1, source, ready.body, properties))
    return messages


def check_target(exchange: str, routing_key: str) -> None:
    """An exchange name or routing key AMQP cannot carry is a usage error (exit 2)."""
    for option, value in (("--exchange", exchange), ("--routing-key", routing_key)):
        problem = short_string_problem(value)
        if problem is not None:
            raise UsageError(f"{option}: {problem}")


# --------------------------------------------------------------------------- publishing


@dataclass(frozen=True, slots=True)
class Failure:
    number: int
    source: str
    message_id: str | None
    outcome: str
    """``returned``, ``refused`` (nacked), ``unencodable`` or ``unconfirmed``."""
    reason: str


@dataclass(frozen=True, slots=True)
class PublishReport:
    exchange: str
    routing_key: str
    messages: int
    confirmed: int
    failures: tuple[Failure, ...] = ()
    not_sent: int = 0
    """Messages never sent: the channel or connection closed first."""
    error: TransportError | None = None
    """What closed the channel or the connection, if something did."""
    confirmed_ids: tuple[str, ...] = field(default=(), repr=False)

    def count(self, outcome: str) -> int:
        return sum(1 for failure in self.failures if failure.outcome == outcome)


def _outcome_name(outcome: Sent, error: BaseException | None) -> str:
    if outcome is Sent.REFUSED:
        return "returned" if isinstance(error, PublishReturned) else "refused"
    if outcome is Sent.UNENCODABLE:
        return "unencodable"
    return "unconfirmed"


async def _send(
    sender: CopySender,
    turn: Turn,
    message: Message,
    exchange: str,
    routing_key: str,
    tracing: Tracing | None,
) -> SendResult:
    """One message published in its turn (in its span, tracing on)."""
    if tracing is None:
        return await sender.publish(
            turn, message.body, routing_key, message.properties, exchange=exchange
        )
    with tracing.producing(exchange or routing_key, message_id=message.properties.message_id):
        properties = tracing.stamp_properties(message.properties)
        return await sender.publish(turn, message.body, routing_key, properties, exchange=exchange)


async def publish_messages(
    connection: Connection,
    messages: Sequence[Message],
    *,
    exchange: str,
    routing_key: str,
    pace: Pace | None = None,
    progress: ProgressSink = NO_PROGRESS,
    tracing: Tracing | None = None,
) -> PublishReport:
    """Publish ``messages`` to ``exchange`` with ``routing_key`` (module doc) and report what
    became of each; with ``tracing`` (on), each in a PRODUCER span whose trace context it
    carries, with a publish stamp (docs/reference/runtime.md, "Tracing and metrics")."""
    progress.begin(len(messages), f"publishing to {exchange or routing_key}")
    channel = await connection.channel(confirms=True)
    closing = asyncio.Event()  # set once the channel or connection closed: waits end
    sender = CopySender(channel, pace=pace, abort=closing)
    slots = asyncio.Semaphore(WINDOW)
    confirmed: list[Message] = []
    failures: list[Failure] = []
    closed: list[TransportError] = []
    pending: set[asyncio.Future[None]] = set()
    started_count = 0
    unsent_count = 0  # started, but their turn came after the close: never sent

    async def publish(message: Message, turn: Any) -> None:
        nonlocal unsent_count
        with turn:
            try:
                await sender.wait(turn)
                if turn.after is not None:
                    await turn.after  # the messages before this one went out (or never will)
                if closed or channel.is_closed:
                    unsent_count += 1
                    return
                sent = await _send(sender, turn, message, exchange, routing_key, tracing)
            finally:
                slots.release()
        if sent.outcome is Sent.CONFIRMED:
            confirmed.append(message)
            progress.advance()
            return
        failures.append(
            Failure(
                message.number,
                message.source,
                message.properties.message_id,
                _outcome_name(sent.outcome, sent.error),
                str(sent.error),
            )
        )
        if sent.outcome is Sent.CUT or isinstance(sent.error, AccessRefused):
            assert isinstance(sent.error, TransportError)
            closed.append(sent.error)
            closing.set()

    try:
        for message in messages:
            await slots.acquire()
            if closed:
                slots.release()
                break
            turn = sender.turn()
            started_count += 1
            task = asyncio.ensure_future(publish(message, turn))
            pending.add(task)
            task.add_done_callback(pending.discard)
        await asyncio.gather(*pending)
    finally:
        await channel.close()
    if closed and isinstance(closed[0], NotFound):
        # the server closed the channel because the exchange does not exist: no message
        # sent on it was enqueued (every one went to that exchange)
        failures = [replace(failure, outcome="refused") for failure in failures]
    return PublishReport(
        exchange=exchange,
        routing_key=routing_key,
        messages=len(messages),
        confirmed=len(confirmed),
        failures=tuple(sorted(failures, key=lambda failure: failure.number)),
        not_sent=len(messages) - started_count + unsent_count,
        error=closed[0] if closed else None,
        confirmed_ids=tuple(m.properties.message_id or "" for m in confirmed),
    )


async def publish_run(
    connect: Connect,
    messages: Sequence[Message],
    *,
    exchange: str,
    routing_key: str,
    pace: Pace | None,
    bar: Bar,
    tracing: Tracing | None = None,
) -> PublishReport:
    """``rr publish``: the checked messages published on a connection of its own
    (:func:`publish_messages`)."""
    async with connected(connect) as connection:
        with bar() as progress:
            return await publish_messages(
                connection,
                messages,
                exchange=exchange,
                routing_key=routing_key,
                pace=pace,
                progress=progress,
                tracing=tracing,
            )


def numbered(records: Iterator[tuple[int, Record]], label: str) -> Iterator[tuple[str, Record]]:
    """An export file's (line number, record) pairs as (``FILE:LINE``, record)."""
    for number, record in records:
        yield f"{label}:{number}", record
