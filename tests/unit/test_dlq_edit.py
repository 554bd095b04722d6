"""Pure: dlq/edit.py, what ``rr dlq edit`` may change and the copy it makes (docs/reference/dlq.md,
"Edit and retry")."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from rabbitctl_retry.dlq.choice import Fail, Send
from rabbitctl_retry.dlq.edit import (
    MAX_DIFF_LINES,
    NO_FINAL_NEWLINE,
    EditRequest,
    body_problem,
    box_body,
    box_problem,
    box_text_problem,
    diff_lines,
    edit_choice,
    header_problem,
    json_problem,
    parse_assignment,
    sha256_hex,
)

H = "x-ruststream-retry-count"
NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    "name",
    [
        H,
        "x-death",
        "x-first-death-queue",
        "x-delivery-count",
        "rr-error-type",
        "rr-handler",
        "rr-replayed-count",
        "rr-edited-at",
        "rr-original-body-sha256",
        "CC",
        "BCC",
        "",
        "a" * 256,
    ],
)
def test_headers_rr_or_the_broker_writes_cannot_be_edited(name: str) -> None:
    assert header_problem(name, H) is not None


def test_application_headers_can_be_edited() -> None:
    assert header_problem("x-tenant", H) is None
    assert parse_assignment("x-tenant=a=b", H) == ("x-tenant", "a=b")
    with pytest.raises(ValueError, match="NAME=VALUE"):
        parse_assignment("x-tenant", H)
    with pytest.raises(ValueError, match="written by rr or the broker"):
        parse_assignment(f"{H}=0", H)


def test_the_copy_is_the_replays_with_the_edit_marked() -> None:
    request = EditRequest(
        body=b'{"a": 2}',
        set_headers=(("x-tenant", "globex"),),
        remove_headers=("x-old",),
        original_sha256=sha256_hex(b'{"a": 1}'),
    )
    replayed = Send(to="refunds", headers={"x-old": 1, "x-keep": "k", "rr-replayed-count": 1})
    choice = edit_choice(replayed, request, NOW)
    assert isinstance(choice, Send)
    assert choice.to == "refunds"
    assert choice.body == b'{"a": 2}'
    assert choice.headers == {
        "x-keep": "k",
        "rr-replayed-count": 1,
        "x-tenant": "globex",
        "rr-edited-at": "2026-12-03T12:00:00.000Z",
        "rr-original-body-sha256": sha256_hex(b'{"a": 1}'),
    }
    failing = Fail("no origin: pass --to")
    assert edit_choice(failing, request, NOW) is failing


@pytest.mark.parametrize(
    ("content_type", "before", "after", "refused"),
    [
        ("application/json", b'{"a": 1}', b'{"a": 2}', False),
        ("application/json", b'{"a": 1}', b'{"a": ', True),
        ("application/vnd.acme+json; charset=utf-8", b"[]", b"nope", True),
        (None, b'{"a": 1}', b"not json", True),  # it was JSON without saying so
        (None, b"  [1, 2]", b"[1, 2", True),
        (None, b"42", b"42 apples", False),  # text that happened to be a JSON number
        ("text/plain", b"hello", b"hello again", False),
        ("text/plain", b"hello", b"\xff\xfe", True),
        ("application/octet-stream", b"\x00\xff", b"\x01", False),
        # RFC 8259: no NaN or Infinity; numbers as written are JSON whatever their size
        ("application/json", b'{"a": 1}', b'{"a": NaN}', True),
        ("application/json", b'{"a": 1}', b'{"a": Infinity}', True),
        ("application/json", b'{"a": 1}', b'{"a": -Infinity}', True),
        (None, b'{"a": 1}', b'{"a": NaN}', True),
        ("application/json", b'{"a": 1}', b'{"a": 1e400, "b": 1.00000000000000001}', False),
        ("application/json", b'{"a": 1}', b'{"a": 1, "a": 2}', False),  # SHOULD, not MUST
        ("application/json", b'{"a": 1}', b'{"a": ' + b"9" * 5000 + b"}", False),
    ],
)
def test_a_body_must_still_parse_as_its_content_type(
    content_type: str | None, before: bytes, after: bytes, refused: bool
) -> None:
    assert (body_problem(content_type, before, after) is not None) == refused


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        (b"{}", None),
        (b'\n {"a": [1, -0, 2.5e-3, true, null, "\\u00e9"]}\r\n', None),
        (b'"a string"', None),
        (b"NaN", "NaN is not a JSON number"),
        (b"[1, Infinity]", "Infinity is not a JSON number"),
        (b'{"a": 1,}', "Expecting property name enclosed in double quotes at line 1 column 9"),
        (b"[01]", "Expecting ',' delimiter at line 1 column 3"),
        (b'"\x01"', "Invalid control character at line 1 column 2"),
        (b"\xef\xbb\xbf{}", "Unexpected UTF-8 BOM (decode using utf-8-sig) at line 1 column 1"),
        (b'"\xff"', "not UTF-8 (byte 1)"),
        ('"é"'.encode("utf-16"), "not UTF-8 (byte 0)"),
        (b"[" * 100_000 + b"]" * 100_000, "nested too deeply to be checked"),
    ],
)
def test_json_is_rfc_8259_json(body: bytes, problem: str | None) -> None:
    assert json_problem(body) == problem


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        (b"", None),
        (b'{"a": 1}', None),
        (b"\nfirst line break\n\ttab\n", None),
        (b"lines\r\nin CRLF\r\n", None),
        (b"emoji \xf0\x9f\x90\x87 and \xe2\x80\xae bidi", None),
        (b"\xff", "it is not UTF-8 text"),
        (b"a NUL \x00", "it holds the control character \\x00"),
        (b"ESC \x1b[31m", "it holds the control character \\x1b"),
        (b"form feed \x0c", "it holds the control character \\x0c"),
        (b"NEL \xc2\x85", "it holds the control character \\x85"),
        (b"a lone\rCR", "it holds a carriage return (CR) that does not end a line with LF"),
        (b"CR at the end\r", "it holds a carriage return (CR) that does not end a line with LF"),
        (b"mixed\r\nand\n", "its lines end in CRLF and in LF both"),
    ],
)
def test_what_the_edit_box_cannot_carry(body: bytes, problem: str | None) -> None:
    assert box_problem(body) == problem


@pytest.mark.parametrize(
    ("before", "sent", "after"),
    [
        # a browser sends each line break of a box as CRLF: written as the original's
        (b"a\nb\n", "a\r\nB\r\n", b"a\nB\n"),
        (b"a\r\nb\r\n", "a\r\nB\r\n", b"a\r\nB\r\n"),
        (b"one line", "one\r\nline", b"one\nline"),
        (b"\n\nfirst", "\r\n\r\nfirst!", b"\n\nfirst!"),  # leading line breaks stay
        (b"a\n", "a\nb\rc", b"a\nb\nc"),  # a script's LF or CR: a line break all the same
        (b"no final newline", "no final newline!", b"no final newline!"),
        (b'{"a": 10.10}', '{"a": 10.10, "b": 1e400}', b'{"a": 10.10, "b": 1e400}'),
        (b"tab\there", "tab\there\t", b"tab\there\t"),
    ],
)
def test_the_box_text_is_the_body_byte_for_byte_but_its_line_breaks(
    before: bytes, sent: str, after: bytes
) -> None:
    assert box_problem(before) is None
    assert box_text_problem(sent) is None
    assert box_body(before, sent) == after


def test_a_control_character_pasted_into_the_box_is_refused() -> None:
    assert box_text_problem("pasted \x1b[31m") == (
        "the edited text holds the control character \\x1b"
    )
    assert box_text_problem("a NUL \x00") is not None
    assert box_text_problem("line\r\nbreaks\tand tabs") is None


def test_the_diff_compares_the_bodies_as_they_are() -> None:
    one_line = diff_lines(b'{"id": 7, "card": "4111"}', b'{"id": 7, "card": "4242"}')
    assert one_line[2:] == [
        "@@ -1 +1 @@",
        '-{"id": 7, "card": "4111"}',
        NO_FINAL_NEWLINE,
        '+{"id": 7, "card": "4242"}',
        NO_FINAL_NEWLINE,
    ]
    assert one_line[:2] == ["--- body before", "+++ body after"]
    # the numbers as written: 10.10 and 10.1 are two bodies
    assert diff_lines(b"[10.10]\n", b"[10.1]\n")[3:] == ["-[10.10]", "+[10.1]"]
    # a line break that became CRLF, and a final newline that went
    assert diff_lines(b"a\nb\n", b"a\r\nb\n")[3:] == ["-a", "+a\r", " b"]
    assert diff_lines(b"a\nb\n", b"a\nb")[3:] == [" a", "-b", "+b", NO_FINAL_NEWLINE]
    # a lone CR stays in its line
    assert diff_lines(b"a\rb\n", b"a\nb\n")[3:] == ["-a\rb", "+a", "+b"]
    assert diff_lines(b"same\n", b"same\n") == []
    binary = diff_lines(b"\xff", b"\xfe\xfe")
    assert binary[0].startswith("- 1 bytes, sha256 ")
    long = diff_lines(b"\n".join(b"%d" % n for n in range(1000)), b"x")
    assert len(long) == MAX_DIFF_LINES + 1
    assert long[-1].endswith("more lines)")
    assert json.dumps(one_line)  # plain strings
