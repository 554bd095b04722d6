"""Pure. The topology a file describes, as frozen values that are valid once constructed.

Each value checks itself in ``__post_init__`` and raises :class:`ConfigError` naming the key
path of the offending key (``queues.payouts.max_attempts``); :class:`Topology` checks what
involves several queues (names that collide, a dead-letter queue that is someone's wait
queue). The loader adds the file name and line. What is checked is what RabbitMQ would
refuse, plus what would silently lose messages (a quorum delivery limit without a route).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType

from rabbitctl_retry.errors import ConfigError, UsageError
from rabbitctl_retry.fields import FieldValue
from rabbitctl_retry.retry.headers import DEFAULT_RETRY_HEADER
from rabbitctl_retry.topology import naming
from rabbitctl_retry.topology.arguments import check_queue_argument
from rabbitctl_retry.topology.keypath import key_path
from rabbitctl_retry.topology.wire import (
    MAX_FIELD_NAME_BYTES,
    MAX_QUEUE_NAME_BYTES,
    MAX_SHORT_STRING_BYTES,
    MAX_TTL_MS,
    describe_text,
    integer_problem,
    name_problem,
    table_problem,
    text_problem,
)
from rabbitctl_retry.urls import parse_management_url

MAX_NAME_BYTES = MAX_QUEUE_NAME_BYTES
"""AMQP short strings: a queue name is at most 255 bytes (an exchange name also at most 127
characters, see :mod:`rabbitctl_retry.topology.wire`)."""

X_MATCH_VALUES = ("all", "any", "all-with-x", "any-with-x")
"""What RabbitMQ takes for a binding's ``x-match`` (it refuses any other value)."""

BUILTIN_EXCHANGE_TYPES = frozenset({"direct", "fanout", "topic", "headers"})
MIN_EXPIRES_MS = 60_000
"""The shortest ``x-expires`` rr takes: RabbitMQ deletes a queue unused for that long, and
between declaring a queue and binding it (or a consumer coming) more can pass on a busy
broker; a queue gone in between leaves a declare half done (docs/reference/topology.md)."""
DELAYED_EXCHANGE_TYPE = "x-delayed-message"

_EMPTY: Mapping[str, FieldValue] = MappingProxyType({})


class QueueType(StrEnum):
    CLASSIC = "classic"
    QUORUM = "quorum"


class DelayMode(StrEnum):
    """How ``retry_after`` waits (docs/reference/topology.md, "Delays")."""

    MEMORY = "memory"
    DLX_TTL = "dlx-ttl"
    PLUGIN_DME = "plugin-dme"
    SERVER = "server"
    """RabbitMQ 4.3's delayed retries of a quorum queue (``x-delayed-retry-*``): a retry is a
    counted ``basic.reject(requeue=true)`` and the server holds the message back."""


class ServerDelayReturns(StrEnum):
    """Which returns a quorum queue with ``delay = "server"`` holds back
    (``x-delayed-retry-type``; docs/reference/topology.md, "Delays")."""

    FAILED = "failed"
    """The counted ones: ``basic.reject`` with requeue (every retry of rr) and a channel or
    connection that closed with the message unacknowledged."""
    ALL = "all"
    """Those and the uncounted ones as well (``basic.nack``, RabbitMQ 4.3's consumer timeout)."""


class DeadLetterStrategy(StrEnum):
    """How a quorum queue moves a message it dead-letters (RabbitMQ's own two ways)."""

    AT_MOST_ONCE = "at-most-once"
    """Fire and forget: lost if the target refuses it (full) or the node crashes first."""
    AT_LEAST_ONCE = "at-least-once"
    """Kept in the source queue until the target confirmed it (needs x-overflow =
    reject-publish on the source)."""


class SettingsMode(StrEnum):
    """Where rr puts a queue's retry settings (docs/how-to/migrate-to-quorum.md, "Changing a
    topology")."""

    ARGUMENTS = "arguments"
    """As ``x-`` arguments of the declare: fixed for the queue's life; what RustStream
    services declare too, so both can declare the same queues."""
    POLICY = "policy"
    """In one rr-owned policy per queue (``rr.<queue>``): a later change applies to the live
    queue; needs the management HTTP API."""


