"""A group action (or one on letters selected): its plan (a dry run), then its run on the
transfer engine, as ``rr dlq replay|move|purge --where group=ID`` (console/reads.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aiohttp import web

from rabbitctl_retry.console.jobs import Job, new_job_id
from rabbitctl_retry.console.reads import (
    dry_run,
    group_chooser,
    group_run,
)
from rabbitctl_retry.console.reads import run_group as run_on_engine
from rabbitctl_retry.console.routes.common import queue_of, respond
from rabbitctl_retry.console.selection import Selection, SelectionPick
from rabbitctl_retry.console.selection import parse as parse_selection
from rabbitctl_retry.console.state import STATE, State
from rabbitctl_retry.console.views import plans as plans_view
from rabbitctl_retry.dlq.rate import Pace, parse_pace
from rabbitctl_retry.dlq.report import (
    TransferOutcome,
    TransferReport,
)
from rabbitctl_retry.errors import UsageError
from rabbitctl_retry.ops.transfer import TransferOptions
from rabbitctl_retry.ops.transfers import TransferRun


@dataclass(frozen=True)
class GroupForm:
    queue: str
    group_id: str
    action: str
    """``retry``, ``move`` or ``discard``."""
    typed: plans_view.PaceFields
    """The rate and ramp fields as typed (the plan hands them on to the run)."""
    pace: Pace | None
    to: str
    selection: Selection | None = None
    """Letters chosen by hand (console/selection.py); None: the whole group."""
    expect: int | None = None
    """How many the plan said would go (the run's progress bar ends there)."""

    def options(self, **given: Any) -> TransferOptions:
        """The engine's options: with a selection, every other letter is skipped."""
        only = self.selection.pick() if self.selection is not None else None
        return TransferOptions(only=only, **given)


async def _group_form(request: web.Request) -> GroupForm:
    queue = queue_of(request)
    form = await request.post()
    action = str(form.get("action", ""))
    if action not in ("retry", "move", "discard"):
        raise UsageError("choose retry, move or discard")
    typed = plans_view.PaceFields(
        rate=str(form.get("rate", "")).strip(), ramp=str(form.get("ramp", "")).strip()
    )
    picks = [str(value) for value in form.getall("pick", [])]
    expect = str(form.get("expect", ""))
    return GroupForm(
        queue=queue,
        group_id=request.match_info["group"],
        action=action,
        typed=typed,
        pace=parse_pace(typed.rate or None, typed.ramp or None, fields=True),
        to=str(form.get("to", "")).strip() if action == "move" else "",
        selection=parse_selection(picks) if picks else None,
        expect=int(expect) if expect.isdigit() else None,
    )


def _group_run(state: State, asked: GroupForm, options: TransferOptions) -> TransferRun:
    choose, kind = group_chooser(
        asked.queue, asked.group_id, asked.action, state.config.settings, asked.to
    )
    return group_run(asked.queue, choose, kind, options, to=asked.to)


async def plan_group(request: web.Request) -> web.Response:
    state = request.app[STATE]
    asked = await _group_form(request)
    queue = asked.queue
    report = await dry_run(state.config.connect, _group_run(state, asked, asked.options()))
    if report is None:
        raise UsageError(f"{queue}: nothing was read")
    sent = [r for r in report.results if r.outcome is TransferOutcome.SENT]
    targets: dict[str, int] = {}
    for result in sent:
        if result.to:
            targets[result.to] = targets.get(result.to, 0) + 1
    failing = [r for r in report.results if r.outcome is TransferOutcome.FAILED]
    plan = plans_view.Plan(
        queue=queue,
        group_id=asked.group_id,
        action=asked.action,
        pace=asked.typed,
        to=asked.to,
        would=len(sent),
        read=report.examined,
        targets=targets,
        failing=len(failing),
        reasons=sorted({r.reason for r in failing if r.reason}),
        picks=asked.selection.values() if asked.selection else (),
        selected=asked.selection.letters() if asked.selection else "",
        selected_where=(asked.selection.expression() or "") if asked.selection else "",
    )
    return respond(plans_view.plan_page(plan, csrf=state.csrf))


async def run_group(request: web.Request) -> web.Response:
    state = request.app[STATE]
    asked = await _group_form(request)
    queue = asked.queue
    # refused at once (a target that drops what it takes, a wrong id), as the plan is
    _group_run(state, asked, TransferOptions())

    async def work(job: Job) -> TransferReport | None:
        options = asked.options(pace=asked.pace, stop=job.stop, confirmed=job.confirm)
        report = await run_on_engine(
            state.config.connect, _group_run(state, asked, options), job, job.stop
        )
        if isinstance(options.only, SelectionPick) and report is not None:
            job.notes = options.only.missing()
        return report

    chosen = asked.selection
    which = f"{chosen.letters()} of group" if chosen else "group"
    job = Job(
        id=new_job_id(),
        title=f"{asked.action.capitalize()} {which} {asked.group_id} of {queue}",
        queue=queue,
        action=asked.action,
        letters=f"{chosen.letters()} (group {asked.group_id})"
        if chosen
        else f"group {asked.group_id}",
        to=asked.to if asked.action == "move" else None,
        expected=asked.expect,
    )
    state.jobs.start(job, work)
    raise web.HTTPSeeOther(location=f"/jobs/{job.id}")
