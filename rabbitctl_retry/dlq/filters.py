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
    group=tmoh-3f9a0c1b2d4e a group ``rr dlq groups`` listed (dlq/groups.py: the id says its
    group!=ID               dimensions, so the letter's group is computed again from it)
    id=ID  id!=ID           its ``message_id`` (a letter without one never equals)
    ids=A,B,C  ids!=A,B,C   its ``message_id`` is one of these (a letter without one is in no
                            list); an id holding a comma cannot be listed (``id=`` names it)
    text=WORD text!=WORD    WORD (case-insensitive, at most 256 characters) in a header's value
                            as text (the error ``rr-error-type``/``rr-error-message`` included)
                            or in the body's first KiB, decoded as UTF-8 with replacement

A letter whose properties could not be decoded matches no ``id``, ``ids`` or ``text``
condition (either operator): its message id and headers are unknown (origin.py
``contents_of``).

Several ``--where`` must all hold. A malformed expression is a usage error (exit 2): an
unknown key, an unknown operator (``==``, ``=>``, ``<>``: the operator is every ``=``, ``!``,
``<`` and ``>`` after the key, so a value cannot start with one of them), a reason that
neither RabbitMQ nor rr gives (:data:`KNOWN_REASONS`), an empty origin or queue, a bad
duration, an empty id in a list, an expression longer than :data:`MAX_EXPRESSION_CHARACTERS`
(an ``ids`` list: :data:`MAX_IDS_CHARACTERS`) (docs/reference/dlq.md, "--where").

An expression is read in one pass (:func:`split_expression`): its time grows with its length,
never with the square of it, whatever it holds.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, TypeAlias, assert_never

from rabbitctl_retry.dlq.groups import Dimension, key_of, parse_group_id
from rabbitctl_retry.dlq.origin import Facts
from rabbitctl_retry.errors import UsageError
from rabbitctl_retry.fields import FieldValue
from rabbitctl_retry.topology.naming import parse_duration_ms

TextKey = Literal["origin", "reason", "queue"]
AgeOp = Literal["<", "<=", ">", ">="]

_TEXT_KEYS: tuple[TextKey, ...] = ("origin", "reason", "queue")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_OPERATOR_CHARACTERS = "=!<>"
_OPERATORS = frozenset({"=", "!=", "<", "<=", ">", ">="})

MAX_EXPRESSION_CHARACTERS = 4096
"""The longest ``--where`` expression rr reads: room for a header name of 255 bytes and a long
value; a longer one is a usage error (docs/reference/dlq.md, "--where")."""
MAX_IDS_CHARACTERS = 8 * MAX_EXPRESSION_CHARACTERS
"""The longest ``ids=`` list: 32,768 characters, room for a selection of 500 ids
(``console/selection.py`` ``MAX_PICKS``) of up to 64 characters each, where 4,096 holds only
110 UUIDs; Linux takes an argument of up to 128 KiB (docs/reference/dlq.md, "--where")."""
IDS_SEPARATOR = ","
_SHOWN_CHARACTERS = 60
"""How much of a long expression an error message quotes."""

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
class IdCondition:
    message_id: str
    negate: bool = False
    text: str = ""


@dataclass(frozen=True, slots=True)
class IdsCondition:
    message_ids: frozenset[str]
    negate: bool = False
    text: str = ""


@dataclass(frozen=True, slots=True)
class SearchCondition:
    word: str
    """Case-folded: compared with case-folded text."""
    negate: bool = False
    text: str = ""


@dataclass(frozen=True, slots=True)
class AgeCondition:
    op: AgeOp
    ms: int
    text: str = ""


@dataclass(frozen=True, slots=True)
class GroupCondition:
    dimensions: tuple[Dimension, ...]
    group_id: str
    negate: bool = False
    text: str = ""


Condition: TypeAlias = (
    TextCondition
    | HeaderCondition
    | AgeCondition
    | GroupCondition
    | IdCondition
    | IdsCondition
    | SearchCondition
)

_USAGE = (
    "use origin=QUEUE, reason=REASON, queue=QUEUE, header.NAME=VALUE, group=ID, id=MESSAGE_ID, "
    "ids=ID,ID,..., text=WORD (or != for each), or age>DURATION / age<DURATION (e.g. age>1h, "
    "age<10m)"
)

MAX_WORD_CHARACTERS = 256
"""The longest word ``text=`` searches for (docs/reference/dlq.md, "--where")."""


@dataclass(frozen=True, slots=True)
class Parts:
    """An expression cut in three: ``key`` (``origin``, ``header.NAME``), ``op`` (every ``=``,
    ``!``, ``<``, ``>`` after the key) and ``value`` (the rest, as given)."""

    key: str
    op: str
    value: str


def split_expression(text: str) -> Parts | None:
    """``text`` as key, operator and value, or ``None`` when it is not ``KEY OP VALUE``.

    The key is a name (``[A-Za-z_][A-Za-z0-9_]*``), optionally followed by ``.`` and any
    characters but the operator's; white space around it is left out. One pass over
    ``text`` (a few ``str`` scans, no backtracking): linear in its length. Pure.
    """
    at = min(
        (found for found in map(text.find, _OPERATOR_CHARACTERS) if found >= 0),
        default=-1,
    )
    if at < 0:
        return None
    end = at
    while end < len(text) and text[end] in _OPERATOR_CHARACTERS:
        end += 1
    head = text[:at].lstrip()
    name, dot, after_dot = head.partition(".")
    if _IDENTIFIER.fullmatch(name if dot else name.rstrip()) is None or (dot and not after_dot):
        return None
    return Parts(key=head.rstrip(), op=text[at:end], value=text[end:])


def shown_expression(text: str) -> str:
    """``text`` (an expression, or a part of one) quoted for an error message, cut after
    :data:`_SHOWN_CHARACTERS`."""
    if len(text) <= _SHOWN_CHARACTERS:
        return repr(text)
    return f"{text[:_SHOWN_CHARACTERS]!r}... ({len(text):,} characters)"


def parse_where(text: str) -> Condition:
    """One ``--where`` expression -> a :class:`Condition`; :class:`UsageError` if malformed."""
    shown = shown_expression(text)
    limit = _limit_of(text)
    if len(text) > limit:
        what = "an ids= list" if limit == MAX_IDS_CHARACTERS else "an expression"
        raise UsageError(f"--where {shown}: too long; {what} is at most {limit:,} characters")
    parts = split_expression(text)
    if parts is None:
        raise UsageError(f"--where {shown}: not an expression; {_USAGE}")
    key, op, value = parts.key, parts.op, parts.value.strip()
    if op not in _OPERATORS:
        raise UsageError(f"--where {shown}: unknown operator {op!r}; {_USAGE}")
    if key == "age":
        age_op = _AGE_OPS.get(op)
        if age_op is None:
            raise UsageError(f"--where {shown}: compare age with <, <=, > or >=; {_USAGE}")
        try:
            ms = parse_duration_ms(value)
        except ValueError as error:
            raise UsageError(f"--where {shown}: {error}") from None
        return AgeCondition(op=age_op, ms=ms, text=text)
    if op not in ("=", "!="):
        raise UsageError(f"--where {shown}: only age compares with < or >; {_USAGE}")
    negate = op == "!="
    if key == "group":
        parsed = parse_group_id(value)
        if parsed is None:
            raise UsageError(
                f"--where {shown}: not a group id; rr dlq groups lists them (e.g. "
                "group=tmoh-3f9a0c1b2d4e)"
            )
        dimensions, _ = parsed
        return GroupCondition(
            dimensions=dimensions, group_id=value.strip(), negate=negate, text=text
        )
    if key in ("id", "text"):
        return _letter_condition(key, value, negate, text)
    if key == "ids":
        return _ids_condition(value, negate, text)
    if key.startswith("header."):
        name = key.removeprefix("header.").strip()
        if not name:
            raise UsageError(f"--where {shown}: name the header (header.NAME=VALUE)")
        return HeaderCondition(name=name, value=value, negate=negate, text=text)
    for known in _TEXT_KEYS:
        if key == known:
            if not value:
                raise UsageError(f"--where {shown}: give a value after {op}")
            if known == "reason" and value not in KNOWN_REASONS:
                raise UsageError(
                    f"--where {shown}: unknown reason {shown_expression(value)}; a dead "
                    f"letter's reason is one of {', '.join(KNOWN_REASONS)}"
                )
            return TextCondition(key=known, value=value, negate=negate, text=text)
    raise UsageError(f"--where {shown}: unknown key {shown_expression(key)}; {_USAGE}")


def _letter_condition(key: str, value: str, negate: bool, text: str) -> Condition:
    """``id=``/``text=`` (and ``!=``) with ``value`` stripped: :class:`UsageError` when empty
    or, for ``text``, longer than :data:`MAX_WORD_CHARACTERS`."""
    shown = shown_expression(text)
    if not value:
        what = "a message id" if key == "id" else "a word to search for"
        raise UsageError(f"--where {shown}: give {what} after {'!=' if negate else '='}")
    if key == "id":
        return IdCondition(message_id=value, negate=negate, text=text)
    if len(value) > MAX_WORD_CHARACTERS:
        raise UsageError(
            f"--where {shown}: the word is {len(value):,} characters; text= searches for at "
            f"most {MAX_WORD_CHARACTERS}"
        )
    return SearchCondition(word=value.casefold(), negate=negate, text=text)


def _limit_of(text: str) -> int:
    """How long ``text`` may be: an expression whose key is ``ids`` (it starts with ``ids``
    and white space or an operator) holds a list, :data:`MAX_IDS_CHARACTERS`."""
    head = text.lstrip()
    after = head[3:4]
    if head.startswith("ids") and after and (after.isspace() or after in "=!"):
        return MAX_IDS_CHARACTERS
    return MAX_EXPRESSION_CHARACTERS


def _ids_condition(value: str, negate: bool, text: str) -> IdsCondition:
    """``ids=A,B`` (and ``!=``), ``value`` stripped: each id between commas stripped; a
    :class:`UsageError` when none is given or one of them is empty."""
    shown = shown_expression(text)
    op = "!=" if negate else "="
    if not value:
        raise UsageError(f"--where {shown}: give message ids after {op}, separated by commas")
    listed = [part.strip() for part in value.split(IDS_SEPARATOR)]
    if not all(listed):
        raise UsageError(
            f"--where {shown}: an empty id in the list (ids are separated by commas: an id "
            "that holds a comma cannot be listed; name it with id=)"
        )
    return IdsCondition(message_ids=frozenset(listed), negate=negate, text=text)


class ListTooLong(ValueError):
    """An ``ids=`` list longer than :data:`MAX_IDS_CHARACTERS` (:func:`ids_expression`)."""


def ids_expression(message_ids: Sequence[str], negate: bool = False) -> str:
    """``ids=A,B,...`` (``ids!=`` when ``negate``) that :func:`parse_where` reads back as
    exactly ``message_ids``; a :class:`ValueError` saying why when it cannot be written: an
    id is empty, holds a comma or white space at either end, or (:class:`ListTooLong`) the
    list is longer than :data:`MAX_IDS_CHARACTERS`. A first id that starts with an operator
    character (``=``, ``!``, ``<``, ``>``) follows a space, which the reader leaves out."""
    if not message_ids:
        raise ValueError("no message id to list")
    for message_id in message_ids:
        if not message_id or message_id != message_id.strip():
            raise ValueError(
                f"the message id {shown_expression(message_id)} is empty or starts or ends "
                "with white space: --where cannot name it"
            )
        if IDS_SEPARATOR in message_id:
            raise ValueError(
                f"the message id {shown_expression(message_id)} holds a comma: an ids= list "
                "cannot name it (id= can, one at a time)"
            )
    listed = IDS_SEPARATOR.join(message_ids)
    spacer = " " if listed[0] in _OPERATOR_CHARACTERS else ""
    expression = f"ids{'!=' if negate else '='}{spacer}{listed}"
    if len(expression) > MAX_IDS_CHARACTERS:
        raise ListTooLong(
            f"{len(message_ids):,} ids make an ids= list of {len(expression):,} characters; "
            f"--where takes at most {MAX_IDS_CHARACTERS:,}"
        )
    return expression


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
        case GroupCondition(dimensions=dimensions, group_id=wanted, negate=negate):
            group = key_of(
                dimensions, headers=facts.headers, origin=facts.origin, reason=facts.reason
            )
            return (group.id == wanted) != negate
        case IdCondition(message_id=wanted, negate=negate):
            return facts.searchable and (facts.message_id == wanted) != negate
        case IdsCondition(message_ids=wanted, negate=negate):
            listed = facts.message_id is not None and facts.message_id in wanted
            return facts.searchable and listed != negate
        case SearchCondition(word=word, negate=negate):
            return facts.searchable and found_text(word, facts) != negate
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


def found_text(word: str, facts: Facts) -> bool:
    """Whether ``word`` (case-folded) appears in a header's value as text or in the body's
    first KiB (``facts.body_head``)."""
    if word in facts.body_head:
        return True
    for value in facts.headers.values():
        text = header_text(value)
        if text is not None and word in text.casefold():
            return True
    return False


def matches(conditions: Iterable[Condition], facts: Facts, now: datetime) -> bool:
    """Whether every condition holds (no conditions: every dead letter matches)."""
    return all(holds(condition, facts, now) for condition in conditions)