class PublishMode(StrEnum):
    """How the runtime publishes its copies: with publisher confirms, or without."""

    CONFIRM = "confirm"
    FAST = "fast"


def check_entity_name(name: str, path: str, what: str, *, reserved_ok: bool = False) -> None:
    """Refuse a name that cannot be declared: empty, longer than the wire takes (255 bytes;
    127 characters for an ``exchange``), outside the name characters
    (:func:`~rabbitctl_retry.topology.wire.name_problem`), or (to declare) in ``amq.``."""
    if not name:
        article = "an" if what[0] in "aeiou" else "a"
        raise ConfigError(f"{article} {what} name must not be empty", path=path)
    problem = name_problem(name, exchange=what.endswith("exchange"))
    if problem is not None:
        raise ConfigError(f"{what} name {describe_text(name)} {problem}", path=path)
    if name.startswith("amq.") and not reserved_ok:
        raise ConfigError(
            f"{what} name {name!r} starts with the reserved prefix 'amq.'; RabbitMQ refuses it",
            path=path,
        )


def check_wire_text(text: str, path: str, what: str, max_bytes: int | None) -> None:
    """Refuse a routing key, header name or type that cannot go on the wire as it is."""
    problem = text_problem(text, max_bytes)
    if problem is not None:
        raise ConfigError(f"{what} {describe_text(text)} {problem}", path=path)


def check_wire_table(table: Mapping[str, FieldValue], *parts: str | int) -> None:
    """Refuse arguments that cannot go on the wire as an AMQP field table (dates, NaN,
    integers outside 64 bits, control characters); ``parts`` is the key path of the table."""
    problem = table_problem(table)
    if problem is not None:
        raise ConfigError(problem.reason, path=key_path(*parts, *problem.at))


def frozen_mapping(values: Mapping[str, FieldValue] | None) -> Mapping[str, FieldValue]:
    """A read-only copy, or the shared empty mapping."""
    if not values:
        return _EMPTY
    return MappingProxyType(dict(values))


@dataclass(frozen=True, slots=True, kw_only=True)
class Binding:
    """``queue`` receives what ``exchange`` routes with ``routing_key`` (and ``arguments``)."""

    queue: str
    exchange: str
    routing_key: str = ""
    arguments: Mapping[str, FieldValue] = field(default_factory=lambda: _EMPTY)
    path: str = ""

    def __post_init__(self) -> None:
        if self.exchange == "":
            raise ConfigError(
                'cannot bind to the default exchange "": RabbitMQ refuses it (every queue '
                "already receives messages whose routing key is its name)",
                path=f"{self.path}.exchange" if self.path else None,
            )
        exchange_path = f"{self.path}.exchange" if self.path else ""
        check_entity_name(self.exchange, exchange_path, "exchange", reserved_ok=True)
        check_wire_text(
            self.routing_key,
            f"{self.path}.routing_key" if self.path else "",
            "routing key",
            MAX_SHORT_STRING_BYTES,
        )
        arguments_path = f"{self.path}.arguments" if self.path else ""
        problem = table_problem(self.arguments)
        if problem is not None:
            below = key_path(*problem.at) if problem.at else ""
            if below and not below.startswith("["):
                below = "." + below
            raise ConfigError(problem.reason, path=f"{arguments_path}{below}" or None)
        match = self.arguments.get("x-match")
        if match is not None and match not in X_MATCH_VALUES:
            raise ConfigError(
                f"x-match must be one of {', '.join(X_MATCH_VALUES)} (RabbitMQ refuses the "
                "binding otherwise)",
                path=f"{arguments_path}.x-match" if arguments_path else None,
            )


