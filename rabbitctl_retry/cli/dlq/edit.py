"""``rr dlq edit``: one dead letter's body and headers edited, then retried; the original kept in
an export file (dlq/edit.py; docs/reference/dlq.md, "Edit and retry").

The letter is found by a read that takes nothing, the edit is made (``$EDITOR``, ``--body``,
``--set-header``, ``--remove-header``), the diff shown and agreed, the original written to its
file, and then one run of the transfer engine (ops/transfer.py) publishes the edited copy with
confirms and acks that letter only: the letters before it go back to their places.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import tempfile
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Annotated

import typer

from rabbitctl_retry.cli import _common as common
from rabbitctl_retry.cli.dlq import common as dlq
from rabbitctl_retry.cli.dlq.export_file import ExportFile
from rabbitctl_retry.cli.dlq.report import transfer_exit_code
from rabbitctl_retry.cli.finish import Outcome, finish
from rabbitctl_retry.cli.queue_names import check_queue_names
from rabbitctl_retry.cli.render import cell, printable
from rabbitctl_retry.dlq.edit import (
    EditRequest,
    body_problem,
    diff_lines,
    header_lines,
    header_problem,
    json_problem,
    parse_assignment,
    sha256_hex,
)
from rabbitctl_retry.dlq.origin import WaitQueues
from rabbitctl_retry.dlq.replay import ReplayPlan
from rabbitctl_retry.dlq.report import transfer_document, transfer_summary
from rabbitctl_retry.dlq.same_id import LetterPick, SameId, checksums
from rabbitctl_retry.errors import DataError, RrError, UsageError
from rabbitctl_retry.ops import dlq_runs as runs
from rabbitctl_retry.ops import transfer as engine
from rabbitctl_retry.ops.edit import EditDone, original_line, publish_edit
from rabbitctl_retry.ops.probe import Connect
from rabbitctl_retry.transport.base import Delivery
from rabbitctl_retry.user_files import BODY_LIMIT_BYTES, FileRefused, read_bytes, read_stream


class NoSuchLetter(RrError):
    """The message id is not in the queue (exit 1: nothing was changed)."""


class LetterChanged(RrError):
    """The letter read is not in the queue as it was when the edit is published (exit 1:
    nothing was published, nothing acked)."""


def edit_command(
    ctx: typer.Context,
    queue: Annotated[str, typer.Argument(help="The dead-letter queue.", metavar="QUEUE")],
    message_id: Annotated[
        str, typer.Option("--id", metavar="MESSAGE_ID", help="The dead letter's message id.")
    ],
    position: Annotated[
        int | None,
        typer.Option(
            "--position",
            min=1,
            metavar="N",
            help="When several dead letters share the id: the N-th of them (1: the first).",
        ),
    ] = None,
    body_file: Annotated[
        str | None,
        typer.Option(
            "--body",
            metavar="FILE",
            help="The new body, byte for byte (no editor); - for stdin (./- is a file). At "
            'most 16 MiB (rr docs cli "Files rr reads").',
        ),
    ] = None,
    set_header: Annotated[
        list[str] | None,
        typer.Option("--set-header", metavar="NAME=VALUE", help="Set a header (repeatable)."),
    ] = None,
    remove_header: Annotated[
        list[str] | None,
        typer.Option("--remove-header", metavar="NAME", help="Remove a header (repeatable)."),
    ] = None,
    to: Annotated[
        str | None,
        typer.Option("--to", help="Publish the copy here instead of the queue it failed in."),
    ] = None,
    keep: Annotated[
        Path | None,
        typer.Option(
            "--keep",
            metavar="FILE",
            help="Where the original is written (an export line) [default: "
            "rr-edit-QUEUE-ID-TIME.jsonl].",
            show_default=False,
        ),
    ] = None,
    force: Annotated[
        bool,
        common.force_option("Publish a body that no longer parses as its content type."),
    ] = False,
    yes: common.YesOption = False,
    topology_file: dlq.TopologyOption = None,
    no_topology: dlq.NoTopologyOption = False,
    url: common.UrlOption = None,
    output: common.OutputOption = common.OutputFormat.TABLE,
) -> None:
    """Edit one dead letter and retry it: $EDITOR (or --body FILE) on its body,
    --set-header/--remove-header on its headers; shows the diff and asks.

    The edited copy goes where a replay sends it (its origin, or --to) with publisher
    confirms, carrying rr-edited-at and rr-original-body-sha256; only then is the dead letter
    acked. The original is first written to an export file (rr dlq import restores it). A
    JSON body that no longer parses is refused unless --force (rr docs dlq "Edit and
    retry").
    """
    topology = dlq.load_topology(topology_file, no_topology)
    retry_header = dlq.retry_header_of(topology)
    with common.guard():
        check_queue_names([queue] + ([to] if to else []))
        assignments = _assignments(set_header, remove_header, retry_header)
        editor, new_body_given = _new_body(body_file, bool(assignments or remove_header))
        dlq.require_answerable(yes, "edit")
        keep_path = keep or _default_keep(queue, message_id)
        if keep_path.exists():
            raise UsageError(f"{keep_path} exists; choose another --keep file")
    connect, broker = dlq.changing_connect_of(ctx, url, topology)
    letter = _read_letter(connect, queue, message_id, position, yes=yes, output=output)
    before = letter.body
    with common.guard():
        after = new_body_given if new_body_given is not None else _edited(editor, letter)
        request = EditRequest(
            body=after,
            set_headers=assignments,
            remove_headers=tuple(remove_header or ()),
            original_sha256=sha256_hex(before),
        )
        if after == before and not request.changes_headers:
            finish(_unchanged(queue, message_id, broker), output)
            return
        problem = body_problem(letter.properties.content_type, before, after)
        if problem is not None and not force:
            raise DataError(f"{message_id!r}: {problem}; nothing was changed")
    for line in [*header_lines(letter.properties.headers, request), *diff_lines(before, after)]:
        dlq.note(line)
    plan = _plan(queue, to, retry_header, WaitQueues.of(topology))
    done = _publish(connect, plan, letter, request, keep_path, (message_id, position), yes=yes)
    finish(_outcome(done, message_id, request, broker), output)


def _unchanged(queue: str, message_id: str, broker: str) -> Outcome:
    """What an edit that changed nothing prints (nothing was published)."""
    return Outcome(
        document=lambda: {
            "queue": queue,
            "message_id": message_id,
            "edited": False,
            "broker": broker,
        },
        table=lambda: [cell(f"{message_id!r}: body and headers unchanged; nothing was published")],
    )


def _plan(queue: str, to: str | None, retry_header: str, wait_queues: WaitQueues) -> ReplayPlan:
    """The replay plan the edited copy goes out by (its origin, or --to)."""
    return ReplayPlan(
        source=queue,
        run_id=engine.new_run_id(),
        retry_header=retry_header,
        to=to,
        wait_queues=wait_queues,
    )


def _edited(editor: list[str] | None, letter: Delivery) -> bytes:
    """The body as the editor saved it, or the letter's own (only headers change)."""
    return _edit_in(editor, letter) if editor is not None else letter.body


def _assignments(
    set_header: list[str] | None, remove_header: list[str] | None, retry_header: str
) -> tuple[tuple[str, str], ...]:
    """``--set-header``'s assignments, and ``--remove-header``'s names checked."""
    try:
        assignments = tuple(parse_assignment(text, retry_header) for text in set_header or ())
    except ValueError as error:
        raise UsageError(str(error)) from None
    for name in remove_header or ():
        problem = header_problem(name, retry_header)
        if problem is not None:
            raise UsageError(f"--remove-header {name[:60]!r}: {problem}")
    return assignments


def _new_body(body_file: str | None, headers: bool) -> tuple[list[str] | None, bytes | None]:
    """The editor to run, or ``--body``'s bytes (``headers``: only headers may change)."""
    editor = None if body_file is not None else _editor_command()
    if body_file is None and editor is None and not headers:
        raise UsageError(
            "no editor: set $VISUAL or $EDITOR, or give the new body with --body FILE "
            "(or only change headers with --set-header / --remove-header)"
        )
    return editor, _read_body(body_file) if body_file is not None else None


def _read_letter(
    connect: Connect,
    queue: str,
    message_id: str,
    position: int | None,
    *,
    yes: bool,
    output: common.OutputFormat,
) -> Delivery:
    """The letter to edit, found by a read that takes nothing."""
    wanted: SameId[Delivery] = SameId(message_id, position or 1)
    scan_reading = runs.inspect(
        connect,
        queue,
        wanted.look,
        limit=None,
        look=partial(dlq.agree_to_read, yes=yes, action=f"read {queue!r}"),
        bar=partial(dlq.progress_bar, output),
    )
    common.run(scan_reading)
    with common.guard():
        return found_one(wanted, queue, asked=position is not None)


def _publish(
    connect: Connect,
    plan: ReplayPlan,
    letter: Delivery,
    request: EditRequest,
    keep_path: Path,
    asked: tuple[str, int | None],
    *,
    yes: bool,
) -> EditDone:
    """Asked, then the edit published (ops/edit.py): ``asked`` is --id and --position."""
    queue, to = plan.source, plan.to
    message_id, position = asked
    target = to or "the queue it failed in"
    # the run takes the letter only if it is still, byte for byte, the one read above
    # (ops/edit.py: the original kept, the copy published, the letter acked)
    pick: LetterPick[Delivery] = LetterPick(message_id, position or 1, checksums(letter))

    async def publish() -> EditDone:
        await dlq.ask(
            f"Publish the edited {message_id!r} to {target} and remove the dead letter? The "
            f"original is kept in {keep_path}",
            yes,
            "edit",
        )
        done = await publish_edit(
            pick,
            plan,
            request,
            keep=partial(_keep_original, keep_path, letter),
            transfer=partial(runs.transfer_one, connect, queue),
        )
        if done.changed is not None:
            raise LetterChanged(
                f"{printable(message_id)!r} in {queue!r}: {done.changed}; nothing was "
                "published and no letter removed (read it again to edit it as it is now)"
            )
        return done

    return common.run(publish())


def found_one(found: SameId[Delivery], queue: str, *, asked: bool) -> Delivery:
    """The letter to edit, or why there is none to pick (``asked``: --position was given)."""
    shown = printable(found.message_id)
    if found.count == 0:
        raise NoSuchLetter(
            f"no message with id {shown!r} in {queue!r} ({found.read:,} read); nothing was changed"
        )
    if found.count > 1 and not asked:
        listed = ", ".join(f"#{p}" for p in found.positions)
        more = ", ..." if found.count > len(found.positions) else ""
        raise UsageError(
            f"{found.count:,} messages with id {shown!r} in {queue!r} (at {listed}{more}): "
            "pick one with --position N"
        )
    if found.letter is None:
        raise NoSuchLetter(
            f"--position {found.nth}: {found.count:,} message(s) with id {shown!r} in "
            f"{queue!r}; nothing was changed"
        )
    return found.letter


def _editor_command() -> list[str] | None:
    for variable in ("VISUAL", "EDITOR"):
        value = os.environ.get(variable, "").strip()
        if value:
            return shlex.split(value)
    return None


def _read_body(given: str) -> bytes:
    """``--body FILE``: a regular file, or a bare ``-`` (stdin; ``./-`` is a file), of at most
    16 MiB (docs/reference/cli.md, "Files rr reads"); :class:`DataError` (exit 65) naming it
    otherwise."""
    try:
        if given == "-":
            return read_stream(sys.stdin.buffer, limit_bytes=BODY_LIMIT_BYTES)
        return read_bytes(given, limit_bytes=BODY_LIMIT_BYTES)
    except FileRefused as refused:
        shown = "- (stdin)" if given == "-" else given
        raise DataError(f"--body {shown}: {refused.reason}") from None


def _edit_in(editor: list[str], letter: Delivery) -> bytes:
    """The body as ``editor`` saved it, byte for byte: the file holds the body exactly as it
    is (nothing re-serialised), and what is saved is the new body (docs/reference/dlq.md)."""
    before = letter.body
    try:
        before.decode("utf-8")
    except UnicodeDecodeError:
        raise UsageError(
            "the body is binary (not UTF-8): give the new body with --body FILE"
        ) from None
    suffix = ".json" if json_problem(before) is None else ".txt"
    with tempfile.TemporaryDirectory(prefix="rr-edit-") as directory:
        path = Path(directory) / f"body{suffix}"
        path.write_bytes(before)
        try:
            done = subprocess.run([*editor, str(path)], check=False)
        except OSError as error:
            raise UsageError(f"cannot start the editor {editor[0]!r}: {error}") from None
        if done.returncode != 0:
            raise RrError(f"the editor exited with {done.returncode}; nothing was changed")
        try:  # what the editor saved, by the rule of --body
            return read_bytes(path, limit_bytes=BODY_LIMIT_BYTES)
        except FileRefused as refused:
            raise DataError(
                f"the file the editor saved ({path}) {refused.reason}; nothing was changed"
            ) from None


def _default_keep(queue: str, message_id: str) -> Path:
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", f"{queue}-{message_id}")[:120]
    return Path(f"rr-edit-{safe}-{stamp}.jsonl")


def _keep_original(path: Path, letter: Delivery) -> Path:
    """The original as one export line, in place before anything is published."""
    with common.guard():
        kept = ExportFile(path)
        try:
            kept.stream.write(original_line(letter))
            kept.stream.flush()
            os.fsync(kept.stream.fileno())
            kept.commit()
        finally:
            kept.discard()
    return path


def _outcome(done: EditDone, message_id: str, request: EditRequest, broker: str) -> Outcome:
    report, keep_path = done.report, done.kept
    published = done.published
    to = done.to
    lines = [transfer_summary(report)]
    if published:
        lines.append(
            f"edited copy of {message_id!r} published to {to!r}; the original is in {keep_path}"
        )
    else:
        lines.append(f"nothing was published; the dead letter stays (its original: {keep_path})")
    return Outcome(
        document=lambda: {
            "message_id": message_id,
            "edited": True,
            "published": published,
            "to": to,
            "original_file": str(keep_path),
            "original_sha256": request.original_sha256,
            "edited_sha256": sha256_hex(request.body),
            "headers_set": dict(request.set_headers),
            "headers_removed": list(request.remove_headers),
            "report": transfer_document(report),
            "broker": broker,
        },
        table=lambda: [cell(line) for line in lines],
        code=0 if published else max(1, int(transfer_exit_code([report]))),
    )


__all__ = ["edit_command"]
