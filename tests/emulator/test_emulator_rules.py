"""The emulator's pure rules: x-death bookkeeping, cycles, expiration and delay parsing."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from rabbitctl_retry.emulator.args import amqp_type_name
from rabbitctl_retry.emulator.deadletter import Death, dead_letter_headers, death_time, is_cycle
from rabbitctl_retry.emulator.values import (
    client_table,
    copy_headers,
    parse_delay_ms,
    parse_expiration,
    server_table,
    timestamp,
)
from rabbitctl_retry.field_codec import decode_fields, raw_fields
from rabbitctl_retry.fields import FieldTable, FieldValue, like

T = datetime(2024, 1, 1, tzinfo=UTC)


def death(queue: str, reason: str, count: int = 1) -> dict[str, FieldValue]:
    return {
        "count": count,
        "reason": reason,
        "queue": queue,
        "time": T,
        "exchange": "",
        "routing-keys": [queue],
    }


def die(headers: FieldTable | None, queue: str, reason: str = "rejected") -> FieldTable:
    return dead_letter_headers(
        headers,
        Death(
            reason=reason,  # type: ignore[arg-type]
            queue=queue,
            exchange="",
            routing_keys=[queue],
            time=T,
            original_expiration=None,
        ),
    )


def test_first_death() -> None:
    headers = die({"app": "x"}, "q")
    assert headers == {
        "app": "x",
        "x-death": [death("q", "rejected")],
        "x-first-death-exchange": "",
        "x-first-death-queue": "q",
        "x-first-death-reason": "rejected",
    }


def test_a_second_death_elsewhere_goes_in_front() -> None:
    headers = die(die(None, "a"), "b")
    deaths = headers["x-death"]
    assert isinstance(deaths, list)
    assert [(d["queue"], d["count"]) for d in deaths if isinstance(d, dict)] == [("b", 1), ("a", 1)]
    assert headers["x-first-death-queue"] == "a"


def test_the_same_queue_and_reason_counts_up() -> None:
    headers = die(die(die(None, "a"), "b"), "a")
    deaths = headers["x-death"]
    assert isinstance(deaths, list)
    assert [(d["queue"], d["count"]) for d in deaths if isinstance(d, dict)] == [("a", 2), ("b", 1)]


def test_the_same_queue_with_another_reason_is_another_entry() -> None:
    headers = die(die(None, "a", "expired"), "a", "rejected")
    deaths = headers["x-death"]
    assert isinstance(deaths, list)
    assert [(d["reason"], d["count"]) for d in deaths if isinstance(d, dict)] == [
        ("rejected", 1),
        ("expired", 1),
    ]


def test_an_x_death_that_is_not_a_list_is_replaced() -> None:
    headers = die({"x-death": "garbage"}, "q")
    assert headers == {"x-death": [death("q", "rejected")]}  # no first-death headers


def test_3_13_writes_the_last_death() -> None:
    headers = dead_letter_headers(
        die(None, "a"),
        Death(
            reason="expired",
            queue="b",
            exchange="x",
            routing_keys=["k"],
            time=T,
            original_expiration="5",
        ),
        write_last_death=True,
    )
    assert (
        headers["x-last-death-queue"],
        headers["x-last-death-reason"],
        headers["x-last-death-exchange"],
    ) == ("b", "expired", "x")
    assert headers["x-first-death-queue"] == "a"


def test_death_time_is_whole_seconds_utc() -> None:
    assert death_time(1_700_000_000.987) == datetime(2023, 11, 14, 22, 13, 20, tzinfo=UTC)


@pytest.mark.parametrize(
    ("queue", "deaths", "cycle"),
    [
        ("a", [death("b", "expired"), death("a", "expired")], True),
        ("a", [death("b", "rejected"), death("a", "expired")], False),
        ("a", [death("b", "expired"), death("a", "rejected")], False),
        ("c", [death("b", "expired"), death("a", "expired")], False),
        ("b", [death("b", "maxlen"), death("a", "rejected")], True),
    ],
)
def test_cycles(queue: str, deaths: list[FieldValue], cycle: bool) -> None:
    assert is_cycle(queue, deaths) is cycle


@pytest.mark.parametrize(
    ("text", "expected"),
    [(None, None), ("0", 0), ("30000", 30000), ("+5", 5)],
)
def test_expiration(text: str | None, expected: int | None) -> None:
    assert parse_expiration(text) == expected


@pytest.mark.parametrize(
    ("text", "reason"), [("abc", "no_integer"), ("", "no_integer"), ("-5", "{value_negative,-5}")]
)
def test_bad_expiration(text: str, reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        parse_expiration(text)


@pytest.mark.parametrize(
    ("headers", "delay_ms"),
    [
        (None, None),
        ({}, None),
        ({"x-delay": 5000}, 5000),
        ({"x-delay": "250"}, 250),
        ({"x-delay": 1.9}, 1),
        ({"x-delay": 0}, None),
        ({"x-delay": -5000}, None),  # what the plugin writes on the way out
        ({"x-delay": 2**32}, None),
        ({"x-delay": True}, None),
        ({"x-delay": "soon"}, None),
    ],
)
def test_delay(headers: FieldTable | None, delay_ms: int | None) -> None:
    assert parse_delay_ms(headers) == delay_ms


def test_headers_reach_the_server_as_the_client_wrote_them_and_are_copied() -> None:
    original: FieldTable = {"b": {"z": 1, "a": [{"y": 1, "x": 2}]}, "a": bytearray(b"\x00")}  # type: ignore[dict-item]
    received = client_table(original)
    assert list(received) == ["b", "a"]  # rr's codec keeps the order (field_codec.py)
    inner = received["b"]
    assert isinstance(inner, dict)
    assert list(inner) == ["z", "a"]
    assert received["a"] == b"\x00"
    assert [(name, field.tag) for name, field in raw_fields(received.encoded)] == [
        ("b", "F"),
        ("a", "x"),
    ]
    copied = copy_headers(received)
    assert copied == received
    assert copied is not received
    assert copied["b"] is not received["b"]


def _tags(table: FieldTable) -> list[tuple[str, str]]:
    assert hasattr(table, "encoded")
    return [(name, field.tag) for name, field in raw_fields(table.encoded)]


def test_the_server_writes_a_table_again_as_rabbitmq_does() -> None:
    unsigned = b"L" + (5).to_bytes(8, "big")
    nested = b"F" + (17).to_bytes(4, "big") + b"\x02zz" + unsigned + b"\x02aa" + b"t\x01"
    table = decode_fields(b"\x02zz" + unsigned + b"\x01m" + nested + b"\x02aa" + b"I" + bytes(4))
    assert _tags(server_table(table, sort=False)) == [("zz", "l"), ("m", "F"), ("aa", "I")]
    again = server_table(table, sort=True)
    assert _tags(again) == [("aa", "I"), ("m", "F"), ("zz", "l")]
    inner = again["m"]
    assert isinstance(inner, dict)
    assert list(inner) == ["zz", "aa"]  # nested tables keep their order
    assert _tags(decode_fields(raw_fields(again.encoded)[1][1].content)) == [
        ("zz", "l"),
        ("aa", "t"),
    ]
    counted = server_table(like(table, {**table, "x-delivery-count": 3}), sort=True)
    assert _tags(counted) == [  # the server's long, sorted in; the client's bytes kept
        ("aa", "I"),
        ("m", "F"),
        ("x-delivery-count", "l"),
        ("zz", "l"),
    ]


def test_timestamps_are_whole_utc_seconds() -> None:
    paris = timezone(timedelta(hours=1))
    assert timestamp(datetime(2024, 1, 1, 13, 0, 0, 999_999, tzinfo=paris)) == datetime(
        2024, 1, 1, 12, 0, 0, tzinfo=UTC
    )
    assert timestamp(datetime(2024, 1, 1, 12, 0, 0, 5)) == datetime(2024, 1, 1, 12, tzinfo=UTC)


@pytest.mark.parametrize(
    ("value", "name"),
    [
        (4, "byte"),
        (1000, "short"),
        (100_000, "signedint"),
        (2**40, "long"),
        (True, "bool"),
        ("x", "longstr"),
        (1.5, "double"),  # rr encodes a float as a 64-bit double (transport/codec.py)
        (None, "void"),
    ],
)
def test_type_names_follow_the_client_encoding(value: FieldValue, name: str) -> None:
    assert amqp_type_name(value) == name
