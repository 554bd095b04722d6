"""Pure. A :class:`Topology` -> the exchanges, queues and bindings it means
(docs/reference/topology.md).

The decision table, per listed queue:

==============================  ==========================================================
file                            on the broker
==============================  ==========================================================
every queue                     ``x-queue-type``, ``"classic"`` or ``"quorum"``: always sent,
                                so that a vhost (or node) whose default queue type is quorum
                                makes no classic queue of the file a quorum queue, and a queue
                                of the other type is a conflict (docs/reference/topology.md, "The
                                queue's type")
classic, any max_attempts       no retry argument (the runtime counts)
classic + dead_letter_exchange  ``x-dead-letter-exchange = <it>`` (where drops go; ``""``, the
                                default exchange, with ``x-dead-letter-routing-key`` from
                                ``arguments``)
rejected R (classic, or quorum  ``x-dead-letter-exchange = ""``,
without D)                      ``x-dead-letter-routing-key = R``: what any consumer rejects
                                or nacks without requeue (rr's ``drop()`` included) goes to
                                R; an unlisted R is declared as D is (below)
quorum + D, rejected = D        nothing more: D is already the queue's route
quorum + max_attempts N + D     ``x-delivery-limit = N - 1`` (the server counts returns, not
                                deliveries), ``x-dead-letter-exchange = ""`` (or the queue's
                                own), ``x-dead-letter-routing-key = D``
quorum + delivery_limit L       ``x-delivery-limit = L`` (with D or dead_letter_exchange)
quorum, neither, RabbitMQ 4.x   ``x-delivery-limit = -1``: no limit (4.x would give it 20, and
                                drop a message returned that often); nothing on 3.10, which
                                has no default and reads -1 as "drop at the first return"
quorum + replicas R             ``x-quorum-initial-group-size = R``, on the queue and on its
                                wait queues (unset: every node of the cluster holds them)
quorum with D or its own DLX    ``x-dead-letter-strategy = "at-least-once"`` and
                                ``x-overflow = "reject-publish"`` (a dead letter stays in
                                the queue until its target confirmed it: neither a full
                                target nor a crash loses it), unless
                                ``dead_letter_strategy = "at-most-once"``
dead_letter D not listed        D as a durable classic queue (``x-queue-type`` only); the
(or rejected R)                 same for R
delay = "dlx-ttl"               wait queue ``<q>.retry`` (or ``wait_queue``): durable,
                                ``x-dead-letter-exchange = ""``,
                                ``x-dead-letter-routing-key = <q>``; per-message expiration
delay = "dlx-ttl", quorum q     the wait queue is a quorum queue too, with
                                ``x-dead-letter-strategy = "at-least-once"`` and
                                ``x-overflow = "reject-publish"``: an expired copy is moved
                                to ``q`` at least once, even across a broker restart (a
                                classic wait queue dead-letters at most once, and a copy
                                that expires while ``q`` is not back yet is lost)
wait_queue_type = "quorum"      the same for a classic queue's wait queues (a classic wait
                                queue may lose a copy to a crash of the node the instant
                                it expires)
delay_tiers                     one such wait queue per tier, ``<q>.retry.<tier>``, each
                                with ``x-message-ttl = <tier ms>``
delay = "plugin-dme"            exchange ``<q>.delay``, type ``x-delayed-message``,
                                ``x-delayed-type = "direct"``, and ``<q>`` bound to it with
                                routing key ``<q>``
delay = "server" (quorum)       ``x-delayed-retry-type = "failed"`` (or ``delay_returns``),
                                ``x-delayed-retry-min`` / ``-max`` = ``delay_min`` /
                                ``delay_max`` in ms (max defaults to min); no wait queue
bindings                        one binding each
settings = "policy"             what a policy can hold (``topology/settings.py``
                                ``POLICY_KEYS``) moves from the queue's arguments (and
                                each wait queue's) into rr's policy for it, ``rr.<queue>``
                                (:attr:`QueueEntity.policy`); the rest stays declared
==============================  ==========================================================

Order: exchanges, then queues, then bindings — the order they can be declared in. Queues
come in file order (each listed queue followed by its wait queues and its unlisted
dead-letter queue), except that a queue something dead-letters to comes before it: a
declaration cut short never leaves a queue whose dead-letter route leads nowhere.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from rabbitctl_retry.fields import FieldValue
from rabbitctl_retry.releases import release_of
from rabbitctl_retry.server import UNLIMITED_DELIVERY_LIMIT, Policy
from rabbitctl_retry.topology.keypath import key_path
from rabbitctl_retry.topology.model import (
    DELAYED_EXCHANGE_TYPE,
    DeadLetterStrategy,
    DelayMode,
    Queue,
    QueueType,
    ServerDelayReturns,
    SettingsMode,
    Topology,
    frozen_mapping,
)
from rabbitctl_retry.topology.naming import format_duration_ms
from rabbitctl_retry.topology.settings import rr_policy, split_arguments


@dataclass(frozen=True, slots=True, kw_only=True)
class QueueEntity:
    """A queue to declare, with its exact arguments."""

    name: str
    durable: bool = True
    arguments: Mapping[str, FieldValue] = field(default_factory=dict)
    role: str = "queue"
    """What the queue is for, in words: ``queue``, ``wait queue of refunds``, ..."""
    source: str = ""
    """The key path in the file that makes rr declare it."""
    policy_mode: bool = False
    """``settings = "policy"``: the settings a policy can hold are in :attr:`policy`, not in
    :attr:`arguments` (docs/how-to/migrate-to-quorum.md, "Changing a topology")."""
    policy: Policy | None = None
    """rr's policy for the queue (``rr.<name>``), put before the queue is declared; None in
    arguments mode, or when no setting needs one."""
    wait_of: str | None = None
    """For a wait queue: the queue it dead-letters its expired copies back to, by name."""
    lifts_delivery_limit: bool = False
    """A quorum queue declared with ``x-delivery-limit = -1`` (no limit) only because the
    server would otherwise give it one (:func:`takes_unlimited`): one that already exists
    without it keeps the server's default limit and is no conflict (the plan warns,
    ``topology/plan.py``)."""

    @property
    def key(self) -> tuple[str, str]:
        return ("queue", self.name)

    def settings_by_argument(self) -> dict[str, FieldValue]:
        """Every setting rr gives the queue, by its argument's name (``x-delivery-limit``),
        whether the declare or rr's policy holds it."""
        found = dict(self.arguments)
        if self.policy is not None:
            found.update((f"x-{key}", value) for key, value in self.policy.definition)
        return found

    def setting(self, argument: str) -> FieldValue:
        """The value of ``argument`` (``x-dead-letter-exchange``) whether the declare or rr's
        policy holds it; None when neither sets it."""
        if argument in self.arguments:
            return self.arguments[argument]
        if self.policy is not None:
            key = argument.removeprefix("x-")
            return self.policy.keys.get(key)
        return None


