"""Pure. Every page of ``rr console`` as HTML, from plain data (docs/console.md).

Every value that comes from the broker or the user (queue names, message ids, headers,
bodies, error texts) goes through :func:`e`: HTML-escaped, quotes included, with control
characters shown as ``\\xNN`` escapes, so a hostile header cannot open a tag or a script, nor
move what follows it. Bodies are shown as text when they are UTF-8 without control
characters, else as a hex dump. Pages hold no script (the Content-Security-Policy forbids
it); a run in progress refreshes its page with ``<meta http-equiv="refresh">``.
"""

from __future__ import annotations

import html
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from urllib.parse import quote

from rabbitctl_retry.console.letter_list import GroupLetters, LetterRow
from rabbitctl_retry.console.search import Search
from rabbitctl_retry.console.selection import Selection, pick_value
from rabbitctl_retry.dlq.groups import Group
from rabbitctl_retry.fields import FieldValue
from rabbitctl_retry.retry.headers import (
    REPLAYED_AT_HEADER,
    REPLAYED_COUNT_HEADER,
    Death,
    count_value,
    utc_stamp,
)

MAX_BODY_BYTES = 64 * 1024
"""How much of a body a page shows."""
HEX_ROW = 16


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


# --------------------------------------------------------------------------- queues


@dataclass(frozen=True, slots=True)
class QueueRow:
    name: str
    depth: int | None
    """None: the queue could not be read (``error`` says why)."""
    quorum: bool | None
    samples: tuple[tuple[float, int], ...] = ()
    """(seconds since the console started, depth), oldest first."""
    error: str | None = None
    reads: str = ""
    """What a read costs its letters: ``free``, ``counted`` or ``spends``
    (``dlq/read_cost.py``)."""
    held: int | None = None
    """Letters another reader holds (``messages_unacknowledged``; None: no management API)."""
    using: str | None = None
    """What this console does with the queue now (``reading``, ``moving``), or None."""


def sparkline(samples: Sequence[tuple[float, int]], width: int = 240, height: int = 36) -> str:
    """The depths over time as an inline SVG polyline (no script)."""
    if len(samples) < 2:
        return ""
    start, end = samples[0][0], samples[-1][0]
    span = max(end - start, 1e-9)
    top = max(depth for _, depth in samples) or 1
    points = " ".join(
        f"{(at - start) / span * width:.1f},{height - depth / top * (height - 2) - 1:.1f}"
        for at, depth in samples
    )
    return (
        f'<svg class="spark" width="{width}" height="{height}" role="img" '
        f'aria-label="depth over the last {end - start:.0f} s">'
        f'<polyline fill="none" stroke="currentColor" points="{points}"/></svg>'
    )


_READS = {
    "free": "free",
    "counted": "counts a delivery",
    "spends": "counts toward its limit",
}
"""What a read costs a queue's letters, in the queues table (``dlq/read_cost.py``)."""


def _held_text(row: QueueRow) -> str:
    """What the depth does not count: letters this console or another reader holds."""
    if row.using == "moving":
        return '<br><span class="held">a run of this console is moving its letters</span>'
    if row.using == "reading":
        return '<br><span class="held">this console is reading it: the depth lacks them</span>'
    if row.held:
        return (
            f'<br><span class="held">+ {counted(row.held, "letter")} held by another reader</span>'
        )
    return ""


def index_page(rows: Sequence[QueueRow], *, read_only: bool, server: str) -> str:
    lines = [
        f'<p class="server">RabbitMQ {e(server)}{" - read only" if read_only else ""}</p>',
        '<table class="queues"><thead><tr><th>queue</th><th>type</th><th>messages</th>'
        "<th>a read</th><th>over time</th><th></th></tr></thead><tbody>",
    ]
    for row in rows:
        kind = {True: "quorum", False: "classic", None: "?"}[row.quorum]
        depth = e(f"{row.depth:,}") if row.depth is not None else e(row.error or "?")
        depth += _held_text(row)
        reads = _READS.get(row.reads, "")
        lines.append(
            f'<tr data-queue="{e(row.name)}"><td>{e(row.name)}</td><td>{kind}</td>'
            f'<td class="depth">{depth}</td><td data-reads="{e(row.reads)}">{reads}</td>'
            f"<td>{sparkline(row.samples)}</td>"
            f'<td><a href="/queues/{path_part(row.name)}/groups">groups</a></td></tr>'
        )
    lines.append("</tbody></table>")
    # no refresh: a page that reloads itself takes the keyboard's focus away (reload it)
    lines.append(
        '<p><a href="/groups">the groups of every queue</a> · '
        '<a href="/">reload</a> for the depths of now</p>'
    )
    return page("Dead-letter queues", "".join(lines))


