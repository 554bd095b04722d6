"""Queue and exchange declarations, pure: argument checks and the equivalence rule.

Texts and rules are those of RabbitMQ 3.10.8 (checked against the server):

* a new queue's ``x-*`` arguments are validated (``x-message-ttl`` a non-negative integer,
  ``x-queue-type`` one the server knows, and so on) -> PRECONDITION_FAILED;
* a quorum queue must be durable, non-exclusive, non-auto-delete, and refuses classic-only
  arguments such as ``x-max-priority``;
* redeclaring an existing queue compares ``durable``, ``auto_delete`` and, per queue type, a
  fixed list of arguments (others are ignored, as the server ignores them): a value of another
  type class, another value, or one side missing -> PRECONDITION_FAILED. A classic queue
  declared without ``x-queue-type`` is equivalent to ``x-queue-type = "classic"``.
* an exchange compares ``type``, ``durable``, ``auto_delete``, ``internal`` and the
  ``alternate-exchange`` argument.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from rabbitctl_retry.emulator import delayed_retry
from rabbitctl_retry.emulator.delayed_retry import DelayedRetry
from rabbitctl_retry.errors import ChannelClosed, PreconditionFailed
from rabbitctl_retry.fields import FieldTable, FieldValue
from rabbitctl_retry.releases import ServerRelease
from rabbitctl_retry.server import ServerVersion
from rabbitctl_retry.transport.base import ExchangeDeclare

QueueKind = Literal["classic", "quorum"]
Overflow = Literal["drop-head", "reject-publish", "reject-publish-dlx"]

VHOST = "/"

_LIFE_AND_LIMIT_KEYS = (
    "x-expires",
    "x-message-ttl",
    "x-dead-letter-exchange",
    "x-dead-letter-routing-key",
    "x-max-length",
    "x-max-length-bytes",
)
"""Arguments both queue types check in this order, one after the other."""
_CLASSIC_EQUIVALENCE_KEYS = (
    # the order RabbitMQ checks a classic queue's arguments in (measured on 3.10.8 and 4.0.5:
    # a TTL queue redeclared as quorum without its TTL reports x-message-ttl first)
    *_LIFE_AND_LIMIT_KEYS,
    "x-max-priority",
    "x-overflow",
    "x-queue-mode",
    "x-single-active-consumer",
    "x-queue-type",
    "x-queue-master-locator",
    "x-queue-version",
)
_QUORUM_EQUIVALENCE_KEYS = (
    "x-queue-type",
    *_LIFE_AND_LIMIT_KEYS,
    "x-max-in-memory-length",
    "x-max-in-memory-bytes",
    "x-overflow",
    "x-single-active-consumer",
    "x-quorum-initial-group-size",
    "x-delivery-limit",
    "x-dead-letter-strategy",
    "x-queue-leader-locator",
)
_QUORUM_REFUSED_ARGS = ("x-max-priority", "x-queue-mode", "x-queue-master-locator")
_NON_NEGATIVE_INT_ARGS = (
    "x-message-ttl",
    "x-max-length",
    "x-max-length-bytes",
    "x-max-in-memory-length",
    "x-max-in-memory-bytes",
)


@dataclass(frozen=True, slots=True)
class StrictPriorities:
    """Ready messages served highest priority first, first in first out within one
    (:meth:`~rabbitctl_retry.emulator.model.EmulatedQueue.head`): a classic queue with
    ``x-max-priority`` (levels 0 to that, none as 0) and RabbitMQ 4.3's quorum queues (0 to
    31, none as 4). Measured on 3.10.8, 4.0.5 and 4.3.6."""

    highest: int
    """A message of a higher priority is served as this one."""
    unset: int
    """The priority of a message without one."""

    def level(self, priority: int | None) -> int:
        if priority is None:
            return self.unset
        return min(priority, self.highest)


QUORUM_PRIORITIES_4_3 = StrictPriorities(highest=31, unset=4)
"""RabbitMQ 4.3 quorum queues: 32 priorities, strict (measured on 4.3.6)."""


@dataclass(frozen=True, slots=True)
class QueueSettings:
    """What a queue's declaration means for its behaviour."""

    kind: QueueKind
    message_ttl_ms: int | None
    dead_letter_exchange: str | None
    dead_letter_routing_key: str | None
    max_length: int | None
    max_length_bytes: int | None
    overflow: Overflow
    delivery_limit: float | None
    """Quorum only: returns allowed before the message is dead-lettered (a message returned
    more times than this is); None = unlimited."""
    dead_letter_at_least_once: bool = False
    """Quorum with ``x-dead-letter-strategy = at-least-once`` and ``x-overflow =
    reject-publish`` (RabbitMQ falls back to at-most-once without the latter): a dead letter
    its target refuses is kept by the queue and sent again later, never dropped."""
    expires_ms: int | None = None
    """``x-expires``: the queue is deleted after this long unused (no consumer, no
    basic.get, not redeclared)."""
    two_priorities: bool = False
    """RabbitMQ 4.0 quorum queues: messages of priority above 4 are served two for every one
    of the others (:meth:`~rabbitctl_retry.emulator.model.EmulatedQueue.head`)."""
    strict_priorities: StrictPriorities | None = None
    delayed_retry: DelayedRetry | None = None
    """RabbitMQ 4.3 quorum queues: the returns held back before they are delivered again
    (emulator/delayed_retry.py)."""


