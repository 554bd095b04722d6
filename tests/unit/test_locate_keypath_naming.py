"""Pure tables for key paths (keypath.py), line lookup (locate.py) and derived names (naming.py)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rabbitctl_retry.retry.headers import DEFAULT_RETRY_HEADER
from rabbitctl_retry.topology.keypath import key_path, parse_key_path, quote_key, split_keys
from rabbitctl_retry.topology.locate import index_lines, line_of
from rabbitctl_retry.topology.naming import (
    delay_exchange_name,
    format_duration_ms,
    parse_duration_ms,
    tier_queue_name,
    wait_queue_name,
)

# --------------------------------------------------------------------------- keypath


@pytest.mark.parametrize(
    ("part", "quoted"),
    [
        ("refunds", "refunds"),
        ("max_attempts", "max_attempts"),
        ("x-message-ttl", "x-message-ttl"),
        ("Queue_01", "Queue_01"),
        ("0", "0"),
        ("refunds.dead", '"refunds.dead"'),
        ("with space", '"with space"'),
        ("", '""'),
        ('say "hi"', '"say \\"hi\\""'),
        ("back\\slash", '"back\\\\slash"'),
        ("é", '"é"'),
        ("a[0]", '"a[0]"'),
        ("it's", '"it\'s"'),
    ],
)
def test_quote_key(part: str, quoted: str) -> None:
    assert quote_key(part) == quoted


@pytest.mark.parametrize("part", ["a\n", "payouts\n", "\n"])
def test_quote_key_never_leaves_a_line_break_bare(part: str) -> None:
    # A TOML bare key is A-Za-z0-9_- only; "a\n" written bare is not the key "a\n".
    assert quote_key(part).startswith('"')


@pytest.mark.parametrize(
    ("parts", "path"),
    [
        (("queues",), "queues"),
        (("queues", "payouts", "max_attempts"), "queues.payouts.max_attempts"),
        (("queues", "refunds.dead", "durable"), 'queues."refunds.dead".durable'),
        (("queues", "a", "bindings", 0), "queues.a.bindings[0]"),
        (("queues", "a", "bindings", 1, "exchange"), "queues.a.bindings[1].exchange"),
        (("queues", "q", "delay_tiers", 2), "queues.q.delay_tiers[2]"),
        (("queues", "q", "arguments", "x-max-priority"), "queues.q.arguments.x-max-priority"),
        (("exchanges", "amq.x"), 'exchanges."amq.x"'),
        ((), ""),
    ],
)
def test_key_path(parts: tuple[str | int, ...], path: str) -> None:
    assert key_path(*parts) == path


@pytest.mark.parametrize(
    ("path", "parts"),
    [
        ("queues", ["queues"]),
        ("queues.payouts.max_attempts", ["queues", "payouts", "max_attempts"]),
        ('queues."refunds.dead".durable', ["queues", "refunds.dead", "durable"]),
        ("queues.a.bindings[0]", ["queues", "a", "bindings", 0]),
        ("queues.a.bindings[12].routing_key", ["queues", "a", "bindings", 12, "routing_key"]),
        ('queues."a\\"b".x', ["queues", 'a"b', "x"]),
        ('queues."a\\\\b"', ["queues", "a\\b"]),
        ('queues.""', ["queues", ""]),
        ("", []),
    ],
)
def test_parse_key_path(path: str, parts: list[str | int]) -> None:
    assert parse_key_path(path) == parts


@pytest.mark.parametrize(
    ("text", "keys"),
    [
        ("queues.payouts", ["queues", "payouts"]),
        ('queues."refunds.dead"', ["queues", "refunds.dead"]),
        ("queues.'refunds.dead'", ["queues", "refunds.dead"]),
        (' queues . "a" . b ', ["queues", "a", "b"]),
        ("queues\t.\tx", ["queues", "x"]),
        ('"a\\"b"', ['a"b']),
        ("'lit\\eral'", ["lit\\eral"]),
        ('""', [""]),
        ("x-message-ttl", ["x-message-ttl"]),
    ],
)
def test_split_keys(text: str, keys: list[str]) -> None:
    assert split_keys(text) == keys


_PATH_PARTS = st.lists(st.one_of(st.text(), st.integers()), min_size=1, max_size=6)


@settings(database=None, max_examples=300)
@given(_PATH_PARTS)
def test_parse_key_path_inverts_key_path(parts: list[str | int]) -> None:
    assert parse_key_path(key_path(*parts)) == parts


@settings(database=None, max_examples=300)
@given(st.lists(st.text(), min_size=1, max_size=6))
def test_split_keys_reads_what_quote_key_writes(parts: list[str]) -> None:
    assert split_keys(".".join(quote_key(part) for part in parts)) == parts


# --------------------------------------------------------------------------- locate

_TEXT = """\
# the refunds service
[broker]
url = "amqp://localhost/"   # trailing comment