@dataclass(frozen=True, slots=True, kw_only=True)
class ExchangeEntity:
    """An exchange to declare."""

    name: str
    type: str = "direct"
    durable: bool = True
    arguments: Mapping[str, FieldValue] = field(default_factory=dict)
    role: str = "exchange"
    source: str = ""

    @property
    def key(self) -> tuple[str, str]:
        return ("exchange", self.name)


@dataclass(frozen=True, slots=True, kw_only=True)
class BindingEntity:
    """``queue`` bound to ``exchange`` with ``routing_key``."""

    queue: str
    exchange: str
    routing_key: str = ""
    arguments: Mapping[str, FieldValue] = field(default_factory=dict)
    role: str = "binding"
    source: str = ""

    @property
    def name(self) -> str:
        return f"{self.exchange} -> {self.queue} ({self.routing_key})"


Entity = QueueEntity | ExchangeEntity | BindingEntity


@dataclass(frozen=True, slots=True, kw_only=True)
class Desired:
    """Everything a topology puts on the broker."""

    exchanges: tuple[ExchangeEntity, ...] = ()
    queues: tuple[QueueEntity, ...] = ()
    bindings: tuple[BindingEntity, ...] = ()
    referenced_exchanges: tuple[str, ...] = ()
    """Exchanges the file uses (bindings, dead-letter exchanges) but does not declare: they
    must already exist."""

    @property
    def entities(self) -> tuple[Entity, ...]:
        return (*self.exchanges, *self.queues, *self.bindings)


CLASSIC_ARGUMENTS: Mapping[str, FieldValue] = MappingProxyType(
    {"x-queue-type": QueueType.CLASSIC.value}
)
"""What a plain classic queue rr declares on its own (an unlisted dead-letter queue, a
holding queue of ``rr migrate``, ``rr dlq move --create``'s target) is declared with: its
type, whatever the vhost's default queue type (docs/reference/topology.md, "The queue's type")."""