@dataclass(frozen=True, slots=True, kw_only=True)
class Exchange:
    """An exchange the file declares (``[exchanges.NAME]``)."""

    name: str
    type: str = "direct"
    durable: bool = True
    arguments: Mapping[str, FieldValue] = field(default_factory=lambda: _EMPTY)

    def __post_init__(self) -> None:
        path = key_path("exchanges", self.name)
        check_entity_name(self.name, path, "exchange")
        check_wire_text(
            self.type, key_path("exchanges", self.name, "type"), "type", MAX_SHORT_STRING_BYTES
        )
        check_wire_table(self.arguments, "exchanges", self.name, "arguments")
        alternate = self.arguments.get("alternate-exchange")
        if alternate is not None:
            alternate_path = key_path("exchanges", self.name, "arguments", "alternate-exchange")
            if not isinstance(alternate, str):
                raise ConfigError(
                    "must be the name of an exchange (a string); RabbitMQ refuses any other type",
                    path=alternate_path,
                )
            check_entity_name(alternate, alternate_path, "alternate exchange", reserved_ok=True)
        if self.type not in BUILTIN_EXCHANGE_TYPES and not self.type.startswith("x-"):
            allowed = ", ".join(sorted(BUILTIN_EXCHANGE_TYPES))
            raise ConfigError(
                f"unknown exchange type {self.type!r}: use one of {allowed}, or a plugin's x- type",
                path=key_path("exchanges", self.name, "type"),
            )
        if self.type == DELAYED_EXCHANGE_TYPE:
            delayed = self.arguments.get("x-delayed-type")
            if delayed not in BUILTIN_EXCHANGE_TYPES:
                raise ConfigError(
                    "an x-delayed-message exchange needs arguments.x-delayed-type set to "
                    "direct, fanout, topic or headers",
                    path=key_path("exchanges", self.name, "arguments", "x-delayed-type"),
                )


