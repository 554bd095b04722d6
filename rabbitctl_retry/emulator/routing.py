"""Exchange routing rules, pure: which bindings a message matches.

The rules are RabbitMQ's, checked against a 3.10.8 server:

* direct: the binding key equals the routing key.
* fanout: every binding.
* topic: keys split on ``.`` into words; ``*`` is exactly one word, ``#`` zero or more. The
  empty key has *no* words (``""`` matches ``#`` and ``""`` but not ``*``), while ``"a."``
  has two (``"a"`` and ``""``), so ``a.*`` matches ``a.`` and ``a.#`` matches ``a``.
* headers: ``x-match`` ``all`` (the default) or ``any`` over the binding's arguments, keys
  starting with ``x-`` ignored; ``all-with-x`` / ``any-with-x`` include them. A binding value of
  ``None`` (AMQP void) matches the key's presence. ``all`` with nothing to compare matches
  everything, ``any`` nothing. A header value is compared with the binding's as the server
  compares the bare values (:func:`header_values_equal`): a long string and a byte array with
  the same bytes are equal, booleans equal only booleans, and an array or a table only one
  with the same element types. Numbers: on 3.10 by value (``1`` matches ``1.0``, and a
  timestamp its number of seconds); on 4.0 an integer never matches a float, and a message's
  timestamp counts in milliseconds (``strict_numbers``, measured on 4.0.5).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from functools import lru_cache
from typing import Literal, assert_never

from rabbitctl_retry.fields import FieldValue

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


def _typed(value: FieldValue) -> object:
    """``value`` with the type of every element, as an array or a table compares inside."""
    if isinstance(value, list):
        return ("array", tuple(_typed(v) for v in value))
    if isinstance(value, dict):
        return ("table", tuple((k, _typed(v)) for k, v in sorted(value.items())))
    return (type(value).__name__, value)


def _compared(value: FieldValue, *, strict_numbers: bool, from_message: bool) -> object:
    """What the server compares of a top-level header or binding value.

    3.10 compares the bare Erlang values with ``==``: numbers by value, a timestamp as its
    seconds, a long string and a byte array as the same binary. 4.0 compares the message's
    value, converted to its internal (AMQP 1.0) form, with ``=:=``: an integer is not a float,
    and a message's timestamp is in milliseconds (the binding's stays in seconds).
    """
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, int):
        return ("int" if strict_numbers else "number", value)
    if isinstance(value, float):
        return ("float" if strict_numbers else "number", value)
    if isinstance(value, datetime):
        seconds = int(value.timestamp())
        if not strict_numbers:
            return ("number", seconds)
        return ("int", seconds * 1000 if from_message else seconds)
    if isinstance(value, str):
        return ("binary", value.encode())
    if isinstance(value, bytes):
        return ("binary", value)
    return _typed(value)


def header_values_equal(
    binding_value: FieldValue, header_value: FieldValue, *, strict_numbers: bool = False
) -> bool:
    """Whether a message's ``header_value`` matches the binding's ``binding_value`` (not void)."""
    if type(binding_value) is str and type(header_value) is str:
        return binding_value == header_value  # the common case, fast
    return _compared(binding_value, strict_numbers=strict_numbers, from_message=False) == (
        _compared(header_value, strict_numbers=strict_numbers, from_message=True)
    )


def headers_match(
    binding_arguments: Mapping[str, FieldValue],
    headers: Mapping[str, FieldValue] | None,
    *,
    strict_numbers: bool = False,
) -> bool:
    """True when a headers-exchange binding with ``binding_arguments`` takes ``headers``.

    ``strict_numbers``: RabbitMQ 4.0's comparison (see :func:`header_values_equal`).
    """
    kind = match_kind(binding_arguments)
    with_x = kind in ("all-with-x", "any-with-x")
    want_all = kind in ("all", "all-with-x")
    data: Mapping[str, FieldValue] = headers if headers is not None else {}
    for key, expected in binding_arguments.items():
        if key == "x-match" or (not with_x and key.startswith("x-")):
            continue
        if key in data and (
            expected is None
            or header_values_equal(expected, data[key], strict_numbers=strict_numbers)
        ):
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