# --------------------------------------------------------------------------- groups


def groups_page(
    queue: str,
    groups: Sequence[Group],
    *,
    read: int,
    in_queue: int,
    ungrouped: int,
    read_only: bool,
    csrf: str,
    note: str | None = None,
    unread: str | None = None,
    search: Search | None = None,
    searched: int = 0,
) -> str:
    """A queue's groups; with a ``search``, of the letters that match it (``read``: those,
    ``searched``: every letter read)."""
    parts = [f'<p class="note">{e(note)}</p>'] if note else []
    parts += [f'<p class="unread">{e(unread)}</p>'] if unread else []
    found = search or Search()
    parts.append(search_form(f"/queues/{path_part(queue)}/groups", found))
    if found.active:
        parts.append(search_summary(found, queue, None, matched=read, read=searched))
    parts.append(
        f'<p class="count">{counted(len(groups), "group")} of '
        f"{counted(read, 'dead letter')} read of {in_queue:,} in {e(queue)}</p>"
    )
    if ungrouped:
        parts.append(
            f'<p class="note">{counted(ungrouped, "dead letter")} of further causes not grouped</p>'
        )
    parts.append(
        '<table class="groups"><thead><tr><th>group</th><th>count</th><th>type</th>'
        "<th>message</th><th>origin</th><th>handler</th><th>first / last failure</th>"
        "<th>sample</th>" + ("" if read_only else "<th>actions</th>") + "</tr></thead><tbody>"
    )
    for group in groups:
        key = group.key
        sample = group.sample
        sample_link = (
            f'<a href="/queues/{path_part(queue)}/messages/{path_part(sample.message_id)}">'
            f"{e(sample.message_id)}</a>"
            if sample.message_id
            else f"#{sample.position}"
        )
        actions = ""
        if not read_only:
            actions = '<td class="actions">' + _group_forms(queue, group.id, csrf) + "</td>"
        parts.append(
            _group_cells(group, ("handler", e(key.handler or "-")))
            + f'<td data-label="sample">{sample_link}<br>'
            f'<a class="letters" href="{e(letters_path(queue, group.id, query=found.query()))}">'
            f"{'' if found.active else 'all '}{counted(group.count, 'letter')}</a></td>"
            f"{actions}</tr>"
        )
    parts.append("</tbody></table>")
    return page(f"Groups of {queue}", "".join(parts))


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