@dataclass(frozen=True, slots=True, kw_only=True)
class Queue:
    """A queue the file declares, with its retry policy (docs/reference/topology.md).

    ``max_attempts`` counts every delivery, the first included. On a quorum queue it becomes
    the server's ``x-delivery-limit = max_attempts - 1``; on a classic queue the runtime
    counts. ``dead_letter`` is a queue on the default exchange where spent messages go.
    """

    name: str
    type: QueueType = QueueType.CLASSIC
    durable: bool = True
    max_attempts: int | None = None
    dead_letter: str | None = None
    dead_letter_exchange: str | None = None
    """The queue's own dead-letter exchange; ``""`` is the default exchange (with
    ``arguments.x-dead-letter-routing-key`` naming the queue that keeps what is dropped)."""
    rejected: str | None = None
    """A queue (on the default exchange) that keeps what any consumer of this queue rejects
    or nacks without requeue, rr's ``drop()`` included: the queue's server-side dead-letter
    route (docs/reference/topology.md, "What other consumers reject")."""
    delivery_limit: int | None = None
    delay: DelayMode = DelayMode.MEMORY
    wait_queue: str | None = None
    wait_queue_type: QueueType | None = None
    """``dlx-ttl`` only: the type of the wait queues; unset means the queue's own type."""
    delay_tiers_ms: tuple[int, ...] = ()
    delay_min_ms: int | None = None
    """``delay = "server"`` only: the first retry's wait (``x-delayed-retry-min``)."""
    delay_max_ms: int | None = None
    """``delay = "server"`` only: the longest wait (``x-delayed-retry-max``; unset: the same as
    ``delay_min_ms``, a constant wait, as RabbitMQ does)."""
    delay_returns: ServerDelayReturns | None = None
    """``delay = "server"`` only: which returns wait (unset: ``failed``)."""
    publish: PublishMode = PublishMode.CONFIRM
    dead_letter_strategy: DeadLetterStrategy | None = None
    """Quorum queues with a dead-letter route only; unset means at-least-once."""
    replicas: int | None = None
    """Quorum queues only: how many nodes hold a copy (``x-quorum-initial-group-size``;
    unset: every node of the cluster, RabbitMQ's default)."""
    arguments: Mapping[str, FieldValue] = field(default_factory=lambda: _EMPTY)
    bindings: tuple[Binding, ...] = ()
    settings: SettingsMode | None = None
    """``settings``: where this queue's retry settings go; unset: ``[broker] settings``."""

    def _path(self, *keys: str) -> str:
        return key_path("queues", self.name, *keys)

    def __post_init__(self) -> None:
        check_entity_name(self.name, self._path(), "queue")
        self._check_attempts()
        self._check_dead_letter()
        self._check_rejected()
        self._check_quorum()
        self._check_delay()
        self._check_arguments()
        self._check_strategy()

    def _check_attempts(self) -> None:
        counts = (
            ("max_attempts", self.max_attempts),
            ("delivery_limit", self.delivery_limit),
            ("replicas", self.replicas),
        )
        for key, value in counts:
            problem = None if value is None else integer_problem(value)
            if problem is not None:
                raise ConfigError(problem, path=self._path(key))
        if self.max_attempts is not None and self.max_attempts < 1:
            raise ConfigError(
                f"must be at least 1 (every delivery counts, the first included), "
                f"not {self.max_attempts}",
                path=self._path("max_attempts"),
            )
        if self.delivery_limit is not None and self.delivery_limit < 0:
            raise ConfigError(
                f"must not be negative, not {self.delivery_limit}",
                path=self._path("delivery_limit"),
            )
        if self.replicas is not None and self.replicas < 1:
            raise ConfigError(
                f"must be at least 1 (the nodes that hold the queue), not {self.replicas}",
                path=self._path("replicas"),
            )

    def _check_dead_letter(self) -> None:
        if self.dead_letter is not None:
            self._check_target(
                "dead_letter",
                self.dead_letter,
                f"spent messages of {self.name!r} would come straight back to it",
            )
        if self.dead_letter_exchange:
            # "" is the default exchange, a valid dead-letter exchange (checked with its
            # routing key: _check_arguments). Only declaring an amq.* exchange is refused;
            # pointing at one is fine.
            check_entity_name(
                self.dead_letter_exchange,
                self._path("dead_letter_exchange"),
                "exchange",
                reserved_ok=True,
            )

    def _check_target(self, key: str, target: str, coming_back: str) -> str:
        """``target``, the queue that setting ``key`` sends messages to, is a queue's name,
        neither this queue nor one of its wait queues; its path."""
        path = self._path(key)
        check_entity_name(target, path, "queue")
        if target == self.name:
            raise ConfigError(f"names the queue itself: {coming_back}", path=path)
        if target in self.wait_queue_names:
            raise ConfigError(f"{target!r} is this queue's own wait queue", path=path)
        return path

    def _check_rejected(self) -> None:
        """``rejected`` is the queue's server-side dead-letter route: a queue of its own,
        never another route beside it (a queue has one)."""
        if self.rejected is None:
            return
        path = self._check_target(
            "rejected",
            self.rejected,
            f"what a consumer of {self.name!r} rejects would come straight back to it, again "
            "and again",
        )
        route = (
            ("dead_letter_exchange", self._path("dead_letter_exchange"))
            if self.dead_letter_exchange is not None
            else ("arguments.x-dead-letter-routing-key", self._path("arguments"))
            if "x-dead-letter-routing-key" in self.arguments
            else None
        )
        if route is not None:
            raise ConfigError(
                f'rejected sets the queue\'s dead-letter route (x-dead-letter-exchange = "" '
                f"and x-dead-letter-routing-key = {self.rejected!r}); a queue has one: drop "
                f"{route[0]}, or rejected",
                path=path,
            )
        if (
            self.type is QueueType.QUORUM
            and self.dead_letter is not None
            and self.rejected != self.dead_letter
        ):
            raise ConfigError(
                f"a quorum queue has one dead-letter route, its dead_letter "
                f"{self.dead_letter!r}: what any consumer rejects without requeue goes there "
                f"already (x-death reason rejected); drop rejected, or make it "
                f"{self.dead_letter!r}",
                path=path,
            )

    def _check_quorum(self) -> None:
        if self.type is QueueType.CLASSIC:
            if self.dead_letter is not None and self.max_attempts is None:
                raise ConfigError(
                    "dead_letter also needs max_attempts: say how many deliveries a message "
                    "gets (max_attempts = 1 sends the first failure straight to "
                    f"{self.dead_letter!r})",
                    path=self._path("dead_letter"),
                )
            if self.delivery_limit is not None:
                raise ConfigError(
                    "only quorum queues have a server delivery limit; a classic queue counts "
                    "attempts with max_attempts",
                    path=self._path("delivery_limit"),
                )
            if self.replicas is not None:
                raise ConfigError(
                    "only quorum queues are replicated; a classic queue lives on one node "
                    '(type = "quorum" to replicate it)',
                    path=self._path("replicas"),
                )
            return
        if not self.durable:
            raise ConfigError(
                "a quorum queue is always durable; RabbitMQ refuses a non-durable one",
                path=self._path("durable"),
            )
        if self.max_attempts is not None and self.dead_letter is None:
            raise ConfigError(
                "a quorum queue with max_attempts also needs dead_letter: a delivery limit "
                "without a route throws the spent message away",
                path=self._path("max_attempts"),
            )
        if self.dead_letter is not None and self.server_delivery_limit is None:
            raise ConfigError(
                "a quorum queue with dead_letter also needs max_attempts (or delivery_limit): "
                "nothing tells the queue when a delivery is spent",
                path=self._path("dead_letter"),
            )
        if (
            self.max_attempts is not None
            and self.delivery_limit is not None
            and self.delivery_limit != self.max_attempts - 1
        ):
            raise ConfigError(
                f"max_attempts = {self.max_attempts} already sets the server limit to "
                f"{self.max_attempts - 1}; drop delivery_limit or make them agree",
                path=self._path("delivery_limit"),
            )
        if self.delivery_limit is not None and not self._dead_letters:
            raise ConfigError(
                "a delivery limit without dead_letter, rejected or dead_letter_exchange "
                "throws the spent message away",
                path=self._path("delivery_limit"),
            )

    def _check_delay(self) -> None:
        if self.wait_queue is not None:
            if self.delay is not DelayMode.DLX_TTL or self.delay_tiers_ms:
                raise ConfigError(
                    'wait_queue only applies to delay = "dlx-ttl" without delay_tiers',
                    path=self._path("wait_queue"),
                )
            check_entity_name(self.wait_queue, self._path("wait_queue"), "queue")
            if self.wait_queue == self.name:
                raise ConfigError(
                    "the wait queue must not be the queue itself", path=self._path("wait_queue")
                )
        if self.delay_tiers_ms:
            if self.delay is not DelayMode.DLX_TTL:
                raise ConfigError(
                    'delay_tiers wait in TTL queues: they need delay = "dlx-ttl"',
                    path=self._path("delay_tiers"),
                )
            if any(tier_ms <= 0 for tier_ms in self.delay_tiers_ms):
                raise ConfigError(
                    "every tier must be longer than 0", path=self._path("delay_tiers")
                )
            for index, tier_ms in enumerate(self.delay_tiers_ms):
                if tier_ms > MAX_TTL_MS:
                    raise ConfigError(
                        f"a tier is at most {MAX_TTL_MS} ms (about 49.7 days), the longest "
                        "TTL rr sets",
                        path=key_path("queues", self.name, "delay_tiers", index),
                    )
            if len(set(self.delay_tiers_ms)) != len(self.delay_tiers_ms):
                raise ConfigError("tiers must differ", path=self._path("delay_tiers"))
            if list(self.delay_tiers_ms) != sorted(self.delay_tiers_ms):
                raise ConfigError(
                    "list tiers from shortest to longest", path=self._path("delay_tiers")
                )
        for derived in self.wait_queue_names:
            check_entity_name(derived, self._path(), "derived wait queue")
        self._check_wait_queue_type()
        self._check_server_delay()
        if self.delay is DelayMode.PLUGIN_DME:
            check_entity_name(
                naming.delay_exchange_name(self.name), self._path(), "derived delay exchange"
            )

    def _check_server_delay(self) -> None:
        server_keys = (
            ("delay_min", self.delay_min_ms),
            ("delay_max", self.delay_max_ms),
            ("delay_returns", self.delay_returns),
        )
        if self.delay is not DelayMode.SERVER:
            for key, value in server_keys:
                if value is not None:
                    raise ConfigError(
                        f'{key} only applies to delay = "server" (RabbitMQ 4.3\'s delayed '
                        "retries of a quorum queue)",
                        path=self._path(key),
                    )
            return
        if self.type is not QueueType.QUORUM:
            raise ConfigError(
                'delay = "server" is RabbitMQ 4.3\'s delayed retry of a quorum queue: it needs '
                'type = "quorum" (a classic queue waits with "dlx-ttl" or delay_tiers)',
                path=self._path("delay"),
            )
        if self.delay_min_ms is None:
            raise ConfigError(
                'delay = "server" needs delay_min, the first retry\'s wait (RabbitMQ waits '
                "delay_min x the delivery count, at most delay_max)",
                path=self._path("delay"),
            )
        for key, value in server_keys[:2]:
            if isinstance(value, int) and not 0 < value <= MAX_TTL_MS:
                raise ConfigError(
                    f"must be longer than 0 and at most {MAX_TTL_MS} ms (about 49.7 days)",
                    path=self._path(key),
                )
        if self.delay_max_ms is not None and self.delay_max_ms < self.delay_min_ms:
            raise ConfigError(
                "must not be shorter than delay_min (RabbitMQ would cap every wait at it)",
                path=self._path("delay_max"),
            )

    def _check_wait_queue_type(self) -> None:
        if self.wait_queue_type is None:
            return
        path = self._path("wait_queue_type")
        if self.delay is not DelayMode.DLX_TTL:
            raise ConfigError(
                'wait_queue_type only applies to delay = "dlx-ttl" (or delay_tiers)', path=path
            )
        if self.type is QueueType.QUORUM and self.wait_queue_type is not QueueType.QUORUM:
            raise ConfigError(
                "the wait queues of a quorum queue are quorum queues: a classic wait queue "
                "comes back from a restart first and loses the copies that expired meanwhile "
                "(rr docs topology 'What survives a broker restart')",
                path=path,
            )

    def _check_arguments(self) -> None:
        check_wire_table(self.arguments, "queues", self.name, "arguments")
        for name, value in self.arguments.items():
            problem = check_queue_argument(name, value, self.type.value)
            if problem is not None:
                raise ConfigError(f"{name} {problem}", path=self._path("arguments", name))
        self._check_expires()
        if (
            self.type is QueueType.QUORUM
            and self.dead_letter is not None
            and "x-dead-letter-routing-key" in self.arguments
        ):
            raise ConfigError(
                "dead_letter already sets x-dead-letter-routing-key",
                path=self._path("arguments", "x-dead-letter-routing-key"),
            )
        if "x-dead-letter-routing-key" in self.arguments and self.dead_letter_exchange is None:
            raise ConfigError(
                'x-dead-letter-routing-key needs dead_letter_exchange ("" for the default '
                "exchange, or use rejected): RabbitMQ refuses a dead-letter routing key "
                "without a dead-letter exchange",
                path=self._path("arguments", "x-dead-letter-routing-key"),
            )
        if (
            self.dead_letter_exchange == ""
            and self.dead_letter is None
            and "x-dead-letter-routing-key" not in self.arguments
        ):
            raise ConfigError(
                'dead_letter_exchange = "" (the default exchange) routes by queue name: '
                "without arguments.x-dead-letter-routing-key a dropped message goes to the "
                "queue its own routing key names (none: lost; this one: back again); name the "
                'queue that keeps them, or write rejected = "QUEUE"',
                path=self._path("dead_letter_exchange"),
            )

    def _check_expires(self) -> None:
        """``x-expires`` (RabbitMQ deletes the queue once unused that long): at least
        :data:`MIN_EXPIRES_MS`, and never on a queue whose delayed copies wait outside it."""
        expires = self.arguments.get("x-expires")
        if not isinstance(expires, int) or isinstance(expires, bool):
            return
        path = self._path("arguments", "x-expires")
        if expires < MIN_EXPIRES_MS:
            raise ConfigError(
                f"x-expires {expires} ms is shorter than rr takes: RabbitMQ would delete the "
                "queue before rr has bound it or a consumer came (a declare left half done); "
                f"at least {MIN_EXPIRES_MS} (one minute)",
                path=path,
            )
        if self.wait_queue_names or self.delay_exchange is not None:
            raise ConfigError(
                "x-expires on a queue with delayed retries on the broker: RabbitMQ would "
                "delete the queue while copies wait for it, and they would come back to "
                'nothing (lost); drop x-expires, or use delay = "memory"',
                path=path,
            )

    def _check_strategy(self) -> None:
        path = self._path("dead_letter_strategy")
        if self.dead_letter_strategy is not None:
            if self.type is not QueueType.QUORUM:
                raise ConfigError(
                    "only quorum queues choose how they dead-letter; a classic queue's spent "
                    "messages are copied by rr, with confirms",
                    path=path,
                )
            if not self._dead_letters:
                raise ConfigError(
                    "the queue dead-letters nothing: set dead_letter or dead_letter_exchange",
                    path=path,
                )
        if self.effective_dead_letter_strategy is not DeadLetterStrategy.AT_LEAST_ONCE:
            return
        overflow = self.arguments.get("x-overflow", "reject-publish")
        if overflow != "reject-publish":
            raise ConfigError(
                f"x-overflow = {overflow!r}: at-least-once dead-lettering needs "
                '"reject-publish" (RabbitMQ falls back to at-most-once otherwise); set '
                'dead_letter_strategy = "at-most-once" to keep this overflow',
                path=self._path("arguments", "x-overflow"),
            )

    @property
    def effective_dead_letter_strategy(self) -> DeadLetterStrategy | None:
        """How this queue dead-letters on the server: quorum queues with a dead-letter route
        do so at least once unless the file says otherwise; ``None`` for the others."""
        if self.type is not QueueType.QUORUM or not self._dead_letters:
            return None
        return self.dead_letter_strategy or DeadLetterStrategy.AT_LEAST_ONCE

    @property
    def _dead_letters(self) -> bool:
        """The queue has a server-side dead-letter route: a quorum queue's ``dead_letter``,
        ``rejected``, or its own ``dead_letter_exchange`` (``""`` included)."""
        return (
            (self.type is QueueType.QUORUM and self.dead_letter is not None)
            or self.rejected is not None
            or self.dead_letter_exchange is not None
        )

    @property
    def effective_wait_queue(self) -> str | None:
        """The single wait queue of ``delay = "dlx-ttl"`` without tiers, else ``None``."""
        if self.delay is not DelayMode.DLX_TTL or self.delay_tiers_ms:
            return None
        return self.wait_queue or naming.wait_queue_name(self.name)

    @property
    def effective_wait_queue_type(self) -> QueueType:
        """The type of this queue's wait queues: ``wait_queue_type``, else the queue's own."""
        return self.wait_queue_type or self.type

    @property
    def wait_queue_names(self) -> tuple[str, ...]:
        """Every wait queue this queue's delayed retries use (one, one per tier, or none)."""
        if self.delay is not DelayMode.DLX_TTL:
            return ()
        if self.delay_tiers_ms:
            return tuple(naming.tier_queue_name(self.name, ms) for ms in self.delay_tiers_ms)
        return (self.wait_queue or naming.wait_queue_name(self.name),)

    @property
    def delay_exchange(self) -> str | None:
        """The delayed-message exchange of ``delay = "plugin-dme"``, else ``None``."""
        if self.delay is DelayMode.PLUGIN_DME:
            return naming.delay_exchange_name(self.name)
        return None

    @property
    def server_delay(self) -> tuple[int, int] | None:
        """``delay = "server"``: ``(delay_min_ms, delay_max_ms)`` as declared, else ``None``."""
        if self.delay is not DelayMode.SERVER or self.delay_min_ms is None:
            return None
        return self.delay_min_ms, self.delay_max_ms or self.delay_min_ms

    @property
    def server_delivery_limit(self) -> int | None:
        """The ``x-delivery-limit`` rr sets: ``max_attempts - 1``, or the raw limit."""
        if self.type is not QueueType.QUORUM:
            return None
        if self.max_attempts is not None:
            return self.max_attempts - 1
        return self.delivery_limit


