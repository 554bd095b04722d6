"""Bodies and x-death as text; summaries, the replay JSON document, and its exit code."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime

import pytest

from rabbitctl_retry.cli.dlq.report import inspect_summary, transfer_exit_code
from rabbitctl_retry.dlq.report import (
    TransferKind,
    TransferOutcome,
    TransferReport,
    TransferResult,
    TransferResults,
    group_counts,
    target_counts,
    transfer_document,
    transfer_summary,
)
from rabbitctl_retry.dlq.view import body_text, death_line, encode_body, error_lines, show_body
from rabbitctl_retry.errors import ExitCode
from rabbitctl_retry.retry.headers import Death

R, S, F = TransferOutcome.SENT, TransferOutcome.SKIPPED, TransferOutcome.FAILED


@pytest.mark.parametrize(
    ("body", "text"),
    [
        (b"hello", "hello"),
        (b"line\nbreak\ttab\r", "line\nbreak\ttab\r"),
        ("żółw".encode(), "żółw"),
        (b"", ""),
        (b"\xff\xfe", None),
        (b"nul\x00", None),
        (b"esc\x1b[31m", None),
        (b"del\x7f", None),
    ],
)
def test_text_or_binary(body: bytes, text: str | None) -> None:
    assert body_text(body) == text
    encoded, encoding = encode_body(body)
    if text is None:
        assert encoding == "base64"
        assert base64.b64decode(encoded) == body
    else:
        assert (encoded, encoding) == (text, "utf-8")


def test_json_is_pretty_printed() -> None:
    view = show_body(b'{"id":1,"card":"4111"}')
    assert view.kind == "json"
    assert view.display() == '{\n  "id": 1,\n  "card": "4111"\n}'


def test_long_text_is_cut_with_a_marker_counting_the_bytes_left() -> None:
    body = ("ą" * 3000).encode()  # 2 bytes per character
    view = show_body(body, limit=2000)
    assert view.kind == "text"
    assert view.text == "ą" * 2000
    assert view.hidden == 2000
    assert view.display().endswith("… (2,000 more bytes)")


def test_long_json_falls_back_to_raw_text_so_the_count_is_exact() -> None:
    body = json.dumps({"items": list(range(2000))}).encode()
    view = show_body(body, limit=100)
    assert view.kind == "text"
    assert view.text == body.decode()[:100]
    assert view.hidden == len(body) - 100


def test_binary_is_base64_and_cut_on_a_whole_group() -> None:
    body = bytes(range(256)) * 10
    view = show_body(body, limit=102)
    assert view.kind == "binary"
    assert len(view.text) == 100
    assert base64.b64decode(view.text) == body[:75]
    assert view.hidden == len(body) - 75
    assert view.display().startswith("base64: ")
    assert show_body(b"").display() == "(empty body)"
    assert show_body(b"\x00\x01").display() == "base64: AAE="


def test_death_line_and_error_lines() -> None:
    death = Death(
        queue="payouts",
        reason="delivery_limit",
        count=3,
        exchange="",
        routing_keys=("payouts",),
        time=datetime(2024, 5, 1, 10, 0, tzinfo=UTC),
    )
    assert death_line(death) == "payouts  delivery_limit  x3  2024-05-01T10:00:00Z"
    headers = {
        "rr-error-message": "declined",
        "rr-error-type": "ValueError",
        "rr-error-extra": b"raw",
        "other": "x",
    }
    assert error_lines(headers) == [
        "rr-error-type: ValueError",
        "rr-error-message: declined",
        "rr-error-extra: raw",
    ]
    assert error_lines(None) == []


def report(*outcomes: TransferOutcome, **changes: object) -> TransferReport:
    values: dict[str, object] = {
        "source": "refunds.dead",
        "dry_run": False,
        "results": TransferResults(
            TransferResult(f"m{i}", "refunds", outcome, None if outcome is R else "why")
            for i, outcome in enumerate(outcomes)
        ),
        "in_queue": len(outcomes),
        "examined": len(outcomes),
    }
    values.update(changes)
    return TransferReport(**values)


@pytest.mark.parametrize(
    ("outcomes", "code"),
    [
        ((), ExitCode.OK),
        ((R, R), ExitCode.OK),
        ((R, S), ExitCode.OK),
        ((S, S), ExitCode.OK),
        ((R, F), ExitCode.PARTIAL),
        ((F, F), ExitCode.FAILURE),
        ((S, F), ExitCode.FAILURE),
    ],
)
def test_exit_code(outcomes: tuple[TransferOutcome, ...], code: ExitCode) -> None:
    assert transfer_exit_code([report(*outcomes)]) is code


def test_exit_code_over_several_sources() -> None:
    assert transfer_exit_code([report(F), report(R)]) is ExitCode.PARTIAL


def test_replay_document_is_spec_6() -> None:
    document = transfer_document(report(R, S, F))
    assert document == {
        "source": "refunds.dead",
        "dry_run": False,
        "replayed": 1,
        "skipped": 1,
        "failed": 1,
        "results": [
            {"message_id": "m0", "to": "refunds", "outcome": "replayed", "reason": None},
            {"message_id": "m1", "to": "refunds", "outcome": "skipped", "reason": "why"},
            {"message_id": "m2", "to": "refunds", "outcome": "failed", "reason": "why"},
        ],
    }


def test_summaries_tell_what_happened() -> None:
    text = transfer_summary(report(R, F))
    assert "replayed 1 of 2 dead letters" in text
    assert "failed dead letters are still in the dead-letter queue" in text
    assert "dry run: nothing was moved" in transfer_summary(report(R, dry_run=True))
    cut = transfer_summary(
        report(R, interrupted="connection closed", possible_duplicates=3, stopped=None)
    )
    assert "interrupted: connection closed" in cut
    assert "up to 3 messages may now be both" in cut
    assert "stopped early: loop" in transfer_summary(report(R, stopped="loop"))


def test_groups_by_origin_and_reason() -> None:
    pairs = [("a", "x"), ("b", "y"), ("a", "x"), (None, None)]
    groups = group_counts(pairs)
    assert groups == [("a", "x", 2), (None, None, 1), ("b", "y", 1)]
    line = inspect_summary("dead", 4, 10, groups)
    assert line == (
        "4 dead letters shown of 10 in 'dead': a/x 2, (unknown origin)/(unknown reason) 1, b/y 1"
    )


def test_target_counts_keep_each_reason_apart() -> None:
    results = [
        TransferResult("a", "refunds", R),
        TransferResult("b", "refunds", R),
        TransferResult("c", "refunds", R, "possible duplicate"),
        TransferResult("d", None, S, "does not match --where"),
    ]
    assert target_counts(results) == [
        ("refunds", "sent", None, 2),
        (None, "skipped", "does not match --where", 1),
        ("refunds", "sent", "possible duplicate", 1),
    ]


def test_a_move_reports_in_its_own_words() -> None:
    moved = report(R, S, F, kind=TransferKind.MOVE)
    document = transfer_document(moved)
    assert (document["moved"], document["skipped"], document["failed"]) == (1, 1, 1)
    assert "replayed" not in document
    assert [result["outcome"] for result in document["results"]] == ["moved", "skipped", "failed"]
    text = transfer_summary(moved)
    assert "moved 1 of 3 messages read from 'refunds.dead'" in text
    assert "failed messages are still in the source queue" in text
    assert "would move 1 of" in transfer_summary(report(R, kind=TransferKind.MOVE, dry_run=True))
