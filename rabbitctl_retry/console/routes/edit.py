"""Edit and retry: the change shown, then published only for the letter the page showed, its
original kept first (docs/reference/dlq.md, "Edit and retry")."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

from aiohttp import web

from rabbitctl_retry.console.jobs import Job
from rabbitctl_retry.console.listen import HTTP_LOG
from rabbitctl_retry.console.reads import (
    pick_letter,
    transfer,
)
from rabbitctl_retry.console.routes.common import queue_of, respond
from rabbitctl_retry.console.routes.message import edit_form, one_letter_replay
from rabbitctl_retry.console.state import STATE, State
from rabbitctl_retry.console.views import base as html
from rabbitctl_retry.console.views import edit as edit_view
from rabbitctl_retry.dlq.choice import Chooser
from rabbitctl_retry.dlq.edit import (
    EditRequest,
    body_problem,
    box_body,
    box_problem,
    box_size_problem,
    box_text_problem,
    diff_lines,
    sha256_hex,
)
from rabbitctl_retry.dlq.report import (
    TransferKind,
    TransferReport,
    transfer_summary,
)
from rabbitctl_retry.dlq.same_id import LetterPick
from rabbitctl_retry.errors import write_failure
from rabbitctl_retry.ops.edit import original_line, publish_edit
from rabbitctl_retry.ops.transfer import TransferOptions
from rabbitctl_retry.transport.base import Delivery


def _not_shown(queue: str, message_id: str, pick: LetterPick[Delivery], back: str) -> str:
    return html.result_page(
        "Not the letter shown",
        [
            f"{message_id} in {queue}: {pick.problem()}",
            "nothing was published and no letter removed; open the message again to see it "
            "as it is now",
        ],
        back=back,
        error=True,
    )


async def edit(request: web.Request) -> web.Response:
    """Show the change (``step=preview``) or publish it: both only for the letter the page
    showed (its place among the letters with its id and its checksums, dlq/same_id.py), and
    the body exactly as the box sent it, line breaks written as the original's (dlq/edit.py
    ``box_body``; docs/reference/console.md)."""
    state = request.app[STATE]
    queue = queue_of(request)
    message_id = request.match_info["message"]
    asked = await edit_form(request)
    back = html.message_path(queue, message_id, asked.nth)
    pick: LetterPick[Delivery] = LetterPick(message_id, asked.nth, asked.shown)
    await pick_letter(state.config.connect, queue, pick)
    if pick.letter is None:
        return respond(_not_shown(queue, message_id, pick, back), 409)
    letter = pick.letter
    before = letter.body
    refusal = box_problem(before) or box_text_problem(asked.text)
    if refusal is not None:
        command = edit_view.edit_command(queue, message_id, asked.nth)
        lines = [f"this body cannot be edited here: {refusal}; edit it with {command}"]
        return respond(html.result_page("Not editable here", lines, back=back, error=True), 400)
    after = box_body(before, asked.text)
    if (too_large := box_size_problem(after, edited=True)) is not None:
        command = edit_view.edit_command(queue, message_id, asked.nth)
        lines = [f"this body cannot be edited here: {too_large}; edit it with {command}"]
        return respond(html.result_page("Not editable here", lines, back=back, error=True), 400)
    problem = body_problem(letter.properties.content_type, before, after, force=edit_view.FORCE_BOX)
    if not asked.publish:
        return respond(
            edit_view.edit_preview_page(
                queue,
                message_id,
                nth=asked.nth,
                checksums=str(asked.shown),
                diff=diff_lines(before, after),
                body=after.decode("utf-8"),
                edited=sha256_hex(after),
                force=asked.force,
                problem=problem,
                changed=after != before,
                csrf=state.csrf,
            )
        )
    if asked.edited != sha256_hex(after):
        lines = ["the body sent back is not the one the change showed; nothing was published"]
        return respond(html.result_page("Refused", lines, back=back, error=True), 400)
    if after == before:
        return respond(html.result_page("Nothing changed", ["nothing was published"], back=back))
    if problem is not None and not asked.force:
        return respond(html.result_page("Refused", [problem], back=back, error=True), 400)
    request_ = EditRequest(body=after, original_sha256=sha256_hex(before))
    plan = one_letter_replay(state, queue)
    # a fresh look in the run that publishes and acks: the letter is checked on the very
    # delivery the run acks (a colleague may have changed it since the look above)
    taking: LetterPick[Delivery] = LetterPick(message_id, asked.nth, asked.shown)

    def keep() -> Path:
        try:
            return _keep_original(state.config.keep_dir, queue, message_id, letter)
        except OSError as error:
            raise _NotKept(error) from None

    async def publish(choose: Chooser, options: TransferOptions) -> TransferReport:
        job = Job(id="edit", title="edit", queue=queue)
        return await transfer(
            state.config.connect, queue, choose, TransferKind.REPLAY, options, job
        )

    try:
        done = await publish_edit(taking, plan, request_, keep=keep, transfer=publish)
    except _NotKept as not_kept:  # nothing was published
        error = not_kept.error
        return respond(_not_kept(state.config.keep_dir, queue, message_id, error, back), 500)
    if done.changed is not None:
        return respond(_not_shown(queue, message_id, taking, back), 409)
    published, kept = done.published, done.kept
    _record_edit(state, queue, message_id, done.report, published)
    lines = [
        *transfer_summary(done.report).splitlines(),
        (
            f"edited copy of {message_id} published to {done.to}; the original is in {kept}"
            if published
            else f"nothing was published; the dead letter stays (its original: {kept})"
        ),
    ]
    return respond(
        html.result_page(
            "Edited and retried" if published else "Not published",
            lines,
            back=f"/queues/{html.path_part(queue)}/groups",
            error=not published,
        ),
        200 if published else 409,
    )


def _record_edit(
    state: State, queue: str, message_id: str, report: TransferReport, published: bool
) -> None:
    """An edit, kept among the runs and told to the record (console/audit.py)."""
    job = Job.one_letter("edit", queue, message_id)
    job.examined = job.total = report.examined
    job.confirmed = report.sent
    lines = transfer_summary(report).splitlines()
    if not published:
        lines.append("nothing was published; the dead letter stays")
    state.jobs.record(job, report, lines)


class _NotKept(Exception):
    """The original of an edit could not be written (nothing was published)."""

    def __init__(self, error: OSError) -> None:
        super().__init__(str(error))
        self.error = error


def _keep_original(directory: Path, queue: str, message_id: str, letter: Delivery) -> Path:
    """The original as one export line, synced, before anything is published (an OSError
    when it cannot be written: no file is left half written)."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
    safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in f"{queue}-{message_id}")
    path = directory / f"rr-edit-{safe[:120]}-{stamp}.jsonl"
    with path.open("x", encoding="utf-8") as out:
        try:
            out.write(original_line(letter))
            out.flush()
            os.fsync(out.fileno())
        except OSError:
            path.unlink(missing_ok=True)
            raise
    return path


def _not_kept(directory: Path, queue: str, message_id: str, error: OSError, back: str) -> str:
    """The page of an edit whose original could not be kept: nothing was published (the
    original is written first, docs/reference/console.md "What each page does")."""
    said = write_failure(error, f"--keep-dir {directory}")
    HTTP_LOG.warning("an edit of %s in %s was not published: %s", message_id, queue, said)
    return html.result_page(
        "Not published",
        [
            f"{message_id} in {queue}: the original could not be kept: {said}",
            "nothing was published and no letter removed: the dead letter stays in the queue",
            "give rr console a --keep-dir it can write, then edit again",
        ],
        back=back,
        error=True,
    )