def group_letters_page(
    queue: str,
    listing: GroupLetters,
    *,
    note: str | None = None,
    unread: str | None = None,
    search: Search | None = None,
    searched: int = 0,
    read_only: bool = True,
    csrf: str = "",
) -> str:
    """One page of a group's letters: where each is in the queue, its id (a link to its page;
    by position when it has none), when it failed, its retry count and its error. With a
    ``search``, only the letters that match it (``searched``: the group's letters read).
    Unless ``read_only``, a box to tick on each row and the form that takes the letters ticked
    or the whole page to the choice of retry, move or discard (:func:`selection_page`)."""
    parts = [f'<p class="note">{e(note)}</p>'] if note else []
    parts += [f'<p class="unread">{e(unread)}</p>'] if unread else []
    found = search or Search()
    parts.append(search_form(letters_path(queue, listing.group_id), found))
    if found.active:
        parts.append(
            search_summary(found, queue, listing.group_id, matched=listing.matched, read=searched)
        )
    first = (listing.page - 1) * listing.per_page + 1
    last = first + len(listing.rows) - 1
    shown = f"{first:,}-{last:,}" if listing.rows else "none"
    parts.append(
        f'<p class="count">{shown} of {counted(listing.matched, "letter")} in group '
        f"{e(listing.group_id)} ({counted(listing.read, 'dead letter')} read in {e(queue)})</p>"
    )
    picking = not read_only and bool(listing.rows)
    parts.append(
        '<table class="letters"><thead><tr>'
        + ("<th>select</th>" if picking else "")
        + "<th>#</th><th>message</th><th>failed</th>"
        "<th>retries</th><th>error</th></tr></thead><tbody>"
    )
    for row in listing.rows:
        link = (
            f'<a href="{e(message_path(queue, row.message_id, row.nth))}">{e(row.message_id)}</a>'
            if row.message_id
            else f'<a href="{position_path(queue, row.position)}">(no id) #{row.position:,}</a>'
        )
        retries = "-" if row.retry_count is None else f"{row.retry_count:,}"
        parts.append(
            f'<tr data-position="{row.position}">'
            + (_pick_cell(row) if picking else "")
            + f'<td data-label="#">{row.position:,}</td>'
            f'<td data-label="message">{link}</td><td data-label="failed">'
            f'{stamp(row.failed_at)}</td><td data-label="retries">{retries}</td>'
            f'<td data-label="error">{e(row.error)}</td></tr>'
        )
    parts.append("</tbody></table>")
    if picking:
        parts.append(_select_form(queue, listing, csrf))
    pager = []
    if listing.page > 1:
        previous = letters_path(
            queue, listing.group_id, listing.page - 1, listing.per_page, query=found.query()
        )
        pager.append(f'<a rel="prev" href="{e(previous)}">previous page</a>')
    if listing.page < listing.pages:
        following = letters_path(
            queue, listing.group_id, listing.page + 1, listing.per_page, query=found.query()
        )
        pager.append(f'<a rel="next" href="{e(following)}">next page</a>')
    pager.append(f'<a href="/queues/{path_part(queue)}/groups">groups of {e(queue)}</a>')
    numbers = f"page {listing.page:,} of {listing.pages:,}"
    parts.append(f'<p class="pager">{numbers}: ' + " · ".join(pager) + "</p>")
    return page(f"Letters of group {listing.group_id}", "".join(parts))


def _row_value(row: LetterRow) -> str:
    """What a row's box sends: its message id, or its place and what it was
    (console/selection.py)."""
    if row.message_id is not None:
        return pick_value(message_id=row.message_id)
    return pick_value(position=row.position, shown=row.shown)


def _pick_cell(row: LetterRow) -> str:
    value = e(_row_value(row))
    which = e(row.message_id) if row.message_id is not None else f"#{row.position} (no id)"
    return (
        f'<td class="pick" data-label="select"><label class="pick">'
        f'<input type="checkbox" name="pick" value="{value}" form="select" '
        f'aria-label="select {which}"></label>'
        f'<input type="hidden" name="row" value="{value}" form="select"></td>'
    )


def _select_form(queue: str, listing: GroupLetters, csrf: str) -> str:
    """The form the rows' boxes belong to: the letters ticked, or every letter of this page,
    taken to the page where retry, move or discard is chosen (nothing is done yet)."""
    action = selection_path(queue, listing.group_id)
    return (
        f'<form id="select" method="post" action="{e(action)}" class="select">'
        f"{csrf_field(csrf)}"
        '<button name="which" value="checked">Retry, move or discard the letters ticked'
        "</button> "
        f'<button name="which" value="page">Select this page '
        f"({counted(len(listing.rows), 'letter')})</button></form>"
    )


def selection_path(queue: str, group_id: str) -> str:
    return f"/queues/{path_part(queue)}/groups/{path_part(group_id)}/selection"


