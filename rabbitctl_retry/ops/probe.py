"""Looking at queues and exchanges on the broker without changing them.

Every probe runs on a channel of its own (:func:`_on_own_channel`), opened for it and always
closed afterwards: RabbitMQ answers a look-up it refuses by closing the channel (404
NOT_FOUND, 405 RESOURCE_LOCKED, 406 PRECONDITION_FAILED), so the caller's other channels and
the connection carry on. Two kinds of probe:

* a passive declare: does the queue or exchange exist (declare-ok), or not (404)? For a queue
  it also gives the depth.
* a re-declare with the arguments rr has in mind: RabbitMQ answers an equivalent one with
  declare-ok (a no-op) and an inequivalent one with a 406 that names one differing argument
  and its current value (``topology/inequivalence.py`` reads it). Taking the broker's value
  and re-declaring again, until the broker accepts, learns every difference
  (:func:`_redeclare_until_accepted`); the accepted declaration is the one the broker holds.

An exchange type that needs a plugin is tried on a throwaway connection instead
(:func:`exchange_type`), since RabbitMQ closes the whole connection (503) for an unknown type.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import TypeVar

from rabbitctl_retry.dlq.read_cost import Cost, GiveBack, ReadCost, give_back_for, read_cost
from rabbitctl_retry.errors import (
    NotFound,
    PreconditionFailed,
    ResourceLocked,
    TransportError,
)
from rabbitctl_retry.fields import FieldValue
from rabbitctl_retry.ops.connected import Connect
from rabbitctl_retry.topology.expand import ExchangeEntity, QueueEntity
from rabbitctl_retry.topology.inequivalence import (
    Declaration,
    Inequivalence,
    adopt_current,
    desired_display,
    parse_inequivalence,
)
from rabbitctl_retry.topology.plan import Absent, Difference, Differs, Matches, Observation, Refused
from rabbitctl_retry.transport.base import Channel, Connection, Delivery, QueueInfo

T = TypeVar("T")


_MAX_DIFFERENCES = 32

_NOT_FOUND = re.compile(r"NOT_FOUND - (?P<text>.*?)(?: \(404\))?$")


async def _on_own_channel(connection: Connection, probe: Callable[[Channel], Awaitable[T]]) -> T:
    """Run ``probe`` on a channel opened for it; the channel is closed whatever happens (one
    the broker closed with 404/405/406 already is, and closing it again is a no-op). What
    ``probe`` raises goes to the caller."""
    channel = await connection.channel()
    try:
        return await probe(channel)
    finally:
        await channel.close()


# --------------------------------------------------------------------------- passive look-ups


def missing_queue_error(error: NotFound, queue: str) -> NotFound:
    """``no queue 'X' in vhost 'V'``: the broker's own words, without the operation prefix."""
    found = _NOT_FOUND.search(error.message)
    return NotFound(found.group("text") if found else f"no queue {queue!r}: {error.message}")


async def queue_info_on(channel: Channel, queue: str) -> QueueInfo:
    """A passive declare of ``queue`` on the caller's own working ``channel`` (one it goes on
    to consume on): declare-ok gives the depth; a 404 (which closes ``channel``) raises
    :class:`NotFound` in the broker's words (:func:`missing_queue_error`)."""
    try:
        return await channel.queue_declare(queue, passive=True)
    except NotFound as error:
        raise missing_queue_error(error, queue) from None


async def depth_on(connection: Connection, channel: Channel, queue: str) -> QueueInfo:
    """:func:`queue_info_on`, with a message count of 0 confirmed before it is believed.

    A quorum queue whose leader is not reachable at that instant (just after a node of a
    cluster stopped, while the queue elects a new one) answers a passive declare with 0
    messages and 0 consumers on RabbitMQ 3.10, however many it holds
    (docs/how-to/run-on-a-cluster.md, "What a quorum queue says during an election"). So a 0 is
    checked with one
    ``basic.get`` on a channel of its own, closed at once: get-empty confirms it; a message
    means the queue holds it plus the count its get-ok gives, and it is handed back as every
    read is (``dlq/read_cost.py``: a ``basic.nack`` where that is not counted, else the
    channel's close, which a quorum queue before 4.3 counts as one more delivery). A classic
    queue, or a quorum queue with a leader, is only ever asked when it is empty."""
    info = await queue_info_on(channel, queue)
    if info.message_count:
        return info
    by_nack = give_back_for(connection.server_version.release) is GiveBack.NACK

    async def peek(probe: Channel) -> Delivery | None:
        got = await probe.get(queue)
        if got is not None and by_nack:
            await probe.nack(got.delivery_tag, requeue=True)
        return got

    got = await _on_own_channel(connection, peek)
    if got is None:
        return info
    return QueueInfo(
        name=info.name,
        message_count=1 + (got.message_count or 0),
        consumer_count=info.consumer_count,
    )


