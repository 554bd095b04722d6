"""Routing rules, pure. Every expectation below was observed on RabbitMQ 3.10.8."""

from __future__ import annotations

import pytest

from rabbitctl_retry.emulator.routing import (
    binding_matches,
    headers_match,
    split_words,
    topic_matches,
)
from rabbitctl_retry.fields import FieldTable

KEYS = ["", "a", "b", "a.b", "a.b.c", "a.c", "a..c", "a.", ".", "x.a.y", "a.x.y.c", "..", "a.b.b"]

# pattern -> the keys of KEYS it matched on the server
TOPIC_TABLE = {
    "#": KEYS,
    "*": ["a", "b"],
    "": [""],
    "a.#": ["a", "a.b", "a.b.c", "a.c", "a..c", "a.", "a.x.y.c", "a.b.b"],
    "#.b": ["b", "a.b", "a.b.b"],
    "a.#.c": ["a.b.c", "a.c", "a..c", "a.x.y.c"],
    "a.*": ["a.b", "a.c", "a."],
    "*.*": ["a.b", "a.c", "a.", "."],
    "a.*.#": ["a.b", "a.b.c", "a.c", "a..c", "a.", "a.x.y.c", "a.b.b"],
    "#.#": KEYS,
    "a": ["a"],
    "a.": ["a."],
    ".": ["."],
    "*.": ["a.", "."],
    "#.a.#": ["a", "a.b", "a.b.c", "a.c", "a..c", "a.", "x.a.y", "a.x.y.c", "a.b.b"],
    "a.b.#": ["a.b", "a.b.c", "a.b.b"],
}


@pytest.mark.parametrize(("pattern", "expected"), list(TOPIC_TABLE.items()))
def test_topic_pattern_matches_exactly_what_the_server_matched(
    pattern: str, expected: list[str]
) -> None:
    assert [key for key in KEYS if topic_matches(pattern, key)] == expected


@pytest.mark.parametrize(
    ("pattern", "key", "matches"),
    [
        ("a.#", "a", True),  # '#' matches zero words
        ("#.b", "b", True),
        ("a.#.c", "a.c", True),
        ("a.*", "a.b.c", False),  # '*' is exactly one word
        ("#", "", True),  # even the empty key
        ("*", "", False),  # the empty key has no words
        ("*.*", "a", False),
        ("#.#.#", "a", True),
        ("a.#.#.c", "a.b.c", True),
        ("#.a.#.b.#", "x.a.y.b.z", True),
        ("#.a.#.b.#", "x.b.y.a.z", False),
        ("a.b", "a.b.c", False),
        ("a.b.c", "a.b", False),
    ],
)
def test_topic_traps(pattern: str, key: str, matches: bool) -> None:
    assert topic_matches(pattern, key) is matches


def test_words_of_a_key_follow_the_server_split() -> None:
    assert split_words("") == ()
    assert split_words("a") == ("a",)
    assert split_words("a.") == ("a", "")
    assert split_words(".") == ("", "")
    assert split_words("a..b") == ("a", "", "b")


MESSAGES: list[FieldTable | None] = [
    {"a": 1},
    {"a": 1, "b": "x"},
    {"b": "x"},
    {},
    None,
    {"a": 1, "x-k": "v"},
    {"x-k": "v"},
    {"a": "1"},
    {"a": True},
    {"a": 2},
    {"a": None},
    {"a": 1.0},
]

# binding arguments -> indexes into MESSAGES the server routed to it
HEADERS_TABLE: list[tuple[FieldTable, list[int]]] = [
    ({"x-match": "all", "a": 1, "b": "x"}, [1]),
    ({"x-match": "any", "a": 1, "b": "x"}, [0, 1, 2, 5, 11]),
    ({"x-match": "all"}, list(range(12))),
    ({"x-match": "any"}, []),
    ({"a": None}, [0, 1, 5, 7, 8, 9, 10, 11]),
    ({"x-match": "all", "x-k": "v"}, list(range(12))),
    ({"x-match": "all-with-x", "x-k": "v"}, [5, 6]),
    ({"x-match": "any-with-x", "x-k": "v", "a": 2}, [5, 6, 9]),
    ({"x-match": "all", "a": "1"}, [7]),
    ({"x-match": "all", "a": 1.0}, [0, 1, 5, 11]),
    ({"x-match": "all", "a": True}, [8]),
    ({}, list(range(12))),
]


@pytest.mark.parametrize(("arguments", "expected"), HEADERS_TABLE)
def test_headers_binding_matches_exactly_what_the_server_matched(
    arguments: FieldTable, expected: list[int]
) -> None:
    assert [i for i, headers in enumerate(MESSAGES) if headers_match(arguments, headers)] == (
        expected
    )


def test_binding_matches_dispatches_on_the_exchange_type() -> None:
    assert binding_matches("direct", "k", {}, "k", None)
    assert not binding_matches("direct", "k", {}, "K", None)
    assert binding_matches("fanout", "whatever", {}, "other", None)
    assert binding_matches("topic", "a.*", {}, "a.b", None)
    assert binding_matches("headers", "", {"x-match": "any", "h": 1}, "", {"h": 1})
