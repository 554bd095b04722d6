"""Pure. A group's letters, page by page, with a box to tick on each row, and the page of the
letters selected, where retry, move or discard is chosen (docs/reference/console.md, "A group's
letters")."""

from __future__ import annotations

from collections.abc import Sequence

from rabbitctl_retry.console.letter_list import GroupLetters, LetterRow
from rabbitctl_retry.console.search import Search
from rabbitctl_retry.console.selection import NoCommandLine, Selection, pick_value
from rabbitctl_retry.console.views.base import (
    counted,
    csrf_field,
    e,
    letters_path,
    message_path,
    page,
    path_part,
    position_path,
    selection_path,
    stamp,
)
from rabbitctl_retry.console.views.groups import group_forms
from rabbitctl_retry.console.views.search import search_form, search_summary


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
            search_summary(
                found,
                queue,
                listing.group_id,
                matched=listing.matched,
                read=searched,
                read_only=read_only,
            )
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


def selection_page(
    queue: str,
    group_id: str,
    selection: Selection,
    *,
    csrf: str,
    target: Sequence[str] = (),
) -> str:
    """The letters selected, one form per action (retry, move, discard) that plans it for
    them, as a group's are planned (:func:`plan_page`), and the command line that retries the
    same letters (``target``: the console's ``--topology`` and ``--url``, masked)."""
    picks = "".join(f'<input type="hidden" name="pick" value="{e(v)}">' for v in selection.values())
    back = letters_path(queue, group_id)
    return page(
        f"{counted(selection.count, 'letter')} of group {group_id}",
        f'<p class="selected">Selected in {e(queue)}: {e(selection.letters())}.</p>'
        '<p class="note">Each action shows its plan first (how many would go, and where); '
        "nothing is done before you confirm it.</p>"
        f'<div class="actions">{group_forms(queue, group_id, csrf, picks)}</div>'
        + _selection_command(queue, group_id, selection, target)
        + f'<p><a href="{e(back)}">back to the letters</a></p>',
    )


def _selection_command(
    queue: str, group_id: str, selection: Selection, target: Sequence[str]
) -> str:
    """The command line that retries the letters selected (move and discard take the same
    ``--where``), or why there is none (console/selection.py ``Selection.command``)."""
    try:
        command = selection.command(queue, group_id, target)
    except NoCommandLine as why:
        return (
            f'<p class="selection-command none">No command line does the same: {e(str(why))}.</p>'
        )
    masked = " (the password masked)" if "--url" in target else ""
    return (
        f'<p class="selection-command">The same retry on the command line{masked}:<br>'
        f'<code class="line">{e(command)}</code><br><code>rr dlq move --to QUEUE</code> and '
        "<code>rr dlq purge</code> take the same conditions.</p>"
    )