async def queue_info(connection: Connection, queue: str) -> QueueInfo | None:
    """What a passive declare of ``queue`` says (depth, consumers), or None when it does not
    exist (404). Nothing is read from the queue: during a quorum queue's leader election,
    RabbitMQ 3.10 may answer 0 and 0 (see :func:`depth_on`). Other refusals raise."""
    try:
        return await _on_own_channel(connection, lambda channel: queue_info_on(channel, queue))
    except NotFound:
        return None


async def queue_missing(connection: Connection, queue: str) -> str | None:
    """None when ``queue`` exists (declare-ok to a passive declare), else why it cannot take a
    copy: the 404's text (:func:`missing_queue_error`). Other refusals raise."""
    try:
        await _on_own_channel(connection, lambda channel: queue_info_on(channel, queue))
    except NotFound as error:
        return error.message
    return None


async def _presence(
    connection: Connection, look_up: Callable[[Channel], Awaitable[object]]
) -> Observation:
    try:
        await _on_own_channel(connection, look_up)
    except NotFound:
        return Absent()
    except ResourceLocked as error:
        return Refused(f"locked: {error}")
    return Matches()


async def queue_exists(connection: Connection, name: str) -> Observation:
    """Whether queue ``name`` exists, by a passive declare: :class:`Matches` on declare-ok,
    :class:`Absent` on 404, :class:`Refused` on 405 (an exclusive queue of another
    connection). Other refusals raise."""
    return await _presence(connection, lambda channel: channel.queue_declare(name, passive=True))


async def exchange_exists(connection: Connection, name: str) -> Observation:
    """Whether exchange ``name`` exists, by a passive declare: :class:`Matches` on declare-ok,
    :class:`Absent` on 404, :class:`Refused` on 405. Other refusals raise."""
    return await _presence(connection, lambda channel: channel.exchange_declare(name, passive=True))


# --------------------------------------------------------------------------- queue state


@dataclass(frozen=True, slots=True)
class QueueState:
    """What rr knows about a queue before it touches its messages."""

    name: str
    message_count: int
    quorum: bool | None
    """True for a quorum queue, False for any other, None when the broker would not say."""
    delivery_limit: int | None = None
    """Its ``x-delivery-limit`` when that is an integer."""
    reads: ReadCost = field(default_factory=lambda: ReadCost(Cost.SPENDS, GiveBack.CLOSE))
    """What reading it without taking costs its messages on this server
    (``dlq/read_cost.py``); the default, for a state made by hand, assumes the worst."""


async def queue_state(
    connection: Connection, queue: str, *, confirm_empty: bool = True
) -> QueueState:
    """The queue's depth (a passive declare), type and ``x-delivery-limit`` (:func:`queue_type`)
    and what a read costs it (``dlq/read_cost.py``); :class:`NotFound` (exit 1) in the
    broker's words when the passive declare gets a 404. Other refusals raise.

    ``confirm_empty``: a depth of 0 is confirmed by one ``basic.get`` (:func:`depth_on`);
    without it, nothing is read (``rr console``'s page views, which change nothing)."""

    async def depth(channel: Channel) -> QueueInfo:
        if confirm_empty:
            return await depth_on(connection, channel, queue)
        return await queue_info_on(channel, queue)

    info = await _on_own_channel(connection, depth)
    arguments = await queue_arguments(connection, queue)
    quorum = None if arguments is None else arguments.get("x-queue-type") == "quorum"
    argument = None if arguments is None else arguments.get("x-delivery-limit")
    return QueueState(
        name=queue,
        message_count=info.message_count,
        quorum=quorum,
        delivery_limit=_integer(argument),
        reads=read_cost(
            connection.server_version.release, queue, quorum=quorum, limit_argument=argument
        ),
    )


def _integer(value: FieldValue | None) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