def selection_page(queue: str, group_id: str, selection: Selection, *, csrf: str) -> str:
    """The letters selected, and one form per action (retry, move, discard) that plans it
    for them, as a group's are planned (:func:`plan_page`)."""
    picks = "".join(f'<input type="hidden" name="pick" value="{e(v)}">' for v in selection.values())
    back = letters_path(queue, group_id)
    return page(
        f"{counted(selection.count, 'letter')} of group {group_id}",
        f'<p class="selected">Selected in {e(queue)}: {e(selection.letters())}.</p>'
        '<p class="note">Each action shows its plan first (how many would go, and where); '
        "nothing is done before you confirm it.</p>"
        f'<div class="actions">{_group_forms(queue, group_id, csrf, picks)}</div>'
        f'<p><a href="{e(back)}">back to the letters</a></p>',
    )


def search_form(action: str, search: Search) -> str:
    """The search form (GET: it changes nothing): text, failure time and message id."""
    return (
        f'<form method="get" action="{e(action)}" class="search" role="search">'
        f'<label>text <input type="search" name="text" value="{e(search.text)}" size="24" '
        'placeholder="in the error, headers or body"></label> '
        f'<label>failed <input name="age" value="{e(search.age)}" size="8" '
        'placeholder="&gt;1h, &lt;10m"></label> '
        f'<label>message id <input name="id" value="{e(search.message_id)}" size="24"></label> '
        "<button>Search</button></form>"
    )


def search_summary(
    search: Search, queue: str, group_id: str | None, *, matched: int, read: int
) -> str:
    """How many letters matched of how many read, and the command lines that select them."""
    where = "the group's " if group_id else ""
    back = letters_path(queue, group_id) if group_id else f"/queues/{path_part(queue)}/groups"
    return (
        f'<p class="search-count">{matched:,} of {where}{counted(read, "dead letter")} read '
        f"match {e(', '.join(search.expressions))} "
        f'(<a href="{e(back)}">clear the search</a>)</p>'
        '<p class="search-command">The same letters on the command line: '
        f"<code>{e(search.command(queue, group_id))}</code></p>"
        '<p class="note">Retry, move and discard on this page act on whole groups. To retry '
        "only the letters found, run "
        f"<code>{e(search.command(queue, group_id, verb='replay'))}</code></p>"
    )


def _group_cells(group: Group, extra: tuple[str, str]) -> str:
    """A group's row up to its last cell: id, count, cause, origins, ``extra`` (a label and
    its cell's HTML) and its first and last failure."""
    key = group.key
    origins = ", ".join(f"{name} ({n:,})" for name, n in group.origins.counts.most_common())
    label, cell_html = extra
    return (
        f'<tr data-group="{e(group.id)}"><td class="id" data-label="group">{e(group.id)}</td>'
        f'<td class="n" data-label="count">{group.count:,}</td>'
        f'<td data-label="type">{e(key.error_type or "-")}</td>'
        f'<td data-label="message">{e(key.message or "-")}</td>'
        f'<td data-label="origin">{e(origins)}</td>'
        f'<td data-label="{label}">{cell_html}</td>'
        f'<td data-label="failed">{stamp(group.first_failed_at)}<br>'
        f"{stamp(group.last_failed_at)}</td>"
    )


def all_groups_page(
    groups: Sequence[Group],
    *,
    read: Mapping[str, int],
    notes: Sequence[str],
    search: Search | None = None,
    searched: Mapping[str, int] | None = None,
) -> str:
    """Every queue's groups in one table: each group's count, cause and the queues it is in,
    each a link to its letters there (where its retry, move and discard are). With a
    ``search``, the groups of the letters that match it (``read``: those, by queue;
    ``searched``: every letter read, by queue), and each queue's command line."""
    parts = [f'<p class="note">{e(note)}</p>' for note in notes]
    found = search or Search()
    parts.append(search_form("/groups", found))
    if found.active:
        parts.append(_all_search_summary(found, read, searched or {}))
    total = sum(read.values())
    shown = ", ".join(f"{e(q)} ({n:,})" for q, n in read.items())
    parts.append(
        f'<p class="count">{counted(len(groups), "group")} of {counted(total, "dead letter")} '
        f"read: {shown}</p>"
    )
    parts.append(
        '<table class="groups all"><thead><tr><th>group</th><th>count</th><th>type</th>'
        "<th>message</th><th>origin</th><th>queues</th><th>first / last failure</th>"
        "</tr></thead><tbody>"
    )
    for group in groups:
        queues = "<br>".join(
            f'<a href="{e(letters_path(name, group.id, query=found.query()))}">{e(name)}</a>'
            f" ({n:,})"
            for name, n in group.queues.counts.most_common()
        )
        parts.append(_group_cells(group, ("queues", queues)) + "</tr>")
    parts.append("</tbody></table>")
    return page("Groups of every queue", "".join(parts))


