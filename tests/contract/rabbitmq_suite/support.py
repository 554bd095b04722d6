"""What the ported RabbitMQ suites share: the queue kinds their groups run a case on, and the
Erlang suites' helpers (declare, publish, ``consume``, ``consume_empty``,
``wait_for_messages``) written over the transport port.

``wait_for_messages(Config, [[Queue, Total, Ready, Unacked]])`` reads ``rabbitmqctl
list_queues``; over AMQP 0-9-1 a client sees ``queue.declare-ok`` only: the ready count
(``message_count``) and the consumer count. :meth:`Scenario.wait_for_messages` waits for the
ready count and for the consumer count the server shows for the unacked column (see
:meth:`Scenario.consumers_for`); ``Total`` (ready + unacked + the dead letters an at-least-once
quorum queue still holds) is not observable and is left out.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from rabbitctl_retry.fields import FieldTable, FieldValue
from rabbitctl_retry.transport.base import Channel, Delivery, Properties, QueueInfo
from tests.backends import Backend
from tests.contract.support import death, first_death
from tests.contract.versions import Difference, carried_count, dead_letter_redelivered, last_death
from tests.observe import Recorder


@dataclass(frozen=True)
class QueueKind:
    """One innermost group of a suite: the queue type and dead-letter strategy of the queue a
    case dead-letters from (the Erlang ``queue_args`` and ``queue_durable``)."""

    id: str
    """The pytest id."""
    group: str
    """The Erlang group path, ``outer/inner``."""
    arguments: dict[str, FieldValue]
    durable: bool

    @property
    def inner_group(self) -> str:
        return self.group.split("/")[1]

    @property
    def quorum(self) -> bool:
        return self.arguments.get("x-queue-type") == "quorum"

    @property
    def at_least_once(self) -> bool:
        return self.arguments.get("x-dead-letter-strategy") == "at-least-once"


CLASSIC = QueueKind("classic", "classic_queue/at_most_once", {"x-queue-type": "classic"}, False)
QUORUM_AT_MOST_ONCE = QueueKind(
    "quorum-at-most-once",
    "quorum_queue/at_most_once",
    {"x-queue-type": "quorum", "x-dead-letter-strategy": "at-most-once"},
    True,
)
QUORUM_AT_LEAST_ONCE = QueueKind(
    "quorum-at-least-once",
    "quorum_queue/at_least_once",
    {
        "x-queue-type": "quorum",
        "x-dead-letter-strategy": "at-least-once",
        "x-overflow": "reject-publish",
    },
    True,
)
CLASSIC_DISABLED = QueueKind("classic-disabled", "classic_queue/disabled", CLASSIC.arguments, False)
QUORUM_DISABLED = QueueKind(
    "quorum-disabled", "quorum_queue/disabled", {"x-queue-type": "quorum"}, True
)


def kinds(*chosen: QueueKind) -> Callable[[Any], Any]:
    """Parametrize a case over ``chosen`` queue kinds (argument ``kind``)."""
    return pytest.mark.parametrize("kind", [pytest.param(k, id=k.id) for k in chosen])


@dataclass(frozen=True)
class Names:
    """The names ``init_per_testcase`` gives a case's queues and exchange."""

    queue: str
    dlx_queue: str
    dlx_queue_2: str
    dlx_exchange: str

    @classmethod
    def of(cls, kind: QueueKind, case: str) -> Names:
        prefix = f"{kind.inner_group}_{case}"
        return cls(prefix, f"{prefix}_2", f"{prefix}_3", f"{prefix}_dlx_exchange")