@dataclass(frozen=True, slots=True, kw_only=True)
class Broker:
    """``[broker]``: where to connect and which header counts retries."""

    urls: tuple[str, ...] = ()
    """``url``: one URL, or the nodes of a cluster in the order rr tries them
    (docs/reference/cli.md, "Several hosts")."""
    retry_header: str = DEFAULT_RETRY_HEADER
    management_url: str | None = None
    """``management_url``: the management plugin's HTTP API, for what AMQP cannot tell (the
    cluster's nodes, each queue's members; docs/how-to/run-on-a-cluster.md)."""
    settings: SettingsMode = SettingsMode.ARGUMENTS
    """``settings``: where the queues' retry settings go unless a queue says otherwise
    (``arguments``, the default, so that RustStream services can declare the same queues)."""

    def __post_init__(self) -> None:
        if not self.retry_header:
            raise ConfigError("must not be empty", path="broker.retry_header")
        check_wire_text(
            self.retry_header, "broker.retry_header", "header name", MAX_FIELD_NAME_BYTES
        )
        for index, url in enumerate(self.urls):
            where = "broker.url" if len(self.urls) == 1 else f"broker.url[{index}]"
            if not url.isprintable():
                raise ConfigError("must not hold control or format characters", path=where)
            if not url.startswith(("amqp://", "amqps://")):
                raise ConfigError("must start with amqp:// or amqps://", path=where)
        if self.management_url is not None:
            # The one parser of management URLs, so `rr topology validate` refuses what
            # `rr declare` would (docs/reference/cli.md, "Malformed input").
            try:
                parse_management_url(self.management_url)
            except UsageError as error:
                raise ConfigError(str(error), path="broker.management_url") from None


