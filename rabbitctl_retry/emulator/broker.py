"""The emulated broker's face: :class:`Broker`, one vhost (``/``) of an emulated RabbitMQ.

A thin facade: it holds one :class:`~rabbitctl_retry.emulator.state.BrokerState` and hands
each operation to the module of functions that owns its rules: ``channels.py``
(connections, channels, consumers), ``entities.py`` (queues, exchanges, bindings, policies),
``publish.py`` (basic.publish), ``queues.py`` (a queue's messages: enqueue, expiry, dispatch,
basic.get, purge, delete), ``settle.py`` (ack, reject, nack, closing channels); under them
``deliver.py``, ``dead_letters.py``, ``route.py`` and ``limits.py``. The transport, the
management twin and the tests use this class only.

Each operation is named once here and stated once, by the function that owns it: an
:class:`_Operation` hands that function the broker's state as its first argument (its
signature and docstring are the function's), and a :class:`_StateField` reads (or sets) a
field of the state.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Concatenate, Generic, ParamSpec, Self, TypeVar, cast, overload

from rabbitctl_retry.emulator import channels, entities, settle
from rabbitctl_retry.emulator import publish as publishing
from rabbitctl_retry.emulator import queues as queue_rules
from rabbitctl_retry.emulator.args import QueueKind
from rabbitctl_retry.emulator.channels import RR_CLIENT_PROPERTIES
from rabbitctl_retry.emulator.clock import VirtualClock
from rabbitctl_retry.emulator.entities import DELAYED_TYPE, ConnectionFault, NotModelled
from rabbitctl_retry.emulator.events import Event
from rabbitctl_retry.emulator.model import ChannelState, ConnectionState, EmulatedQueue, Exchange
from rabbitctl_retry.emulator.state import BrokerState, dead_letters_afterwards
from rabbitctl_retry.releases import ServerRelease
from rabbitctl_retry.server import Policy, ServerVersion

__all__ = [
    "DELAYED_TYPE",
    "RR_CLIENT_PROPERTIES",
    "Broker",
    "ConnectionFault",
    "NotModelled",
]

_P = ParamSpec("_P")
_R = TypeVar("_R")
_T = TypeVar("_T")


class _Operation(Generic[_P, _R]):
    """An operation of :class:`Broker`: ``rule`` (a function of a module of rules) with the
    broker's state as its first argument."""

    def __init__(self, rule: Callable[Concatenate[BrokerState, _P], _R]) -> None:
        self._rule = rule
        self.__doc__ = rule.__doc__

    @overload
    def __get__(self, broker: None, owner: type[Broker]) -> Self: ...
    @overload
    def __get__(self, broker: Broker, owner: type[Broker] | None = None) -> Callable[_P, _R]: ...
    def __get__(
        self, broker: Broker | None, owner: type[Broker] | None = None
    ) -> Self | Callable[_P, _R]:
        if broker is None:  # read on the class (help(), documentation tools)
            return self
        return cast("Callable[_P, _R]", partial(self._rule, broker.state))


class _StateField(Generic[_T]):
    """A field of :class:`Broker`'s state, read through the broker."""

    __slots__ = ("_name",)

    def __set_name__(self, owner: type[Broker], name: str) -> None:
        self._name = name

    @overload
    def __get__(self, broker: None, owner: type[Broker]) -> Self: ...
    @overload
    def __get__(self, broker: Broker, owner: type[Broker] | None = None) -> _T: ...
    def __get__(self, broker: Broker | None, owner: type[Broker] | None = None) -> Self | _T:
        if broker is None:  # read on the class
            return self
        return cast("_T", getattr(broker.state, self._name))


class _SettableStateField(_StateField[_T]):
    """A field of :class:`Broker`'s state that the tests and the glue also set."""

    __slots__ = ()

    def __set__(self, broker: Broker, value: _T) -> None:
        setattr(broker.state, self._name, value)


class Broker:
    """One vhost (``/``) of an emulated RabbitMQ: its state, and the operations on it."""

    def __init__(self, state: BrokerState) -> None:
        """A broker over ``state`` (made by the :class:`~rabbitctl_retry.emulator.emulator.Emulator`
        with its clock and server version), with the exchanges every vhost has."""
        self.state = state
        entities.declare_system_exchanges(self.state)

    # -- the state, as the transport, the management twin and the tests read it
    # (state.py's BrokerState says what each field is) ---------------------------------------

    clock = _StateField[VirtualClock]()
    server_version = _StateField[ServerVersion]()
    behaviour = _SettableStateField[ServerRelease]()
    delayed_message_exchange = _StateField[bool]()
    default_queue_type = _StateField[QueueKind | None]()
    queues = _StateField[dict[str, EmulatedQueue]]()
    exchanges = _StateField[dict[str, Exchange]]()
    connections = _StateField[list[ConnectionState]]()
    policies = _StateField[dict[bool, dict[str, Policy]]]()
    events = _StateField[list[Event]]()
    activity = _StateField[int]()
    dead_letter_retry_s = _SettableStateField[float]()
    kept_dead_letters = _StateField[int]()

    # -- connections and channels ------------------------------------------------------------

    open_connection = _Operation(channels.open_connection)
    open_channel = _Operation(channels.open_channel)
    close_channel = _Operation(channels.close_channel)
    close_connection = _Operation(channels.close_connection)
    release_channels = _Operation(settle.release_channels)

    def release_channel(self, channel: ChannelState) -> None:
        """A closing channel: cancel its consumers, return its unacked deliveries in order."""
        settle.release_channels(self.state, [channel])

    # -- queues, exchanges, bindings, policies -----------------------------------------------

    queue_declare = _Operation(entities.queue_declare)
    queue_purge = _Operation(entities.queue_purge)
    queue_delete = _Operation(entities.queue_delete)
    purge = _Operation(queue_rules.purge)
    delete_queue = _Operation(queue_rules.delete_queue)
    mark_used = _Operation(queue_rules.mark_used)
    exchange_declare = _Operation(entities.exchange_declare)
    exchange_delete = _Operation(entities.exchange_delete)
    queue_bind = _Operation(entities.queue_bind)
    queue_unbind = _Operation(entities.queue_unbind)
    put_policy = _Operation(entities.put_policy)
    delete_policy = _Operation(entities.delete_policy)

    # -- messages ----------------------------------------------------------------------------

    publish = _Operation(publishing.publish)
    publish_rate = _Operation(publishing.publish_rate)
    dead_letters_afterwards = _Operation(dead_letters_afterwards)
    qos = _Operation(channels.qos)
    consume = _Operation(channels.consume)
    cancel = _Operation(channels.cancel)
    get = _Operation(queue_rules.get)
    get_from = _Operation(channels.get_from)
    ack = _Operation(settle.ack)
    reject = _Operation(settle.reject)
