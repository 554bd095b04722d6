"""A run's page and the runs page (console/jobs.py)."""

from __future__ import annotations

from aiohttp import web

from rabbitctl_retry.console.jobs import Job
from rabbitctl_retry.console.routes.common import not_found, respond
from rabbitctl_retry.console.state import STATE
from rabbitctl_retry.console.views import runs as runs_view


async def job_page(request: web.Request) -> web.Response:
    job = request.app[STATE].jobs.get(request.match_info["job"])
    if job is None:
        raise not_found("no such run (runs are kept while the console runs)")
    return respond(runs_view.job_page(_job_view(job)))


def _job_view(job: Job) -> runs_view.JobView:
    return runs_view.JobView(
        id=job.id,
        title=job.title,
        queue=job.queue,
        running=job.running,
        examined=job.examined,
        total=job.total,
        lines=job.lines,
        error=job.error,
        started_at=job.started_at,
        stopped=job.stopped_by_the_console,
        confirmed=job.confirmed,
        expected=job.expected,
        action=job.action,
    )


async def runs_page(request: web.Request) -> web.Response:
    """Every action of this console, newest first (the last 100 runs)."""
    jobs = request.app[STATE].jobs.all()
    return respond(runs_view.runs_page([_job_view(job) for job in jobs]))