def _all_search_summary(search: Search, matched: Mapping[str, int], read: Mapping[str, int]) -> str:
    """How many letters matched of how many read in every queue, and each queue's command
    line that lists the same letters (``rr dlq inspect`` reads one queue)."""
    total = sum(read.values())
    commands = "".join(f"<li><code>{e(search.command(queue))}</code></li>" for queue in read)
    return (
        f'<p class="search-count">{sum(matched.values()):,} of {counted(total, "dead letter")} '
        f"read match {e(', '.join(search.expressions))} "
        '(<a href="/groups">clear the search</a>)</p>'
        '<p class="search-command">The same letters on the command line, queue by queue:</p>'
        f'<ul class="search-command">{commands}</ul>'
    )


def _group_forms(queue: str, group_id: str, csrf: str, picks: str = "") -> str:
    """One form per action, so that Enter in a box plans that box's action (the move's
    target box moves), never the first button of a shared form; discard last, apart, and
    styled as destructive. ``picks``: the hidden fields of a selection (the plan is then of
    those letters only)."""
    action = f"/queues/{path_part(queue)}/groups/{path_part(group_id)}/plan"

    def start(kind: str) -> str:
        return f'<form method="post" action="{action}" class="{kind}">{csrf_field(csrf)}{picks}'

    rate = (
        '<label>rate <input name="rate" size="5" placeholder="msg/s" inputmode="decimal"></label> '
    )
    return (
        start("retry")
        + rate
        + '<button name="action" value="retry">retry</button></form>'
        + start("move")
        + '<label>to <input name="to" size="12" placeholder="queue" required></label> '
        + rate
        + '<button name="action" value="move">move</button></form>'
        + start("discard")
        + '<button name="action" value="discard" class="danger">discard</button></form>'
    )


@dataclass(frozen=True, slots=True)
class Plan:
    queue: str
    group_id: str
    action: str
    """``retry``, ``move`` or ``discard``."""
    rate: str
    would: int
    read: int
    targets: Mapping[str, int]
    """Where the letters would go (retry), by queue."""
    failing: int
    reasons: Sequence[str] = ()
    to: str = ""
    """A move's target."""
    picks: Sequence[str] = ()
    """A selection's form values (console/selection.py): the plan is of those letters."""
    selected: str = ""
    """The selection in words (``letters a, b``), or "" for the whole group."""


_PAST = {"retry": "retried", "move": "moved", "discard": "discarded"}


