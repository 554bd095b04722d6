"""The emulated broker's face: :class:`Broker`, one vhost (``/``) of an emulated RabbitMQ.

A thin facade: it holds one :class:`~rabbitctl_retry.emulator.state.BrokerState` and hands
each operation to the module of functions that owns its rules: ``channels.py``
(connections, channels, consumers), ``entities.py`` (queues, exchanges, bindings, policies),
``publish.py`` (basic.publish), ``queues.py`` (a queue's messages: enqueue, expiry, dispatch,
basic.get, purge, delete), ``settle.py`` (ack, reject, nack, closing channels); under them
``deliver.py``, ``dead_letters.py``, ``route.py`` and ``limits.py``. The transport, the
management twin and the tests use this class only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from typing import Literal

from rabbitctl_retry.emulator import channels, entities, settle
from rabbitctl_retry.emulator import publish as publishing
from rabbitctl_retry.emulator import queues as queue_rules
from rabbitctl_retry.emulator.args import QueueKind
from rabbitctl_retry.emulator.channels import RR_CLIENT_PROPERTIES
from rabbitctl_retry.emulator.clock import VirtualClock
from rabbitctl_retry.emulator.entities import DELAYED_TYPE, ConnectionFault, NotModelled
from rabbitctl_retry.emulator.events import Event
from rabbitctl_retry.emulator.model import ChannelState, ConnectionState, EmulatedQueue, Exchange
from rabbitctl_retry.emulator.publish import PublishOutcome
from rabbitctl_retry.emulator.state import BrokerState, dead_letters_afterwards
from rabbitctl_retry.fields import FieldValue
from rabbitctl_retry.releases import ServerRelease
from rabbitctl_retry.server import Policy, ServerVersion
from rabbitctl_retry.transport.base import Delivery, Properties, QueueInfo

__all__ = [
    "DELAYED_TYPE",
    "RR_CLIENT_PROPERTIES",
    "Broker",
    "ConnectionFault",
    "NotModelled",
]


class Broker:
    """One vhost (``/``) of an emulated RabbitMQ: its state, and the operations on it."""

    def __init__(
        self,
        clock: VirtualClock,
        server_version: ServerVersion,
        *,
        delayed_message_exchange: bool = True,
        record_events: bool = True,
        default_queue_type: QueueKind | None = None,
    ) -> None:
        self.state = BrokerState(
            clock=clock,
            server_version=server_version,
            behaviour=server_version.behaviour,
            record_events=record_events,
            delayed_message_exchange=delayed_message_exchange,
            default_queue_type=default_queue_type,
        )
        entities.declare_system_exchanges(self.state)

    # -- the state, as the transport, the management twin and the tests read it -------------

    @property
    def clock(self) -> VirtualClock:
        return self.state.clock

    @property
    def server_version(self) -> ServerVersion:
        return self.state.server_version

    @property
    def behaviour(self) -> ServerRelease:
        """What this server does where releases differ (``releases.py``)."""
        return self.state.behaviour

    @behaviour.setter
    def behaviour(self, behaviour: ServerRelease) -> None:
        self.state.behaviour = behaviour

    @property
    def delayed_message_exchange(self) -> bool:
        return self.state.delayed_message_exchange

    @property
    def default_queue_type(self) -> QueueKind | None:
        """The vhost's default queue type, None when it was made without one."""
        return self.state.default_queue_type

    @property
    def queues(self) -> dict[str, EmulatedQueue]:
        return self.state.queues

    @property
    def exchanges(self) -> dict[str, Exchange]:
        return self.state.exchanges

    @property
    def connections(self) -> list[ConnectionState]:
        return self.state.connections

    @property
    def policies(self) -> dict[bool, dict[str, Policy]]:
        """The vhost's policies (at False) and operator policies (at True), by name."""
        return self.state.policies

    @property
    def events(self) -> list[Event]:
        return self.state.events

    @property
    def activity(self) -> int:
        """Bumped by every operation and timer: lets the glue tell when things stopped
        moving."""
        return self.state.activity

    @property
    def dead_letter_retry_s(self) -> float:
        """How long an at-least-once dead-letter worker waits before it sends a refused dead
        letter again."""
        return self.state.dead_letter_retry_s

    @dead_letter_retry_s.setter
    def dead_letter_retry_s(self, seconds: float) -> None:
        self.state.dead_letter_retry_s = seconds

    @property
    def kept_dead_letters(self) -> int:
        """Dead letters quorum queues keep (at-least-once) because their target refused them."""
        return self.state.kept_dead_letters

    # -- connections and channels ------------------------------------------------------------

    def open_connection(
        self, client_properties: Mapping[str, FieldValue] | None = None
    ) -> ConnectionState:
        return channels.open_connection(self.state, client_properties)

    def open_channel(self, connection: ConnectionState, *, confirms: bool) -> ChannelState:
        return channels.open_channel(self.state, connection, confirms=confirms)

    def close_channel(self, channel: ChannelState) -> None:
        channels.close_channel(self.state, channel)

    def close_connection(self, connection: ConnectionState) -> None:
        channels.close_connection(self.state, connection)

    def release_channel(self, channel: ChannelState) -> None:
        """A closing channel: cancel its consumers, return its unacked deliveries in order."""
        settle.release_channels(self.state, [channel])

    def release_channels(self, channels: list[ChannelState]) -> None:
        """Channels closing together: cancel their consumers, return what each held."""
        settle.release_channels(self.state, channels)

    # -- queues, exchanges, bindings, policies -----------------------------------------------

    def queue_declare(
        self,
        channel: ChannelState,
        name: str,
        *,
        passive: bool,
        durable: bool,
        exclusive: bool,
        auto_delete: bool,
        arguments: Mapping[str, FieldValue] | None,
    ) -> QueueInfo:
        return entities.queue_declare(
            self.state,
            channel,
            name,
            passive=passive,
            durable=durable,
            exclusive=exclusive,
            auto_delete=auto_delete,
            arguments=arguments,
        )

    def queue_purge(self, channel: ChannelState, name: str) -> int:
        return entities.queue_purge(self.state, channel, name)

    def queue_delete(
        self, channel: ChannelState, name: str, *, if_unused: bool, if_empty: bool
    ) -> int:
        return entities.queue_delete(
            self.state, channel, name, if_unused=if_unused, if_empty=if_empty
        )

    def purge(self, q: EmulatedQueue) -> int:
        """Remove ``q``'s ready messages (and those waiting out a delayed retry)."""
        return queue_rules.purge(self.state, q)

    def delete_queue(self, q: EmulatedQueue) -> int:
        """Remove ``q`` with its ready messages, bindings and consumers."""
        return queue_rules.delete_queue(self.state, q)

    def mark_used(self, q: EmulatedQueue) -> None:
        """``x-expires``: ``q`` was used."""
        queue_rules.mark_used(self.state, q)

    def exchange_declare(
        self,
        name: str,
        *,
        type: str,
        passive: bool,
        durable: bool,
        auto_delete: bool,
        internal: bool,
        arguments: Mapping[str, FieldValue] | None,
    ) -> None:
        entities.exchange_declare(
            self.state,
            name,
            type=type,
            passive=passive,
            durable=durable,
            auto_delete=auto_delete,
            internal=internal,
            arguments=arguments,
        )

    def exchange_delete(self, name: str, *, if_unused: bool) -> None:
        entities.exchange_delete(self.state, name, if_unused=if_unused)

    def queue_bind(
        self,
        channel: ChannelState,
        queue: str,
        exchange: str,
        routing_key: str,
        arguments: Mapping[str, FieldValue] | None,
    ) -> None:
        entities.queue_bind(self.state, channel, queue, exchange, routing_key, arguments)

    def queue_unbind(
        self,
        channel: ChannelState,
        queue: str,
        exchange: str,
        routing_key: str,
        arguments: Mapping[str, FieldValue] | None,
    ) -> None:
        entities.queue_unbind(self.state, channel, queue, exchange, routing_key, arguments)

    def put_policy(self, policy: Policy, *, operator: bool) -> None:
        """Set (or replace) a policy; it applies to every queue at once."""
        entities.put_policy(self.state, policy, operator=operator)

    def delete_policy(self, name: str, *, operator: bool) -> None:
        entities.delete_policy(self.state, name, operator=operator)

    # -- messages ----------------------------------------------------------------------------

    def publish(
        self,
        exchange: str,
        routing_key: str,
        body: bytes,
        properties: Properties,
        mandatory: bool,
        publisher: object = None,
    ) -> PublishOutcome:
        """Route and enqueue one message."""
        return publishing.publish(
            self.state, exchange, routing_key, body, properties, mandatory, publisher
        )

    def publish_rate(self, exchange: str) -> float | None:
        """Messages per second published into ``exchange`` over the last few virtual
        seconds, as the management API states it; None when nothing was published to it."""
        return publishing.publish_rate(self.state, exchange)

    def dead_letters_afterwards(self) -> AbstractContextManager[None]:
        """Hold back the dead letters an operation causes until the operation is done."""
        return dead_letters_afterwards(self.state)

    def qos(self, channel: ChannelState, prefetch_count: int) -> None:
        channels.qos(self.state, channel, prefetch_count)

    def consume(
        self,
        channel: ChannelState,
        queue: str,
        sink: Callable[[Delivery], None],
        *,
        no_ack: bool,
        exclusive: bool,
        consumer_tag: str | None,
        on_cancel: Callable[[str], None] | None = None,
    ) -> str:
        return channels.consume(
            self.state,
            channel,
            queue,
            sink,
            no_ack=no_ack,
            exclusive=exclusive,
            consumer_tag=consumer_tag,
            on_cancel=on_cancel,
        )

    def cancel(self, channel: ChannelState, consumer_tag: str) -> None:
        channels.cancel(self.state, channel, consumer_tag)

    def get(self, channel: ChannelState, q: EmulatedQueue, no_ack: bool) -> Delivery | None:
        """basic.get from ``q``."""
        return queue_rules.get(self.state, channel, q, no_ack)

    def get_from(self, channel: ChannelState, queue: str, *, no_ack: bool) -> Delivery | None:
        return channels.get_from(self.state, channel, queue, no_ack=no_ack)

    def ack(self, channel: ChannelState, tag: int, multiple: bool) -> None:
        settle.ack(self.state, channel, tag, multiple)

    def reject(
        self,
        channel: ChannelState,
        tag: int,
        multiple: bool,
        requeue: bool,
        method: Literal["reject", "nack"],
    ) -> None:
        settle.reject(self.state, channel, tag, multiple, requeue, method)
