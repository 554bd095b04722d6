"""Pure. What ``rr dlq`` reports: summaries, replay results, the replay's exit code.

A replay's exit code (:func:`replay_exit_code`): 0 when no dead letter failed (skipped ones
do not count: a filter left them on purpose), 3 when some were replayed and some failed, 1
when some failed and none could be replayed. A run cut short by a dropped connection exits
with that error's code instead (69), one the broker refused access to (a user without write
permission) with 77; the shell decides that, since only it holds the error.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from rabbitctl_retry.errors import ExitCode


class ReplayOutcome(StrEnum):
    REPLAYED = "replayed"
    SKIPPED = "skipped"
    FAILED = "failed"


@dataclass(frozen=True, slots=True)
class ReplayResult:
    """What happened to one dead letter (one entry of the JSON ``results``, docs/dlq.md)."""

    message_id: str | None
    to: str | None
    outcome: ReplayOutcome
    reason: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplayReport:
    """One source queue's replay."""

    source: str
    dry_run: bool
    results: tuple[ReplayResult, ...] = ()
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
    publish): the run stopped there, exit 77 (docs/dlq.md, "When the broker refuses")."""
    possible_duplicates: int = 0
    """Dead letters whose copy may have reached its target while the dead letter itself
    stayed (a copy in flight, or an ack the broker had not confirmed, when the connection
    dropped): a rerun replays them again."""
    elapsed_s: float = 0.0

    def count(self, outcome: ReplayOutcome) -> int:
        return sum(1 for result in self.results if result.outcome is outcome)

    @property
    def replayed(self) -> int:
        return self.count(ReplayOutcome.REPLAYED)

    @property
    def skipped(self) -> int:
        return self.count(ReplayOutcome.SKIPPED)

    @property
    def failed(self) -> int:
        return self.count(ReplayOutcome.FAILED)


def replay_exit_code(reports: Iterable[ReplayReport]) -> ExitCode:
    """0 nothing failed, 3 some failed and some were replayed, 1 some failed and none were."""
    replayed = failed = 0
    for report in reports:
        replayed += report.replayed
        failed += report.failed
    if failed == 0:
        return ExitCode.OK
    return ExitCode.PARTIAL if replayed else ExitCode.FAILURE


def replay_document(report: ReplayReport) -> dict[str, Any]:
    """``rr dlq replay --output json`` for one source (docs/dlq.md)."""
    return {
        "source": report.source,
        "dry_run": report.dry_run,
        "replayed": report.replayed,
        "skipped": report.skipped,
        "failed": report.failed,
        "results": [
            {
                "message_id": result.message_id,
                "to": result.to,
                "outcome": result.outcome.value,
                "reason": result.reason,
            }
            for result in report.results
        ],
    }


def limit_reached(limit: int) -> str:
    """Why a run stopped at ``--limit``: it counts every dead letter attempted."""
    return f"--limit {limit:,} reached ({limit:,} attempted: failed ones count, skipped ones not)"


def _plural(count: int, word: str) -> str:
    return f"{count:,} {word}" if count == 1 else f"{count:,} {word}s"


def replay_summary(report: ReplayReport) -> str:
    """The last lines a replay prints: what moved, what stayed, and why it stopped."""
    verb = "would replay" if report.dry_run else "replayed"
    head = (
        f"{verb} {report.replayed:,} of {_plural(report.examined, 'dead letter')} read from "
        f"{report.source!r} ({report.in_queue:,} there at the start): "
        f"{report.skipped:,} skipped, {report.failed:,} failed"
    )
    if report.elapsed_s > 0 and report.replayed and not report.dry_run:
        rate = report.replayed / report.elapsed_s
        head += f", in {report.elapsed_s:.1f} s ({rate:,.0f}/s)"
    lines = [head]
    if report.dry_run:
        lines.append("dry run: nothing was moved; every dead letter is still in the queue")
    if report.stopped:
        lines.append(f"stopped early: {report.stopped}")
    if report.interrupted:
        lines.append(f"{'refused' if report.refused else 'interrupted'}: {report.interrupted}")
        if report.refused and not report.possible_duplicates:
            lines.append(
                "nothing is in two places; every dead letter not replayed is still in the "
                "dead-letter queue"
            )
        else:
            lines.append(
                f"up to {_plural(report.possible_duplicates, 'message')} may now be both in "
                "the dead-letter queue and in its target (copy sent, dead letter not yet "
                "acked); nothing was lost; rerun the command to replay the rest"
            )
    elif report.failed and not report.dry_run:
        lines.append("failed dead letters are still in the dead-letter queue")
    return "\n".join(lines)


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


def inspect_summary(
    queue: str, shown: int, in_queue: int, groups: Iterable[tuple[str | None, str | None, int]]
) -> str:
    """The line under ``rr dlq inspect``'s table."""
    grouped = groups_text(groups)
    head = f"{_plural(shown, 'dead letter')} shown of {in_queue:,} in {queue!r}"
    return f"{head}: {grouped}" if grouped else head


def target_counts(results: Iterable[ReplayResult]) -> list[tuple[str | None, str, str | None, int]]:
    """(to, outcome, reason, count) for a replay's table, most frequent first."""
    counted = Counter((result.to, result.outcome.value, result.reason) for result in results)
    return [
        (to, outcome, reason, count)
        for (to, outcome, reason), count in sorted(
            counted.items(),
            key=lambda item: (-item[1], item[0][0] or "", item[0][1], item[0][2] or ""),
        )
    ]