async def queue_arguments(connection: Connection, queue: str) -> Mapping[str, FieldValue] | None:
    """The arguments of the existing ``queue`` that RabbitMQ checks on a re-declare (its type,
    limits, overflow, dead-letter route, ...), or None when the broker would not say.

    The queue is re-declared as a durable quorum queue, taking the broker's value for each
    argument its 406 names, until the broker accepts (:func:`_redeclare_until_accepted`): the
    accepted arguments are the queue's, and the accepted re-declare changes nothing. None when
    a 406 cannot be read or adopted, or any other refusal (403, 404, 405) ends the probe. Look
    the queue up first (a re-declare of a missing queue would make it).
    """

    return await _accepted_arguments(connection, queue, auto_delete=False)


async def _accepted_arguments(
    connection: Connection, queue: str, *, auto_delete: bool
) -> Mapping[str, FieldValue] | None:
    """The arguments of the re-declare of ``queue`` the broker accepts, starting from a
    durable quorum queue (``auto_delete`` or not), each flag and argument a 406 names
    adopted (:func:`_redeclare_until_accepted`); None when none is accepted."""

    async def redeclare(channel: Channel, current: Declaration) -> None:
        await channel.queue_declare(
            queue,
            durable=current.durable,
            auto_delete=current.auto_delete,
            arguments=current.arguments,
        )

    declaration = Declaration(
        durable=True, auto_delete=auto_delete, arguments={"x-queue-type": "quorum"}
    )
    learned = await _redeclare_until_accepted(connection, declaration, redeclare)
    return None if learned.accepted is None else learned.accepted.arguments


async def queue_type(connection: Connection, queue: str) -> tuple[bool | None, int | None]:
    """(is ``queue`` a quorum queue, its ``x-delivery-limit``), or None for what the broker
    would not say (:func:`queue_arguments`)."""
    arguments = await queue_arguments(connection, queue)
    if arguments is None:
        return None, None
    quorum = arguments.get("x-queue-type") == "quorum"
    return quorum, _integer(arguments.get("x-delivery-limit"))


async def queue_kind(connection: Connection, queue: str) -> str | None:
    """The type of the existing ``queue`` (``classic``, ``quorum``, ``stream``) as AMQP can
    learn it, or None when the broker would not say (docs/reference/cli.md, "rr status").

    A passive declare does not say a queue's type; a re-declare does: the queue is
    re-declared as a durable, auto-delete quorum queue, taking the broker's value for each
    flag and argument its 406 names (:func:`_redeclare_until_accepted`), and the accepted
    ``x-queue-type`` is its type (none: classic, RabbitMQ 3.10's). A quorum queue cannot be
    auto-delete, so if ``queue`` vanished since it was looked up, the first re-declare is
    refused (406 ``invalid property 'auto-delete'``) instead of making it: measured on
    RabbitMQ 3.10.8, 4.0.5 and 4.3.6, as is the rest. None also for an exclusive queue of
    another connection (405), and for any reply the probe cannot read.
    """

    arguments = await _accepted_arguments(connection, queue, auto_delete=True)
    if arguments is None:
        return None
    kind = arguments.get("x-queue-type", "classic")
    return kind if isinstance(kind, str) else None


# --------------------------------------------------------------------------- comparing


@dataclass(frozen=True, slots=True)
class _Learned:
    """What re-declaring until the broker accepts learned."""

    accepted: Declaration | None
    """The declaration the broker accepted (what it holds); None when it never did."""
    found: tuple[Inequivalence, ...]
    """Each difference a 406 named, in order."""
    stopped_by: TransportError | None = None
    """The refusal that ended the probe: a 406 that could not be read or adopted, or named a
    difference already adopted; or any other refusal."""


async def _redeclare_until_accepted(
    connection: Connection,
    declaration: Declaration,
    redeclare: Callable[[Channel, Declaration], Awaitable[None]],
) -> _Learned:
    """Re-declare (each time on a channel of its own) until the broker accepts, adopting the
    current value each 406 names; at most ``_MAX_DIFFERENCES`` times. Errors opening the
    channel raise; the broker's replies to the re-declare are returned."""
    found: list[Inequivalence] = []
    for _ in range(_MAX_DIFFERENCES):
        refusal = await _on_own_channel(connection, partial(_reply_to, redeclare, declaration))
        if refusal is None:
            return _Learned(declaration, tuple(found))
        if not isinstance(refusal, PreconditionFailed):
            return _Learned(None, tuple(found), refusal)
        inequivalence = parse_inequivalence(str(refusal))
        adopted = adopt_current(declaration, inequivalence) if inequivalence is not None else None
        if (
            inequivalence is None
            or adopted is None
            or inequivalence.key in {known.key for known in found}
        ):
            return _Learned(None, tuple(found), refusal)
        found.append(inequivalence)
        declaration = adopted
    return _Learned(None, tuple(found))


