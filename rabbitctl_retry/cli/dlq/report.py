"""What ``rr dlq replay``, ``rr dlq move`` and ``rr dlq import`` print, and the exit code they pick.

The exit code of a transfer (:func:`transfer_exit_code`, docs/reference/exit-codes.md, "Exit
codes"): 0 when no message failed (skipped ones do not count: a filter left them on purpose), 3 when
some were sent and some failed, 1 when some failed and none could be sent. A run cut short by a
dropped connection exits with that error's code instead (69), one the broker refused access
to (a user without write permission) with 77.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from rabbitctl_retry.dlq.report import TransferReport, groups_text, plural
from rabbitctl_retry.errors import (
    AccessRefused,
    BrokerUnreachable,
    ExitCode,
    PartialFailure,
    RrError,
)
from rabbitctl_retry.ops.dlq import ImportReport


def bulk_exit_code(done: int, *, failed: int) -> ExitCode:
    """The one rule for partial success of every command that moves many messages (replay,
    move, import): 0 nothing failed, 3 some failed and some were done, 1 some failed and none
    were (docs/reference/exit-codes.md, "Exit codes")."""
    if failed == 0:
        return ExitCode.OK
    return ExitCode.PARTIAL if done else ExitCode.FAILURE


def transfer_exit_code(reports: Iterable[TransferReport]) -> ExitCode:
    """:func:`bulk_exit_code` over every source of a replay or move."""
    sent = failed = 0
    for report in reports:
        sent += report.sent
        failed += report.failed
    return bulk_exit_code(sent, failed=failed)


def inspect_summary(
    queue: str, shown: int, in_queue: int, groups: Iterable[tuple[str | None, str | None, int]]
) -> str:
    """The line under ``rr dlq inspect``'s table."""
    grouped = groups_text(groups)
    head = f"{plural(shown, 'dead letter')} shown of {in_queue:,} in {queue!r}"
    return f"{head}: {grouped}" if grouped else head


# --------------------------------------------------------------------------- import


def import_summary(report: ImportReport) -> str:
    """``imported 5 of 10 message(s) into 'q'``, and which lines a ``--from-line`` skipped."""
    checked = report.checked
    text = f"imported {report.published:,} of {checked.to_publish:,} message(s) into {report.to!r}"
    skipped = checked.messages - checked.to_publish
    if checked.from_line > 1:
        text += f" (--from-line {checked.from_line}: the {skipped:,} before it skipped)"
    return text


def import_document(report: ImportReport) -> dict[str, Any]:
    """``rr dlq import --output json`` (docs/reference/dlq.md, "JSON output")."""
    checked = report.checked
    return {
        "file": str(report.path),
        "to": report.to,
        "messages": checked.messages,
        "from_line": checked.from_line,
        "to_publish": checked.to_publish,
        "imported": report.published,
        "first_not_imported": report.first_not_imported,
        "reason": report.reason,
        "unconfirmed": list(report.unconfirmed),
        "user_ids_dropped": checked.user_ids_dropped,
    }


def import_failure(report: ImportReport) -> RrError | None:
    """The one error line (and exit code) of an import that stopped, or None when every
    message was imported: 77 for a refused permission, 69 when the connection dropped, 3 when
    some messages were imported, else 1."""
    first = report.first_not_imported
    if first is None:
        return None
    checked = report.checked
    done = (
        f"lines {checked.from_line}-{first - 1} ({report.published:,} message(s)) were "
        "published and confirmed"
        if first > checked.from_line
        else "no message was imported"
    )
    text = f"import into {report.to!r} stopped at {report.path}:{first}: {report.reason}; {done}"
    unsure = [number for number in report.unconfirmed if number >= first]
    if unsure:
        text += (
            f"; {line_list(unsure)} went out but the channel closed before the broker "
            f"confirmed them: they may be in {report.to!r} already (a rerun from line "
            f"{first} may import those twice)"
        )
    else:
        text += f", nothing from line {first} on was"
    if report.confirmed_after:
        text += (
            f"; {line_list(report.confirmed_after)} after it were confirmed all the same (a "
            f"rerun from line {first} imports those twice)"
        )
    text += f"; rerun with --from-line {first} to import the rest"
    error = report.error
    if isinstance(error, AccessRefused):
        return AccessRefused(text)
    if isinstance(error, BrokerUnreachable):
        return BrokerUnreachable(text)
    if bulk_exit_code(report.published, failed=1) is ExitCode.PARTIAL:
        return PartialFailure(text)
    return RrError(text)


def line_list(numbers: Sequence[int]) -> str:
    """``line 4``, ``lines 4-9``, ``lines 4-9, 12``: sorted line numbers, runs joined."""
    runs: list[list[int]] = []
    for number in sorted(numbers):
        if runs and number == runs[-1][1] + 1:
            runs[-1][1] = number
        else:
            runs.append([number, number])
    parts = [f"{a}" if a == b else f"{a}-{b}" for a, b in runs]
    label = "line" if len(numbers) == 1 else "lines"
    return f"{label} {', '.join(parts)}"
