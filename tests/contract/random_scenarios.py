"""Randomized differential scenarios: generate, run on two backends, compare, shrink.

A :class:`Scenario` is a topology (exchanges, classic and quorum queues with TTLs, dead-letter
exchanges, length limits, delivery limits, classic priorities, bindings) and a list of
operations (publishes with confirms, priorities and expirations, basic.get, consumers with
prefetch, ack / reject / nack, cancel, channel close, purge, delete, passive and repeated
declares, sleeps; now and then a short run of them in the shape of a difference once found,
:data:`MOTIFS`). :func:`generate` draws one from a seed;
:class:`Interpreter` runs it on a backend through the transport port and records every
observable; :func:`compare` runs it on the emulator and on a subject (RabbitMQ, or another
emulator) and finds the first step where they disagree; :func:`shrink` makes a disagreeing
scenario small; :func:`reproducer` prints it as Python-like steps (docs/reference/testing.md, "The
randomized differential test").

Every generated scenario is valid for RabbitMQ, except for the operations of
:data:`INVALID_OPERATIONS`, drawn on purpose and compared by error class and reply code. What
the real server does in a racy order is excluded by the rules below; each is enforced by
:class:`Rules` (generation and shrinking only keep scenarios that pass it), never by skipping a
seed.

RULES
-----

R1 settle: every step waits for the server to settle before the next one. On RabbitMQ the
   interpreter polls the observable counts (ready messages and consumers of every queue by
   passive declare, deliveries and cancel notifications per channel, channels and the
   connection open or closed) until they equal what the emulator reached after the same step
   (the emulator runs first); when they do not within :data:`SETTLE_DEADLINE_S`, it polls
   until they stop changing and the step disagrees. So a consumer receiving a message after a
   publish, a quorum queue dead-lettering, or a message coming back when a channel closes is
   always complete before the next step. A disagreement counts when RabbitMQ disagrees again
   in a second run (:func:`compare`).
R2 the consumers of a queue are on one channel, and a channel consumes one queue, with two
   consumers at most: the order in which consumers of one queue on two channels, or of two
   queues on one channel, get their messages is the server's to choose (two consumers of one
   queue on one channel take turns, and one basic.ack / nack settles them one by one in
   consumer tag order, docs/reference/testing.md).
R3 a quorum queue, and the timed queue (R5), is read with acknowledgements (basic.get
   without no_ack, or a consumer) on one channel only: the messages two closing channels give
   back race to a quorum queue's front, and to a classic timed queue's head, where one that
   expired while it was out is dropped or not depending on which came back first (measured
   on 3.10.8 and 4.0.5).
R3b but for a second channel reading a quorum queue that is not the timed one, when the two
   never give its messages back at once but by a connection error a method on one of them
   caused (``Delete(..., slot=)``: a quorum queue refuses ``if-unused``, 540): that channel's
   messages come back first, then the other's (measured on 3.10.8, 4.0.5 and 4.3.6 in all
   but 2 of about 130 runs; tests/contract/test_two_channels_closed.py). Any other close of
   both (the final one, an error on a third channel) is a race: a scenario whose final close
   would be one is not compared past its final drain. Only the motif "two channels closed"
   deletes on a channel other than ``p``.
R4 a step dead-letters from two queues into one target only when their dead letters cannot
   race: queues that dead-letter on overflow (drop-head, reject-publish-dlx) have disjoint
   targets; a reject, nack or channel close that may return or dead-letter messages of several
   queues (``multiple``, a closing channel, a connection error, the final close) happens only
   when those queues' targets are disjoint.
R4b a publish that reaches a quorum queue both directly and through a dead letter it pushes out
   of a full queue comes on a channel that published to that quorum queue before: the first
   enqueue of a channel registers it with the queue first, and its message and the dead letter
   then arrive in either order (measured on 3.10.8 and 4.0.5; never once the channel had
   published there).
R5 at most one queue expires messages (the *timed* queue): only it has ``x-message-ttl``, and a
   publish carries an ``expiration`` only when it is routed to that queue alone. Expiries of
   two queues at one instant race.
R5b a publish that may reach a timed quorum queue (directly or by dead letters) carries no
   priority. Messages published in one phase start their TTL clocks a few milliseconds apart
   on the server and at one instant on the emulator; a RabbitMQ 4.3 quorum queue expires at
   the head of each priority, the due ones highest priority first, so two of different
   priorities expiring together come out in either order on the server as its timer fires
   before or after the second is due (seed 1285 on 4.3.6: two publishes of one phase, 2 of 3
   runs one way). One priority keeps them in the order of their clocks.
R6 no second TTL hop during a sleep: the timed queue's dead letters (and what they push out of
   full queues that dead-letter on overflow) never reach the timed queue again, so every
   message that starts a TTL clock does so during an operation, at a known time.
R6b nor do the dead letters the timed queue's dead letters push out of full queues reach a queue
   its dead letters reach: two messages expiring together race there with the first one's
   ``maxlen`` copy (measured on 3.10.8, 4.0.5 and 4.3.6, both orders on each; seed 1192).
   One expiring alone reaches every queue first, as a publish does (modelled).
R7 never act near a TTL boundary: time moves only in sleeps (:data:`TTL_VALUES` are 100 to
   400 ms). Every operation that may start a TTL clock (a publish, reject or nack, a closing
   channel, whose messages may reach the timed queue) puts a boundary at its phase start plus
   each TTL in use, spread over :data:`PHASE_MS` and padded by :data:`EPSILON_MS`; the
   scheduler (:func:`schedule`) lengthens sleeps so that no later phase starts within a
   boundary, and ends the scenario with a sleep past every boundary. A phase of a timed
   scenario holds at most :data:`PHASE_OPS` operations, so that it takes less than
   :data:`PHASE_MS` on the server. On RabbitMQ each sleep ends when the model time comes
   (sleeps make up for the time the operations took), and the interpreter checks the rule
   against the times it measured (:func:`timing_violation`); a disagreement that a late
   server may have caused is run again.
R8 two sleeps are never adjacent, and a scenario has at most :data:`MAX_OPS` operations (so a
   message is returned fewer than 20 times: 4.0's default quorum delivery limit never fires).
R9 a dead-letter exchange ``""`` always comes with a dead-letter routing key naming a queue;
   ``reject-publish-dlx`` only on classic queues (quorum queues do not take it).
R10 (retired) every get-ok's message count is compared. It once was not for a quorum queue
   that expires messages, which seemed to count an expired message behind the taken head in
   some runs only (seed 14: 1 in a get, 0 in the final drain): it counts it when the get
   waits for an ack, not with no_ack (measured on 3.10.8, 4.0.5 and 4.3.6; modelled).
R11 a connection closes (an error, or the end) only when no queue has a consumer on one of its
   channels while another of its channels may hold that queue's messages, or messages whose
   dead letters may reach it: the server may or may not deliver what the second gives back
   to the first before the first closes too (seeds 34 and 525 on 4.0.5, one each way; seed
   290 on 4.3.6, a message given back that expired at once and was dead-lettered to the
   other channel's queue).
R12 (retired) a quorum queue is limited by ``x-max-length-bytes`` on RabbitMQ 4.3 too: 4.3.6
   counts the body and the properties as published (``mN`` with its message id: 5 bytes more;
   releases.py ``quorum_bytes_count_properties``, measured by
   scripts/measure_quorum_bytes.py), and the emulator models it. (The "over 30 bytes without
   properties" once seen was aiormq's: it gives a message without a message id a 32-digit
   one.)
"""

from __future__ import annotations

import asyncio
import itertools
import random
import re
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from dataclasses import MISSING, dataclass, field, fields, replace
from typing import Any, Literal, TypeAlias

from rabbitctl_retry.errors import NotFound, PublishFailed, RrError
from rabbitctl_retry.fields import FieldValue
from rabbitctl_retry.transport.base import Channel, Connection, Delivery, Properties
from tests.backends import Backend, EmulatorBackend
from tests.contract.support import view

# -- limits and timing ------------------------------------------------------------------------

MAX_OPS = 18
"""Operations per scenario at most (R8)."""
PHASE_OPS = 4
"""Operations between two sleeps of a timed scenario at most (R7)."""
PHASE_MS = 60
"""How long a phase (its operations and their settling) may take on the server, as planned."""
EPSILON_MS = 15
"""Padding around each TTL boundary (R7)."""
TTL_VALUES = (100, 150, 200, 250, 300, 350, 400)
"""Queue TTLs and message expirations, in ms."""
SETTLE_DEADLINE_S = 1.0
"""How long RabbitMQ may take to reach the emulator's counts after a step (R1)."""
STABLE_POLLS = 5
STABLE_INTERVAL_S = 0.02
"""A server that does not reach them is read once its counts stayed the same this long."""

SLOTS = ("c0", "c1", "c2")
"""The channels that consume and get, and publish now and then; ``p`` publishes and manages
queues. All are confirm channels of one connection; the observer has a connection of its
own."""
EXCHANGE_TYPES = {"dx": "direct", "fx": "fanout", "tx": "topic"}
BINDING_KEYS = {"direct": ("a", "b"), "fanout": ("",), "topic": ("a.*", "*.b", "#", "a.#")}
ROUTING_KEYS = {
    "direct": ("a", "b", "c"),
    "fanout": ("", "a"),
    "topic": ("a", "a.b", "b", "c.b", "a.b.c"),
}
MISSING_EXCHANGE = "nowhere"
"""An exchange never declared: publishing to it is an invalid operation (404)."""
UNKNOWN_TAG = 9999

INVALID_OPERATIONS = (
    "publish to a missing exchange (404, closes the channel)",
    "delete a queue with if-unused / if-empty (406 when in use or not empty; a quorum queue "
    "refuses the flags with a connection error)",
    "ack an unknown delivery tag (406, closes the channel; compared by reply code, as the "
    "client reports it on the next call)",
    "declare a queue again with another x-max-length (406)",
    "get, consume or passive declare on a deleted queue (404)",
)


# -- the scenario -----------------------------------------------------------------------------