def plan_page(plan: Plan, *, csrf: str) -> str:
    verb = _PAST[plan.action]
    rows = "".join(f"<li>{n:,} to {e(target)}</li>" for target, n in sorted(plan.targets.items()))
    failing = (
        f'<p class="note failing">{counted(plan.failing, "dead letter")} would fail and stay in '
        f"{e(plan.queue)}: " + e("; ".join(plan.reasons[:5])) + "</p>"
        if plan.failing
        else ""
    )
    rate = f" at most {e(plan.rate)} per second" if plan.rate else ""
    action = f"/queues/{path_part(plan.queue)}/groups/{path_part(plan.group_id)}/run"
    export = (
        '<p class="note">Discarded letters are gone for good. To keep a copy first'
        + (" (of the group's letters, the ones selected among them)" if plan.picks else "")
        + f": <code>{e(export_command(plan.queue, plan.group_id))}</code></p>"
        if plan.action == "discard" and plan.would
        else ""
    )
    if not plan.would:
        confirm = f'<p class="note">Nothing would be {verb}.</p>'
    else:
        label = (
            f"{plan.action.capitalize()} the {counted(plan.would, 'other')}"
            if plan.failing
            else f"{plan.action.capitalize()} {'it' if plan.would == 1 else 'them'}"
        )
        danger = " danger" if plan.action == "discard" else ""
        confirm = (
            f'<form method="post" action="{action}">{csrf_field(csrf)}'
            f'<input type="hidden" name="action" value="{e(plan.action)}">'
            f'<input type="hidden" name="rate" value="{e(plan.rate)}">'
            f'<input type="hidden" name="to" value="{e(plan.to)}">'
            f'<input type="hidden" name="expect" value="{plan.would}">'
            + "".join(f'<input type="hidden" name="pick" value="{e(v)}">' for v in plan.picks)
            + f'<button class="confirm{danger}">{e(label)}</button></form>'
        )
    which = (
        f"the {e(plan.selected)} selected of group {e(plan.group_id)}"
        if plan.picks
        else f"group {e(plan.group_id)}"
    )
    body = (
        f'<p class="plan">{plan.would:,} of {counted(plan.read, "dead letter")} in '
        f"{e(plan.queue)} would be {verb}{rate} ({which}).</p>"
        + (f"<ul>{rows}</ul>" if rows else "")
        + failing
        + export
        + confirm
        + (
            f'<p><a href="{e(letters_path(plan.queue, plan.group_id))}">back to the letters</a></p>'
            if plan.picks
            else f'<p><a href="/queues/{path_part(plan.queue)}/groups">back to the groups</a></p>'
        )
    )
    return page(f"{plan.action.capitalize()} group {plan.group_id}", body)


def export_command(queue: str, group_id: str) -> str:
    """The ``rr dlq export`` that keeps a copy of a group's letters in a file."""
    return (
        f"rr dlq export {shlex.quote(queue)} {shlex.quote(group_id)}.jsonl "
        f"--where group={shlex.quote(group_id)}"
    )


# --------------------------------------------------------------------------- jobs


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


# --------------------------------------------------------------------------- a message


@dataclass(frozen=True, slots=True)
class MessageView:
    queue: str
    message_id: str
    nth: int
    """Which of the letters with this id (1: the first in the queue)."""
    position: int
    properties: Mapping[str, object]
    headers: Mapping[str, FieldValue]
    deaths: Sequence[Death]
    body: bytes
    editable: str | None
    """The body as the edit box holds it: its text, as it is (None: not editable here)."""
    others: int = 0
    """More dead letters with the same id (the first is shown)."""
    not_editable: str | None = None
    """Why the edit box cannot hand the body back byte for byte (dlq/edit.py
    ``box_problem``)."""
    checksums: str = ""
    """What the letter shown is (dlq/same_id.py ``Checksums``): the edit form carries it, and
    the console publishes only that letter."""
    by_position: bool = False
    """Opened by its place in the queue (it has no message id): shown only."""


def came_back(headers: Mapping[str, FieldValue]) -> list[str]:
    """A letter that was retried (by the console or ``rr dlq replay``: ``rr-replayed-count``)
    and is a dead letter again: marked as such, with when it was last sent back."""
    times = count_value(headers.get(REPLAYED_COUNT_HEADER))
    if not times:
        return []
    at = headers.get(REPLAYED_AT_HEADER)
    when = f", last at {_field(at)}" if at is not None else ""
    return [
        f'<p class="came-back" data-replayed="{times}">Came back: retried '
        f"{counted(times, 'time')} before{e(when)}, and dead-lettered again.</p>"
    ]


