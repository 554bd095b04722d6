"""Exchange routing rules, pure: which bindings a message matches.

The rules are RabbitMQ's, checked against a 3.10.8 server:

* direct: the binding key equals the routing key.
* fanout: every binding.
* topic: keys split on ``.`` into words; ``*`` is exactly one word, ``#`` zero or more. The
  empty key has *no* words (``""`` matches ``#`` and ``""`` but not ``*``), while ``"a."``
  has two (``"a"`` and ``""``), so ``a.*`` matches ``a.`` and ``a.#`` matches ``a``.
* headers: ``x-match`` ``all`` (the default) or ``any`` over the binding's arguments, keys
  starting with ``x-`` ignored; ``all-with-x`` / ``any-with-x`` include them. A binding value of
  ``None`` (AMQP void) matches the key's presence. Values compare by AMQP type class: numbers
  with numbers (``1`` matches ``1.0``), booleans only with booleans, strings with strings.
  ``all`` with nothing to compare matches everything, ``any`` nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from functools import lru_cache
from typing import Literal, assert_never

from rabbitctl_retry.transport.base import FieldValue

ExchangeType = Literal["direct", "fanout", "topic", "headers"]
"""The routing types; ``x-delayed-message`` routes with its ``x-delayed-type``."""

ROUTING_TYPES: frozenset[str] = frozenset({"direct", "fanout", "topic", "headers"})


def split_words(key: str) -> tuple[str, ...]:
    """A topic key as words, the server's way: ``""`` has none, ``"a."`` has ``("a", "")``."""
    if key == "":
        return ()
    return tuple(key.split("."))


@lru_cache(maxsize=4096)
def _pattern_words(pattern: str) -> tuple[str, ...]:
    return split_words(pattern)


def topic_matches(pattern: str, routing_key: str) -> bool:
    """True when the topic binding key ``pattern`` matches ``routing_key``."""
    return _match_words(_pattern_words(pattern), split_words(routing_key))


def _match_words(pattern: tuple[str, ...], words: tuple[str, ...]) -> bool:
    # Iterative matcher with backtracking to the last '#': linear in practice.
    p = w = 0
    star_p = -1
    star_w = 0
    while w < len(words):
        if p < len(pattern) and pattern[p] == "#":
            star_p, star_w = p, w
            p += 1
        elif p < len(pattern) and (pattern[p] == "*" or pattern[p] == words[w]):
            p += 1
            w += 1
        elif star_p >= 0:
            star_w += 1
            w = star_w
            p = star_p + 1
        else:
            return False
    while p < len(pattern) and pattern[p] == "#":
        p += 1
    return p == len(pattern)


def direct_matches(binding_key: str, routing_key: str) -> bool:
    return binding_key == routing_key


MatchKind = Literal["all", "any", "all-with-x", "any-with-x"]


def match_kind(arguments: Mapping[str, FieldValue]) -> MatchKind:
    """The binding's ``x-match``; anything unknown is ``all`` (validated at bind time)."""
    value = arguments.get("x-match", "all")
    if value == "any":
        return "any"
    if value == "all-with-x":
        return "all-with-x"
    if value == "any-with-x":
        return "any-with-x"
    return "all"


def valid_match_kind(arguments: Mapping[str, FieldValue]) -> bool:
    value = arguments.get("x-match", "all")
    return value in ("all", "any", "all-with-x", "any-with-x")


def type_class(value: FieldValue) -> str:
    """The AMQP type class a value compares within (RabbitMQ's ``rabbit_misc:type_class``)."""
    if value is None:
        return "void"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "longstr"
    if isinstance(value, bytes):
        return "binary"
    if isinstance(value, datetime):
        return "timestamp"
    if isinstance(value, list):
        return "array"
    return "table"


def _values_equal(pattern: FieldValue, value: FieldValue) -> bool:
    if type_class(pattern) != type_class(value):
        return False
    return pattern == value


def headers_match(
    binding_arguments: Mapping[str, FieldValue], headers: Mapping[str, FieldValue] | None
) -> bool:
    """True when a headers-exchange binding with ``binding_arguments`` takes ``headers``."""
    kind = match_kind(binding_arguments)
    with_x = kind in ("all-with-x", "any-with-x")
    want_all = kind in ("all", "all-with-x")
    data: Mapping[str, FieldValue] = headers if headers is not None else {}
    for key, expected in binding_arguments.items():
        if key == "x-match" or (not with_x and key.startswith("x-")):
            continue
        if key in data and (expected is None or _values_equal(expected, data[key])):
            if not want_all:
                return True
        elif want_all:
            return False
    return want_all


def binding_matches(
    exchange_type: ExchangeType,
    binding_key: str,
    binding_arguments: Mapping[str, FieldValue],
    routing_key: str,
    headers: Mapping[str, FieldValue] | None,
) -> bool:
    """One binding against one message, for any routing type."""
    match exchange_type:
        case "direct":
            return binding_key == routing_key
        case "fanout":
            return True
        case "topic":
            return topic_matches(binding_key, routing_key)
        case "headers":
            return headers_match(binding_arguments, headers)
        case _:
            assert_never(exchange_type)