[queues.refunds]  # a [bracketed] comment
type = "classic"
max_attempts = 5

[queues."refunds.dead"]
durable = true

[ queues . 'lit.q' ]
"quoted key" = 1

[queues]
inline.type = "quorum"
inline . durable = false

[[queues.a.bindings]]
exchange = "e1"

[[queues.a.bindings]]
exchange = "e2"
routing_key = "k"

[queues.b]
bindings = [
  { exchange = "x" },
]
arguments = { x-max-length = 1 }
"""


@pytest.mark.parametrize(
    ("path", "line"),
    [
        ("broker", 2),
        ("broker.url", 3),
        ("queues", 5),
        ("queues.refunds", 5),
        ("queues.refunds.type", 6),
        ("queues.refunds.max_attempts", 7),
        ('queues."refunds.dead"', 9),
        ('queues."refunds.dead".durable', 10),
        ('queues."lit.q"', 12),
        ('queues."lit.q"."quoted key"', 13),
        ("queues.inline", 16),
        ("queues.inline.type", 16),
        ("queues.inline.durable", 17),
        ("queues.a", 19),
        ("queues.a.bindings", 19),
        ("queues.a.bindings[0]", 19),
        ("queues.a.bindings[0].exchange", 20),
        ("queues.a.bindings[1]", 22),
        ("queues.a.bindings[1].exchange", 23),
        ("queues.a.bindings[1].routing_key", 24),
        # not written: the closest enclosing key that is
        ("queues.a.bindings[1].arguments", 22),
        ("queues.refunds.dead_letter", 5),
        ("queues.b", 26),
        ("queues.b.bindings", 27),
        ("queues.b.bindings[0].exchange", 27),
        ("queues.b.arguments", 30),
        ("queues.b.arguments.x-max-length", 30),
        ("queues.nowhere.type", 5),
    ],
)
def test_line_of(path: str, line: int) -> None:
    assert line_of(_TEXT, path) == line


@pytest.mark.parametrize("path", ["exchanges", 'exchanges."x".type', "nothing"])
def test_line_of_a_path_with_no_written_prefix_is_none(path: str) -> None:
    assert line_of(_TEXT, path) is None


def test_index_lines_records_first_appearance_and_array_items() -> None:
    lines = index_lines(_TEXT)
    assert lines[("queues", "a", "bindings", 0)] == 19
    assert lines[("queues", "a", "bindings", 1)] == 22
    assert ("queues", "a", "bindings", 2) not in lines
    assert lines[("queues", "refunds.dead", "durable")] == 10


def test_line_of_commented_out_header_is_ignored() -> None:
    text = "# [queues.x]\n[queues.y]\n"
    assert line_of(text, "queues.x") == 2  # only [queues.y] wrote "queues"
    assert line_of(text, "queues.y") == 2


def test_line_of_crlf_text() -> None:
    text = "[queues.a]\r\ntype = 1\r\n\r\n[queues.b]\r\ndurable = 2\r\n"
    assert line_of(text, "queues.b.durable") == 5


def test_line_of_header_with_escaped_name() -> None:
    # TOML decodes "x\u0041" to the key "xA"; the error path names "xA".
    text = '[queues.a]\n\n[queues."x\\u0041"]\nmax_attemps = 1\n'
    assert line_of(text, "queues.xA.max_attemps") == 4


def test_line_of_ignores_lines_inside_a_multi_line_string() -> None:
    text = (
        "[broker]\n"
        'retry_header = """\n'
        "[queues.b]\n"
        "max_attempts = 0\n"
        '"""\n'
        "[queues.b]\n"
        "max_attempts = 0\n"
    )
    assert line_of(text, "queues.b.max_attempts") == 7