def message_page(view: MessageView, *, read_only: bool, csrf: str, note: str | None = None) -> str:
    """``note``: what reading the queue cost (a read that counts, asked for), shown first;
    every read the page's forms make costs the same."""
    queue = view.queue
    props = "".join(
        f"<tr><th>{e(name)}</th><td>{e(value)}</td></tr>"
        for name, value in view.properties.items()
        if value is not None
    )
    headers = "".join(
        f"<tr><th>{e(name)}</th><td>{e(_field(value))}</td></tr>"
        for name, value in sorted(view.headers.items())
        if name != "x-death"
    )
    timeline = "".join(
        f"<tr><td>{stamp(death.time)}</td><td>{e(death.queue)}</td><td>{e(death.reason)}</td>"
        f"<td>{death.count:,}</td><td>{e(death.exchange or '(default)')}</td>"
        f"<td>{e(', '.join(death.routing_keys))}</td></tr>"
        for death in view.deaths
    )
    parts = [f'<p class="note">{e(note)}</p>'] if note else []
    parts += came_back(view.headers)
    parts += [
        f'<p class="where">#{view.position:,} in {e(queue)}'
        + (f" ({view.others:,} more with this id)" if view.others else "")
        + "</p>",
        "<h2>Deaths (newest first)</h2>",
        '<table class="timeline"><thead><tr><th>time</th><th>queue</th><th>reason</th>'
        "<th>count</th><th>exchange</th><th>routing keys</th></tr></thead><tbody>"
        + (timeline or '<tr><td colspan="6">no x-death</td></tr>')
        + "</tbody></table>",
        f'<h2>Properties</h2><table class="props">{props}</table>',
        f'<h2>Headers</h2><table class="headers">{headers}</table>',
        "<h2>Body</h2>" + body_html(view.body) + _download(view),
    ]
    if view.by_position:
        parts.append(
            '<p class="note no-id">This letter has no message id: it is shown by its place in '
            "the queue, which changes as letters come and go, so it is not retried or edited "
            "alone here; its group's retry, move or discard takes it.</p>"
        )
    if not read_only and not view.by_position:
        retry = f"/queues/{path_part(queue)}/messages/{path_part(view.message_id)}/retry"
        parts.append(
            f'<h2>Retry</h2><form method="post" action="{retry}" class="retry">'
            + csrf_field(csrf)
            + _letter_fields(view.nth, view.checksums)
            + "<button>Retry this letter unchanged</button></form>"
        )
    if not read_only and view.editable is not None:
        action = f"/queues/{path_part(queue)}/messages/{path_part(view.message_id)}/edit"
        parts.append(
            f'<h2>Edit and retry</h2><form method="post" action="{action}">{csrf_field(csrf)}'
            + _letter_fields(view.nth, view.checksums)
            # the body's text as it is, escaped only (a tab, a line break, a digit must come
            # back as they were): HTML drops the line break right after <textarea>, the one
            # written here, so that a body's own first line break stays
            + '<textarea name="body" rows="16" cols="100">\n'
            f"{html.escape(view.editable, quote=False)}</textarea><br>"
            f'<label><input type="checkbox" name="force" value="1"> {FORCE_LABEL}</label><br>'
            '<button name="step" value="preview">Show the change</button></form>'
        )
    elif not read_only and view.not_editable is not None:
        command = edit_command(queue, view.message_id, view.nth)
        parts.append(
            f'<h2>Edit and retry</h2><p class="note not-editable">This body cannot be edited '
            f"here: {e(view.not_editable)}; an edit box would not send it back as it is. "
            f"Edit it with <code>{e(command)}</code> (the file is published byte for byte).</p>"
        )
    title = f"Letter #{view.position:,} of {queue}" if view.by_position else view.message_id
    return page(title if view.by_position else f"Message {title}", "".join(parts))


def _download(view: MessageView) -> str:
    if view.by_position:
        return f'<p class="size">{len(view.body):,} bytes</p>'
    path = body_path(view.queue, view.message_id, view.nth)
    return (
        f'<p><a class="download" href="{e(path)}">download the whole body</a> '
        f"({len(view.body):,} bytes)</p>"
    )


FORCE_LABEL = "publish a body that no longer parses as its content type"
"""The edit form's checkbox that publishes such a body anyway."""
FORCE_BOX = f"tick “{FORCE_LABEL}” to publish it anyway"
"""The console's words for ``rr dlq edit --force`` (``dlq/edit.py`` ``body_problem``)."""


def edit_command(queue: str, message_id: str, nth: int) -> str:
    """The ``rr dlq edit`` that edits a body the edit box cannot carry, from a file."""
    position = f" --position {nth}" if nth > 1 else ""
    return f"rr dlq edit {shlex.quote(queue)} --id {shlex.quote(message_id)}{position} --body FILE"


