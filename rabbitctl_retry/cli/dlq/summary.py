"""Rendering for ``rr dlq inspect --summary``: the counts as tables or one JSON document
(docs/reference/dlq.md, "Big queues")."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text

from rabbitctl_retry.cli.render import cell, count_cell
from rabbitctl_retry.dlq.report import plural
from rabbitctl_retry.dlq.summary import Landmark, Summary
from rabbitctl_retry.retry.headers import utc_stamp


def summary_document(
    queue: str, summary: Summary, *, in_queue: int, complete: bool
) -> dict[str, Any]:
    """``rr dlq inspect --summary --output json``."""
    return {
        "queue": queue,
        "in_queue": in_queue,
        "read": summary.count,
        "complete": complete,
        "origins": [{"queue": name, "count": n} for name, n in summary.origins.most_common()],
        "reasons": [{"reason": reason, "count": n} for reason, n in summary.reasons.most_common()],
        "retry_counts": [{"retry_count": value, "count": n} for value, n in summary.retry_rows()],
        "ages": [{"age": name, "count": n} for name, n in summary.age_rows()],
        "oldest": _landmark_document(summary.oldest),
        "newest": _landmark_document(summary.newest),
        "undecodable": summary.undecodable,
        "body_bytes": summary.body_bytes,
    }


def _landmark_document(mark: Landmark | None) -> dict[str, Any] | None:
    if mark is None:
        return None
    return {
        "failed_at": mark.failed_at.isoformat(),
        "message_id": mark.message_id,
        "position": mark.position,
    }


def summary_head(queue: str, summary: Summary, in_queue: int) -> str:
    """``20,000 dead letters read of 20,000 in 'refunds.dead'``."""
    return f"{plural(summary.count, 'dead letter')} read of {in_queue:,} in {queue!r}"


def summary_view(summary: Summary) -> Group:
    """One small table per count (origin, reason, retry count, age), then the extremes."""
    total = summary.count
    parts: list[Any] = []
    for table in (
        _counts("origin queue", _named(summary.origins.most_common()), total),
        _counts("reason", _named(summary.reasons.most_common()), total),
        _counts("retries", _named(summary.retry_rows(), missing="(no header)"), total),
        _counts("dead-lettered", summary.age_rows(), total),
    ):
        parts.extend((Text(""), table))
    parts.append(Text(""))
    extremes = [
        f"{label}: {utc_stamp(mark.failed_at)} (#{mark.position}, {mark.message_id or '(no id)'})"
        for label, mark in (("oldest", summary.oldest), ("newest", summary.newest))
        if mark is not None
    ]
    if summary.undecodable:
        extremes.append(
            f"undecodable: {summary.undecodable:,} (replay --undecodable moves them aside)"
        )
    extremes.append(f"bodies: {summary.body_bytes:,} bytes")
    parts.extend(cell(line) for line in extremes)
    return Group(*parts)


def _named(rows: Sequence[tuple[object, int]], missing: str = "(unknown)") -> list[tuple[str, int]]:
    return [(missing if value is None else str(value), n) for value, n in rows]


def _counts(title: str, rows: Sequence[tuple[str, int]], total: int) -> Table:
    table = Table(show_edge=False, pad_edge=False, header_style="bold")
    table.add_column(title, overflow="fold")
    table.add_column("count", justify="right", no_wrap=True)
    table.add_column("share", justify="right", no_wrap=True)
    for name, n in rows:
        share = f"{100 * n / total:.1f}%" if total else "-"
        table.add_row(cell(name), count_cell(n), share)
    return table
