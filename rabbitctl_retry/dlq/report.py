"""What a transfer (``rr dlq replay``, ``rr dlq move``) found: one result per message
read, the run's report, and the counts its table groups; and its words, shared by the CLI and
the console: the summary lines, the JSON document, each outcome's word. The CLI picks the exit
code (``cli/dlq/report.py``)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from rabbitctl_retry.dlq.results import TransferOutcome, TransferResult, TransferResults
from rabbitctl_retry.json_text import StreamedArray


class TransferKind(StrEnum):
    """Which command moved the messages: the word its reports use for one sent."""

    REPLAY = "replay"
    MOVE = "move"
    PURGE = "purge"
    """``rr dlq purge --where``: the matching messages acked, nowhere copied."""

    @property
    def past(self) -> str:
        return {"replay": "replayed", "move": "moved", "purge": "purged"}[self.value]


@dataclass(frozen=True, slots=True, kw_only=True)
class TransferReport:
    """One source queue's replay or move."""

    source: str
    dry_run: bool
    kind: TransferKind = TransferKind.REPLAY
    results: TransferResults = field(default_factory=TransferResults)
    """One per message read, in the order read (kept in bounded memory: dlq/results.py)."""
    in_queue: int = 0
    """Messages ready in the source when the run started."""
    examined: int = 0
    """Dead letters the run read (replayed, skipped or failed)."""
    stopped: str | None = None
    """Why the run stopped before the end of the queue (the loop guard, --limit), if it did."""
    interrupted: str | None = None
    """The error that cut the run short (a dropped connection, refused access), if one did."""
    refused: bool = False
    """The error was the broker refusing access (403 ACCESS_REFUSED, e.g. on the copies'
    publish): the run stopped there, exit 77 (docs/how-to/after-an-outage.md, "When the broker
    refuses")."""
    possible_duplicates: int = 0
    """Dead letters whose copy may have reached its target while the dead letter itself
    stayed (a copy in flight, or an ack the broker had not confirmed, when the connection
    dropped): a rerun replays them again."""
    elapsed_s: float = 0.0

    def count(self, outcome: TransferOutcome) -> int:
        return self.results.count(outcome)

    @property
    def sent(self) -> int:
        """Sent to their target and removed from the source."""
        return self.count(TransferOutcome.SENT)

    @property
    def skipped(self) -> int:
        return self.count(TransferOutcome.SKIPPED)

    @property
    def failed(self) -> int:
        return self.count(TransferOutcome.FAILED)


def limit_reached(limit: int) -> str:
    """Why a run stopped at ``--limit``: it counts every dead letter attempted."""
    return f"--limit {limit:,} reached ({limit:,} attempted: failed ones count, skipped ones not)"


def group_counts(
    pairs: Iterable[tuple[str | None, str | None]],
) -> list[tuple[str | None, str | None, int]]:
    """(origin, reason) pairs -> (origin, reason, count), most frequent first."""
    counted = Counter(pairs)
    return [
        (origin, reason, count)
        for (origin, reason), count in sorted(
            counted.items(), key=lambda item: (-item[1], item[0][0] or "", item[0][1] or "")
        )
    ]


def groups_text(groups: Iterable[tuple[str | None, str | None, int]]) -> str:
    """``refunds/max_attempts 120, payouts/delivery_limit 80``."""
    return ", ".join(
        f"{origin or '(unknown origin)'}/{reason or '(unknown reason)'} {count:,}"
        for origin, reason, count in groups
    )


def target_counts(
    results: Iterable[TransferResult],
) -> list[tuple[str | None, str, str | None, int]]:
    """(to, outcome, reason, count) for a replay's table, most frequent first."""
    counted = Counter((result.to, result.outcome.value, result.reason) for result in results)
    return [
        (to, outcome, reason, count)
        for (to, outcome, reason), count in sorted(
            counted.items(),
            key=lambda item: (-item[1], item[0][0] or "", item[0][1], item[0][2] or ""),
        )
    ]


__all__ = [
    "TransferKind",
    "TransferOutcome",
    "TransferReport",
    "TransferResult",
    "TransferResults",
    "group_counts",
    "groups_text",
    "limit_reached",
    "target_counts",
]


def outcome_text(kind: TransferKind, outcome: TransferOutcome) -> str:
    """``replayed`` / ``moved`` for a message sent, else the outcome's own word."""
    return kind.past if outcome is TransferOutcome.SENT else outcome.value


def transfer_document(report: TransferReport) -> dict[str, Any]:
    """``rr dlq replay|move --output json`` for one source (docs/reference/dlq.md); its results are
    written one by one, never held as one list (dlq/results.py)."""
    return {
        "source": report.source,
        "dry_run": report.dry_run,
        report.kind.past: report.sent,
        "skipped": report.skipped,
        "failed": report.failed,
        "results": StreamedArray(
            lambda: (result_document(report.kind, result) for result in report.results),
            len(report.results),
        ),
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
    """The last lines a replay, move or purge --where prints: what moved, what stayed, and
    why it stopped."""
    replay = report.kind is TransferKind.REPLAY
    purge = report.kind is TransferKind.PURGE
    item = "dead letter" if replay else "message"
    place = "the dead-letter queue" if replay else "the queue" if purge else "the source queue"
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
        elif purge:
            lines.append(
                f"up to {plural(report.possible_duplicates, 'message')} purged may still be in "
                f"{place} (ack not confirmed); rerun the command to purge the rest"
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