@dataclass(frozen=True)
class QueueSpec:
    name: str
    kind: Literal["classic", "quorum"] = "classic"
    ttl: int | None = None
    dlx: str | None = None
    """The dead-letter exchange: ``""`` (the default exchange), an exchange of the scenario,
    :data:`MISSING_EXCHANGE`, or None."""
    dlrk: str | None = None
    """The dead-letter routing key: a queue name when ``dlx`` is ``""``, else a routing key."""
    max_length: int | None = None
    max_length_bytes: int | None = None
    overflow: str | None = None
    delivery_limit: int | None = None
    max_priority: int | None = None
    """``x-max-priority`` (classic queues only)."""

    def arguments(self, prefix: str, *, other_length: bool = False) -> dict[str, FieldValue]:
        args: dict[str, FieldValue] = {}
        if self.kind == "quorum":
            args["x-queue-type"] = "quorum"
        if self.ttl is not None:
            args["x-message-ttl"] = self.ttl
        if self.dlx is not None:
            args["x-dead-letter-exchange"] = prefix + self.dlx if self.dlx else ""
        if self.dlrk is not None:
            args["x-dead-letter-routing-key"] = prefix + self.dlrk if self.dlx == "" else self.dlrk
        if other_length:
            args["x-max-length"] = (self.max_length or 0) + 5
        elif self.max_length is not None:
            args["x-max-length"] = self.max_length
        if self.max_length_bytes is not None:
            args["x-max-length-bytes"] = self.max_length_bytes
        if self.overflow is not None:
            args["x-overflow"] = self.overflow
        if self.delivery_limit is not None:
            args["x-delivery-limit"] = self.delivery_limit
        if self.max_priority is not None:
            args["x-max-priority"] = self.max_priority
        return args

    @property
    def limited(self) -> bool:
        return self.max_length is not None or self.max_length_bytes is not None

    @property
    def overflow_dead_letters(self) -> bool:
        """Whether a full queue dead-letters (drop-head, reject-publish-dlx)."""
        return (
            self.limited
            and self.dlx is not None
            and self.overflow in (None, "drop-head", "reject-publish-dlx")
        )

    def __str__(self) -> str:
        args = self.arguments("")
        shown = f", {args!r}" if args else ""
        return f"declare_queue({self.name!r}{shown})"


@dataclass(frozen=True)
class ExchangeSpec:
    name: str
    type: str

    def __str__(self) -> str:
        return f"declare_exchange({self.name!r}, {self.type!r})"


@dataclass(frozen=True)
class BindingSpec:
    queue: str
    exchange: str
    key: str

    def __str__(self) -> str:
        return f"bind({self.queue!r}, {self.exchange!r}, {self.key!r})"


@dataclass(frozen=True)
class Publish:
    n: int
    exchange: str
    key: str
    mandatory: bool = False
    expiration: int | None = None
    pad: int = 0
    """Extra body bytes (for x-max-length-bytes)."""
    slot: str = "p"
    """The channel it goes on (every channel is a confirm channel)."""
    priority: int | None = None

    @property
    def body(self) -> str:
        return f"m{self.n}" + "." * self.pad

    def __str__(self) -> str:
        extra = ", mandatory=True" if self.mandatory else ""
        if self.expiration is not None:
            extra += f", expiration={str(self.expiration)!r}"
        if self.priority is not None:
            extra += f", priority={self.priority}"
        return (
            f"{self.slot}.publish({self.body!r}, exchange={self.exchange!r}, "
            f"routing_key={self.key!r}{extra})"
        )


@dataclass(frozen=True)
class Get:
    slot: str
    queue: str
    no_ack: bool = False

    def __str__(self) -> str:
        extra = ", no_ack=True" if self.no_ack else ""
        return f"{self.slot}.get({self.queue!r}{extra})"


@dataclass(frozen=True)
class Consume:
    slot: str
    queue: str
    prefetch: int = 1
    no_ack: bool = False
    tag: Literal["a", "z"] = "a"
    """The first letter of the consumer's tag after the channel's name (``c0-z003``): the
    server orders some of a channel's work by consumer tag (docs/reference/testing.md)."""
    priority: int | None = None
    """Its ``x-priority`` consumer argument (None: none)."""

    def __str__(self) -> str:
        extra = ", no_ack=True" if self.no_ack else ""
        if self.priority is not None:
            extra += f", arguments={{'x-priority': {self.priority}}}"
        return (
            f"{self.slot}.qos({self.prefetch}); {self.slot}.consume({self.queue!r}{extra}, "
            f"tag={self.tag!r})"
        )


@dataclass(frozen=True)
class Cancel:
    slot: str

    def __str__(self) -> str:
        return f"{self.slot}.cancel(its last consumer)"


@dataclass(frozen=True)
class Settle:
    slot: str
    method: Literal["ack", "reject", "nack"]
    which: Literal["first", "last"] = "first"
    requeue: bool = False
    multiple: bool = False

    def __str__(self) -> str:
        extra = ""
        if self.method != "ack":
            extra += f", requeue={self.requeue}"
        if self.multiple:
            extra += ", multiple=True"
        return f"{self.slot}.{self.method}({self.which} held{extra})"


@dataclass(frozen=True)
class AckUnknown:
    slot: str

    def __str__(self) -> str:
        return f"{self.slot}.ack({UNKNOWN_TAG})  # unknown tag"


@dataclass(frozen=True)
class Close:
    slot: str

    def __str__(self) -> str:
        return f"{self.slot}.close()"


@dataclass(frozen=True)
class Purge:
    queue: str

    def __str__(self) -> str:
        return f"p.queue_purge({self.queue!r})"


@dataclass(frozen=True)
class Delete:
    queue: str
    if_unused: bool = False
    if_empty: bool = False
    slot: str = "p"
    """The channel it goes on: a quorum queue's refusal of the flags (540) closes the
    connection, giving back first what that channel holds (R3b)."""

    def __str__(self) -> str:
        extra = ", if_unused=True" if self.if_unused else ""
        extra += ", if_empty=True" if self.if_empty else ""
        return f"{self.slot}.queue_delete({self.queue!r}{extra})"


@dataclass(frozen=True)
class Passive:
    queue: str

    def __str__(self) -> str:
        return f"p.queue_declare({self.queue!r}, passive=True)"


@dataclass(frozen=True)
class Redeclare:
    queue: str
    change: bool = False

    def __str__(self) -> str:
        what = "with another x-max-length" if self.change else "with the same arguments"
        return f"p.queue_declare({self.queue!r})  # again, {what}"


@dataclass(frozen=True)
class Sleep:
    ms: int

    def __str__(self) -> str:
        return f"sleep({self.ms / 1000:g})"


Op: TypeAlias = (
    Publish
    | Get
    | Consume
    | Cancel
    | Settle
    | AckUnknown
    | Close
    | Purge
    | Delete
    | Passive
    | Redeclare
    | Sleep
)


@dataclass(frozen=True)
class Scenario:
    queues: tuple[QueueSpec, ...]
    exchanges: tuple[ExchangeSpec, ...] = ()
    bindings: tuple[BindingSpec, ...] = ()
    ops: tuple[Op, ...] = ()
    seed: int | None = None

    def queue(self, name: str) -> QueueSpec | None:
        return next((q for q in self.queues if q.name == name), None)

    def exchange_type(self, name: str) -> str | None:
        return next((x.type for x in self.exchanges if x.name == name), None)

    @property
    def queue_names(self) -> tuple[str, ...]:
        return tuple(q.name for q in self.queues)


# -- static analysis: routing, dead-letter targets, the timed queue ---------------------------


def topic_matches(pattern: str, key: str) -> bool:
    """RabbitMQ's topic match: ``*`` one word, ``#`` zero or more; ``""`` has no words."""

    def match(p: tuple[str, ...], w: tuple[str, ...]) -> bool:
        if not p:
            return not w
        if p[0] == "#":
            return any(match(p[1:], w[i:]) for i in range(len(w) + 1))
        return bool(w) and p[0] in ("*", w[0]) and match(p[1:], w[1:])

    return match(tuple(pattern.split(".")) if pattern else (), tuple(key.split(".")) if key else ())


def route(s: Scenario, exchange: str, key: str) -> frozenset[str]:
    """The queues a message goes to, as declared (deletes not considered)."""
    if exchange == "":
        return frozenset({key}) if s.queue(key) is not None else frozenset()
    kind = s.exchange_type(exchange)
    found = set()
    for b in s.bindings:
        if b.exchange != exchange or s.queue(b.queue) is None:
            continue
        if (
            kind == "fanout"
            or (kind == "direct" and b.key == key)
            or (kind == "topic" and topic_matches(b.key, key))
        ):
            found.add(b.queue)
    return frozenset(found)


def targets(s: Scenario, q: QueueSpec) -> frozenset[str]:
    """Every queue a dead letter of ``q`` may reach (with the original routing keys: every
    queue bound to the dead-letter exchange)."""
    if q.dlx is None:
        return frozenset()
    if q.dlx == "":
        return frozenset({q.dlrk}) if q.dlrk and s.queue(q.dlrk) else frozenset()
    if s.exchange_type(q.dlx) is None:
        return frozenset()
    if q.dlrk is not None:
        return route(s, q.dlx, q.dlrk)
    return frozenset(
        b.queue for b in s.bindings if b.exchange == q.dlx and s.queue(b.queue) is not None
    )


def reaches(s: Scenario, start: Iterable[str], *, overflow_only: bool = False) -> frozenset[str]:
    """Queues reached from ``start`` by dead letters (``overflow_only``: only through queues
    that dead-letter on overflow), ``start`` excluded unless reached again."""
    seen: set[str] = set()
    todo = list(start)
    while todo:
        name = todo.pop()
        q = s.queue(name)
        if q is None or (overflow_only and not q.overflow_dead_letters):
            continue
        for t in targets(s, q):
            if t not in seen:
                seen.add(t)
                todo.append(t)
    return frozenset(seen)


def publishes_with_expiration(s: Scenario) -> list[Publish]:
    return [op for op in s.ops if isinstance(op, Publish) and op.expiration is not None]