def amqp_type_name(value: FieldValue) -> str:
    """The AMQP field type rr's transport encodes ``value`` as (a float as a double:
    transport/codec.py), named as the server does."""
    if value is None:
        return "void"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        if -(2**7) <= value < 2**7:
            return "byte"
        if -(2**15) <= value < 2**15:
            return "short"
        if -(2**31) <= value < 2**31:
            return "signedint"
        return "long"
    if isinstance(value, float):
        return "double"
    if isinstance(value, str):
        return "longstr"
    if isinstance(value, bytes):
        return "binary"
    if isinstance(value, datetime):
        return "timestamp"
    if isinstance(value, list):
        return "array"
    return "table"


def _type_class(value: FieldValue) -> str:
    name = amqp_type_name(value)
    return "int" if name in ("byte", "short", "signedint", "long", "double") else name


def _fmt(value: FieldValue) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _delivery_limit(value: FieldValue, server_version: ServerVersion) -> float | None:
    """What a quorum queue's ``x-delivery-limit`` means (measured on 3.10.8 and 4.0.5).

    Both compare the delivery count with the number as it is, a float too (2.5: dead-lettered
    at the third return). A string (``"3"`` measured) is never reached: Erlang term order puts
    every number below it; a bool (an atom: not measured) is taken the same way. Without the
    argument 4.0 sets 20. RabbitMQ 4.3 (measured on 4.3.6) takes only an integer: a float or a
    string is ignored, as if the argument were missing (20).
    """
    # RabbitMQ 4.0 (measured on 4.0.5): a negative x-delivery-limit means no limit at all;
    # 3.10 dead-letters at the first return, as the count (1) is above it
    behaviour = server_version.behaviour
    negative_means_unlimited = behaviour.takes_unlimited_delivery_limit
    integers_only = behaviour.delivery_limit_integers_only
    if value is None or (integers_only and not _is_int(value)):
        return server_version.quorum_default_delivery_limit
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if value < 0 and negative_means_unlimited:
        return None
    return value


CONSUMER_PRIORITY = "x-priority"

STREAM_OFFSET = "x-stream-offset"
"""A consumer argument of streams only."""


def consumer_priority(
    queue: str, kind: Literal["classic", "quorum"], arguments: Mapping[str, FieldValue] | None
) -> int:
    """A basic.consume's ``x-priority`` on ``queue`` of type ``kind`` (0 without one). Refused,
    406 (measured on 3.10.8, 4.0.5 and 4.3.6): a priority that is not an integer (``"expected
    integer, got longstr"``), and ``x-stream-offset``, which only a stream takes."""
    if arguments and STREAM_OFFSET in arguments:
        raise _refused_by_type(STREAM_OFFSET, queue, f"rabbit_{kind}_queue")
    value = (arguments or {}).get(CONSUMER_PRIORITY, 0)
    if not _is_int(value):
        raise _invalid_arg(
            CONSUMER_PRIORITY, queue, f'"expected integer, got {amqp_type_name(value)}"'
        )
    assert isinstance(value, int)
    return value


def _is_int(value: FieldValue) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _invalid_arg(key: str, name: str, detail: str) -> PreconditionFailed:
    return PreconditionFailed(
        f"PRECONDITION_FAILED - invalid arg '{key}' for queue '{name}' in vhost '{VHOST}': {detail}"
    )


