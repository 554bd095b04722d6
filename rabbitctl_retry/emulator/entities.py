"""What exists in the emulated broker: exchanges, queues, bindings, policies; declared,
checked and removed with the server's rules and error texts, as functions over the broker's
state (``state.py``). Connections, channels and consumers: ``channels.py``.

Channel errors are the :mod:`rabbitctl_retry.errors` classes with the server's reply text; a
*connection* error (503 COMMAND_INVALID, 530 NOT_ALLOWED) is a :class:`ConnectionFault` with
its reply code, so the transport closes the whole connection.
"""

from __future__ import annotations

from collections.abc import Mapping

from rabbitctl_retry.emulator import policies
from rabbitctl_retry.emulator.args import (
    VHOST,
    QueueKind,
    QueueSettings,
    exchange_inequivalence,
    frozen_arguments,
    queue_inequivalence,
    validate_queue,
)
from rabbitctl_retry.emulator.model import (
    Binding,
    ChannelState,
    EmulatedQueue,
    Exchange,
)
from rabbitctl_retry.emulator.queues import delete_queue, mark_used, purge, trim
from rabbitctl_retry.emulator.route import reindex_bindings
from rabbitctl_retry.emulator.routing import ROUTING_TYPES, valid_match_kind
from rabbitctl_retry.emulator.state import BrokerState
from rabbitctl_retry.errors import (
    AccessRefused,
    BrokerRefused,
    ConfigError,
    NotFound,
    PreconditionFailed,
    ResourceLocked,
)
from rabbitctl_retry.fields import FieldValue
from rabbitctl_retry.server import Policy
from rabbitctl_retry.transport.base import Binding as BindRequest
from rabbitctl_retry.transport.base import ExchangeDeclare, QueueDeclare, QueueInfo

DELAYED_TYPE = "x-delayed-message"

_SYSTEM_EXCHANGES = (
    ("", "direct"),
    ("amq.direct", "direct"),
    ("amq.fanout", "fanout"),
    ("amq.topic", "topic"),
    ("amq.headers", "headers"),
    ("amq.match", "headers"),
    ("amq.rabbitmq.trace", "topic"),  # internal: the firehose
)


class NotModelled(ConfigError):
    """A declaration the server accepts whose behaviour the emulator does not model: it refuses
    it clearly instead of behaving differently from RabbitMQ."""


class ConnectionFault(Exception):
    """A connection-level error (the server closes the whole connection with this reply)."""

    def __init__(self, reply_code: int, reply_text: str) -> None:
        super().__init__(reply_text)
        self.reply_code = reply_code
        self.reply_text = reply_text


def declare_system_exchanges(state: BrokerState) -> None:
    """The exchanges every vhost has from the start: the default one and the ``amq.*``."""
    for name, kind in _SYSTEM_EXCHANGES:
        state.exchanges[name] = Exchange(
            name=name,
            type=kind,
            durable=True,
            auto_delete=False,
            internal=name == "amq.rabbitmq.trace",
            arguments={},
            routing_type=kind,
        )


# -- queues ------------------------------------------------------------------------------


def queue_of(state: BrokerState, channel: ChannelState, name: str) -> EmulatedQueue:
    q = state.queues.get(name)
    if q is None:
        raise NotFound(f"NOT_FOUND - no queue '{name}' in vhost '{VHOST}'")
    _check_access(channel, q)
    return q


def _check_access(channel: ChannelState, q: EmulatedQueue) -> None:
    if q.exclusive_owner is not None and q.exclusive_owner is not channel.connection:
        raise _locked(q.name)