@dataclass(frozen=True, slots=True, kw_only=True)
class Topology:
    """A whole topology file: broker settings, queues and exchanges, mutually consistent."""

    broker: Broker = field(default_factory=Broker)
    queues: tuple[Queue, ...] = ()
    exchanges: tuple[Exchange, ...] = ()

    def __post_init__(self) -> None:
        listed = {queue.name for queue in self.queues}
        exchanges = {exchange.name for exchange in self.exchanges}
        owner_of_wait_queue: dict[str, str] = {}
        for queue in self.queues:
            for wait_queue in queue.wait_queue_names:
                path = key_path("queues", queue.name, "wait_queue")
                if wait_queue in listed:
                    raise ConfigError(
                        f"{wait_queue!r} is the wait queue of {queue.name!r}; rr declares it, "
                        "so do not list it under [queues]",
                        path=key_path("queues", wait_queue),
                    )
                other = owner_of_wait_queue.setdefault(wait_queue, queue.name)
                if other != queue.name:
                    raise ConfigError(
                        f"{wait_queue!r} is already the wait queue of {other!r}; a wait "
                        "queue sends its messages back to one queue only",
                        path=path,
                    )
            delay_exchange = queue.delay_exchange
            if delay_exchange is not None and delay_exchange in exchanges:
                raise ConfigError(
                    f"{delay_exchange!r} is the delay exchange rr declares for {queue.name!r}; "
                    "do not list it under [exchanges]",
                    path=key_path("exchanges", delay_exchange),
                )
        expiring = {queue.name for queue in self.queues if "x-expires" in queue.arguments}
        for queue in self.queues:
            routes = (
                (
                    "rejected",
                    queue.rejected,
                    f"what is rejected from {queue.name!r} then",
                    ": what it holds goes back there",
                ),
                (
                    "dead_letter",
                    queue.dead_letter,
                    f"the dead letters of {queue.name!r} sent then",
                    ", not a dead-letter queue",
                ),
            )
            for key, target, lost, not_one in routes:
                if target is not None and target in expiring:
                    raise ConfigError(
                        f"{target!r} has x-expires: RabbitMQ would delete it while unused, "
                        f"and {lost} would be lost",
                        path=key_path("queues", target, "arguments", "x-expires"),
                    )
                if target is not None and target in owner_of_wait_queue:
                    raise ConfigError(
                        f"{target!r} is the wait queue of {owner_of_wait_queue[target]!r}{not_one}",
                        path=key_path("queues", queue.name, key),
                    )

    def settings_of(self, queue: Queue) -> SettingsMode:
        """Where ``queue``'s retry settings go: its own ``settings``, else the broker's."""
        return queue.settings or self.broker.settings

    @property
    def uses_policies(self) -> bool:
        """Some queue keeps its settings in a policy (``settings = "policy"``)."""
        return any(self.settings_of(queue) is SettingsMode.POLICY for queue in self.queues)

    def queue(self, name: str) -> Queue | None:
        """The queue listed under ``name``, if any."""
        for queue in self.queues:
            if queue.name == name:
                return queue
        return None

    @property
    def wait_queue_owners(self) -> Mapping[str, str]:
        """Every wait queue of the topology -> the queue its messages go back to."""
        return {
            wait_queue: queue.name for queue in self.queues for wait_queue in queue.wait_queue_names
        }
