"""Pure: dlq/edit.py, what ``rr dlq edit`` may change and the copy it makes (docs/dlq.md,
"Edit and retry")."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from rabbitctl_retry.dlq.choice import Fail, Send
from rabbitctl_retry.dlq.edit import (
    MAX_DIFF_LINES,
    EditRequest,
    body_problem,
    compact_like,
    diff_lines,
    edit_choice,
    editable_text,
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


def test_the_editor_sees_pretty_json_and_one_line_json_stays_one_line() -> None:
    body = b'{"id": 7, "card": "4111"}'
    text = editable_text(body, "application/json")
    assert text == '{\n  "id": 7,\n  "card": "4111"\n}\n'
    assert compact_like(body, text.replace("4111", "4242")) == b'{"id": 7, "card": "4242"}'
    compact = b'{"id":7}'
    assert compact_like(compact, '{\n  "id": 8\n}\n') == b'{"id":8}'
    pretty = b'{\n  "id": 7\n}\n'
    assert compact_like(pretty, '{\n  "id": 8\n}\n') == b'{\n  "id": 8\n}\n'
    assert editable_text(b"\xff", None) is None
    assert compact_like(b"plain", "plain text\n") == b"plain text\n"


def test_the_diff_shows_what_changed() -> None:
    lines = diff_lines(b'{"id": 7, "card": "4111"}', b'{"id": 7, "card": "4242"}')
    assert '-  "card": "4111"' in lines
    assert '+  "card": "4242"' in lines
    binary = diff_lines(b"\xff", b"\xfe\xfe")
    assert binary[0].startswith("- 1 bytes, sha256 ")
    long = diff_lines(b"\n".join(b"%d" % n for n in range(1000)), b"x")
    assert len(long) == MAX_DIFF_LINES + 1
    assert long[-1].endswith("more lines)")
    assert json.dumps(lines)  # plain strings