async def _reply_to(
    redeclare: Callable[[Channel, Declaration], Awaitable[None]],
    declaration: Declaration,
    channel: Channel,
) -> TransportError | None:
    """None when the broker accepts the re-declare, else its refusal."""
    try:
        await redeclare(channel, declaration)
    except TransportError as error:
        return error
    return None


async def _compare(
    connection: Connection,
    declaration: Declaration,
    redeclare: Callable[[Channel, Declaration], Awaitable[None]],
) -> Observation:
    learned = await _redeclare_until_accepted(connection, declaration, redeclare)
    refusal = learned.stopped_by
    if refusal is not None and not isinstance(refusal, PreconditionFailed):
        raise refusal
    differences = tuple(
        Difference(
            key=found.key,
            desired=desired_display(declaration, found.key),
            current=found.current.display(),
            current_value=found.current.value if found.current.present else None,
        )
        for found in learned.found
    )
    if refusal is not None:
        return Differs(differences, detail=str(refusal))
    if differences:
        return Differs(differences)
    return Matches()


async def compare_queue(connection: Connection, queue: QueueEntity) -> Observation:
    """How the existing ``queue`` differs from the entity, by re-declaring it with the entity's
    durability and arguments until the broker accepts (:func:`_redeclare_until_accepted`).

    :class:`Matches` when the first re-declare gets declare-ok; :class:`Differs` listing each
    argument a 406 named (desired against the broker's value), with the 406's text as the
    detail when one could not be read or adopted. Other refusals raise.
    """
    declaration = Declaration(durable=queue.durable, arguments=dict(queue.arguments))

    async def redeclare(channel: Channel, current: Declaration) -> None:
        await channel.queue_declare(
            queue.name, durable=current.durable, arguments=current.arguments
        )

    return await _compare(connection, declaration, redeclare)


async def compare_exchange(connection: Connection, exchange: ExchangeEntity) -> Observation:
    """How the existing ``exchange`` differs from the entity: as :func:`compare_queue`, with
    the type, durability, auto-delete and internal flags as well as the arguments."""
    declaration = Declaration(
        durable=exchange.durable,
        arguments=dict(exchange.arguments),
        exchange_type=exchange.type,
    )

    async def redeclare(channel: Channel, current: Declaration) -> None:
        await channel.exchange_declare(
            exchange.name,
            type=current.exchange_type or exchange.type,
            durable=current.durable,
            auto_delete=current.auto_delete,
            internal=current.internal,
            arguments=current.arguments,
        )

    return await _compare(connection, declaration, redeclare)


async def exchange_type(exchange: ExchangeEntity, connect: Connect) -> Observation:
    """Whether the broker can declare an exchange of ``exchange.type`` (one it does not build
    in, e.g. ``x-delayed-message``): an auto-delete exchange of that type and arguments is
    declared under a fresh name on a throwaway connection from ``connect``, and deleted at once.

    :class:`Absent` when it can (the exchange itself is missing); :class:`Refused` on any
    refusal (RabbitMQ closes the connection with 503 for an unknown type: is its plugin
    enabled?).
    """
    name = f"rr.probe.{uuid.uuid4().hex}"

    async def declare_and_delete(channel: Channel) -> None:
        await channel.exchange_declare(
            name,
            type=exchange.type,
            durable=False,
            auto_delete=True,
            arguments=exchange.arguments,
        )
        await channel.exchange_delete(name)

    connection = await connect()
    try:
        await _on_own_channel(connection, declare_and_delete)
    except TransportError as error:
        return Refused(
            f"the broker cannot declare an exchange of type {exchange.type!r} "
            f"(is its plugin enabled?): {error}"
        )
    finally:
        await connection.close()
    return Absent()


__all__ = [
    "Connect",
    "QueueState",
    "compare_exchange",
    "compare_queue",
    "depth_on",
    "exchange_exists",
    "exchange_type",
    "missing_queue_error",
    "queue_arguments",
    "queue_exists",
    "queue_info",
    "queue_info_on",
    "queue_kind",
    "queue_missing",
    "queue_state",
    "queue_type",
]
