"""One message's page, its whole body as a file, and the letter retried unchanged."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import partial

from aiohttp import web

from rabbitctl_retry.console.jobs import Job
from rabbitctl_retry.console.reads import (
    find_letter,
    transfer,
)
from rabbitctl_retry.console.routes.common import (
    not_found,
    nth_of,
    queue_of,
    read_gate,
    reads_of,
    respond,
)
from rabbitctl_retry.console.state import STATE, State
from rabbitctl_retry.console.views import base as html
from rabbitctl_retry.console.views import message as message_view
from rabbitctl_retry.dlq.edit import box_problem
from rabbitctl_retry.dlq.read_cost import Cost
from rabbitctl_retry.dlq.replay import ReplayPlan
from rabbitctl_retry.dlq.replay import choose as choose_replay
from rabbitctl_retry.dlq.report import (
    TransferKind,
    TransferReport,
    limit_reached,
)
from rabbitctl_retry.dlq.same_id import Checksums, LetterPick, checksums
from rabbitctl_retry.errors import UsageError
from rabbitctl_retry.ops import transfer as engine
from rabbitctl_retry.ops.transfer import TransferOptions
from rabbitctl_retry.retry.headers import deaths
from rabbitctl_retry.transport.base import Delivery


def one_letter_replay(state: State, queue: str) -> ReplayPlan:
    """The replay of one letter of ``queue`` to its origin (a retry unchanged, an edit)."""
    return ReplayPlan(
        source=queue,
        run_id=engine.new_run_id(),
        retry_header=state.config.settings.retry_header,
        wait_queues=state.config.settings.wait_queues,
    )


async def retry_letter(request: web.Request) -> web.Response:
    """The letter the page showed, retried unchanged: ``rr dlq replay`` of that one letter
    (only if it is still the letter shown, dlq/same_id.py), as a run of its own."""
    state = request.app[STATE]
    queue = queue_of(request)
    message_id = request.match_info["message"]
    asked = await edit_form(request)
    plan = one_letter_replay(state, queue)
    pick: LetterPick[Delivery] = LetterPick(message_id, asked.nth, asked.shown)

    async def work(job: Job) -> TransferReport | None:
        options = TransferOptions(limit=1, only=pick, stop=job.stop, confirmed=job.confirm)
        chooser = partial(choose_replay, plan)
        report = await transfer(
            state.config.connect, queue, chooser, TransferKind.REPLAY, options, job
        )
        if report.stopped == limit_reached(1):  # the one letter: no limit the user gave
            report = dataclasses.replace(report, stopped=None)
        changed = pick.refused(report)
        if changed is not None:
            job.error = changed
        return report

    job = Job.one_letter("retry", queue, message_id)
    state.jobs.start(job, work)
    raise web.HTTPSeeOther(location=f"/jobs/{job.id}")


async def _letter(request: web.Request, nth: int) -> tuple[str, str, Delivery, int, int]:
    state = request.app[STATE]
    queue = queue_of(request)
    message_id = request.match_info["message"]
    found = await find_letter(state.config.connect, queue, message_id, nth)
    if found.letter is None:
        raise not_found(f"no message with this id in {queue} ({found.read:,} read)")
    return queue, message_id, found.letter, found.position, found.count


async def message(request: web.Request) -> web.Response:
    state = request.app[STATE]
    nth = nth_of(request.query.get("n"))
    queue_state = await reads_of(request, queue_of(request))
    back = f"/queues/{html.path_part(queue_state.name)}/groups"
    gate = read_gate(request, queue_state, f"Message {request.match_info['message']}", back)
    if gate is not None:
        return gate
    queue, message_id, letter, position, count = await _letter(request, nth)
    view = letter_view(queue, message_id, nth, position, letter, count - 1)
    reads = queue_state.reads
    note = (
        None
        if reads.cost is Cost.FREE
        else f"{reads.why}: this read counted one each, and so does each of the forms below"
    )
    return respond(
        message_view.message_page(
            view, read_only=state.config.read_only, csrf=state.csrf, note=note
        )
    )


def letter_view(
    queue: str, message_id: str, nth: int, position: int, letter: Delivery, others: int
) -> message_view.MessageView:
    properties = letter.properties
    not_editable = box_problem(letter.body)
    return message_view.MessageView(
        queue=queue,
        message_id=message_id,
        nth=nth,
        position=position,
        properties={
            "content_type": properties.content_type,
            "content_encoding": properties.content_encoding,
            "correlation_id": properties.correlation_id,
            "delivery_mode": properties.delivery_mode,
            "timestamp": properties.timestamp,
            "type": properties.type,
            "app_id": properties.app_id,
            "routing_key": letter.routing_key,
            "exchange": letter.exchange or "(default)",
        },
        headers=properties.headers or {},
        deaths=deaths(properties.headers),
        body=letter.body,
        editable=letter.body.decode("utf-8") if not_editable is None else None,
        others=others,
        not_editable=not_editable,
        checksums=str(checksums(letter)),
    )


async def body(request: web.Request) -> web.StreamResponse:
    """The whole body of a letter, as a file: read as the message page reads it (the same
    gate: a read that counts is asked first)."""
    nth = nth_of(request.query.get("n"))
    queue_state = await reads_of(request, queue_of(request))
    message_id = request.match_info["message"]
    back = html.message_path(queue_state.name, message_id, nth)
    gate = read_gate(request, queue_state, f"Body of {message_id}", back)
    if gate is not None:
        return gate
    queue, message_id, letter, _, _ = await _letter(request, nth)
    name = html.body_file_name(queue, message_id, nth)
    return web.Response(
        body=letter.body,
        content_type="application/octet-stream",
        headers={"Content-Disposition": f'attachment; filename="{name}"'},
    )


@dataclass(frozen=True)
class EditForm:
    """What an edit form sent (the message page's, then the preview's)."""

    nth: int
    shown: Checksums
    """What the letter on the page was: only that letter is edited."""
    text: str
    """The edit box's text (the preview's: the body it showed)."""
    force: bool
    publish: bool
    edited: str
    """The preview's SHA-256 of the body it showed ("" before)."""


async def edit_form(request: web.Request) -> EditForm:
    form = await request.post()
    shown = Checksums.parse(str(form.get("letter", "")))
    if shown is None:
        raise UsageError(
            "the form does not say which letter it was made on: open the message again"
        )
    return EditForm(
        nth=nth_of(form.get("n")),
        shown=shown,
        text=str(form.get("body", "")),
        force=form.get("force") == "1",
        publish=form.get("step") == "publish",
        edited=str(form.get("edited", "")),
    )