@dataclass
class Scenario:
    """One case on one backend and queue kind: its channel, its names, and the quorum queues
    it declared.

    The channel is in confirm mode (the suite's is not): each publish returns once the queue
    took the message, so that a wait for a count (``wait_for_messages``) can never be met
    before the publishes arrived, and a publish the queue refuses raises
    :class:`~rabbitctl_retry.errors.PublishFailed`."""

    backend: Backend
    kind: QueueKind
    names: Names
    channel: Channel
    quorum_queues: set[str] = field(default_factory=set)

    @classmethod
    async def open(cls, backend: Backend, kind: QueueKind, case: str) -> Scenario:
        channel = await backend.channel(confirms=True)
        return cls(backend, kind, Names.of(kind, case), channel)

    # -- declarations ------------------------------------------------------------------------

    async def declare_queue(
        self, name: str, arguments: Mapping[str, FieldValue] | None = None, *, durable: bool
    ) -> QueueInfo:
        info = await self.channel.queue_declare(name, durable=durable, arguments=arguments)
        if (arguments or {}).get("x-queue-type") == "quorum":
            self.quorum_queues.add(name)
        return info

    async def declare_source(
        self, name: str, dead_letter: Mapping[str, FieldValue], extra: Mapping[str, FieldValue]
    ) -> QueueInfo:
        """``name`` with ``DeadLetterArgs ++ Args ++ ExtraArgs``, the kind's durability."""
        arguments = {**dead_letter, **self.kind.arguments, **extra}
        return await self.declare_queue(name, arguments, durable=self.kind.durable)

    async def declare_dead_letter_queues(
        self, extra: Mapping[str, FieldValue] | None = None
    ) -> None:
        """``declare_dead_letter_queues``: the DLX (direct), the queue dead-lettering to it with
        the DLX queue's name as key, and the DLX queue bound to it with that key."""
        n = self.names
        await self.channel.exchange_declare(n.dlx_exchange, durable=False)
        await self.declare_source(
            n.queue,
            {"x-dead-letter-exchange": n.dlx_exchange, "x-dead-letter-routing-key": n.dlx_queue},
            extra or {},
        )
        await self.declare_queue(n.dlx_queue, durable=self.kind.durable)
        await self.channel.queue_bind(n.dlx_queue, n.dlx_exchange, n.dlx_queue)

    # -- publish, get, settle ----------------------------------------------------------------

    async def publish(
        self,
        queue: str,
        payloads: Sequence[str],
        headers: FieldTable | None = None,
        *,
        expiration: str | None = None,
    ) -> None:
        """Publish each payload to ``queue`` through the default exchange (confirmed)."""
        properties = Properties(headers=headers, expiration=expiration)
        for payload in payloads:
            await self.channel.publish(payload.encode(), routing_key=queue, properties=properties)

    async def get(self, queue: str) -> Delivery:
        delivery = await self.channel.get(queue)
        assert delivery is not None, f"basic.get-empty from {queue!r}"
        return delivery

    async def consume(self, queue: str, payloads: Sequence[str]) -> list[Delivery]:
        """``consume``: one basic.get (with ack) per payload, each must be that payload."""
        got = [await self.get(queue) for _ in payloads]
        bodies = [d.body.decode() for d in got]
        assert bodies == list(payloads), f"got {bodies} from {queue!r}, not {list(payloads)}"
        return got

    async def consume_empty(self, queue: str) -> None:
        """``consume_empty``: basic.get-empty."""
        delivery = await self.channel.get(queue)
        assert delivery is None, f"{queue!r} still holds {delivery.body!r}"

    async def reject_all(self, queue: str, count: int) -> list[bytes]:
        """A consumer rejects (no requeue) each delivery of ``queue`` until ``count`` came, and
        is cancelled; the bodies in delivery order."""
        recorder = Recorder(self.channel, "drop")
        tag = await self.channel.consume(queue, recorder)

        async def all_rejected() -> bool:
            return len(recorder.deliveries) == count

        await self.backend.until(all_rejected, f"{count} deliveries rejected")
        await self.channel.cancel(tag)
        return recorder.bodies

    async def nack(self, delivery: Delivery, *, multiple: bool = False, requeue: bool) -> None:
        await self.channel.nack(delivery.delivery_tag, multiple=multiple, requeue=requeue)

    async def reject(self, delivery: Delivery, *, requeue: bool) -> None:
        await self.channel.reject(delivery.delivery_tag, requeue=requeue)

    # -- observing ---------------------------------------------------------------------------

    async def declare_ok(self, queue: str) -> tuple[int, int]:
        """(message_count, consumer_count) of a passive ``queue.declare``."""
        info = await self.channel.queue_declare(queue, passive=True)
        return info.message_count, info.consumer_count

    def consumers_for(self, queue: str, unacked: int) -> int:
        """The consumer count ``queue.declare-ok`` shows while the case's channel holds
        ``unacked`` basic.get deliveries of ``queue`` and no consumer is on it: 0 for a
        classic queue; for a quorum queue, one per unacked basic.get delivery (measured on
        3.10.8 and 4.0.5: 3 after three basic.get, 2 once one of them is nacked with requeue,
        0 once all are settled)."""
        return unacked if queue in self.quorum_queues else 0

    async def wait_for_messages(self, queue: str, ready: int, unacked: int = 0) -> None:
        """``wait_for_messages(Config, [[Queue, _Total, Ready, Unacked]])`` as far as AMQP
        0-9-1 sees it: wait until ``queue.declare-ok`` shows ``ready`` messages and the
        consumer count of ``unacked`` basic.get deliveries (:meth:`consumers_for`)."""
        want = (ready, self.consumers_for(queue, unacked))
        seen: list[tuple[int, int]] = []

        async def reached() -> bool:
            seen.append(await self.declare_ok(queue))
            return seen[-1] == want

        try:
            await self.backend.until(reached, f"{queue!r} at (messages, consumers) {want}")
        except AssertionError as error:
            raise AssertionError(f"{error}; last seen {seen[-1:]}") from None

    # -- expected headers --------------------------------------------------------------------

    def got_count(self, queue: str, *, nacks: int = 0, rejects: int = 0) -> FieldTable:
        """The count headers a basic.get of ``queue`` shows for a message never returned to
        it that ``nacks`` basic.nack and ``rejects`` basic.reject without requeue dead-lettered
        from ``queue`` before (as headers to merge): none from a classic queue,
        :func:`quorum_get_count` from a quorum queue."""
        if queue not in self.quorum_queues:
            return {}
        carried = carried_count(self.backend.version, nacks=nacks, rejects=rejects, quorum=True)
        return quorum_get_count(self.backend.version, carried)

    def redelivered(self, source: str, target: str, *, rejects: int) -> bool:
        """The redelivered flag of a dead letter's first delivery from ``target``, which
        ``rejects`` basic.reject (with or without requeue) in ``source`` sent there."""
        version = self.backend.version
        carried = carried_count(version, rejects=rejects, quorum=source in self.quorum_queues)
        return dead_letter_redelivered(version, carried, quorum=target in self.quorum_queues)

    def died(
        self,
        reason: str,
        queue: str,
        *,
        exchange: str = "",
        routing_keys: list[str] | None = None,
        count: int = 1,
        original_expiration: str | None = None,
        extra: Mapping[str, FieldValue] | None = None,
    ) -> FieldTable:
        """The headers of a message that died once (``count`` times) in ``queue``, published
        to ``exchange`` with ``routing_keys`` (default: the queue's name), plus ``extra``."""
        entry = death(
            reason,
            queue,
            exchange=exchange,
            routing_keys=routing_keys if routing_keys is not None else [queue],
            count=count,
            original_expiration=original_expiration,
        )
        return {
            **(extra or {}),
            "x-death": [entry],
            **first_death(reason, queue, exchange),
            **last_death(self.backend.version, reason, queue, exchange),
        }


