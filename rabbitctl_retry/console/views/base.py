"""Pure. What every page of ``rr console`` shares (docs/reference/console.md): escaping, the page
frame, the console's links, and the small pages (an error, a result, the token, the read gate).

Every value that comes from the broker or the user (queue names, message ids, headers,
bodies, error texts) goes through :func:`e`: HTML-escaped, quotes included, with control
characters shown as ``\\xNN`` escapes, so a hostile header cannot open a tag or a script, nor
move what follows it. Pages hold no script (the Content-Security-Policy forbids it); a run in
progress refreshes its page with ``<meta http-equiv="refresh">``.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from datetime import datetime
from urllib.parse import quote

from rabbitctl_retry.retry.headers import utc_stamp


def e(value: object) -> str:
    """``value`` as text safe inside HTML (element content or a quoted attribute)."""
    text = value if isinstance(value, str) else str(value)
    if not text.isprintable():
        text = "".join(
            char if char.isprintable() or char in " \n" else char.encode("unicode_escape").decode()
            for char in text
        )
    return html.escape(text, quote=True)


def path_part(name: str) -> str:
    """A queue name or message id inside a URL path."""
    return quote(name, safe="")


def message_path(queue: str, message_id: str, nth: int = 1) -> str:
    """The page of the ``nth`` letter with ``message_id`` in ``queue``."""
    path = f"/queues/{path_part(queue)}/messages/{path_part(message_id)}"
    return path + (f"?n={nth}" if nth > 1 else "")


def body_path(queue: str, message_id: str, nth: int = 1) -> str:
    """The whole body of the ``nth`` letter with ``message_id``, as a file."""
    path = f"/queues/{path_part(queue)}/messages/{path_part(message_id)}/body"
    return path + (f"?n={nth}" if nth > 1 else "")


def body_file_name(queue: str, message_id: str, nth: int) -> str:
    """The name a downloaded body is saved under: ASCII letters, digits and ``. _ -``."""
    safe = "".join(
        c if c.isascii() and (c.isalnum() or c in "._-") else "_" for c in f"{queue}-{message_id}"
    )
    return f"{safe[:120]}-{nth}.body"


def stamp(moment: datetime | None) -> str:
    return utc_stamp(moment) if moment is not None else "-"


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """``1 group``, ``2 groups``, ``1,000 dead letters``: the count and its noun, in the
    right number."""
    return f"{count:,} {noun if count == 1 else plural or noun + 's'}"


def page(title: str, body: str, *, refresh_s: int | None = None) -> str:
    refresh = f'<meta http-equiv="refresh" content="{refresh_s}">' if refresh_s else ""
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{e(title)} - rr console</title>{refresh}"
        '<link rel="stylesheet" href="/static/console.css"></head><body>'
        '<header><a href="/">rr console</a> <a class="runs" href="/jobs">runs</a></header>'
        f"<main><h1>{e(title)}</h1>{body}</main></body></html>\n"
    )


def csrf_field(csrf: str) -> str:
    return f'<input type="hidden" name="csrf" value="{e(csrf)}">'


def letters_path(
    queue: str, group_id: str, page_number: int = 1, per_page: int = 50, *, query: str = ""
) -> str:
    """The ``page_number``-th page of a group's letters, ``per_page`` to a page (``query``: a
    search's fields, :meth:`Search.query`)."""
    path = f"/queues/{path_part(queue)}/groups/{path_part(group_id)}/letters"
    asked = [f"page={page_number}"] if page_number > 1 else []
    asked += [f"per={per_page}"] if per_page != 50 else []
    asked += [query] if query else []
    return path + ("?" + "&".join(asked) if asked else "")


def position_path(queue: str, position: int) -> str:
    """The letter at ``position`` of ``queue`` (1: the head): the link of a letter without a
    message id."""
    return f"/queues/{path_part(queue)}/positions/{position}"


def selection_path(queue: str, group_id: str) -> str:
    return f"/queues/{path_part(queue)}/groups/{path_part(group_id)}/selection"


def read_gate_page(
    title: str,
    *,
    why: str,
    count: int,
    can_drop: bool,
    action: str | None,
    csrf: str,
    back: str,
) -> str:
    """A page that does not read its queue on a GET, because a read counts a delivery on each
    letter (``dlq/read_cost.py``): what it costs, and the form that reads it once asked
    (``action``; None where the console refuses to read it: read-only, and a read can drop
    letters)."""
    cost = (
        "Each read counts one delivery on each letter, and past the queue's delivery limit a "
        "letter is dead-lettered or dropped."
        if can_drop
        else "Each read counts one delivery on each letter (none can be dropped)."
    )
    parts = [
        f'<p class="note" data-reads="{"spends" if can_drop else "counted"}">{e(why)}.</p>',
        f'<p class="note">{e(cost)} Reading this page reads the queue\'s {count:,} letters.</p>',
    ]
    if action is None:
        parts.append(
            '<p class="error">This console is read-only, and reading this queue can drop '
            "letters: it is not read. Its depth is on the queues page.</p>"
        )
    else:
        label = (
            f"Read the {counted(count, 'letter')} anyway: one delivery counted on each"
            if can_drop
            else f"Read the {counted(count, 'letter')}: one delivery counted on each"
        )
        parts.append(
            f'<form method="post" action="{e(action)}">{csrf_field(csrf)}'
            f'<button class="confirm" name="read" value="1">{label}</button></form>'
        )
    parts.append(f'<p><a href="{e(back)}">back, without reading</a></p>')
    return page(title, "".join(parts))


def result_page(title: str, lines: Sequence[str], *, back: str, error: bool = False) -> str:
    kind = "error" if error else "report"
    body = "".join(f'<p class="{kind}">{e(line)}</p>' for line in lines)
    return page(title, f'{body}<p><a href="{e(back)}">back</a></p>')


def being_moved_page(queue: str, *, job_id: str | None, job_title: str | None) -> str:
    """A page of ``queue`` asked for while a run moves its letters (409): nothing is read, so
    that the run moves exactly what its plan said (console/queue_use.py)."""
    run = (
        f'<a href="/jobs/{path_part(job_id)}">{e(job_title or "a run")}</a>'
        if job_id is not None
        else "a run"
    )
    return page(
        "Being moved",
        f'<p class="note" data-state="being-moved">The letters of {e(queue)} are being moved '
        f"by {run}: the letter asked for may be among them. The console reads none of "
        f"{e(queue)}'s letters until that run is done, so that it moves exactly what its "
        "plan said; open this page again then.</p>"
        '<p><a href="/">queues</a></p>',
    )


def token_page(*, wrong: bool = False) -> str:
    """The answer to a request without the token (401): nothing of the broker, and a form
    that opens the console with one (a token read from ``--token-file`` is not printed; the
    browser URL-encodes what is typed)."""
    said = (
        '<p class="error">That is not the token.</p>'
        if wrong
        else "<p>Open the address rr console printed, or give its token (with "
        "<code>--token-file</code>: the one in that file).</p>"
    )
    return page(
        "The token",
        f'{said}<form method="get" action="/"><label>token <input type="password" '
        'name="token" autocomplete="off" size="40"></label> <button>Open</button></form>',
    )


def error_page(status: int, text: str) -> str:
    return page(
        f"{status}",
        f'<p class="error">{e(text)}</p><p><a href="/">back to the queues</a></p>',
    )
