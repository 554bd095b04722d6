"""Pure. A queue's groups page and the groups of every queue (``/groups``), with one form per
group action (docs/reference/console.md, "What each page does")."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rabbitctl_retry.console.search import Search
from rabbitctl_retry.console.views.base import (
    counted,
    csrf_field,
    e,
    letters_path,
    page,
    path_part,
    stamp,
)
from rabbitctl_retry.console.views.search import all_search_summary, search_form, search_summary
from rabbitctl_retry.dlq.groups import Group


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
        summary = search_summary(
            found, queue, None, matched=read, read=searched, read_only=read_only
        )
        parts.append(summary)
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
            actions = '<td class="actions">' + group_forms(queue, group.id, csrf) + "</td>"
        parts.append(
            _group_cells(group, ("handler", e(key.handler or "-")))
            + f'<td data-label="sample">{sample_link}<br>'
            f'<a class="letters" href="{e(letters_path(queue, group.id, query=found.query()))}">'
            f"{'' if found.active else 'all '}{counted(group.count, 'letter')}</a></td>"
            f"{actions}</tr>"
        )
    parts.append("</tbody></table>")
    return page(f"Groups of {queue}", "".join(parts))


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
        parts.append(all_search_summary(found, read, searched or {}))
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


def group_forms(queue: str, group_id: str, csrf: str, picks: str = "") -> str:
    """One form per action, so that Enter in a box plans that box's action (the move's
    target box moves), never the first button of a shared form; discard last, apart, and
    styled as destructive. ``picks``: the hidden fields of a selection (the plan is then of
    those letters only)."""
    action = f"/queues/{path_part(queue)}/groups/{path_part(group_id)}/plan"

    def start(kind: str) -> str:
        return f'<form method="post" action="{action}" class="{kind}">{csrf_field(csrf)}{picks}'

    rate = (
        '<label>rate <input name="rate" size="5" placeholder="msg/s" inputmode="decimal"></label> '
        '<label>ramp <input name="ramp" size="4" placeholder="s" inputmode="decimal"></label> '
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
