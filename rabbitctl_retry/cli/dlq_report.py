"""What ``rr dlq replay`` and ``rr dlq move`` print, and the exit code they pick.

The exit code of a transfer (:func:`transfer_exit_code`, docs/dlq.md "Exit codes"): 0 when
no message failed (skipped ones do not count: a filter left them on purpose), 3 when some
were sent and some failed, 1 when some failed and none could be sent. A run cut short by a
dropped connection exits with that error's code instead (69), one the broker refused access
to (a user without write permission) with 77.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rabbitctl_retry.dlq.report import (
    TransferKind,
    TransferOutcome,
    TransferReport,
    TransferResult,
    groups_text,
)
from rabbitctl_retry.errors import ExitCode


def transfer_exit_code(reports: Iterable[TransferReport]) -> ExitCode:
    """0 nothing failed, 3 some failed and some were sent, 1 some failed and none were."""
    sent = failed = 0
    for report in reports:
        sent += report.sent
        failed += report.failed
    if failed == 0:
        return ExitCode.OK
    return ExitCode.PARTIAL if sent else ExitCode.FAILURE


def outcome_text(kind: TransferKind, outcome: TransferOutcome) -> str:
    """``replayed`` / ``moved`` for a message sent, else the outcome's own word."""
    return kind.past if outcome is TransferOutcome.SENT else outcome.value


def transfer_document(report: TransferReport) -> dict[str, Any]:
    """``rr dlq replay|move --output json`` for one source (docs/dlq.md)."""
    return {
        "source": report.source,
        "dry_run": report.dry_run,
        report.kind.past: report.sent,
        "skipped": report.skipped,
        "failed": report.failed,
        "results": [result_document(report.kind, result) for result in report.results],
    }


def result_document(kind: TransferKind, result: TransferResult) -> dict[str, Any]:
    return {
        "message_id": result.message_id,
        "to": result.to,
        "outcome": outcome_text(kind, result.outcome),
        "reason": result.reason,
    }


def plural(count: int, word: str) -> str:
    return f"{count:,} {word}" if count == 1 else f"{count:,} {word}s"


def transfer_summary(report: TransferReport) -> str:
    """The last lines a replay or move prints: what moved, what stayed, and why it stopped."""
    replay = report.kind is TransferKind.REPLAY
    item = "dead letter" if replay else "message"
    place = "the dead-letter queue" if replay else "the source queue"
    verb = f"would {report.kind.value}" if report.dry_run else report.kind.past
    head = (
        f"{verb} {report.sent:,} of {plural(report.examined, item)} read from "
        f"{report.source!r} ({report.in_queue:,} there at the start): "
        f"{report.skipped:,} skipped, {report.failed:,} failed"
    )
    if report.elapsed_s > 0 and report.sent and not report.dry_run:
        rate = report.sent / report.elapsed_s
        head += f", in {report.elapsed_s:.1f} s ({rate:,.0f}/s)"
    lines = [head]
    if report.dry_run:
        lines.append(f"dry run: nothing was moved; every {item} is still in the queue")
    if report.stopped:
        lines.append(f"stopped early: {report.stopped}")
    if report.interrupted:
        lines.append(f"{'refused' if report.refused else 'interrupted'}: {report.interrupted}")
        if report.refused and not report.possible_duplicates:
            lines.append(
                f"nothing is in two places; every {item} not {report.kind.past} is still in {place}"
            )
        else:
            lines.append(
                f"up to {plural(report.possible_duplicates, 'message')} may now be both in "
                f"{place} and in its target (copy sent, {item} not yet acked); nothing was "
                f"lost; rerun the command to {report.kind.value} the rest"
            )
    elif report.failed and not report.dry_run:
        lines.append(f"failed {item}s are still in {place}")
    return "\n".join(lines)


def inspect_summary(
    queue: str, shown: int, in_queue: int, groups: Iterable[tuple[str | None, str | None, int]]
) -> str:
    """The line under ``rr dlq inspect``'s table."""
    grouped = groups_text(groups)
    head = f"{plural(shown, 'dead letter')} shown of {in_queue:,} in {queue!r}"
    return f"{head}: {grouped}" if grouped else head