def queue_declare(state: BrokerState, channel: ChannelState, request: QueueDeclare) -> QueueInfo:
    name, arguments = request.queue, request.arguments
    durable, exclusive, auto_delete = request.durable, request.exclusive, request.auto_delete
    state.activity += 1
    if request.passive:
        return _info(state, queue_of(state, channel, name))
    if name == "":
        if (arguments or {}).get("x-queue-type") == "quorum":
            # measured on 3.10.8 and 4.0.5: the channel is closed
            raise PreconditionFailed(
                "PRECONDITION_FAILED - Cannot declare a server-named queue for type "
                "rabbit_quorum_queue"
            )
        name = _generated_name(state)
    elif name.startswith("amq."):
        raise AccessRefused(
            f"ACCESS_REFUSED - queue name '{name}' contains reserved prefix 'amq.*'"
        )
    args = frozen_arguments(arguments)
    existing = state.queues.get(name)
    if existing is not None:
        # an existing queue is compared, not validated: measured on 3.10.8, a string TTL
        # against an integer one is "inequivalent", not "invalid"
        _check_access(channel, existing)
        if exclusive != (existing.exclusive_owner is not None):
            raise _locked(name)
        current_args: Mapping[str, FieldValue] = existing.arguments
        compared_args: Mapping[str, FieldValue] = args
        implied = _implied_queue_type(state)
        if implied is not None:
            current_args = {**current_args, "x-queue-type": existing.settings.kind}
            compared_args = {"x-queue-type": implied, **args}
        problem = queue_inequivalence(
            name,
            kind=existing.settings.kind,
            current_durable=existing.durable,
            current_auto_delete=existing.auto_delete,
            current_arguments=current_args,
            durable=durable,
            auto_delete=auto_delete,
            arguments=compared_args,
            delayed_retries=state.behaviour.delayed_retries,
        )
        if problem is not None:
            raise PreconditionFailed(problem)
        mark_used(state, existing)
        return _info(state, existing)
    if state.default_queue_type is not None and "x-queue-type" not in args:
        args = frozen_arguments({"x-queue-type": state.default_queue_type, **args})
    settings = validate_queue(
        name,
        durable=durable,
        exclusive=exclusive,
        auto_delete=auto_delete,
        arguments=args,
        server_version=state.server_version,
    )
    q = _create_queue(state, channel, name, settings, durable, exclusive, auto_delete, args)
    _apply_policies(state, q)
    mark_used(state, q)
    return _info(state, q)


def _implied_queue_type(state: BrokerState) -> QueueKind | None:
    """The type a declaration without ``x-queue-type`` means when the server compares it
    with an existing queue: the vhost's default; on RabbitMQ 4 without one, classic; on
    3.10 without one, none (it compares "none" with the queue's argument)."""
    if state.default_queue_type is not None:
        return state.default_queue_type
    return "classic" if state.behaviour.queue_type_always_set else None


# -- policies (docs/reference/topology.md, "Policies and arguments") ------------------------------


def put_policy(state: BrokerState, policy: Policy, *, operator: bool) -> None:
    """Set (or replace) a policy; it applies to every queue at once."""
    problem = policies.refusal(policy, state.server_version, operator=operator)
    if problem is not None:
        raise BrokerRefused(" ".join(problem.split()))
    state.policies[operator][policy.name] = policy
    _policies_changed(state)


def delete_policy(state: BrokerState, name: str, *, operator: bool) -> None:
    if state.policies[operator].pop(name, None) is None:
        kind = "operator policy" if operator else "policy"
        raise NotFound(f"no {kind} '{name}' in vhost '{VHOST}'")
    _policies_changed(state)


def _policies_changed(state: BrokerState) -> None:
    state.activity += 1
    for q in list(state.queues.values()):
        _apply_policies(state, q)


def _apply_policies(state: BrokerState, q: EmulatedQueue) -> None:
    """Give ``q`` the settings its arguments, policy and operator policy make together; a
    lower limit drops (dead-letters) the oldest at once, a changed expiry starts again."""
    kind = q.settings.kind
    version = state.server_version
    effective = policies.queue_arguments(q.arguments, q.name, kind, version, state.policies)
    if kind == "classic":  # a classic queue takes no delayed retry, nor 4.3's consumer timeout
        effective = {
            k: v
            for k, v in effective.items()
            if not k.startswith("x-delayed-") and k != "x-consumer-timeout"
        }
    try:
        settings = validate_queue(
            q.name,
            durable=q.durable,
            exclusive=q.exclusive_owner is not None,
            auto_delete=q.auto_delete,
            arguments=effective,
            server_version=version,
        )
    except PreconditionFailed:
        return  # a combination the server would not take: the queue keeps what it had
    before, q.settings = q.settings, settings
    if settings.expires_ms != before.expires_ms:
        if settings.expires_ms is None and q.expiry_timer is not None:
            q.expiry_timer.cancel()
            q.expiry_timer = None
        else:
            mark_used(state, q)
    if settings.overflow == "drop-head" and q.over_limit():
        trim(state, q)