def timed_queues(s: Scenario) -> set[str]:
    """Queues that may expire messages (R5 wants at most one)."""
    names = {q.name for q in s.queues if q.ttl is not None}
    for op in publishes_with_expiration(s):
        names |= route(s, op.exchange, op.key)
    return names


def ttl_values(s: Scenario) -> tuple[int, ...]:
    values = {q.ttl for q in s.queues if q.ttl is not None}
    values |= {op.expiration for op in publishes_with_expiration(s) if op.expiration}
    return tuple(sorted(values))


def prioritized_into_timed_quorum(s: Scenario) -> Publish | None:
    """R5b: a publish of ``s`` with a priority that may reach a timed quorum queue, directly
    or by dead letters; None when there is none."""
    timed = timed_queues(s)
    quorum = {q.name for q in s.queues if q.name in timed and q.kind == "quorum"}
    if not quorum:
        return None
    for op in s.ops:
        if isinstance(op, Publish) and op.priority is not None:
            routed = route(s, op.exchange, op.key)
            if quorum & (routed | reaches(s, routed)):
                return op
    return None


def static_problem(s: Scenario) -> str | None:
    """Which topology rule ``s`` breaks (R4 overflow, R5, R5b, R6, R6b, R9), or None."""
    names = s.queue_names
    if len(set(names)) != len(names):
        return "two queues of one name"
    for q in s.queues:
        if q.dlx == "" and (q.dlrk is None or s.queue(q.dlrk) is None):
            return f"R9: {q.name} dead-letters to the default exchange without a queue name"
        if q.kind == "quorum" and q.overflow == "reject-publish-dlx":
            return f"R9: quorum {q.name} with reject-publish-dlx"
        if q.kind == "classic" and q.delivery_limit is not None:
            return f"{q.name}: a delivery limit on a classic queue"
        if q.kind == "quorum" and q.max_priority is not None:
            return f"{q.name}: x-max-priority on a quorum queue"
    overflowing = [q for q in s.queues if q.overflow_dead_letters]
    for a, b in itertools.combinations(overflowing, 2):
        if targets(s, a) & targets(s, b):
            return f"R4: {a.name} and {b.name} dead-letter on overflow to one queue"
    timed = timed_queues(s)
    if len(timed) > 1:
        return f"R5: more than one queue expires messages: {sorted(timed)}"
    for op in publishes_with_expiration(s):
        if len(route(s, op.exchange, op.key)) != 1:
            return f"R5: {op} reaches {len(route(s, op.exchange, op.key))} queues"
    prioritized = prioritized_into_timed_quorum(s)
    if prioritized is not None:
        return f"R5b: {prioritized} may reach a timed quorum queue"
    if timed:
        (name,) = timed
        spec = s.queue(name)
        assert spec is not None
        direct = targets(s, spec)
        pushed = reaches(s, direct, overflow_only=True)
        if name in pushed | direct:
            return f"R6: the dead letters of timed {name} reach it again"
        if pushed & direct:
            return f"R6b: what the dead letters of timed {name} push out reaches their queues"
    return None


# -- the dynamic rules ------------------------------------------------------------------------


@dataclass
class Rules:
    """Checks a scenario's operations one by one (R2, R3, R4, R7, R8), tracking what each
    channel may hold; :attr:`clocks` says which operations may start a TTL clock."""

    s: Scenario
    slot_consumer: dict[str, str | None] = field(default_factory=dict)
    """The queue each channel consumes (R2)."""
    consumers: dict[str, int] = field(default_factory=dict)
    """How many consumers each channel has (of its queue; two at most)."""
    queue_consumer: dict[str, str] = field(default_factory=dict)
    may_hold: dict[str, set[str]] = field(default_factory=dict)
    owner: dict[str, str] = field(default_factory=dict)
    co_reader: dict[str, str] = field(default_factory=dict)
    """R3b: the second channel that reads a quorum queue with acknowledgements."""
    published: dict[str, set[str]] = field(default_factory=dict)
    """The quorum queues each channel surely published to since it opened (R4b)."""
    deleted: set[str] = field(default_factory=set)
    maybe_deleted: set[str] = field(default_factory=set)
    phase_ops: int = 0
    after_sleep: bool = True
    clocks: list[bool] = field(default_factory=list)
    count: int = 0

    def __post_init__(self) -> None:
        for slot in SLOTS:
            self.slot_consumer.setdefault(slot, None)
            self.consumers.setdefault(slot, 0)
            self.may_hold.setdefault(slot, set())
        for slot in ("p", *SLOTS):
            self.published.setdefault(slot, set())
        timed = timed_queues(self.s)
        reaching = {q.name for q in self.s.queues if timed & (reaches(self.s, [q.name]))}
        self._reach_timed = frozenset(timed | reaching)
        self._timed_names = frozenset(timed)
        self._timed = bool(timed)

    def copy(self) -> Rules:
        return Rules(
            s=self.s,
            slot_consumer=dict(self.slot_consumer),
            consumers=dict(self.consumers),
            queue_consumer=dict(self.queue_consumer),
            may_hold={k: set(v) for k, v in self.may_hold.items()},
            owner=dict(self.owner),
            co_reader=dict(self.co_reader),
            published={k: set(v) for k, v in self.published.items()},
            deleted=set(self.deleted),
            maybe_deleted=set(self.maybe_deleted),
            phase_ops=self.phase_ops,
            after_sleep=self.after_sleep,
            clocks=list(self.clocks),
            count=self.count,
        )

    def _race(self, queues: Iterable[str], *, requeue: bool) -> str | None:
        """R4 for messages of ``queues`` refused or (``requeue``) given back at once: given
        back, a quorum queue's may pass its delivery limit, the timed queue's may have
        expired, and both are dead-lettered then."""
        sources = []
        for name in sorted(queues):
            q = self.s.queue(name)
            if q is None or not targets(self.s, q):
                continue
            limited = q.kind == "quorum" and q.delivery_limit is not None
            if requeue and not (limited or name in self._timed_names):
                continue
            sources.append(q)
        for a, b in itertools.combinations(sources, 2):
            if targets(self.s, a) & targets(self.s, b):
                return f"R4: dead letters of {a.name} and {b.name} race to one queue"
        return None

    def _close_slot(self, slot: str) -> str | None:
        problem = self._race(self.may_hold[slot], requeue=True)
        self._no_consumers(slot)
        self.may_hold[slot] = set()
        self.published[slot] = set()
        return problem

    def _no_consumers(self, slot: str) -> None:
        queue = self.slot_consumer[slot]
        if queue is not None:
            self.queue_consumer.pop(queue, None)
        self.slot_consumer[slot] = None
        self.consumers[slot] = 0

    def _starts_clock(self, queues: Iterable[str]) -> bool:
        return self._timed and bool(set(queues) & self._reach_timed)

    def close_all(self, cause: str | None = None) -> tuple[str | None, bool]:
        """The connection closes (a connection error a method on channel ``cause`` caused,
        or the end): the problem, and whether it may start a TTL clock."""
        held = set().union(*self.may_hold.values())
        clock = self._starts_clock(held)
        problem = (
            self._race(held, requeue=True)
            or self._given_to_a_sibling()
            or self._given_back_together(cause)
        )
        for slot in SLOTS:
            self._close_slot(slot)
        self.published["p"] = set()
        return problem, clock

    def _given_back_together(self, cause: str | None) -> str | None:
        """R3b: a quorum queue read on two channels gets their messages back at once only
        from a connection error one of them caused (that channel's first, measured on
        3.10.8, 4.0.5 and 4.3.6); from any other close the two race."""
        for queue in sorted(self.co_reader):
            others = [c for c in SLOTS if c != cause and queue in self.may_hold[c]]
            if len(others) > 1:
                return f"R3b: {' and '.join(others)} give {queue} back at once"
        return None

    def _given_to_a_sibling(self) -> str | None:
        """R11: a queue consumed on one channel while another channel may hold its messages,
        or messages whose dead letters may reach it."""
        for queue, consuming in sorted(self.queue_consumer.items()):
            for slot in SLOTS:
                held = self.may_hold[slot]
                if slot != consuming and (queue in held or queue in reaches(self.s, held)):
                    return (
                        f"R11: {slot} may give {queue} back to the consumer on {consuming} "
                        "as the connection closes"
                    )
        return None

    def apply(self, op: Op) -> str | None:
        """Check ``op`` and record its effect; the rule it breaks, or None."""
        self.count += 1
        if self.count > MAX_OPS:
            return "R8: too many operations"
        clock = False
        problem: str | None = None
        if isinstance(op, Sleep):
            if self.after_sleep and self.count > 1:
                return "R8: two sleeps in a row"
            self.after_sleep = True
            self.phase_ops = 0
            self.clocks.append(False)
            return None
        self.after_sleep = False
        self.phase_ops += 1
        if self._timed and self.phase_ops > PHASE_OPS:
            return f"R7: more than {PHASE_OPS} operations between two sleeps"
        match op:
            case Publish():
                routed = route(self.s, op.exchange, op.key)
                clock = self._starts_clock(routed)
                problem = self._first_enqueue(op, routed)
            case Get():
                if op.queue in self.maybe_deleted:
                    self.published[op.slot] = set()  # a 404 may close the channel
                if op.queue in self.deleted:
                    problem = self._close_slot(op.slot)  # 404 closes the channel
                elif not op.no_ack:
                    problem = self._reader(op.slot, op.queue)
                    self.may_hold[op.slot].add(op.queue)
            case Consume():
                consuming = self.slot_consumer[op.slot]
                if consuming is not None and consuming != op.queue:
                    return f"R2: {op.slot} consumes {consuming} already"
                if self.consumers[op.slot] >= 2:
                    return f"R2: {op.slot} has two consumers already"
                if self.queue_consumer.get(op.queue, op.slot) != op.slot:
                    return f"R2: {op.queue} has a consumer on another channel already"
                if op.queue in self.maybe_deleted:
                    self.published[op.slot] = set()  # a 404 may close the channel
                if op.queue in self.deleted:
                    problem = self._close_slot(op.slot)
                else:
                    if not op.no_ack:
                        problem = self._reader(op.slot, op.queue)
                        self.may_hold[op.slot].add(op.queue)
                    self.slot_consumer[op.slot] = op.queue
                    self.consumers[op.slot] += 1
                    self.queue_consumer[op.queue] = op.slot
            case Cancel():
                if self.consumers[op.slot] > 1:
                    self.consumers[op.slot] -= 1
                else:
                    self._no_consumers(op.slot)
            case Settle():
                held = self.may_hold[op.slot]
                if op.method != "ack":
                    clock = self._starts_clock(held)
                    if op.multiple:
                        problem = self._race(held, requeue=op.requeue)
            case AckUnknown() | Close():
                clock = self._starts_clock(self.may_hold[op.slot])
                problem = self._close_slot(op.slot)
            case Delete():
                q = self.s.queue(op.queue)
                flags = op.if_unused or op.if_empty
                if q is not None and q.kind == "quorum" and flags and op.queue not in self.deleted:
                    problem, clock = self.close_all(op.slot)  # a connection error
                elif op.slot != "p":
                    return "R3b: only p deletes, but for a quorum queue's connection error"
                elif flags:
                    self.maybe_deleted.add(op.queue)
                    self.published["p"] = set()  # 406 closes the channel, or not
                else:
                    self.deleted.add(op.queue)
                    slot = self.queue_consumer.get(op.queue)
                    if slot is not None:
                        self._no_consumers(slot)
            case Redeclare():
                if op.queue in self.deleted or op.queue in self.maybe_deleted:
                    return "a deleted queue is not declared again"
                if op.change:
                    self.published["p"] = set()  # 406 closes the channel
            case Purge() | Passive():
                if op.queue in self.deleted or op.queue in self.maybe_deleted:
                    self.published["p"] = set()  # 404 closes the channel
        self.clocks.append(clock)
        return problem

    def _first_enqueue(self, op: Publish, routed: frozenset[str]) -> str | None:
        """R4b; and what the publish's channel has now published to."""
        if self.s.exchange_type(op.exchange) is None and op.exchange != "":
            self.published[op.slot] = set()  # 404 closes the channel
            return None
        pushed: set[str] = set()
        for name in routed:
            q = self.s.queue(name)
            if q is not None and q.overflow_dead_letters:
                first = targets(self.s, q)
                pushed |= first | reaches(self.s, first, overflow_only=True)
        gone = self.deleted | self.maybe_deleted
        for name in sorted(routed & pushed):
            q = self.s.queue(name)
            fresh = name not in self.published[op.slot]
            if q is not None and q.kind == "quorum" and fresh and name not in gone:
                return f"R4b: the first publish of {op.slot} to quorum {name} races its dead letter"
        for name in routed - gone:
            q = self.s.queue(name)
            if q is not None and q.kind == "quorum":
                self.published[op.slot].add(name)
        return None

    def _reader(self, slot: str, queue: str) -> str | None:
        q = self.s.queue(queue)
        if q is None or (q.kind != "quorum" and queue not in self._timed_names):
            return None
        owner = self.owner.setdefault(queue, slot)
        second = owner != slot and queue not in self._timed_names
        if second and self.co_reader.setdefault(queue, slot) == slot:
            return None  # R3b: a second channel, given back with the first only by error
        if owner != slot:
            kind = "quorum" if q.kind == "quorum" else "timed"
            return f"R3: {kind} {queue} is read on {self.owner[queue]} already"
        return None


