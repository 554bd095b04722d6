"""Pure. A run's page (its progress: copies confirmed, then its report) and the runs page."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from rabbitctl_retry.console.views.base import counted, e, page, path_part


@dataclass(frozen=True, slots=True)
class JobView:
    id: str
    title: str
    queue: str
    running: bool
    examined: int
    total: int
    lines: Sequence[str]
    confirmed: int = 0
    """Letters done with: copies the broker confirmed (a discard: letters acked)."""
    expected: int | None = None
    """How many its plan said would go (None: no plan, e.g. one letter)."""
    action: str = ""
    """The report, when done."""
    error: str | None = None
    started_at: datetime | None = None
    stopped: bool = False
    """The console stopped while it ran."""

    @property
    def state(self) -> str:
        if self.running:
            return "running"
        if self.error:
            return "failed"
        return "stopped" if self.stopped else "done"


def job_page(job: JobView) -> str:
    state = job.state
    done = "discarded" if job.action == "discard" else "copies confirmed"
    goal = job.expected if job.expected is not None else job.total
    body = (
        f'<p class="state" data-state="{state}">{state}: '
        f'<span class="confirmed" data-confirmed="{job.confirmed}">{job.confirmed:,} of '
        f"{goal:,} {done}</span> ({job.examined:,} of {counted(job.total, 'letter')} read)</p>"
        f'<progress max="{max(goal, 1)}" value="{min(job.confirmed, max(goal, 1))}"></progress>'
        + "".join(f'<p class="report">{e(line)}</p>' for line in job.lines)
        + (f'<p class="error">{e(job.error)}</p>' if job.error else "")
        + f'<p><a href="/queues/{path_part(job.queue)}/groups">groups of {e(job.queue)}</a></p>'
    )
    return page(job.title, body, refresh_s=1 if job.running else None)


def runs_page(jobs: Sequence[JobView]) -> str:
    """This console's runs and edits, newest first, each with its report's first line."""
    if not jobs:
        return page("Runs", "<p>Nothing was retried, moved, discarded or edited yet.</p>")
    rows = [
        '<table class="runs"><thead><tr><th>started</th><th>what</th><th>state</th>'
        "<th>report</th></tr></thead><tbody>"
    ]
    for job in jobs:
        started = job.started_at.strftime("%H:%M:%S") if job.started_at else ""
        first = job.error or (job.lines[0] if job.lines else "")
        rows.append(
            f'<tr data-run="{e(job.id)}"><td>{e(started)}</td>'
            f'<td><a href="/jobs/{e(job.id)}">{e(job.title)}</a></td>'
            f'<td data-state="{job.state}">{job.state}</td><td>{e(first)}</td></tr>'
        )
    rows.append("</tbody></table>")
    return page("Runs", "".join(rows), refresh_s=5 if any(j.running for j in jobs) else None)