def _create_queue(
    state: BrokerState,
    channel: ChannelState,
    name: str,
    settings: QueueSettings,
    durable: bool,
    exclusive: bool,
    auto_delete: bool,
    arguments: dict[str, FieldValue],
) -> EmulatedQueue:
    q = EmulatedQueue(
        name=name,
        settings=settings,
        durable=durable,
        exclusive_owner=channel.connection if exclusive else None,
        auto_delete=auto_delete,
        arguments=arguments,
    )
    state.queues[name] = q
    return q


def _info(state: BrokerState, q: EmulatedQueue) -> QueueInfo:
    return QueueInfo(
        name=q.name, message_count=len(q.ready), consumer_count=_consumer_count(state, q)
    )


def _consumer_count(state: BrokerState, q: EmulatedQueue) -> int:
    """queue.declare-ok's consumer count: the queue's consumers; for a quorum queue also
    each unacked ``basic.get`` delivery of it, and each cancelled consumer still holding
    unacked deliveries, until they are settled or their channel closes (measured on
    RabbitMQ 3.10.8 and 4.0.5: the queue keeps a consumer for each)."""
    count = len(q.consumers)
    if not q.is_quorum or not q.unacked:
        return count
    cancelled: set[int] = set()
    for connection in state.connections:
        for channel in connection.channels.values():
            for item in channel.unacked.values():
                if item.queue is not q:
                    continue
                consumer = item.consumer
                if consumer is None:
                    count += 1  # one per basic.get
                elif channel.consumers.get(consumer.tag) is not consumer:
                    cancelled.add(id(consumer))
    return count + len(cancelled)


def _generated_name(state: BrokerState) -> str:
    while True:
        name = f"amq.gen-{next(state.generated_names):022d}"
        if name not in state.queues:
            return name


def queue_purge(state: BrokerState, channel: ChannelState, name: str) -> int:
    return purge(state, queue_of(state, channel, name))


def queue_delete(
    state: BrokerState, channel: ChannelState, name: str, *, if_unused: bool, if_empty: bool
) -> int:
    q = state.queues.get(name)
    if q is None:
        return 0  # deleting a missing queue is not an error (3.10)
    _check_access(channel, q)
    if q.is_quorum and (if_unused or if_empty):
        # RabbitMQ 3.10.8 and 4.0.5 (rabbit_quorum_queue:delete): a connection error
        flag = "if-unused" if if_unused else "if-empty"
        raise ConnectionFault(
            540,
            f"NOT_IMPLEMENTED - cannot delete queue '{name}' in vhost '{VHOST}'. "
            f"queue.delete operations with {flag} flag set are not supported by quorum "
            "queues",
        )
    if if_unused and q.consumers:
        raise PreconditionFailed(f"PRECONDITION_FAILED - queue '{name}' in vhost '{VHOST}' in use")
    if if_empty and q.ready:
        raise PreconditionFailed(
            f"PRECONDITION_FAILED - queue '{name}' in vhost '{VHOST}' not empty"
        )
    return delete_queue(state, q)


# -- exchanges and bindings --------------------------------------------------------------


def exchange_declare(state: BrokerState, request: ExchangeDeclare) -> None:
    name, type, arguments = request.exchange, request.type, request.arguments
    durable, auto_delete, internal = request.durable, request.auto_delete, request.internal
    _touch_exchange(state, name)
    existing = state.exchanges.get(name)
    if request.passive:
        if existing is None:
            raise NotFound(f"NOT_FOUND - no exchange '{name}' in vhost '{VHOST}'")
        return
    _check_type(state, type)
    args = frozen_arguments(arguments)
    if existing is not None:
        problem = exchange_inequivalence(existing.declared, request)
        if problem is not None:
            raise PreconditionFailed(problem)
        return
    if name.startswith("amq."):
        raise AccessRefused(
            f"ACCESS_REFUSED - exchange name '{name}' contains reserved prefix 'amq.*'"
        )
    routing_type = type
    if type == DELAYED_TYPE:
        delayed_type = args.get("x-delayed-type")
        if not isinstance(delayed_type, str):
            # the plugin's own text, typos included
            raise PreconditionFailed(
                "PRECONDITION_FAILED - Invalid argument, 'x-delayed-type' must bean existing "
                "exchnage type"
            )
        _check_type(state, delayed_type)
        if delayed_type == DELAYED_TYPE:
            raise PreconditionFailed(
                "PRECONDITION_FAILED - Invalid argument, 'x-delayed-type' must bean existing "
                "exchnage type"
            )
        routing_type = delayed_type
    state.exchanges[name] = Exchange(
        name=name,
        type=type,
        durable=durable,
        auto_delete=auto_delete,
        internal=internal,
        arguments=args,
        routing_type=routing_type,
    )