def validate_queue(
    name: str,
    *,
    durable: bool,
    exclusive: bool,
    auto_delete: bool,
    arguments: Mapping[str, FieldValue],
    server_version: ServerVersion,
) -> QueueSettings:
    """Check the declaration of a new queue; the settings it gives the queue.

    Raises :class:`PreconditionFailed` with the server's text.
    """
    kind_value = _queue_type(name, arguments)
    kind: QueueKind = "quorum" if kind_value == "quorum" else "classic"
    behaviour = server_version.behaviour
    _check_integers(name, arguments, kind, behaviour)
    dlx = arguments.get("x-dead-letter-exchange")
    if "x-dead-letter-exchange" in arguments and not isinstance(dlx, str):
        raise _invalid_type("x-dead-letter-exchange", name, dlx)
    dlrk = arguments.get("x-dead-letter-routing-key")
    if "x-dead-letter-routing-key" in arguments:
        if not isinstance(dlrk, str):
            raise _invalid_type("x-dead-letter-routing-key", name, dlrk)
        if "x-dead-letter-exchange" not in arguments:
            raise _invalid_arg("x-dead-letter-routing-key", name, "routing_key_but_no_dlx_defined")
    overflow = _overflow(name, arguments.get("x-overflow", "drop-head"), kind_value)
    if kind == "quorum":
        _check_quorum(
            name, durable=durable, exclusive=exclusive, auto_delete=auto_delete, arguments=arguments
        )
    else:
        _check_classic(name, arguments, behaviour)
    delivery_limit: float | None = None
    if kind == "quorum":
        delivery_limit = _delivery_limit(arguments.get("x-delivery-limit"), server_version)
    ttl = arguments.get("x-message-ttl")
    max_length = arguments.get("x-max-length")
    max_bytes = arguments.get("x-max-length-bytes")
    expires = arguments.get("x-expires")
    return QueueSettings(
        kind=kind,
        message_ttl_ms=ttl if isinstance(ttl, int) else None,
        dead_letter_exchange=dlx if isinstance(dlx, str) else None,
        dead_letter_routing_key=dlrk if isinstance(dlrk, str) else None,
        max_length=max_length if isinstance(max_length, int) else None,
        max_length_bytes=max_bytes if isinstance(max_bytes, int) else None,
        overflow=overflow,
        delivery_limit=delivery_limit,
        dead_letter_at_least_once=kind == "quorum"
        and arguments.get("x-dead-letter-strategy") == "at-least-once"
        and overflow == "reject-publish",
        expires_ms=expires if isinstance(expires, int) and not isinstance(expires, bool) else None,
        two_priorities=kind == "quorum" and behaviour.quorum_priorities == "two",
        strict_priorities=_strict_priorities(kind, arguments.get("x-max-priority"), behaviour),
        delayed_retry=delayed_retry.delayed_retry_of(arguments)
        if kind == "quorum" and behaviour.delayed_retries
        else None,
    )


def _queue_type(name: str, arguments: Mapping[str, FieldValue]) -> FieldValue:
    """The declaration's ``x-queue-type`` (None without one), checked."""
    kind_value = arguments.get("x-queue-type")
    if kind_value is not None:
        if not isinstance(kind_value, str):
            raise _invalid_arg(
                "x-queue-type", name, f'"expected string, got {amqp_type_name(kind_value)}"'
            )
        if kind_value == "stream":
            raise ChannelClosed("NOT_IMPLEMENTED - the emulator has no stream queues")
        if kind_value not in ("classic", "quorum"):
            raise _invalid_arg("x-queue-type", name, f"\"unsupported queue type '{kind_value}'\"")
    return kind_value


def _check_integers(
    name: str, arguments: Mapping[str, FieldValue], kind: QueueKind, behaviour: ServerRelease
) -> None:
    """The arguments that take a non-negative integer, and ``x-expires`` a positive one."""
    checked: tuple[str, ...] = _NON_NEGATIVE_INT_ARGS
    if kind == "quorum" and behaviour.quorum_takes_consumer_timeout:
        checked += ("x-consumer-timeout",)  # RabbitMQ 4.3 quorum queues apply it
    for key in checked:
        if key in arguments:
            _non_negative(key, name, arguments[key])
    if "x-expires" in arguments and _non_negative("x-expires", name, arguments["x-expires"]) == 0:
        raise _invalid_arg("x-expires", name, "{value_zero,0}")


