"""One dead letter's edit published: the steps ``rr dlq edit`` (cli/dlq/edit.py) and the
console (console/routes/edit.py) share once the letter is read and the change agreed
(docs/reference/dlq.md, "Edit and retry"; docs/reference/console.md).

The original is kept first (the caller writes it where its own rules say: an export file,
the console's ``--keep-dir``; :func:`original_line` is its one line), then one run of the
transfer engine publishes the edited copy with confirms and acks the letter, only if it is
still, byte for byte, the letter read (dlq/same_id.py ``LetterPick``, checked on the very
delivery the run acks); when it is not, nothing is published, the letter stays, and the kept
original is removed (the original of nothing).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from rabbitctl_retry.dlq.choice import Chooser
from rabbitctl_retry.dlq.edit import EditRequest, edit_chooser
from rabbitctl_retry.dlq.jsonl import record_line
from rabbitctl_retry.dlq.replay import ReplayPlan
from rabbitctl_retry.dlq.report import TransferReport, limit_reached
from rabbitctl_retry.dlq.results import TransferOutcome
from rabbitctl_retry.dlq.same_id import LetterPick
from rabbitctl_retry.ops.dlq import record_of
from rabbitctl_retry.ops.transfer import TransferOptions
from rabbitctl_retry.transport.base import Delivery

Transfer = Callable[[Chooser, TransferOptions], Awaitable[TransferReport]]
"""One run of the transfer engine on the letter's queue (the caller's connection and
progress): the chooser and the options in, the run's report out."""


@dataclass(frozen=True, slots=True)
class EditDone:
    """What came of publishing an edit."""

    report: TransferReport
    kept: Path
    """Where the original was kept (removed again when ``changed``)."""
    changed: str | None
    """Why nothing was published because the letter is not the one read, or None."""

    @property
    def published(self) -> bool:
        return self.report.sent == 1

    @property
    def to(self) -> str | None:
        """Where the edited copy went, or None when none was sent."""
        sent = (r for r in self.report.results if r.outcome is TransferOutcome.SENT)
        result = next(sent, None)
        return result.to if result is not None else None


def original_line(letter: Delivery) -> str:
    """The letter as one export line (docs/reference/dlq.md, "Export format"), its newline included:
    what an edit keeps before it publishes (``rr dlq import`` restores it)."""
    return record_line(record_of(letter)) + "\n"


async def publish_edit(
    pick: LetterPick[Delivery],
    plan: ReplayPlan,
    request: EditRequest,
    *,
    keep: Callable[[], Path],
    transfer: Transfer,
) -> EditDone:
    """Keep the original (``keep``: its errors are the caller's, nothing is published), then
    publish the edited copy and ack the letter ``pick`` names in one run of ``transfer``;
    the kept file is removed when the letter was not the one read."""
    kept = keep()
    report = await transfer(edit_chooser(plan, request), TransferOptions(limit=1, only=pick))
    if report.stopped == limit_reached(1):
        # the one letter edited: no limit the user gave, and nothing stopped early
        report = dataclasses.replace(report, stopped=None)
    changed = pick.refused(report)
    if changed is not None:
        kept.unlink(missing_ok=True)  # the original of nothing: the letter stays
    return EditDone(report=report, kept=kept, changed=changed)


__all__ = ["EditDone", "Transfer", "original_line", "publish_edit"]