@dataclass(frozen=True)
class Checked:
    """A scenario that keeps every rule: what may start a TTL clock, and its final close."""

    clocks: tuple[bool, ...]
    final_close: bool
    final_close_clock: bool


def check(s: Scenario) -> Checked | str:
    """The rule ``s`` breaks, or what the interpreter and the scheduler need to know."""
    problem = static_problem(s)
    if problem is not None:
        return problem
    rules = Rules(s)
    for op in s.ops:
        problem = rules.apply(op)
        if problem is not None:
            return f"{op}: {problem}"
    final_problem, final_clock = rules.copy().close_all()
    return Checked(tuple(rules.clocks), final_problem is None, final_clock)


# -- the schedule (R7) ------------------------------------------------------------------------


@dataclass(frozen=True)
class Schedule:
    sleeps: tuple[int, ...]
    """The length of each Sleep (ms), lengthened where R7 needs it."""
    final_ms: int
    """The sleep before the final observation: past every TTL boundary."""


def schedule(s: Scenario, checked: Checked) -> Schedule:
    values = ttl_values(s)
    boundaries: list[tuple[int, int]] = []
    start = 0
    clocking = False
    sleeps: list[int] = []

    def close_phase() -> None:
        if clocking:
            for v in values:
                boundaries.append((start + v - EPSILON_MS, start + v + PHASE_MS + EPSILON_MS))

    for op, clock in zip(s.ops, checked.clocks, strict=True):
        if not isinstance(op, Sleep):
            clocking = clocking or clock
            continue
        close_phase()
        clocking = False
        nxt = start + max(op.ms, PHASE_MS)
        while True:
            hit = [b for b in boundaries if b[0] < nxt + PHASE_MS and nxt < b[1]]
            if not hit:
                break
            nxt = max(b[1] for b in hit)
        sleeps.append(nxt - start)
        start = nxt
    clocking = clocking or checked.final_close_clock
    close_phase()
    final = max([start, *(b[1] for b in boundaries)])
    return Schedule(tuple(sleeps), final - start)


def normalized(s: Scenario) -> Scenario:
    """``s`` with its sleeps as :func:`schedule` lengthens them (``s`` must keep the rules)."""
    checked = check(s)
    assert isinstance(checked, Checked), checked
    lengths = iter(schedule(s, checked).sleeps)
    return replace(s, ops=tuple(Sleep(next(lengths)) if isinstance(o, Sleep) else o for o in s.ops))


# -- generation -------------------------------------------------------------------------------


SHAPES = ("bytes", "priorities", "two channels")
"""What :func:`generate` can be told to draw in every scenario (``RR_RANDOM_SHAPE``): a
quorum queue limited by ``x-max-length-bytes``; classic queues with ``x-max-priority`` and
publishes with priorities (and expirations); the motif "two channels closed"."""


def generate(seed: int, *, max_ops: int = 16, shape: str | None = None) -> Scenario:
    """A scenario that keeps every rule, drawn from ``seed`` (the same one every time), with
    ``shape`` (one of :data:`SHAPES`) in it when given."""
    rnd = random.Random(seed)
    motif = rnd.choices(list(MOTIFS), weights=list(MOTIFS.values()))[0]
    if shape == "two channels":
        motif = "two channels closed"
    exchanges = tuple(
        ExchangeSpec(name, kind) for name, kind in EXCHANGE_TYPES.items() if rnd.random() < 0.5
    )
    names = [f"q{i}" for i in range(rnd.randint(2, 4))]
    # a scenario with the motif "expired behind" has a timed queue, most often a quorum one
    expiring = motif == "expired behind"
    timed = rnd.choice(names) if expiring or shape == "priorities" or rnd.random() < 0.5 else None
    quorum = 0.75 if expiring else 0.3 if shape == "priorities" else 0.45
    queues = [_queue(rnd, name, names, exchanges, timed, quorum, shape) for name in names]
    if shape == "bytes" and not any(q.kind == "quorum" and q.max_length_bytes for q in queues):
        i = rnd.randrange(len(queues))
        queues[i] = replace(
            queues[i],
            kind="quorum",
            max_priority=None,
            max_length=None,
            max_length_bytes=rnd.choice(BYTE_LIMITS),
            overflow=rnd.choice([None, "drop-head", "reject-publish"]),
        )
    bindings: list[BindingSpec] = []
    for x in exchanges:
        for name in rnd.sample(names, rnd.randint(1, len(names))):
            for key in rnd.sample(
                BINDING_KEYS[x.type], rnd.randint(1, min(2, len(BINDING_KEYS[x.type])))
            ):
                bindings.append(BindingSpec(name, x.name, key))
    expirations = (
        tuple(rnd.sample(TTL_VALUES, rnd.randint(0 if _ttl(queues, timed) else 1, 2)))
        if timed
        else ()
    )
    s = Scenario(tuple(queues), exchanges, tuple(bindings), seed=seed)
    # drop dead-letter exchanges (last queue first) until the topology keeps R4-R6
    while static_problem(s) is not None:
        with_dlx = [i for i, q in enumerate(s.queues) if q.dlx is not None]
        assert with_dlx, static_problem(s)
        i = with_dlx[-1]
        changed = list(s.queues)
        changed[i] = replace(changed[i], dlx=None, dlrk=None)
        s = replace(s, queues=tuple(changed))
    rules = Rules(s)
    ops: list[Op] = []
    numbers = itertools.count(1)
    wanted = rnd.randint(6, max(6, min(max_ops, MAX_OPS)))
    motif_at = rnd.randint(0, 4)
    plan: list[Op] | None = None
    attempts = 0
    while (len(ops) < wanted or plan) and len(ops) < MAX_OPS and attempts < 400:
        attempts += 1
        if plan is None and len(ops) >= motif_at:
            plan = _motif(rnd, motif, s, rules, numbers, expirations, timed)
        planned = bool(plan)
        if plan:
            op = plan[0]
            if isinstance(op, Sleep) and rules.after_sleep:
                plan.pop(0)
                continue
            if timed and not rules.after_sleep and rules.phase_ops >= PHASE_OPS:
                op, planned = Sleep(PHASE_MS), False  # R7: the motif goes on after a sleep
        else:
            op = _operation(rnd, s, rules, next(numbers), expirations, timed)
            if isinstance(op, Publish) and rnd.random() < (0.6 if shape == "priorities" else 0.2):
                prioritized = replace(op, priority=rnd.choice(PRIORITIES))
                # R5b: drawn all the same, so that later draws stay as they were
                if prioritized_into_timed_quorum(replace(s, ops=(*ops, prioritized))) is None:
                    op = prioritized
        candidate = replace(s, ops=(*ops, op))
        if not isinstance(check(candidate), Checked):
            if planned and plan:
                plan.clear()  # the motif does not fit this scenario: random operations go on
            continue
        if planned and plan:
            plan.pop(0)
        s, ops = candidate, [*ops, op]
        rules = Rules(s)
        for done in ops:
            rules.apply(done)
    while ops and isinstance(ops[-1], Sleep):
        ops.pop()
    s = _with_consumer_priorities(replace(s, ops=tuple(ops)))
    # the publish numbers drawn and dropped leave gaps: count again
    renumbered = _renumbered(s)
    if isinstance(check(renumbered), Checked):
        s = renumbered
    return normalized(s)