def queue_arguments(
    queue: Queue, server: tuple[int, int, int] | None = None
) -> dict[str, FieldValue]:
    """The exact ``x-`` arguments of a listed queue (table in the module docstring) on a
    server of release ``server`` (None: not known)."""
    arguments: dict[str, FieldValue] = dict(queue.arguments)
    arguments["x-queue-type"] = queue.type.value
    if queue.type is QueueType.QUORUM:
        limit = queue.server_delivery_limit
        if limit is not None:
            arguments["x-delivery-limit"] = limit
        elif takes_unlimited(server):
            arguments["x-delivery-limit"] = UNLIMITED_DELIVERY_LIMIT
        if queue.dead_letter is not None:
            arguments["x-dead-letter-exchange"] = queue.dead_letter_exchange or ""
            arguments["x-dead-letter-routing-key"] = queue.dead_letter
        else:
            arguments.update(_server_route(queue))
        if queue.effective_dead_letter_strategy is DeadLetterStrategy.AT_LEAST_ONCE:
            arguments["x-dead-letter-strategy"] = DeadLetterStrategy.AT_LEAST_ONCE.value
            arguments["x-overflow"] = "reject-publish"
        if queue.replicas is not None:
            arguments["x-quorum-initial-group-size"] = queue.replicas
        server_delay = queue.server_delay
        if server_delay is not None:
            returns = queue.delay_returns or ServerDelayReturns.FAILED
            arguments["x-delayed-retry-type"] = returns.value
            arguments["x-delayed-retry-min"], arguments["x-delayed-retry-max"] = server_delay
    else:
        arguments.update(_server_route(queue))
    return arguments


def _server_route(queue: Queue) -> dict[str, FieldValue]:
    """The dead-letter route the server follows for ``queue`` when rr's ``dead_letter`` is
    not one (a classic queue's ``D`` is rr's copy): ``rejected`` through the default
    exchange, else a ``dead_letter_exchange`` alone, else none."""
    if queue.rejected is not None:
        return {"x-dead-letter-exchange": "", "x-dead-letter-routing-key": queue.rejected}
    if queue.dead_letter_exchange is not None:
        return {"x-dead-letter-exchange": queue.dead_letter_exchange}
    return {}


def wait_queue_arguments(
    queue: str, ttl_ms: int | None = None, *, quorum: bool = False, replicas: int | None = None
) -> dict[str, FieldValue]:
    """A wait queue dead-letters expired messages back to ``queue`` on the default exchange;
    the wait queue of a quorum queue is a quorum queue that does so at least once, on as many
    nodes as its queue (``replicas``)."""
    arguments: dict[str, FieldValue] = {
        "x-dead-letter-exchange": "",
        "x-dead-letter-routing-key": queue,
    }
    if ttl_ms is not None:
        arguments["x-message-ttl"] = ttl_ms
    arguments["x-queue-type"] = (QueueType.QUORUM if quorum else QueueType.CLASSIC).value
    if quorum:
        arguments["x-dead-letter-strategy"] = "at-least-once"
        arguments["x-overflow"] = "reject-publish"
        if replicas is not None:
            arguments["x-quorum-initial-group-size"] = replicas
    return arguments


def _dead_letter_target(queue: QueueEntity) -> str | None:
    """The queue ``queue`` dead-letters to on the default exchange, if any."""
    if queue.setting("x-dead-letter-exchange") != "":
        return None
    target = queue.setting("x-dead-letter-routing-key")
    return target if isinstance(target, str) else None


def targets_first(
    queues: list[QueueEntity], routes: Mapping[str, str] | None = None
) -> list[QueueEntity]:
    """``queues`` in the same order, except that each comes after the queue it dead-letters
    to (its ``x-dead-letter-routing-key`` on the default exchange, or ``routes[name]``: where
    the runtime sends its spent messages). A cycle is cut where it closes."""
    by_name = {queue.name: queue for queue in queues}
    known_routes = routes or {}
    ordered: list[QueueEntity] = []
    seen: set[str] = set()

    def targets(queue: QueueEntity) -> Iterator[str]:
        for target in (_dead_letter_target(queue), known_routes.get(queue.name)):
            if target is not None and target in by_name:
                yield target

    # Depth first, post-order, with an explicit stack: a file may chain thousands of queues
    # (each dead-lettering to the next), deeper than Python's recursion limit.
    for root in queues:
        if root.name in seen:
            continue
        seen.add(root.name)
        stack: list[tuple[QueueEntity, Iterator[str]]] = [(root, targets(root))]
        while stack:
            queue, pending = stack[-1]
            for target in pending:
                if target not in seen:
                    seen.add(target)
                    stack.append((by_name[target], targets(by_name[target])))
                    break
            else:
                stack.pop()
                ordered.append(queue)
    return ordered