# -- where RabbitMQ 3.10 and 4.0 differ in these scenarios ------------------------------------
# (beside tests/contract/versions.py's table, read with its ``expected``: the same form)

DIFFERENCES: dict[str, Difference] = {}


def expected(version: str, name: str) -> Any:
    """What a scenario expects of ``name`` (:data:`DIFFERENCES`) on ``version``."""
    return DIFFERENCES[name].values[version]


DIFFERENCES["quorum-get-delivery-count"] = Difference(
    # the x-delivery-count (and x-acquired-count) a basic.get from a quorum queue shows for a
    # message never returned to that queue, given the count it carries as a dead letter
    # ("dead-letter-carried-count")
    {
        "3.10": "0",
        "4.0": "the carried count, absent when none",
        "4.3": "the carried count as both counts, absent when none",
    },
    "RabbitMQ 4.0 (message containers): a dead letter's delivery-count annotation travels "
    "with it, and a quorum queue the dead letter reaches (the same or another) shows it as "
    "x-delivery-count on basic.get and basic.deliver. RabbitMQ 4.3 starts both of its counts "
    "from it: x-delivery-count and x-acquired-count show the carried count. 3.10 shows "
    "x-delivery-count 0 on every first basic.get from a quorum queue (versions.py "
    "'quorum-got-by-basic-get'). Measured on 3.10.8, 4.0.5 and 4.3.6.",
)
DIFFERENCES["dead-letter-key-removes-cc"] = Difference(
    {"3.10": True, "4.0": False, "4.3": False},
    "RabbitMQ 3.10 removes the CC header of a message dead-lettered with "
    "x-dead-letter-routing-key (rabbit_dead_letter, as dead_letter_headers_CC_with_routing_key "
    "expects); 4.0 keeps it (it only routes by the dead-letter key). Measured on 3.10.8 and "
    "4.0.5.",
)


def quorum_get_count(version: str, carried: int = 0) -> FieldTable:
    """The count headers of a basic.get from a quorum queue, of a message never returned to
    it that carries ``carried`` (as headers to merge: empty when absent);
    "quorum-get-delivery-count"."""
    rule = expected(version, "quorum-get-delivery-count")
    if rule == "0":
        return {"x-delivery-count": 0}
    if not carried:
        return {}
    if rule == "the carried count, absent when none":
        return {"x-delivery-count": carried}
    assert rule == "the carried count as both counts, absent when none"
    return {"x-acquired-count": carried, "x-delivery-count": carried}