def _check_type(state: BrokerState, type: str) -> None:
    if type in ROUTING_TYPES or (type == DELAYED_TYPE and state.delayed_message_exchange):
        return
    word = "unknown" if type.startswith("x-") else "invalid"
    raise ConnectionFault(503, f"COMMAND_INVALID - {word} exchange type '{type}'")


def exchange_delete(state: BrokerState, name: str, *, if_unused: bool) -> None:
    _touch_exchange(state, name)
    if name.startswith("amq.") and any(name == n for n, _ in _SYSTEM_EXCHANGES):
        raise AccessRefused(
            f"ACCESS_REFUSED - deletion of system exchange '{name}' in vhost '{VHOST}' not allowed"
        )
    x = state.exchanges.get(name)
    if x is None:
        return  # deleting a missing exchange is not an error (3.10)
    if if_unused and x.bindings:
        raise PreconditionFailed(
            f"PRECONDITION_FAILED - exchange '{name}' in vhost '{VHOST}' in use"
        )
    del state.exchanges[name]


def queue_bind(state: BrokerState, channel: ChannelState, request: BindRequest) -> None:
    exchange, routing_key = request.exchange, request.routing_key
    _touch_exchange(state, exchange)
    x = state.exchanges.get(exchange)
    if x is None:
        raise NotFound(f"NOT_FOUND - no exchange '{exchange}' in vhost '{VHOST}'")
    q = queue_of(state, channel, request.queue)
    args = frozen_arguments(request.arguments)
    if x.routing_type == "headers" and not valid_match_kind(args):
        value = _erlang(args.get("x-match"))
        raise PreconditionFailed(
            f"PRECONDITION_FAILED - Invalid x-match field value {value}; "
            "expected all, any, all-with-x, or any-with-x"
        )
    if any(_is_binding(binding, q.name, routing_key, args) for binding in x.bindings):
        return
    x.bindings.append(Binding(queue=q.name, routing_key=routing_key, arguments=args))
    reindex_bindings(x)


def queue_unbind(state: BrokerState, channel: ChannelState, request: BindRequest) -> None:
    """Remove one binding. A binding, queue or exchange that does not exist is no error:
    RabbitMQ 3.10.8, 4.0.5 and 4.3.6 all answer unbind-ok
    (tests/contract/test_routing.py)."""
    _touch_exchange(state, request.exchange)
    x = state.exchanges.get(request.exchange)
    if x is None:
        return
    args = frozen_arguments(request.arguments)
    kept = [b for b in x.bindings if not _is_binding(b, request.queue, request.routing_key, args)]
    if len(kept) != len(x.bindings):
        x.bindings[:] = kept
        reindex_bindings(x)


def _touch_exchange(state: BrokerState, name: str) -> None:
    """An operation on exchange ``name``: counted as activity, refused on the default
    exchange."""
    state.activity += 1
    if name == "":
        raise AccessRefused("ACCESS_REFUSED - operation not permitted on the default exchange")


def _is_binding(
    binding: Binding, queue: str, routing_key: str, arguments: Mapping[str, FieldValue]
) -> bool:
    """Whether ``binding`` binds ``queue`` with ``routing_key`` and ``arguments``."""
    return (
        binding.queue == queue
        and binding.routing_key == routing_key
        and binding.arguments == arguments
    )


def _erlang(value: FieldValue) -> str:
    """A value as the server prints an Erlang term (``~p``): strings are binaries."""
    if isinstance(value, str):
        return f'<<"{value}">>'
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _locked(name: str) -> ResourceLocked:
    return ResourceLocked(
        f"RESOURCE_LOCKED - cannot obtain exclusive access to locked queue '{name}' in vhost "
        f"'{VHOST}'. It could be originally declared on another connection or the exclusive "
        "property value does not match that of the original declaration."
    )