def takes_unlimited(server: tuple[int, int, int] | None) -> bool:
    """Whether rr declares a quorum queue without a limit (no ``max_attempts``, no
    ``delivery_limit``: a dead-letter or parking queue) with ``x-delivery-limit = -1`` on a
    server of release ``server``: on RabbitMQ 4.0 and later, which would otherwise give it a
    limit of 20 and drop what was returned that often (every read of it before 4.3 counts).
    Not on 3.10, which has no default limit and drops every message at its first return
    under -1; not when the server is not known (``rr topology show``, an export of
    definitions)."""
    return server is not None and release_of(server).takes_unlimited_delivery_limit


def expand(topology: Topology, server: tuple[int, int, int] | None = None) -> Desired:
    """The concrete entities of ``topology`` (see the module docstring) on a server of release
    ``server`` (``(4, 3, 6)``; None when not known: then no argument that depends on the
    server is set, see :func:`takes_unlimited`)."""
    expansion = _Expansion(topology, server)
    for queue in topology.queues:
        expansion.add(queue)
    return expansion.desired()


class _Expansion:
    """The entities of a topology as :func:`expand` adds them, a listed queue at a time, in
    declaration order."""

    def __init__(self, topology: Topology, server: tuple[int, int, int] | None) -> None:
        self.topology = topology
        self.server = server
        self.listed = {queue.name for queue in topology.queues}
        self.declared_exchanges = {exchange.name for exchange in topology.exchanges}
        self.exchanges = [
            ExchangeEntity(
                name=exchange.name,
                type=exchange.type,
                durable=exchange.durable,
                arguments=frozen_mapping(exchange.arguments),
                source=key_path("exchanges", exchange.name),
            )
            for exchange in topology.exchanges
        ]
        self.queues: list[QueueEntity] = []
        self.bindings: list[BindingEntity] = []
        self.referenced: list[str] = []
        self.seen_dead_letters: set[str] = set()
        self.dead_letter_of: dict[str, list[str]] = {}
        self.rejected_of: dict[str, list[str]] = {}
        for queue in topology.queues:
            if queue.dead_letter is not None:
                self.dead_letter_of.setdefault(queue.dead_letter, []).append(queue.name)
            if queue.rejected is not None and queue.rejected != queue.dead_letter:
                self.rejected_of.setdefault(queue.rejected, []).append(queue.name)

    def reference(self, exchange: str) -> None:
        """``exchange`` is used: an exchange the file does not declare must already exist."""
        if exchange and exchange not in self.declared_exchanges and exchange not in self.referenced:
            self.referenced.append(exchange)

    def keeps(self, name: str) -> str:
        """``, dead letters of a, rejected messages of b``: what queue ``name`` keeps."""
        kept = ""
        if name in self.dead_letter_of:
            kept += ", dead letters of " + ", ".join(self.dead_letter_of[name])
        if name in self.rejected_of:
            kept += ", rejected messages of " + ", ".join(self.rejected_of[name])
        return kept

    def add(self, queue: Queue) -> None:
        """A listed queue, its wait queues, its delay exchange, its unlisted dead-letter
        queues and its bindings."""
        self.queues.append(self._listed_queue(queue))
        self.queues.extend(_wait_queues(queue))
        if queue.dead_letter_exchange:  # "" is the default exchange: always there
            self.reference(queue.dead_letter_exchange)
        if queue.delay is DelayMode.PLUGIN_DME:
            self._add_delay_exchange(queue)
        self._add_unlisted_dead_letters(queue)
        for index, binding in enumerate(queue.bindings):
            self.reference(binding.exchange)
            self.bindings.append(
                BindingEntity(
                    queue=queue.name,
                    exchange=binding.exchange,
                    routing_key=binding.routing_key,
                    arguments=frozen_mapping(binding.arguments),
                    source=key_path("queues", queue.name, "bindings", index),
                )
            )

    def _listed_queue(self, queue: Queue) -> QueueEntity:
        role = f"{queue.type.value} queue"
        if queue.replicas is not None:
            role += f" on {queue.replicas} node{'' if queue.replicas == 1 else 's'}"
        return QueueEntity(
            name=queue.name,
            durable=queue.durable,
            arguments=frozen_mapping(queue_arguments(queue, self.server)),
            role=role + self.keeps(queue.name),
            source=key_path("queues", queue.name),
            lifts_delivery_limit=(
                queue.type is QueueType.QUORUM
                and queue.server_delivery_limit is None
                and takes_unlimited(self.server)
            ),
        )

    def _add_delay_exchange(self, queue: Queue) -> None:
        """``delay = "plugin-dme"``: the queue's delayed-message exchange, bound to it."""
        exchange_name = queue.delay_exchange or ""
        source = key_path("queues", queue.name, "delay")
        self.exchanges.append(
            ExchangeEntity(
                name=exchange_name,
                type=DELAYED_EXCHANGE_TYPE,
                arguments=frozen_mapping({"x-delayed-type": "direct"}),
                role=f"delay exchange of {queue.name}",
                source=source,
            )
        )
        self.bindings.append(
            BindingEntity(
                queue=queue.name,
                exchange=exchange_name,
                routing_key=queue.name,
                role=f"delay route of {queue.name}",
                source=source,
            )
        )

    def _add_unlisted_dead_letters(self, queue: Queue) -> None:
        """The queue's dead-letter and rejected queues the file does not list, once each."""
        for key, target in (("dead_letter", queue.dead_letter), ("rejected", queue.rejected)):
            if target is None or target in self.listed or target in self.seen_dead_letters:
                continue
            self.seen_dead_letters.add(target)
            self.queues.append(
                QueueEntity(
                    name=target,
                    arguments=frozen_mapping(CLASSIC_ARGUMENTS),
                    role="classic queue" + self.keeps(target),
                    source=key_path("queues", queue.name, key),
                )
            )

    def desired(self) -> Desired:
        """Everything added, rr's policies taken out of the arguments of the queues with
        ``settings = "policy"``, each queue after the one it dead-letters to."""
        topology = self.topology
        routes = {q.name: q.dead_letter for q in topology.queues if q.dead_letter is not None}
        in_policy = {
            name
            for queue in topology.queues
            if topology.settings_of(queue) is SettingsMode.POLICY
            for name in (queue.name, *queue.wait_queue_names)
        }
        queues = [_in_policy(queue) if queue.name in in_policy else queue for queue in self.queues]
        return Desired(
            exchanges=tuple(self.exchanges),
            queues=tuple(targets_first(queues, routes)),
            bindings=tuple(self.bindings),
            referenced_exchanges=tuple(self.referenced),
        )