# --------------------------------------------------------------------------- naming


def test_default_retry_header_is_ruststreams() -> None:
    assert DEFAULT_RETRY_HEADER == "x-ruststream-retry-count"


@pytest.mark.parametrize(
    ("queue", "wait", "delay_exchange"),
    [
        ("refunds", "refunds.retry", "refunds.delay"),
        ("refunds.dead", "refunds.dead.retry", "refunds.dead.delay"),
        ("é", "é.retry", "é.delay"),
    ],
)
def test_derived_names(queue: str, wait: str, delay_exchange: str) -> None:
    assert wait_queue_name(queue) == wait
    assert delay_exchange_name(queue) == delay_exchange


@pytest.mark.parametrize(
    ("tier_ms", "name"),
    [
        (1, "refunds.retry.1ms"),
        (500, "refunds.retry.500ms"),
        (1_000, "refunds.retry.1s"),
        (1_500, "refunds.retry.1500ms"),
        (30_000, "refunds.retry.30s"),
        (90_000, "refunds.retry.90s"),
        (300_000, "refunds.retry.5m"),
        (3_600_000, "refunds.retry.1h"),
        (5_400_000, "refunds.retry.90m"),
        (86_400_000, "refunds.retry.1d"),
        (90_000_000, "refunds.retry.25h"),
    ],
)
def test_tier_queue_name(tier_ms: int, name: str) -> None:
    assert tier_queue_name("refunds", tier_ms) == name


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("0ms", 0),
        ("1ms", 1),
        ("1500ms", 1_500),
        ("1s", 1_000),
        ("30s", 30_000),
        ("5m", 300_000),
        ("2h", 7_200_000),
        ("1d", 86_400_000),
        (" 5 m ", 300_000),
        ("0s", 0),
        ("007s", 7_000),
    ],
)
def test_parse_duration_ms(text: str, ms: int) -> None:
    result = parse_duration_ms(text)
    assert result == ms
    assert type(result) is int


@pytest.mark.parametrize("text", ["", "5", "s", "1w", "1.5s", "-1s", "5 minutes", "5S", "1s1ms"])
def test_parse_duration_ms_refuses(text: str) -> None:
    with pytest.raises(ValueError, match=re.escape(f"{text!r} is not a duration")):
        parse_duration_ms(text)


@pytest.mark.parametrize(
    ("ms", "text"),
    [
        (0, "0ms"),
        (999, "999ms"),
        (1_000, "1s"),
        (1_001, "1001ms"),
        (60_000, "1m"),
        (61_000, "61s"),
        (3_600_000, "1h"),
        (86_400_000, "1d"),
        (172_800_000, "2d"),
    ],
)
def test_format_duration_ms(ms: int, text: str) -> None:
    assert format_duration_ms(ms) == text


@settings(database=None, max_examples=500)
@given(st.integers(min_value=0, max_value=10**15))
def test_parse_duration_ms_inverts_format_duration_ms(ms: int) -> None:
    assert parse_duration_ms(format_duration_ms(ms)) == ms


@settings(database=None, max_examples=300)
@given(st.integers(min_value=1, max_value=10**12), st.sampled_from(["ms", "s", "m", "h", "d"]))
def test_format_duration_ms_is_the_shortest_exact_spelling(amount: int, unit: str) -> None:
    ms = parse_duration_ms(f"{amount}{unit}")
    text = format_duration_ms(ms)
    assert parse_duration_ms(text) == ms
    assert len(text) <= len(f"{amount}{unit}")
