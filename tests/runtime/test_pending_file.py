"""Saving the delayed copies a stop could not publish (runtime/pending.py): one file per
queue in the format of ``rr dlq export``, written whole, never over an earlier one, in the
temporary folder when the pending folder cannot be written; what can be written nowhere is
handed back as lost."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from rabbitctl_retry.dlq.jsonl import parse_record
from rabbitctl_retry.retry.policy import Copy, CopyPurpose
from rabbitctl_retry.runtime import pending
from rabbitctl_retry.runtime.delays import PendingCopy
from rabbitctl_retry.runtime.pending import file_name, save_pending, saved_files
from rabbitctl_retry.transport.base import Delivery, Properties

NOW = datetime(2026, 12, 1, 20, 46, 7, tzinfo=UTC)
H = "x-ruststream-retry-count"


def copy_to(queue: str, message_id: str, attempt: int = 1) -> PendingCopy:
    copy = Copy(
        exchange="",
        routing_key=queue,
        headers={H: str(attempt), "tenant": "t-1"},
        purpose=CopyPurpose.DELAY,
    )
    original = Delivery(
        body=message_id.encode(),
        properties=Properties(
            message_id=message_id,
            content_type="application/json",
            user_id="guest",
            expiration="60000",
            headers={H: str(attempt - 1), "x-death": [{"queue": "q", "count": 1}]},
        ),
        routing_key=queue,
    )
    return PendingCopy(copy, original, queue)


def test_the_file_name_says_queue_time_and_process() -> None:
    assert file_name("refunds", NOW, 4242) == "rr-pending-refunds-20261201T204607Z-4242.jsonl"
    assert file_name("a/b c", NOW, 1) == "rr-pending-a%2Fb%20c-20261201T204607Z-1.jsonl"


def test_copies_are_saved_one_file_per_queue_as_rr_dlq_import_reads_them(
    tmp_path: Path,
) -> None:
    copies = [copy_to("refunds", "r-1"), copy_to("payouts", "p-1", 2), copy_to("refunds", "r-2")]
    result = save_pending(copies, tmp_path, now=NOW, pid=7)
    assert result.lost == ()
    assert {(s.queue, s.path.name, s.count) for s in result.saved} == {
        ("refunds", "rr-pending-refunds-20261201T204607Z-7.jsonl", 2),
        ("payouts", "rr-pending-payouts-20261201T204607Z-7.jsonl", 1),
    }
    lines = (tmp_path / "rr-pending-refunds-20261201T204607Z-7.jsonl").read_text().splitlines()
    records = [parse_record(line, f"line {n}") for n, line in enumerate(lines, 1)]
    assert [r.body for r in records] == [b"r-1", b"r-2"]
    first = records[0]
    assert (first.exchange, first.routing_key) == ("", "refunds")
    # the copy's properties, as rr would have published it: its retry header, persistent,
    # without the original's expiration, user_id and broker headers
    assert first.headers == {H: "1", "tenant": "t-1"}
    assert first.properties["message_id"] == "r-1"
    assert first.properties["delivery_mode"] == 2
    assert "expiration" not in first.properties
    assert "user_id" not in first.properties
    assert saved_files(tmp_path) == sorted(s.path for s in result.saved)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no partial file


def test_a_file_of_an_earlier_stop_is_never_replaced(tmp_path: Path) -> None:
    first = save_pending([copy_to("work", "a")], tmp_path, now=NOW, pid=7)
    second = save_pending([copy_to("work", "b")], tmp_path, now=NOW, pid=7)
    paths = [first.saved[0].path, second.saved[0].path]
    assert [p.name for p in paths] == [
        "rr-pending-work-20261201T204607Z-7.jsonl",
        "rr-pending-work-20261201T204607Z-7-2.jsonl",
    ]
    assert [parse_record(p.read_text(), "x").body for p in paths] == [b"a", b"b"]


def test_a_folder_that_is_no_folder_falls_back_and_nowhere_means_lost(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A path that is a file cannot take files (whoever runs it, root too)."""
    not_a_folder = tmp_path / "file"
    not_a_folder.write_text("")
    spare = tmp_path / "spare"
    spare.mkdir()
    monkeypatch.setattr(pending.tempfile, "gettempdir", lambda: str(spare))
    result = save_pending([copy_to("work", "a")], not_a_folder, now=NOW, pid=7)
    assert [s.path.parent for s in result.saved] == [spare]
    monkeypatch.setattr(pending.tempfile, "gettempdir", lambda: str(not_a_folder))
    copies = [copy_to("work", "b"), copy_to("other", "c")]
    result = save_pending(copies, not_a_folder, now=NOW, pid=7)
    assert result.saved == ()
    assert [p.message_id for p in result.lost] == ["b", "c"]
    assert result.error is not None
    assert str(not_a_folder) in result.error


def test_one_copy_that_cannot_be_written_costs_only_itself(tmp_path: Path) -> None:
    broken = copy_to("work", "broken")
    broken.copy = Copy(
        exchange="",
        routing_key="work",
        headers={"bad": object()},  # type: ignore[dict-item]
        purpose=CopyPurpose.DELAY,
    )
    result = save_pending([copy_to("work", "a"), broken], tmp_path, now=NOW, pid=7)
    assert [p.message_id for p in result.lost] == ["broken"]
    assert [s.count for s in result.saved] == [1]