def _letter_fields(nth: int, checksums: str) -> str:
    """Which letter an edit form is about: its place among the letters with its id and what
    it is (the console publishes nothing if the letter there is not that one)."""
    return (
        f'<input type="hidden" name="n" value="{nth}">'
        f'<input type="hidden" name="letter" value="{e(checksums)}">'
    )


def _field(value: FieldValue) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, datetime):
        return utc_stamp(value)
    if isinstance(value, list):
        return "[" + ", ".join(_field(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_field(v)}" for k, v in value.items()) + "}"
    return str(value)


def body_html(body: bytes) -> str:
    shown = body[:MAX_BODY_BYTES]
    more = (
        f'<p class="note">{len(body) - len(shown):,} more bytes not shown</p>'
        if len(body) > len(shown)
        else ""
    )
    try:
        text = shown.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is not None and all(c.isprintable() or c in "\n\t\r" for c in text):
        return f'<pre class="body">{html.escape(text, quote=True)}</pre>{more}'
    rows = []
    for at in range(0, len(shown), HEX_ROW):
        chunk = shown[at : at + HEX_ROW]
        printable = "".join(chr(b) if 32 <= b < 127 else "." for b in chunk)
        rows.append(f"{at:08x}  {chunk.hex(' '):<47}  {printable}")
    return f'<pre class="body hex">{html.escape(chr(10).join(rows), quote=True)}</pre>{more}'


# --------------------------------------------------------------------------- edit


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
            + _letter_fields(nth, checksums)
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


STYLE = """
body { font-family: system-ui, sans-serif; margin: 0; color: #1b1b1b; }
header { background: #3b3b6d; padding: .5em 1em; }
header a { color: #fff; text-decoration: none; font-weight: bold; }
header a.runs { font-weight: normal; margin-left: 1.5em; }
main { padding: 1em; }
table { border-collapse: collapse; margin: .5em 0; }
th, td { border: 1px solid #ccc; padding: .25em .5em; text-align: left; vertical-align: top; }
td.n, td.depth { text-align: right; }
pre.body, pre.diff { background: #f6f6f6; padding: .5em; overflow-x: auto; max-width: 100%; }
.note { color: #8a5a00; }
.error { color: #b00020; font-weight: bold; }
svg.spark { color: #3b3b6d; }
button.confirm { font-weight: bold; }
button.danger { color: #fff; background: #b00020; border: 1px solid #7a0016; }
td.actions form { display: inline-block; margin: 0 1.5em .3em 0; }
td.actions form.discard { margin-left: 1em; }
div.actions form { display: inline-block; margin: 0 1.5em .3em 0; }
div.actions form.discard { margin-left: 1em; }
td.pick input { width: 1.4em; height: 1.4em; }
form.select { margin: .5em 0; }
form.select button { margin: 0 1em .3em 0; }
input, button { font-size: 1em; }
button { padding: .3em .8em; }
@media (max-width: 700px) {
  main { padding: .5em; }
  table.groups, table.groups tbody, table.groups tr, table.groups td,
  table.letters, table.letters tbody, table.letters tr, table.letters td { display: block; }
  table.groups thead, table.letters thead { display: none; }
  table.groups tr, table.letters tr { border: 1px solid #ccc; margin: 0 0 1em; }
  table.groups td, table.letters td { border: none; border-bottom: 1px solid #eee; }
  table.groups td[data-label]::before, table.letters td[data-label]::before {
    content: attr(data-label) ": "; font-weight: bold; }
  td { overflow-wrap: anywhere; }
  table.queues, table.timeline, table.props, table.headers, table.runs {
    display: block; overflow-x: auto; }
  td.actions form, div.actions form { display: block; margin: .8em 0; }
  td.actions form.discard, div.actions form.discard { margin: 2em 0 .5em; }
  form.select button { display: block; margin: .6em 0; }
  textarea { width: 100%; box-sizing: border-box; }
  pre.body, pre.diff { white-space: pre-wrap; word-break: break-all; }
}
"""
"""The one style sheet (``/static/console.css``)."""