def _in_policy(queue: QueueEntity) -> QueueEntity:
    """``queue`` with ``settings = "policy"``: what a policy can hold moves from its
    arguments into rr's policy for it (docs/how-to/migrate-to-quorum.md, "Changing a topology")."""
    declared, definition = split_arguments(queue.arguments)
    return QueueEntity(
        name=queue.name,
        durable=queue.durable,
        arguments=frozen_mapping(declared),
        role=queue.role,
        source=queue.source,
        policy_mode=True,
        policy=rr_policy(queue.name, definition) if definition else None,
        wait_of=queue.wait_of,
        lifts_delivery_limit=queue.lifts_delivery_limit,
    )


def _wait_queues(queue: Queue) -> list[QueueEntity]:
    source = key_path("queues", queue.name, "delay")
    quorum = queue.effective_wait_queue_type is QueueType.QUORUM
    replicas = queue.replicas if queue.type is QueueType.QUORUM else None
    if queue.delay_tiers_ms:
        return [
            QueueEntity(
                name=name,
                arguments=frozen_mapping(
                    wait_queue_arguments(queue.name, tier_ms, quorum=quorum, replicas=replicas)
                ),
                role=f"{format_duration_ms(tier_ms)} wait queue of {queue.name}",
                source=key_path("queues", queue.name, "delay_tiers"),
                wait_of=queue.name,
            )
            for name, tier_ms in zip(queue.wait_queue_names, queue.delay_tiers_ms, strict=True)
        ]
    wait_queue = queue.effective_wait_queue
    if wait_queue is None:
        return []
    return [
        QueueEntity(
            name=wait_queue,
            arguments=frozen_mapping(
                wait_queue_arguments(queue.name, quorum=quorum, replicas=replicas)
            ),
            role=f"wait queue of {queue.name}",
            source=source,
            wait_of=queue.name,
        )
    ]