CONSUMER_PRIORITIES = (-1, 1, 5)
"""The ``x-priority`` a consumer is drawn with, now and then (none: 0)."""


def _with_consumer_priorities(s: Scenario) -> Scenario:
    """``s`` with an ``x-priority`` on about a third of its consumers, drawn from a generator
    of its own: a seed draws every other operation as it did before consumers had
    priorities."""
    rnd = random.Random(f"consumer-priority-{s.seed}")
    ops = tuple(
        replace(op, priority=rnd.choice(CONSUMER_PRIORITIES))
        if isinstance(op, Consume) and rnd.random() < 0.35
        else op
        for op in s.ops
    )
    return replace(s, ops=ops)


MOTIFS: dict[str | None, float] = {
    None: 0.3,
    "two consumers": 0.3,
    "expired behind": 0.2,
    "rejected after delete": 0.1,
    "two channels closed": 0.1,
}
"""Short runs of operations a scenario holds now and then among its random ones (weights: none
at all, or one of them), each the shape of a difference once found between the emulator and
RabbitMQ (docs/reference/testing.md): two consumers of one queue on one channel settled by one
multiple ack or nack while messages wait; a basic.get from the timed queue once a message
behind the one it takes expired (half the time behind one a closing channel gave back); a
reject or nack without requeue after its queue was deleted; two channels of the connection
each holding a message of one quorum queue when a method on one of them closes the
connection (540: R3b)."""

PRIORITIES = (0, 1, 2, 3, 5, 9)
"""The priorities a publish is drawn with (above a queue's ``x-max-priority`` counts as it)."""
MAX_PRIORITIES = (1, 2, 2, 5)
"""The ``x-max-priority`` a classic queue is drawn with."""
BYTE_LIMITS = (6, 10, 20)
"""The ``x-max-length-bytes`` a queue is drawn with (a message ``mN`` with its message id
is 2 to 11 bytes of body and, counted by a 4.3 quorum queue, 5 or more of properties)."""


def _motif(
    rnd: random.Random,
    motif: str | None,
    s: Scenario,
    rules: Rules,
    numbers: Iterator[int],
    expirations: tuple[int, ...],
    timed: str | None,
) -> list[Op]:
    """The operations of ``motif`` in this scenario as it stands (none when it cannot hold
    them); :func:`generate` checks each against the rules, and gives up the rest of a motif
    that breaks one."""
    alive = [q for q in s.queue_names if q not in rules.deleted and q not in rules.maybe_deleted]
    if motif == "two consumers":
        free = [q for q in alive if q not in rules.queue_consumer]
        if not free:
            return []
        queue = rnd.choice(free)
        idle = [c for c in SLOTS if rules.slot_consumer[c] is None]
        owner = rules.owner.get(queue)
        slot = owner if owner in idle else rnd.choice(idle) if idle else None
        if slot is None:
            return []
        tags: list[Literal["a", "z"]] = rnd.choice([["a", "z"], ["z", "a"]])
        plan: list[Op] = [Consume(slot, queue, tag=tag) for tag in tags]
        plan += [Publish(next(numbers), "", queue) for _ in range(rnd.randint(3, 4))]
        method = rnd.choice(["ack", "nack"])
        plan.append(
            Settle(
                slot,
                method,  # type: ignore[arg-type]
                which="last",
                requeue=method == "nack" and rnd.random() < 0.5,
                multiple=True,
            )
        )
        return plan
    spec = s.queue(timed) if timed in alive else None
    if motif == "expired behind" and timed is not None and spec is not None:
        # the shortest expiration, behind a head that outlives the sleep after it (R7
        # lengthens that sleep past the boundaries of the phase that published both)
        expiration = TTL_VALUES[0]
        if spec.ttl is not None and spec.ttl < expiration + 2 * PHASE_MS + 2 * EPSILON_MS:
            return []
        slot = rules.queue_consumer.get(timed) or rules.owner.get(timed)
        head: list[Op] = [Purge(timed), Publish(next(numbers), "", timed)]
        if rnd.random() < 0.5:
            # behind a message given back: a consumer holds the head, its channel closes
            idle = [c for c in SLOTS if rules.slot_consumer[c] is None]
            slot = slot or (rnd.choice(idle) if idle else None)
            if slot is None:
                return []
            if rules.slot_consumer[slot] is None:
                head.insert(1, Consume(slot, timed))
            after: list[Op] = [Close(slot)]
        else:
            after = []
        slot = slot or rnd.choice(SLOTS)
        return [
            *head,
            Publish(next(numbers), "", timed, expiration=expiration),
            *after,
            Sleep(expiration + PHASE_MS),
            Get(slot, timed),
        ]
    if motif == "two channels closed":
        return _two_channels_closed(rnd, s, rules, numbers, alive, timed)
    if motif == "rejected after delete" and alive:
        queue = rnd.choice(alive)
        slot = rules.owner.get(queue) or rnd.choice(SLOTS)
        return [
            Publish(next(numbers), "", queue),
            Get(slot, queue),
            Delete(queue),
            Settle(slot, rnd.choice(["reject", "nack"]), which="last"),  # type: ignore[arg-type]
        ]
    return []


def _two_channels_closed(
    rnd: random.Random,
    s: Scenario,
    rules: Rules,
    numbers: Iterator[int],
    alive: list[str],
    timed: str | None,
) -> list[Op]:
    """Two messages of a quorum queue, taken by basic.get on two channels, then a method on
    one of them (delete with if-unused: a 540) closes the connection (R3b)."""
    quorum = [
        q
        for q in alive
        if (spec := s.queue(q)) is not None and spec.kind == "quorum" and q != timed
    ]
    if not quorum:
        return []
    queue = rnd.choice(quorum)
    first = rules.owner.get(queue) or rnd.choice(SLOTS)
    second = rules.co_reader.get(queue) or rnd.choice([c for c in SLOTS if c != first])
    takers = [first, second]
    rnd.shuffle(takers)
    return [
        Publish(next(numbers), "", queue),
        Publish(next(numbers), "", queue),
        Get(takers[0], queue),
        Get(takers[1], queue),
        Delete(queue, if_unused=True, slot=rnd.choice(takers)),
    ]


def _ttl(queues: Sequence[QueueSpec], timed: str | None) -> bool:
    return any(q.name == timed and q.ttl is not None for q in queues)


def _queue(
    rnd: random.Random,
    name: str,
    names: list[str],
    exchanges: tuple[ExchangeSpec, ...],
    timed: str | None,
    quorum: float,
    shape: str | None = None,
) -> QueueSpec:
    """A queue drawn from ``rnd``; the timed one a quorum queue with the odds ``quorum``;
    a classic one with priorities now and then (most of the time for ``shape``
    ``"priorities"``)."""
    odds = quorum if name == timed else 0.45
    kind: Literal["classic", "quorum"] = "quorum" if rnd.random() < odds else "classic"
    q = QueueSpec(name, kind)
    if name == timed and rnd.random() < 0.7:
        q = replace(q, ttl=rnd.choice(TTL_VALUES))
    if rnd.random() < 0.6:
        choices = ["", "", *(x.name for x in exchanges)]
        if rnd.random() < 0.05:
            choices = [MISSING_EXCHANGE]
        dlx = rnd.choice(choices)
        if dlx == "":
            q = replace(q, dlx="", dlrk=rnd.choice(names))
        else:
            kind_of = next((x.type for x in exchanges if x.name == dlx), "direct")
            key = rnd.choice(ROUTING_KEYS[kind_of]) if rnd.random() < 0.4 else None
            q = replace(q, dlx=dlx, dlrk=key)
    if rnd.random() < 0.4:
        if rnd.random() < 0.75:
            q = replace(q, max_length=rnd.randint(1, 3))
        else:
            q = replace(q, max_length_bytes=rnd.choice(BYTE_LIMITS))
        overflows: list[str | None] = [None, "drop-head", "reject-publish"]
        if kind == "classic":
            overflows.append("reject-publish-dlx")
        q = replace(q, overflow=rnd.choice(overflows))
    if kind == "quorum" and rnd.random() < 0.5:
        q = replace(q, delivery_limit=rnd.randint(0, 3))
    if kind == "classic" and rnd.random() < (0.7 if shape == "priorities" else 0.2):
        q = replace(q, max_priority=rnd.choice(MAX_PRIORITIES))
    return q