def _non_negative(key: str, name: str, value: FieldValue) -> int:
    """Argument ``key``'s ``value``, refused (as the server words it) unless an integer of
    zero or more."""
    if not _is_int(value):
        raise _invalid_arg(key, name, f'"expected integer, got {amqp_type_name(value)}"')
    assert isinstance(value, int)
    if value < 0:
        raise _invalid_arg(key, name, f"{{value_negative,{value}}}")
    return value


def _overflow(name: str, overflow_value: FieldValue, kind_value: FieldValue) -> Overflow:
    """What ``x-overflow`` makes the queue do."""
    match overflow_value:
        case "drop-head":
            return "drop-head"
        case "reject-publish":
            return "reject-publish"
        case "reject-publish-dlx":
            # a 3.10 quorum queue takes the argument and then drops heads (measured)
            return "drop-head" if kind_value == "quorum" else "reject-publish-dlx"
        case _:
            raise _invalid_arg("x-overflow", name, "invalid_overflow")


def _check_quorum(
    name: str,
    *,
    durable: bool,
    exclusive: bool,
    auto_delete: bool,
    arguments: Mapping[str, FieldValue],
) -> None:
    """A quorum queue is durable, not exclusive, not auto-delete, and refuses some arguments."""
    if not durable:
        raise _invalid_property("non-durable", name)
    if exclusive:
        raise _invalid_property("exclusive-owner", name)
    if auto_delete:
        raise _invalid_property("auto-delete", name)
    for key in _QUORUM_REFUSED_ARGS:
        if key in arguments:
            raise _refused_by_type(key, name, "rabbit_quorum_queue")


def _check_classic(
    name: str, arguments: Mapping[str, FieldValue], behaviour: ServerRelease
) -> None:
    """A classic queue refuses a delayed retry (where the release has them) and checks its
    ``x-max-priority``."""
    if behaviour.delayed_retries:
        refused = delayed_retry.refused_on_classic(arguments)
        if refused is not None:
            raise _refused_by_type(refused, name, "rabbit_classic_queue")
    if "x-max-priority" in arguments:
        value = _non_negative("x-max-priority", name, arguments["x-max-priority"])
        if value > MAX_PRIORITY:
            raise _invalid_arg("x-max-priority", name, f"{{max_value_exceeded,{value}}}")


def _refused_by_type(key: str, name: str, queue_type: str) -> PreconditionFailed:
    """Argument ``key`` is not one a queue of ``queue_type`` takes."""
    return PreconditionFailed(
        f"PRECONDITION_FAILED - invalid arg '{key}' for queue '{name}' in vhost "
        f"'{VHOST}' of queue type {queue_type}"
    )


MAX_PRIORITY = 255
"""The highest ``x-max-priority`` a classic queue takes."""


def _strict_priorities(
    kind: QueueKind, max_priority: FieldValue, behaviour: ServerRelease
) -> StrictPriorities | None:
    if kind == "quorum":
        return QUORUM_PRIORITIES_4_3 if behaviour.quorum_priorities == "strict" else None
    if not isinstance(max_priority, int) or isinstance(max_priority, bool):
        return None
    if max_priority == 0:
        # RabbitMQ 4.0 and 4.3 serve 0 as 1; 3.10 has no priorities then (measured)
        return (
            StrictPriorities(highest=1, unset=0) if behaviour.classic_max_priority_0_as_1 else None
        )
    return StrictPriorities(highest=max_priority, unset=0)


def _invalid_type(key: str, name: str, value: FieldValue) -> PreconditionFailed:
    return PreconditionFailed(
        f"PRECONDITION_FAILED - invalid type '{amqp_type_name(value)}' for arg '{key}' in queue "
        f"'{name}' in vhost '{VHOST}'"
    )


def _invalid_property(prop: str, name: str) -> PreconditionFailed:
    return PreconditionFailed(
        f"PRECONDITION_FAILED - invalid property '{prop}' for queue '{name}' in vhost '{VHOST}'"
    )


