"""Pure. ``--where`` expressions: which dead letters a replay takes.

::

    origin=refunds          the queue it failed in (see origin.py)
    origin!=refunds
    reason=delivery_limit   why it left its origin: delivery_limit, rejected, expired,
                            maxlen, or max_attempts (rr's own dead-letter copies)
    queue=payouts.retry     any queue its history names (rr-origin-queue or an x-death entry)
    header.NAME=VALUE       a header's value as text (numbers in decimal, bytes as UTF-8);
    header.NAME!=VALUE      a missing header never equals anything
    age>1h  age<10m         time since it was last dead-lettered (newest x-death time or
    age>=30s  age<=2d       rr-failed-at); a dead letter whose age is unknown never matches

Several ``--where`` must all hold. A malformed expression is a usage error (exit 2): an
unknown key, an unknown operator (``==``, ``=>``, ``<>``: the operator is every ``=``, ``!``,
``<`` and ``>`` after the key, so a value cannot start with one of them), a reason that
neither RabbitMQ nor rr gives (:data:`KNOWN_REASONS`), an empty origin or queue, a bad
duration (docs/dlq.md, "--where").
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, TypeAlias, assert_never

from rabbitctl_retry.dlq.origin import Facts
from rabbitctl_retry.errors import UsageError
from rabbitctl_retry.fields import FieldValue
from rabbitctl_retry.topology.naming import parse_duration_ms

TextKey = Literal["origin", "reason", "queue"]
AgeOp = Literal["<", "<=", ">", ">="]

_TEXT_KEYS: tuple[TextKey, ...] = ("origin", "reason", "queue")
_EXPRESSION = re.compile(
    r"\A\s*(?P<key>[A-Za-z_][A-Za-z0-9_]*(?:\.[^=!<>]+)?)\s*(?P<op>[=!<>]+)(?P<value>.*)\Z",
    re.DOTALL,
)
_OPERATORS = frozenset({"=", "!=", "<", "<=", ">", ">="})

KNOWN_REASONS = ("delivery_limit", "rejected", "expired", "maxlen", "max_attempts")
"""Every reason a dead letter can have: RabbitMQ's (``x-death``) and rr's own
(``max_attempts``, see origin.py)."""
_AGE_OPS: dict[str, AgeOp] = {"<": "<", "<=": "<=", ">": ">", ">=": ">="}


@dataclass(frozen=True, slots=True)
class TextCondition:
    key: TextKey
    value: str
    negate: bool = False
    text: str = ""


@dataclass(frozen=True, slots=True)
class HeaderCondition:
    name: str
    value: str
    negate: bool = False
    text: str = ""


@dataclass(frozen=True, slots=True)
class AgeCondition:
    op: AgeOp
    ms: int
    text: str = ""


Condition: TypeAlias = TextCondition | HeaderCondition | AgeCondition

_USAGE = (
    "use origin=QUEUE, reason=REASON, queue=QUEUE, header.NAME=VALUE (or != for each), "
    "or age>DURATION / age<DURATION (e.g. age>1h, age<10m)"
)


def parse_where(text: str) -> Condition:
    """One ``--where`` expression -> a :class:`Condition`; :class:`UsageError` if malformed."""
    match = _EXPRESSION.match(text)
    if match is None:
        raise UsageError(f"--where {text!r}: not an expression; {_USAGE}")
    key, op, value = match.group("key"), match.group("op"), match.group("value").strip()
    if op not in _OPERATORS:
        raise UsageError(f"--where {text!r}: unknown operator {op!r}; {_USAGE}")
    if key == "age":
        age_op = _AGE_OPS.get(op)
        if age_op is None:
            raise UsageError(f"--where {text!r}: compare age with <, <=, > or >=; {_USAGE}")
        try:
            ms = parse_duration_ms(value)
        except ValueError as error:
            raise UsageError(f"--where {text!r}: {error}") from None
        return AgeCondition(op=age_op, ms=ms, text=text)
    if op not in ("=", "!="):
        raise UsageError(f"--where {text!r}: only age compares with < or >; {_USAGE}")
    negate = op == "!="
    if key.startswith("header."):
        name = key.removeprefix("header.").strip()
        if not name:
            raise UsageError(f"--where {text!r}: name the header (header.NAME=VALUE)")
        return HeaderCondition(name=name, value=value, negate=negate, text=text)
    for known in _TEXT_KEYS:
        if key == known:
            if not value:
                raise UsageError(f"--where {text!r}: give a value after {op}")
            if known == "reason" and value not in KNOWN_REASONS:
                raise UsageError(
                    f"--where {text!r}: unknown reason {value!r}; a dead letter's reason is "
                    f"one of {', '.join(KNOWN_REASONS)}"
                )
            return TextCondition(key=known, value=value, negate=negate, text=text)
    raise UsageError(f"--where {text!r}: unknown key {key!r}; {_USAGE}")


def parse_all(texts: Iterable[str]) -> tuple[Condition, ...]:
    return tuple(parse_where(text) for text in texts)


def header_text(value: FieldValue) -> str | None:
    """A header value as ``header.NAME=VALUE`` compares it; ``None`` for tables and lists."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, str | int | float):
        return str(value)
    if isinstance(value, datetime):
        return value.isoformat()
    return None


def holds(condition: Condition, facts: Facts, now: datetime) -> bool:
    """Whether one condition holds for a dead letter (``now`` measures age)."""
    match condition:
        case TextCondition(key=key, value=value, negate=negate):
            if key == "origin":
                found = facts.origin == value
            elif key == "reason":
                found = facts.reason == value
            else:
                found = value in facts.queues
            return found != negate
        case HeaderCondition(name=name, value=value, negate=negate):
            present = name in facts.headers
            found = present and header_text(facts.headers[name]) == value
            return found != negate
        case AgeCondition(op=op, ms=ms):
            if facts.failed_at is None:
                return False
            age_ms = (now - facts.failed_at).total_seconds() * 1000
            if op == "<":
                return age_ms < ms
            if op == "<=":
                return age_ms <= ms
            if op == ">":
                return age_ms > ms
            return age_ms >= ms
        case _:
            assert_never(condition)


def matches(conditions: Iterable[Condition], facts: Facts, now: datetime) -> bool:
    """Whether every condition holds (no conditions: every dead letter matches)."""
    return all(holds(condition, facts, now) for condition in conditions)