def _operation(
    rnd: random.Random,
    s: Scenario,
    rules: Rules,
    n: int,
    expirations: tuple[int, ...],
    timed: str | None,
) -> Op:
    names = list(s.queue_names)
    alive = [q for q in names if q not in rules.deleted] or names
    slot = rnd.choice(SLOTS)
    if timed and not rules.after_sleep and (rules.phase_ops >= PHASE_OPS or rnd.random() < 0.25):
        return Sleep(rnd.choice([60, 100, 150, 200, 250, 300]))
    roll = rnd.random()
    if roll < 0.32:
        return _publish(rnd, s, n, expirations, timed)
    if roll < 0.44:
        return Get(slot, rnd.choice(alive), no_ack=rnd.random() < 0.25)
    if roll < 0.53:
        free = [q for q in alive if q not in rules.queue_consumer]
        idle = [c for c in SLOTS if rules.slot_consumer[c] is None]
        # a second consumer of a channel's queue (R2), half the time there is one to add
        joining = [c for c in SLOTS if rules.consumers[c] == 1 and rules.slot_consumer[c] in alive]
        if joining and (rnd.random() < 0.5 or not (free and idle)):
            chosen = rnd.choice(joining)
            queue = rules.slot_consumer[chosen]
            assert queue is not None
            return _consume(rnd, chosen, queue)
        if free and idle:
            return _consume(rnd, rnd.choice(idle), rnd.choice(free))
    if roll < 0.73:
        # what a channel holds of a deleted queue is rejected now and then
        orphans = [c for c in SLOTS if rules.may_hold[c] & rules.deleted]
        if orphans and rnd.random() < 0.5:
            return Settle(
                rnd.choice(orphans),
                rnd.choice(["reject", "nack"]),  # type: ignore[arg-type]
                which=rnd.choice(["first", "last"]),
            )
        method = rnd.choice(["ack", "ack", "reject", "nack"])
        two = rules.consumers[slot] == 2
        return Settle(
            slot,
            method,  # type: ignore[arg-type]
            which=rnd.choice(["first", "last"]),
            requeue=rnd.random() < 0.5,
            multiple=method != "reject" and rnd.random() < (0.6 if two else 0.3),
        )
    if roll < 0.77:
        busy = [c for c in SLOTS if rules.slot_consumer[c] is not None]
        if busy:
            return Cancel(rnd.choice(busy))
    if roll < 0.81:
        return Close(slot)
    if roll < 0.84:
        return Purge(rnd.choice(alive))
    if roll < 0.88:
        return Passive(rnd.choice(names))
    if roll < 0.90:
        return Redeclare(rnd.choice(alive), change=rnd.random() < 0.4)
    if roll < 0.93:
        flags = rnd.random() < 0.5
        held = sorted(set().union(*rules.may_hold.values()) & set(alive))
        queue = rnd.choice(held if held and rnd.random() < 0.6 else alive)
        return Delete(queue, if_unused=flags and rnd.random() < 0.5, if_empty=flags)
    if roll < 0.95:
        return AckUnknown(slot)
    if roll < 0.97:
        return Publish(n, MISSING_EXCHANGE, "a")
    return _publish(rnd, s, n, expirations, timed)


def _consume(rnd: random.Random, slot: str, queue: str) -> Consume:
    return Consume(
        slot,
        queue,
        prefetch=rnd.choice([1, 1, 2, 3, 0]),
        no_ack=rnd.random() < 0.1,
        tag=rnd.choice(["a", "z"]),
    )


def _publish(
    rnd: random.Random, s: Scenario, n: int, expirations: tuple[int, ...], timed: str | None
) -> Publish:
    names = s.queue_names
    pad = rnd.choice([0, 0, 0, 4, 9])
    mandatory = rnd.random() < 0.3
    slot = "p" if rnd.random() < 0.7 else rnd.choice(SLOTS)
    if timed and expirations and rnd.random() < 0.5:
        exchange, key, expiration = "", timed, rnd.choice(expirations)
    elif s.exchanges and rnd.random() < 0.5:
        x = rnd.choice(s.exchanges)
        exchange, key, expiration = x.name, rnd.choice(ROUTING_KEYS[x.type]), None
    else:
        exchange, key = "", rnd.choice(names) if rnd.random() < 0.9 else "nobody"
        expiration = None
    return Publish(n, exchange, key, mandatory, expiration, pad, slot)


def _renumbered(s: Scenario) -> Scenario:
    numbers = itertools.count(1)
    return replace(
        s, ops=tuple(replace(o, n=next(numbers)) if isinstance(o, Publish) else o for o in s.ops)
    )


# -- running a scenario -----------------------------------------------------------------------

Fingerprint: TypeAlias = tuple[Any, ...]


@dataclass
class Step:
    """One step as a backend went through it: what was observed, and (on RabbitMQ) when."""

    label: str
    observed: dict[str, Any]
    fingerprint: Fingerprint
    sleep: bool = False
    started: float = 0.0
    done: float = 0.0
    settled: float = 0.0
    """Seconds since the first operation: the operation sent, answered, and settled."""
    looked: float = 0.0
    """When the first look at the queues' counts after the operation ended (on RabbitMQ):
    what it saw may hold a TTL boundary that fell before it, on a slow server."""


@dataclass
class Trace:
    steps: list[Step]


class _Slot:
    def __init__(self) -> None:
        self.channel: Channel | None = None
        self.generation = 0
        self.consumers: list[str] = []
        self.held: list[Delivery] = []
        self.new: list[Delivery] = []
        self.delivered = 0
        self.cancels = 0
        self.new_cancels = 0


def error_of(error: BaseException) -> dict[str, Any]:
    """An error as compared: its class and the AMQP reply code in its text."""
    codes = re.findall(r"\((\d{3})\b", str(error))
    return {"error": type(error).__name__, "code": int(codes[-1]) if codes else None}


def _held_view(delivery: Delivery) -> dict[str, Any]:
    seen = view(delivery)
    seen["tag"] = delivery.delivery_tag
    seen["message_id"] = delivery.properties.message_id
    return seen


def _delivered_view(delivery: Delivery) -> dict[str, Any]:
    """A basic.deliver as compared: which consumer got it, too."""
    seen = _held_view(delivery)
    seen["consumer"] = delivery.consumer_tag
    return seen


