"""Pure. Edit and retry: the change shown (the diff) and the Publish form, and the words and
fields the edit forms share (docs/reference/dlq.md, "Edit and retry")."""

from __future__ import annotations

import html
import shlex
from collections.abc import Iterable

from rabbitctl_retry.console.views.base import csrf_field, e, message_path, page, path_part

FORCE_LABEL = "publish a body that no longer parses as its content type"
"""The edit form's checkbox that publishes such a body anyway."""
FORCE_BOX = f"tick “{FORCE_LABEL}” to publish it anyway"
"""The console's words for ``rr dlq edit --force`` (``dlq/edit.py`` ``body_problem``)."""


def edit_command(queue: str, message_id: str, nth: int) -> str:
    """The ``rr dlq edit`` that edits a body the edit box cannot carry, from a file."""
    position = f" --position {nth}" if nth > 1 else ""
    return f"rr dlq edit {shlex.quote(queue)} --id {shlex.quote(message_id)}{position} --body FILE"


def letter_fields(nth: int, checksums: str) -> str:
    """Which letter an edit form is about: its place among the letters with its id and what
    it is (the console publishes nothing if the letter there is not that one)."""
    return (
        f'<input type="hidden" name="n" value="{nth}">'
        f'<input type="hidden" name="letter" value="{e(checksums)}">'
    )


def edit_preview_page(
    queue: str,
    message_id: str,
    *,
    nth: int,
    checksums: str,
    diff: Iterable[str],
    body: str,
    edited: str,
    force: bool,
    problem: str | None,
    changed: bool,
    csrf: str,
) -> str:
    """The diff of an edit and its Publish form: the letter's place and checksums, the new
    body (``body``) and its SHA-256 (``edited``: Publish checks the body it gets back is the
    one this diff showed)."""
    lines = "\n".join(diff)
    action = f"/queues/{path_part(queue)}/messages/{path_part(message_id)}/edit"
    refused = f'<p class="error">{e(problem)}</p>' if problem and not force else ""
    confirm = (
        ""
        if refused or not changed
        else (
            f'<form method="post" action="{action}">{csrf_field(csrf)}'
            + letter_fields(nth, checksums)
            + f'<input type="hidden" name="body" value="{html.escape(body, quote=True)}">'
            f'<input type="hidden" name="edited" value="{e(edited)}">'
            + ('<input type="hidden" name="force" value="1">' if force else "")
            + '<button name="step" value="publish" class="confirm">Publish the edited copy'
            "</button></form>"
        )
    )
    return page(
        f"Edit {message_id}",
        f'<pre class="diff">{e(lines) if changed else "(no change)"}</pre>{refused}{confirm}'
        f'<p><a href="{e(message_path(queue, message_id, nth))}">back</a></p>',
    )
