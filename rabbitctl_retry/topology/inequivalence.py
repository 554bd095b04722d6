"""Pure. Read RabbitMQ's PRECONDITION_FAILED text for an inequivalent re-declare.

The broker names one differing argument per refusal, in one of these shapes (measured on
RabbitMQ 3.10)::

    inequivalent arg 'x-delivery-limit' for queue 'q' in vhost '/': received '5' but current is '4'
    inequivalent arg 'x-dead-letter-routing-key' for queue 'q' in vhost '/':
        received none but current is the value 'd' of type 'longstr'
    inequivalent arg 'durable' for queue 'q' in vhost '/': received 'false' but current is 'true'

:func:`parse_inequivalence` reads one such line; :func:`adopt_current` rewrites the desired
declaration to take the broker's value for that key, so the shell can re-declare again and
learn the next difference, until the broker accepts (all differences found) or the text can
no longer be read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rabbitctl_retry.fields import FieldValue

_INEQUIVALENT = re.compile(
    r"inequivalent arg '(?P<key>[^']+)' for (?P<kind>queue|exchange) '(?P<name>.*)' in vhost "
    r"'(?P<vhost>.*)': received (?P<received>.+) but current is (?P<current>.+?)\s*$"
)
_REPLY_CODE_SUFFIX = re.compile(r"\s*\(\d{3}\)\s*$")
_TYPED = re.compile(r"^the value '(?P<value>.*)' of type '(?P<type>[^']+)'$")
_BARE = re.compile(r"^'(?P<value>.*)'$")

FLAG_KEYS = frozenset({"durable", "auto_delete", "exclusive", "internal"})
_STRING_TYPES = frozenset({"longstr", "shortstr"})
_INTEGER_TYPES = frozenset(
    {"byte", "unsignedbyte", "short", "unsignedshort", "signedint", "unsignedint", "long"}
)


@dataclass(frozen=True, slots=True)
class BrokerValue:
    """A value as the broker printed it: ``present`` is false for ``none``."""

    present: bool
    value: FieldValue = None

    def display(self) -> str:
        if not self.present:
            return "(none)"
        return display_value(self.value)


@dataclass(frozen=True, slots=True)
class Inequivalence:
    key: str
    kind: str
    name: str
    received: BrokerValue
    current: BrokerValue


def display_value(value: FieldValue) -> str:
    """How plans print a value: strings quoted, booleans lower-case, numbers bare."""
    if value is None:
        return "(none)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f"'{value}'"
    return str(value)


def _parse_value(text: str, key: str) -> BrokerValue | None:
    text = text.strip()
    if text == "none":
        return BrokerValue(present=False)
    typed = _TYPED.match(text)
    if typed is not None:
        raw, kind = typed.group("value"), typed.group("type")
        if kind in _STRING_TYPES:
            return BrokerValue(True, raw)
        if kind in _INTEGER_TYPES:
            return BrokerValue(True, int(raw)) if _is_int(raw) else None
        if kind == "bool":
            return BrokerValue(True, raw == "true")
        return None
    bare = _BARE.match(text)
    if bare is None:
        return None
    raw = bare.group("value")
    if key in FLAG_KEYS and raw in {"true", "false"}:
        return BrokerValue(True, raw == "true")
    if _is_int(raw):
        return BrokerValue(True, int(raw))
    return BrokerValue(True, raw)


def _is_int(text: str) -> bool:
    return bool(re.fullmatch(r"-?\d+", text))


def parse_inequivalence(message: str) -> Inequivalence | None:
    """One PRECONDITION_FAILED text -> what differs, or ``None`` if it is not of that kind."""
    match = _INEQUIVALENT.search(_REPLY_CODE_SUFFIX.sub("", message))
    if match is None:
        return None
    key = match.group("key")
    received = _parse_value(match.group("received"), key)
    current = _parse_value(match.group("current"), key)
    if received is None or current is None:
        return None
    return Inequivalence(
        key=key,
        kind=match.group("kind"),
        name=match.group("name"),
        received=received,
        current=current,
    )


@dataclass(frozen=True, slots=True)
class Declaration:
    """The flags and arguments of one declare, as the shell sends it."""

    durable: bool
    arguments: dict[str, FieldValue]
    auto_delete: bool = False
    internal: bool = False
    exchange_type: str | None = None


def adopt_current(declaration: Declaration, found: Inequivalence) -> Declaration | None:
    """``declaration`` with the broker's current value for ``found.key``.

    Returns ``None`` when the key cannot be adopted (an unknown flag or a type), so the
    caller stops asking.
    """
    arguments = dict(declaration.arguments)
    flags = {
        "durable": declaration.durable,
        "auto_delete": declaration.auto_delete,
        "internal": declaration.internal,
    }
    exchange_type = declaration.exchange_type
    if found.key in flags:
        if not isinstance(found.current.value, bool):
            return None
        flags[found.key] = found.current.value
    elif found.key == "type" and found.kind == "exchange":
        if not isinstance(found.current.value, str):
            return None
        exchange_type = found.current.value
    elif found.key == "exclusive":
        return None
    elif found.current.present:
        arguments[found.key] = found.current.value
    else:
        arguments.pop(found.key, None)
    return Declaration(
        durable=flags["durable"],
        arguments=arguments,
        auto_delete=flags["auto_delete"],
        internal=flags["internal"],
        exchange_type=exchange_type,
    )


def desired_display(declaration: Declaration, key: str) -> str:
    """How the file's side of ``key`` prints in a conflict."""
    if key == "durable":
        return display_value(declaration.durable)
    if key == "auto_delete":
        return display_value(declaration.auto_delete)
    if key == "internal":
        return display_value(declaration.internal)
    if key == "type" and declaration.exchange_type is not None:
        return display_value(declaration.exchange_type)
    if key in declaration.arguments:
        return display_value(declaration.arguments[key])
    return "(none)"