class Interpreter:
    """Runs a scenario on one backend through the port and records every observable.

    ``prefix`` goes before every queue and exchange name (the real server runs many scenarios
    in one vhost) and is taken out of what is observed. ``targets``: the emulator's
    fingerprints, step by step, that RabbitMQ settles towards (R1); None on the emulator,
    which settles by itself. The run stops after the first step that does not reach its
    target: that step disagrees (its counts are part of what is observed), and what comes
    after it is not compared.
    """

    def __init__(
        self,
        backend: Backend,
        scenario: Scenario,
        *,
        prefix: str = "",
        targets: Sequence[Fingerprint] | None = None,
    ) -> None:
        checked = check(scenario)
        if not isinstance(checked, Checked):
            raise ValueError(f"the scenario breaks a rule: {checked}")
        self.backend = backend
        self.s = scenario
        self.checked = checked
        self.schedule = schedule(scenario, checked)
        self.prefix = prefix
        self.targets = targets
        self.real = backend.name != "emulator"
        self.connection: Connection | None = None
        self.observer: Connection | None = None
        self.observing: Channel | None = None
        self.slots = {name: _Slot() for name in ("p", *SLOTS)}
        self.consumers = 0
        """Consumers started so far: their tags (``c1-a003``: the channel, the letter its
        Consume drew, this count) sort as the scenario says, where the server orders a
        channel's consumers by tag (a server-named tag would sort at random)."""
        self.steps: list[Step] = []
        self.missed = False
        self.looked = 0.0
        """A step did not reach its target: the run stops."""
        self._t0 = 0.0
        self._model_ms = 0

    # names ----------------------------------------------------------------------------------
    def name(self, base: str) -> str:
        return self.prefix + base

    def key(self, exchange: str, key: str) -> str:
        return self.prefix + key if exchange == "" else key

    def exchange(self, base: str) -> str:
        return self.prefix + base if base else ""

    def plain(self, value: Any) -> Any:
        """``value`` with the run's prefix taken out of every string."""
        if not self.prefix:
            return value
        if isinstance(value, str):
            return value.replace(self.prefix, "")
        if isinstance(value, dict):
            return {self.plain(k): self.plain(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return type(value)(self.plain(v) for v in value)
        return value

    # connections and channels ---------------------------------------------------------------
    async def _connection(self) -> Connection:
        if self.connection is None or self.connection.is_closed:
            self.connection = await self.backend.connect()
        return self.connection

    def _refresh(self) -> None:
        """Forget what closed channels held (their messages went back)."""
        for slot in self.slots.values():
            if slot.channel is not None and slot.channel.is_closed:
                slot.channel = None
                slot.consumers = []
                slot.held = []
                slot.generation += 1

    async def channel(self, name: str) -> Channel:
        self._refresh()
        slot = self.slots[name]
        if slot.channel is None:
            connection = await self._connection()
            slot.channel = await connection.channel(confirms=True)
            slot.generation += 1
        return slot.channel

    async def _observing(self) -> Channel:
        if self.observer is None or self.observer.is_closed:
            self.observer = await self.backend.connect()
            self.observing = None
        if self.observing is None or self.observing.is_closed:
            self.observing = await self.observer.channel()
        return self.observing

    # observing ------------------------------------------------------------------------------
    async def fingerprint(self) -> Fingerprint:
        queues: list[tuple[int, int] | None] = []
        for base in self.s.queue_names:
            channel = await self._observing()
            try:
                info = await channel.queue_declare(self.name(base), passive=True)
            except NotFound:
                queues.append(None)
            else:
                queues.append((info.message_count, info.consumer_count))
        self._refresh()
        slots = tuple(
            (slot.delivered, slot.cancels, slot.channel is not None)
            for name, slot in self.slots.items()
            if name != "p"
        )
        return (tuple(queues), slots)

    async def settle(self, index: int) -> Fingerprint:
        """Wait for the step to settle (R1); the fingerprint reached."""
        if not self.real:
            await self.backend.until(lambda: True, "the emulator settled")
            return await self.fingerprint()
        loop = asyncio.get_running_loop()
        target = self.targets[index] if self.targets and index < len(self.targets) else None
        deadline = loop.time() + SETTLE_DEADLINE_S
        current = await self.fingerprint()
        self.looked = self._now()
        while target is not None and current != target and loop.time() < deadline:
            await asyncio.sleep(0.003)
            current = await self.fingerprint()
        if current == target:
            return current
        self.missed = target is not None
        same = 0
        while same < STABLE_POLLS:
            await asyncio.sleep(STABLE_INTERVAL_S)
            again = await self.fingerprint()
            same = same + 1 if again == current else 0
            current = again
        return current

    def _now(self) -> float:
        return asyncio.get_running_loop().time() - self._t0

    async def _record(self, label: str, result: Any, *, sleep: bool, started: float) -> None:
        done = self._now()
        fingerprint = await self.settle(len(self.steps))
        observed: dict[str, Any] = {}
        if result is not None:
            observed["result"] = result
        deliveries = {}
        for name, slot in self.slots.items():
            if slot.new:
                new = sorted(slot.new, key=lambda d: d.delivery_tag)
                deliveries[name] = [_delivered_view(d) for d in new]
                slot.new = []
            if slot.new_cancels:
                observed.setdefault("cancelled by the server", {})[name] = slot.new_cancels
                slot.new_cancels = 0
        if deliveries:
            observed["delivered"] = deliveries
        queues, slots = fingerprint
        observed["queues"] = {
            base: "missing" if state is None else {"ready": state[0], "consumers": state[1]}
            for base, state in zip(self.s.queue_names, queues, strict=True)
        }
        closed = [name for name, state in zip(SLOTS, slots, strict=True) if not state[2]]
        if closed:
            observed["not open"] = closed
        self.steps.append(
            Step(
                label,
                self.plain(observed),
                fingerprint,
                sleep=sleep,
                started=started,
                done=done,
                settled=self._now(),
                looked=self.looked,
            )
        )

    # running --------------------------------------------------------------------------------
    async def run(self) -> Trace:
        try:
            await self._declare()
            self._t0 = asyncio.get_running_loop().time()
            sleeps = iter(self.schedule.sleeps)
            for op in self.s.ops:
                if isinstance(op, Sleep):
                    await self._sleep(next(sleeps), str(op))
                else:
                    started = self._now()
                    try:
                        result = await self._do(op)
                    except RrError as error:
                        result = error_of(error)
                    await self._record(str(op), self.plain(result), sleep=False, started=started)
                if self.missed:
                    return Trace(self.steps)
            await self._final()
        finally:
            await self._close()
        return Trace(self.steps)

    async def _sleep(self, ms: int, label: str) -> None:
        started = self._now()
        self._model_ms += ms
        if self.real:
            await asyncio.sleep(max(0.0, self._model_ms / 1000 - self._now()))
        else:
            await self.backend.elapse(ms / 1000)
        await self._record(label, None, sleep=True, started=started)

    async def _declare(self) -> None:
        connection = await self._connection()
        channel = await connection.channel()
        for x in self.s.exchanges:
            await channel.exchange_declare(self.name(x.name), type=x.type)
        for q in self.s.queues:
            await channel.queue_declare(self.name(q.name), arguments=q.arguments(self.prefix))
        for b in self.s.bindings:
            await channel.queue_bind(self.name(b.queue), self.name(b.exchange), b.key)
        await channel.close()

    async def _final(self) -> None:
        if self.schedule.final_ms:
            await self._sleep(self.schedule.final_ms, f"sleep({self.schedule.final_ms / 1000:g})")
            if self.missed:
                return
        started = self._now()
        drained = await self._drain()
        await self._record("final: drain every queue", drained, sleep=False, started=started)
        if not self.checked.final_close or self.missed:
            return
        started = self._now()
        if self.connection is not None:
            await self.connection.close()
        await self._record("final: close the connection", None, sleep=False, started=started)
        if self.missed:
            return
        started = self._now()
        drained = await self._drain()
        await self._record("final: drain every queue again", drained, sleep=False, started=started)

    async def _drain(self) -> dict[str, Any]:
        contents: dict[str, Any] = {}
        for base in self.s.queue_names:
            taken: list[dict[str, Any]] = []
            channel = await self._observing()
            try:
                while (delivery := await channel.get(self.name(base), no_ack=True)) is not None:
                    seen = view(delivery)
                    seen["message_count"] = delivery.message_count
                    taken.append(seen)
            except RrError as error:
                contents[base] = error_of(error)
                continue
            if taken:
                contents[base] = taken
        plain: dict[str, Any] = self.plain(contents)
        return plain

    async def _close(self) -> None:
        for connection in (self.connection, self.observer):
            if connection is not None:
                await connection.close()
        if not self.real:
            return
        connection = await self.backend.connect()
        try:
            channel = await connection.channel()
            for q in self.s.queues:
                await channel.queue_delete(self.name(q.name))
            for x in self.s.exchanges:
                await channel.exchange_delete(self.name(x.name))
        finally:
            await connection.close()

    async def _do(self, op: Op) -> Any:
        match op:
            case Publish():
                channel = await self.channel(op.slot)
                properties = Properties(
                    message_id=f"m{op.n}",
                    expiration=None if op.expiration is None else str(op.expiration),
                    priority=op.priority,
                )
                try:
                    await channel.publish(
                        op.body.encode(),
                        exchange=self.exchange(op.exchange),
                        routing_key=self.key(op.exchange, op.key),
                        properties=properties,
                        mandatory=op.mandatory,
                    )
                except PublishFailed as error:
                    if "returned the message" in str(error):
                        return "returned"
                    if "basic.nack" in str(error):
                        return "nack"
                    raise
                return "ack"
            case Get():
                channel = await self.channel(op.slot)
                delivery = await channel.get(self.name(op.queue), no_ack=op.no_ack)
                if delivery is None:
                    return "empty"
                if not op.no_ack:
                    self.slots[op.slot].held.append(delivery)
                seen = _held_view(delivery)
                seen["message_count"] = delivery.message_count
                return seen
            case Consume():
                channel = await self.channel(op.slot)
                await channel.qos(op.prefetch)
                slot = self.slots[op.slot]
                self.consumers += 1
                tag = await channel.consume(
                    self.name(op.queue),
                    self._callback(slot, op.no_ack),
                    no_ack=op.no_ack,
                    consumer_tag=f"{op.slot}-{op.tag}{self.consumers:03d}",
                    on_cancel=self._on_cancel(slot),
                    arguments=None if op.priority is None else {"x-priority": op.priority},
                )
                slot.consumers.append(tag)
                return "ok"
            case Cancel():
                channel = await self.channel(op.slot)
                slot = self.slots[op.slot]
                if not slot.consumers:
                    return "no consumer"
                await channel.cancel(slot.consumers.pop())
                return "ok"
            case Settle():
                return await self._settle(op)
            case AckUnknown():
                channel = await self.channel(op.slot)
                await channel.ack(UNKNOWN_TAG)
                return await self._barrier(channel, "sent")
            case Close():
                self._refresh()
                slot = self.slots[op.slot]
                if slot.channel is None:
                    return "not open"
                await slot.channel.close()
                self._refresh()
                return "closed"
            case Purge():
                return await (await self.channel("p")).queue_purge(self.name(op.queue))
            case Delete():
                channel = await self.channel(op.slot)
                return await channel.queue_delete(
                    self.name(op.queue), if_unused=op.if_unused, if_empty=op.if_empty
                )
            case Passive():
                channel = await self.channel("p")
                info = await channel.queue_declare(self.name(op.queue), passive=True)
                return {"ready": info.message_count, "consumers": info.consumer_count}
            case Redeclare():
                q = self.s.queue(op.queue)
                assert q is not None
                channel = await self.channel("p")
                info = await channel.queue_declare(
                    self.name(op.queue), arguments=q.arguments(self.prefix, other_length=op.change)
                )
                return {"ready": info.message_count, "consumers": info.consumer_count}
            case Sleep():
                raise AssertionError("sleeps are run by run()")

    async def _settle(self, op: Settle) -> Any:
        channel = await self.channel(op.slot)
        slot = self.slots[op.slot]
        held = sorted(slot.held, key=lambda d: d.delivery_tag)
        if not held:
            return "nothing held"
        chosen = held[0] if op.which == "first" else held[-1]
        tag = chosen.delivery_tag
        covered = [d for d in held if d.delivery_tag <= tag] if op.multiple else [chosen]
        match op.method:
            case "ack":
                await channel.ack(tag, multiple=op.multiple)
            case "reject":
                await channel.reject(tag, requeue=op.requeue)
            case "nack":
                await channel.nack(tag, multiple=op.multiple, requeue=op.requeue)
        slot.held = [d for d in held if d not in covered]
        return await self._barrier(channel, [d.body.decode() for d in covered])

    async def _barrier(self, channel: Channel, result: Any) -> Any:
        """basic.ack / reject / nack get no answer: a passive declare on the same channel
        makes sure the server handled it, and reports the error it closed the channel with
        (by reply code: the client reports it as the class of the call that finds it)."""
        try:
            await channel.exchange_declare("amq.direct", type="direct", passive=True)
        except RrError as error:
            return {"settled": result, "channel closed": error_of(error)["code"]}
        return result

    def _callback(self, slot: _Slot, no_ack: bool) -> Callable[[Delivery], Awaitable[None]]:
        generation = slot.generation

        async def received(delivery: Delivery) -> None:
            slot.new.append(delivery)
            slot.delivered += 1
            if not no_ack and slot.generation == generation:
                slot.held.append(delivery)

        return received

    def _on_cancel(self, slot: _Slot) -> Callable[[str], None]:
        def cancelled(tag: str) -> None:
            slot.cancels += 1
            slot.new_cancels += 1
            if tag in slot.consumers:
                slot.consumers.remove(tag)

        return cancelled


# -- comparing --------------------------------------------------------------------------------


def first_difference(reference: Trace, subject: Trace) -> int | None:
    """The index of the first step where the two traces differ, or None."""
    for index, (a, b) in enumerate(zip(reference.steps, subject.steps, strict=False)):
        if a.label != b.label or ordered(a.observed) != ordered(b.observed):
            return index
    if len(reference.steps) != len(subject.steps):
        return min(len(reference.steps), len(subject.steps))
    return None


def ordered(value: Any) -> Any:
    """``value`` with every dict as its list of items: AMQP tables keep their order on the
    wire (x-death entries, headers), and Python's ``==`` on dicts would not see it."""
    if isinstance(value, dict):
        return [(k, ordered(v)) for k, v in value.items()]
    if isinstance(value, list | tuple):
        return [ordered(v) for v in value]
    return value


def timing_violation(s: Scenario, trace: Trace, upto: int) -> bool:
    """Whether a TTL boundary may have fallen (R7, with the times a RabbitMQ trace measured)
    during a step before ``upto`` or during the operation of step ``upto`` itself: then the
    server may disagree at ``upto`` only because it was late. (The settling of step ``upto``
    is not counted: when the step disagrees, that is a wait for counts that never come; its
    first look at the counts is: a server slow to answer it may show what expired meanwhile.)"""
    checked = check(s)
    assert isinstance(checked, Checked)
    values = ttl_values(s)
    if not values:
        return False
    # a trace's steps are the operations (sleeps included), then the final ones
    clocks = list(checked.clocks) + [False] * (len(trace.steps) - len(checked.clocks))
    for i, step in enumerate(trace.steps):
        if checked.final_close and step.label == "final: close the connection":
            clocks[i] = checked.final_close_clock
    margin = EPSILON_MS / 1000
    for i, step in enumerate(trace.steps[: upto + 1]):
        if not clocks[i]:
            continue
        for v in values:
            low, high = step.started + v / 1000 - margin, step.done + v / 1000 + margin
            for j in range(i, upto + 1):
                later = trace.steps[j]
                end = max(later.done, later.looked) if j == upto else later.settled
                if not later.sleep and low <= end and later.started <= high:
                    return True
    return False


@dataclass
class Outcome:
    scenario: Scenario
    reference: Trace
    subject: Trace
    index: int | None
    """The first step that differs (None: they agree)."""
    late: bool = False
    """The server broke R7's timing in every run (it was too slow): the difference may be a
    race."""

    @property
    def agree(self) -> bool:
        return self.index is None


Subject: TypeAlias = Callable[[], Awaitable[Backend]]
"""Makes the backend a scenario is compared on (RabbitMQ: the test's own, reused)."""


async def run_on(
    backend: Backend,
    s: Scenario,
    *,
    prefix: str = "",
    targets: Sequence[Fingerprint] | None = None,
) -> Trace:
    return await Interpreter(backend, s, prefix=prefix, targets=targets).run()


_runs = itertools.count(1)


async def compare(
    s: Scenario,
    version: str,
    subject: Backend | None = None,
    *,
    subject_version: str | None = None,
    attempts: int = 4,
) -> Outcome:
    """Run ``s`` on the emulator set to ``version``, then on ``subject`` (RabbitMQ; kept
    open) or on a fresh emulator set to ``subject_version``; the first difference.

    On RabbitMQ a disagreement counts once the server disagreed in two runs that kept R7's
    timing (a run the server was too slow for is run again, up to ``attempts`` runs in all):
    a difference of the emulator's comes back every time, a server that missed a settle
    deadline on a loaded machine does not.
    """
    reference_backend = EmulatorBackend(version, rounds=1)
    try:
        reference = await run_on(reference_backend, s)
    finally:
        await reference_backend.close()
    if subject is None:
        other = EmulatorBackend(subject_version or version, rounds=1)
        try:
            trace = await run_on(other, s)
        finally:
            await other.close()
        return Outcome(s, reference, trace, first_difference(reference, trace))
    targets = [step.fingerprint for step in reference.steps]
    found: Outcome | None = None
    kept_timing = 0
    for _ in range(attempts):
        prefix = f"rr{next(_runs):05d}z-"
        trace = await run_on(subject, s, prefix=prefix, targets=targets)
        index = first_difference(reference, trace)
        if index is None:
            return Outcome(s, reference, trace, None)
        late = timing_violation(s, trace, index)
        outcome = Outcome(s, reference, trace, index, late=late)
        if outcome.late:
            found = found or outcome
            continue
        found = outcome if found is None or found.late else found
        kept_timing += 1
        if kept_timing == 2:
            break
    assert found is not None
    return found


# -- shrinking --------------------------------------------------------------------------------

Check: TypeAlias = Callable[[Scenario], Awaitable[Outcome]]


@dataclass
class Shrunk:
    outcome: Outcome
    original_ops: int
    tries: int


async def shrink(
    outcome: Outcome, check_again: Check, *, budget_s: float = 120.0, max_tries: int = 300
) -> Shrunk:
    """A smaller scenario that still disagrees: cut after the first difference, drop runs of
    operations (delta debugging), then unused bindings, exchanges, queues and arguments, then
    simplify parameters; each candidate must keep the rules."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + budget_s
    best = outcome
    tries = 0
    original = len(outcome.scenario.ops)

    async def attempt(candidate: Scenario) -> bool:
        nonlocal best, tries
        if tries >= max_tries or loop.time() > deadline:
            return False
        if not isinstance(check(candidate), Checked):
            return False
        candidate = normalized(candidate)
        if candidate == best.scenario:
            return False
        tries += 1
        result = await check_again(candidate)
        if result.agree or result.late:
            return False
        best = result
        return True

    s = best.scenario
    if best.index is not None and best.index + 1 < len(s.ops):
        await attempt(replace(s, ops=s.ops[: best.index + 1]))
    progress = True
    while progress and tries < max_tries and loop.time() < deadline:
        progress = False
        # drop runs of operations, long ones first
        size = max(1, len(best.scenario.ops) // 2)
        while size >= 1:
            start = 0
            while start < len(best.scenario.ops):
                ops = best.scenario.ops
                if await attempt(replace(best.scenario, ops=ops[:start] + ops[start + size :])):
                    progress = True
                else:
                    start += size
            size //= 2
        for simpler in (_simpler_topologies, _simpler_operations):
            # candidates are made from the best scenario so far: start again after each success
            found = True
            while found:
                found = False
                for candidate in simpler(best.scenario):
                    if await attempt(candidate):
                        progress = found = True
                        break
    renumbered = _renumbered(best.scenario)
    await attempt(renumbered)
    return Shrunk(best, original, tries)


def _simpler_topologies(s: Scenario) -> Iterable[Scenario]:
    used = {q for op in s.ops for q in _queues_of(op)} | {b.queue for b in s.bindings}
    used |= {q.dlrk for q in s.queues if q.dlx == "" and q.dlrk}
    for i in range(len(s.bindings)):
        yield replace(s, bindings=s.bindings[:i] + s.bindings[i + 1 :])
    for x in s.exchanges:
        yield replace(
            s,
            exchanges=tuple(e for e in s.exchanges if e != x),
            bindings=tuple(b for b in s.bindings if b.exchange != x.name),
        )
    for q in s.queues:
        if q.name not in used:
            yield replace(s, queues=tuple(o for o in s.queues if o != q))
    for i, q in enumerate(s.queues):
        simpler = []
        if q.kind == "quorum":
            simpler.append(replace(q, kind="classic", delivery_limit=None))
        for name in (
            "ttl",
            "max_length",
            "max_length_bytes",
            "overflow",
            "delivery_limit",
            "max_priority",
        ):
            if getattr(q, name) is not None:
                simpler.append(replace(q, **{name: None}))  # type: ignore[arg-type]
        if q.dlx is not None:
            simpler.append(replace(q, dlx=None, dlrk=None))
            if q.dlx != "" and q.dlrk is not None:
                simpler.append(replace(q, dlrk=None))
        for other in simpler:
            yield replace(s, queues=(*s.queues[:i], other, *s.queues[i + 1 :]))


def _queues_of(op: Op) -> tuple[str, ...]:
    if isinstance(op, Publish):
        return (op.key,) if op.exchange == "" else ()
    queue = getattr(op, "queue", None)
    return (queue,) if isinstance(queue, str) else ()


def _simpler_operations(s: Scenario) -> Iterable[Scenario]:
    for i, op in enumerate(s.ops):
        for other in _simpler(op):
            yield replace(s, ops=(*s.ops[:i], other, *s.ops[i + 1 :]))


def _simpler(op: Op) -> list[Op]:
    found: list[Op] = []
    defaults = {f.name: f.default for f in fields(op) if f.default is not MISSING}
    simplifiable = (
        "mandatory",
        "expiration",
        "pad",
        "slot",
        "multiple",
        "no_ack",
        "if_unused",
        "if_empty",
        "priority",
    )
    for name in simplifiable:
        if name in defaults and getattr(op, name) != defaults[name]:
            found.append(replace(op, **{name: defaults[name]}))
    if isinstance(op, Consume) and op.prefetch != 1:
        found.append(replace(op, prefetch=1))
    if isinstance(op, Settle) and op.which == "last":
        found.append(replace(op, which="first"))
    if isinstance(op, Sleep) and op.ms > PHASE_MS:
        found.append(replace(op, ms=PHASE_MS))
    return found


# -- reporting --------------------------------------------------------------------------------


def reproducer(shrunk: Shrunk, *, reference: str = "emulator", subject: str = "RabbitMQ") -> str:
    """The scenario as Python-like steps, and the first difference."""
    outcome = shrunk.outcome
    s = outcome.scenario
    lines = [
        f"seed {s.seed}: shrunk from {shrunk.original_ops} to {len(s.ops)} operations "
        f"({shrunk.tries} runs)",
        *(str(x) for x in s.exchanges),
        *(str(q) for q in s.queues),
        *(str(b) for b in s.bindings),
    ]
    lines += describe_steps(outcome, reference=reference, subject=subject)
    if outcome.late:
        lines.append("(the server was too slow to keep the TTL timing rules in every run)")
    return "\n".join(lines)


def describe_steps(
    outcome: Outcome, *, reference: str = "emulator", subject: str = "RabbitMQ"
) -> list[str]:
    lines = []
    index = outcome.index
    for i, step in enumerate(outcome.reference.steps):
        if index is not None and i > index:
            break
        mark = "  <-- first difference" if i == index else ""
        lines.append(f"{i:>3}: {step.label}{mark}")
    if index is None:
        return lines
    a = outcome.reference.steps[index].observed if index < len(outcome.reference.steps) else {}
    b = outcome.subject.steps[index].observed if index < len(outcome.subject.steps) else {}
    for key in sorted(set(a) | set(b)):
        if ordered(a.get(key)) != ordered(b.get(key)):
            lines.append(f"     {key}:")
            lines.append(f"       {reference}: {a.get(key, '(none)')!r}")
            lines.append(f"       {subject}: {b.get(key, '(none)')!r}")
    return lines
