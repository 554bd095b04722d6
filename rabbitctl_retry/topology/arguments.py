"""Pure. The queue arguments RabbitMQ knows, which queue types take them, and their values.

RabbitMQ refuses a declare whose known argument has the wrong type or range
(``PRECONDITION_FAILED - invalid arg 'x-message-ttl' ... expected integer, got longstr``), and
a quorum queue refuses classic-only arguments (``invalid arg 'x-max-priority' ... of queue
type rabbit_quorum_queue``). rr refuses the same inputs while loading the file, so a declare
never fails half way. Unknown ``x-`` arguments are refused too: the server would accept and
silently ignore a misspelt ``x-message-tll``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from rabbitctl_retry.topology.wire import MAX_SHORT_STRING_BYTES, MAX_TTL_MS, describe_text

CLASSIC = "classic"
QUORUM = "quorum"


def _non_negative_int(value: object) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int):
        return f"must be an integer, not {_type_name(value)}"
    if value < 0:
        return "must not be negative"
    return None


def _positive_int(value: object) -> str | None:
    problem = _non_negative_int(value)
    if problem is None and isinstance(value, int) and value == 0:
        return "must be greater than 0"
    return problem


def _ttl_ms(*, positive: bool) -> Callable[[object], str | None]:
    """A TTL or expiry in milliseconds: 0 (or 1) to 4294967295, the longest every RabbitMQ
    release takes (3.10 takes up to ten years, older ones only 32 bits)."""
    base = _positive_int if positive else _non_negative_int

    def check(value: object) -> str | None:
        problem = base(value)
        if problem is None and isinstance(value, int) and value > MAX_TTL_MS:
            return f"must be at most {MAX_TTL_MS} ms (about 49.7 days)"
        return problem

    return check


def _string(value: object) -> str | None:
    return None if isinstance(value, str) else f"must be a string, not {_type_name(value)}"


def _routing_key(value: object) -> str | None:
    problem = _string(value)
    if problem is None and isinstance(value, str):
        size = len(value.encode("utf-8"))
        if size > MAX_SHORT_STRING_BYTES:
            return f"is {size} bytes long; a routing key is at most {MAX_SHORT_STRING_BYTES}"
    return problem


def _boolean(value: object) -> str | None:
    return None if isinstance(value, bool) else f"must be true or false, not {_type_name(value)}"


def _one_of(*choices: object) -> Callable[[object], str | None]:
    def check(value: object) -> str | None:
        if type(value) in {type(choice) for choice in choices} and value in choices:
            return None
        allowed = ", ".join(repr(choice) for choice in choices)
        if isinstance(value, str):
            shown = describe_text(value)
        else:
            shown = repr(value) if isinstance(value, int | float) else _type_name(value)
        return f"must be one of {allowed}, not {shown}"

    return check


def _priority(value: object) -> str | None:
    problem = _non_negative_int(value)
    if problem is None and isinstance(value, int) and value > 255:
        return "must be at most 255"
    return problem


def _denied_master_locator(value: object) -> str | None:
    """A deprecated feature (``queue_master_locator``) that RabbitMQ 4.3 denies: its declare
    closes the whole connection (541). rr refuses it on every server, so that a file works on
    the release users upgrade to."""
    return (
        "is a deprecated feature (queue_master_locator) that RabbitMQ 4.3 denies, closing the "
        "connection; drop it (a policy's queue-leader-locator places classic queues on 4.x)"
    )


def _queue_version(value: object) -> str | None:
    """Classic queue version 2 only: RabbitMQ 4.3 has no version 1 (406)."""
    if value == 1 and type(value) is int:
        return (
            "1 is refused by RabbitMQ 4.3, which has no classic queue version 1 (406); use 2, "
            "or drop it"
        )
    return _one_of(1, 2)(value)


def _type_name(value: object) -> str:
    names = {bool: "a boolean", int: "an integer", float: "a float", str: "a string"}
    return names.get(type(value), type(value).__name__)


@dataclass(frozen=True, slots=True)
class ArgumentRule:
    """What one known argument accepts."""

    check: Callable[[object], str | None]
    queue_types: frozenset[str]
    managed_by: str | None = None
    """The topology key that sets this argument; giving it raw as well is refused."""
    other_types: str | None = None
    """Why a queue of another type may not have it, when there is more to say than that."""


_BOTH = frozenset({CLASSIC, QUORUM})
_CLASSIC_ONLY = frozenset({CLASSIC})
_QUORUM_ONLY = frozenset({QUORUM})

QUEUE_ARGUMENTS: dict[str, ArgumentRule] = {
    "x-message-ttl": ArgumentRule(_ttl_ms(positive=False), _BOTH),
    "x-expires": ArgumentRule(_ttl_ms(positive=True), _BOTH),
    "x-max-length": ArgumentRule(_non_negative_int, _BOTH),
    "x-max-length-bytes": ArgumentRule(_non_negative_int, _BOTH),
    "x-overflow": ArgumentRule(_one_of("drop-head", "reject-publish", "reject-publish-dlx"), _BOTH),
    "x-dead-letter-exchange": ArgumentRule(_string, _BOTH, managed_by="dead_letter_exchange"),
    "x-dead-letter-routing-key": ArgumentRule(_routing_key, _BOTH),
    "x-single-active-consumer": ArgumentRule(_boolean, _BOTH),
    # RabbitMQ 3.10 refuses x-queue-leader-locator on a classic queue (measured).
    "x-queue-leader-locator": ArgumentRule(_one_of("client-local", "balanced"), _QUORUM_ONLY),
    "x-queue-master-locator": ArgumentRule(_denied_master_locator, _CLASSIC_ONLY),
    "x-max-priority": ArgumentRule(_priority, _CLASSIC_ONLY),
    "x-queue-mode": ArgumentRule(_one_of("default", "lazy"), _CLASSIC_ONLY),
    "x-queue-version": ArgumentRule(_queue_version, _CLASSIC_ONLY),
    "x-delivery-limit": ArgumentRule(_non_negative_int, _QUORUM_ONLY, managed_by="delivery_limit"),
    "x-dead-letter-strategy": ArgumentRule(
        _one_of("at-most-once", "at-least-once"), _QUORUM_ONLY, managed_by="dead_letter_strategy"
    ),
    "x-quorum-initial-group-size": ArgumentRule(_positive_int, _QUORUM_ONLY, managed_by="replicas"),
    "x-queue-type": ArgumentRule(_string, _BOTH, managed_by="type"),
    # docs/reference/topology.md (measured on 3.10.8, 4.0.5 and 4.3.6); 0 is refused:
    # 4.3.6 cancels every consumer of the queue at once.
    "x-consumer-timeout": ArgumentRule(
        _ttl_ms(positive=True),
        _QUORUM_ONLY,
        other_types="RabbitMQ 4.3 refuses it on a classic queue (406 invalid arg), and times "
        "out no consumer of one",
    ),
    # RabbitMQ 4.3's delayed retries (docs/reference/topology.md, "Delays"): set by delay =
    # "server".
    "x-delayed-retry-type": ArgumentRule(_string, _QUORUM_ONLY, managed_by="delay"),
    "x-delayed-retry-min": ArgumentRule(_non_negative_int, _QUORUM_ONLY, managed_by="delay_min"),
    "x-delayed-retry-max": ArgumentRule(_non_negative_int, _QUORUM_ONLY, managed_by="delay_max"),
}


def check_queue_argument(name: str, value: object, queue_type: str) -> str | None:
    """Why RabbitMQ (or rr) would refuse argument ``name = value`` on a queue of this type.

    Returns ``None`` when the argument is acceptable.
    """
    rule = QUEUE_ARGUMENTS.get(name)
    if rule is None:
        return "is not an argument RabbitMQ knows"
    if rule.managed_by is not None:
        return f"is set by the key `{rule.managed_by}`, not in `arguments`"
    if queue_type not in rule.queue_types:
        other = next(iter(rule.queue_types))
        why = f": {rule.other_types}" if rule.other_types else ""
        return f"only applies to {other} queues, and this queue is {queue_type}{why}"
    return rule.check(value)