def _inequivalent(
    key: str, kind: str, name: str, received: FieldValue, current: FieldValue, *, present: bool
) -> str:
    where = f"inequivalent arg '{key}' for {kind} '{name}' in vhost '{VHOST}'"
    if not present:
        return (
            f"PRECONDITION_FAILED - {where}: received none but current is the value "
            f"'{_fmt(current)}' of type '{amqp_type_name(current)}'"
        )
    if current is None:
        return (
            f"PRECONDITION_FAILED - {where}: received the value '{_fmt(received)}' of type "
            f"'{amqp_type_name(received)}' but current is none"
        )
    return (
        f"PRECONDITION_FAILED - {where}: received '{_fmt(received)}' but current is "
        f"'{_fmt(current)}'"
    )


def _field(key: str, kind: str, name: str, received: bool, current: bool) -> str | None:
    if received == current:
        return None
    return _inequivalent(key, kind, name, received, current, present=True)


def _same(a: FieldValue, b: FieldValue) -> bool:
    return _type_class(a) == _type_class(b) and type(a) is type(b) and a == b


def queue_inequivalence(
    name: str,
    *,
    kind: QueueKind,
    current_durable: bool,
    current_auto_delete: bool,
    current_arguments: Mapping[str, FieldValue],
    durable: bool,
    auto_delete: bool,
    arguments: Mapping[str, FieldValue],
    delayed_retries: bool = False,
) -> str | None:
    """The server's PRECONDITION_FAILED text when a redeclare differs, else None
    (``delayed_retries``: RabbitMQ 4.3, whose quorum queues compare ``x-consumer-timeout``
    and ``x-delayed-retry-*`` too)."""
    problem = _field("durable", "queue", name, durable, current_durable) or _field(
        "auto_delete", "queue", name, auto_delete, current_auto_delete
    )
    if problem:
        return problem
    keys: tuple[str, ...] = (
        _QUORUM_EQUIVALENCE_KEYS if kind == "quorum" else _CLASSIC_EQUIVALENCE_KEYS
    )
    if kind == "quorum" and delayed_retries:
        keys += delayed_retry.QUORUM_ONLY_4_3
    for key in keys:
        if key == "x-queue-type" and kind == "classic":
            # "classic" and no type at all are the same queue
            has_new, has_old = key in arguments, key in current_arguments
            new, old = arguments.get(key), current_arguments.get(key)
            new = "classic" if new is None else new
            old = "classic" if old is None else old
            if new == old:
                continue
            return _inequivalent(key, "queue", name, new, old if has_old else None, present=has_new)
        problem = _argument_problem(key, "queue", name, arguments, current_arguments)
        if problem:
            return problem
    return None


def exchange_inequivalence(current: ExchangeDeclare, wanted: ExchangeDeclare) -> str | None:
    """The server's PRECONDITION_FAILED text when an exchange redeclare (``wanted``) differs
    from the declare that made the exchange (``current``), else None."""
    name = wanted.exchange
    if wanted.type != current.type:
        return _inequivalent("type", "exchange", name, wanted.type, current.type, present=True)
    problem = (
        _field("durable", "exchange", name, wanted.durable, current.durable)
        or _field("auto_delete", "exchange", name, wanted.auto_delete, current.auto_delete)
        or _field("internal", "exchange", name, wanted.internal, current.internal)
    )
    if problem:
        return problem
    arguments, current_arguments = wanted.arguments or {}, current.arguments or {}
    return _argument_problem("alternate-exchange", "exchange", name, arguments, current_arguments)


def _argument_problem(
    key: str,
    kind: str,
    name: str,
    arguments: Mapping[str, FieldValue],
    current_arguments: Mapping[str, FieldValue],
) -> str | None:
    """The server's PRECONDITION_FAILED text when a redeclare's argument ``key`` differs from
    the existing ``kind``'s (``"queue"``, ``"exchange"``), else None."""
    has_new, has_old = key in arguments, key in current_arguments
    if not has_new and not has_old:
        return None
    new, old = arguments.get(key), current_arguments.get(key)
    if has_new and has_old and _same(new, old):
        return None
    return _inequivalent(key, kind, name, new, old if has_old else None, present=has_new)


def frozen_arguments(arguments: Mapping[str, FieldValue] | None) -> FieldTable:
    """A private copy of declared arguments."""
    return dict(arguments) if arguments else {}
