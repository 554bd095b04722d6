"""Pure. The search form and what a search found: how many matched of how many read, and the
command line that selects the same letters (docs/reference/console.md)."""

from __future__ import annotations

from collections.abc import Mapping

from rabbitctl_retry.console.search import Search
from rabbitctl_retry.console.views.base import counted, e, letters_path, path_part


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
    search: Search,
    queue: str,
    group_id: str | None,
    *,
    matched: int,
    read: int,
    read_only: bool = False,
) -> str:
    """How many letters matched of how many read, and the command lines that select them
    (``read_only``: the console retries nothing, so the command line is the way to)."""
    where = "the group's " if group_id else ""
    back = letters_path(queue, group_id) if group_id else f"/queues/{path_part(queue)}/groups"
    return (
        f'<p class="search-count">{matched:,} of {where}{counted(read, "dead letter")} read '
        f"match {e(', '.join(search.expressions))} "
        f'(<a href="{e(back)}">clear the search</a>)</p>'
        '<p class="search-command">The same letters on the command line: '
        f"<code>{e(search.command(queue, group_id))}</code></p>"
        + f'<p class="note">{_what_to_do(group_id, read_only)} '
        + f"<code>{e(search.command(queue, group_id, verb='replay'))}</code></p>"
    )


def _what_to_do(group_id: str | None, read_only: bool) -> str:
    """How the letters found are retried, moved or discarded from this page (escaped)."""
    if read_only:
        return (
            "This console is read-only: it retries, moves and discards nothing. To retry only "
            "the letters found, run (<code>rr dlq move --to QUEUE</code> and <code>rr dlq "
            "purge</code> take the same conditions)"
        )
    if group_id:
        return (
            "To retry, move or discard only the letters found, tick them (or select this "
            "page) below; or run"
        )
    return (
        "Retry, move and discard on this page act on whole groups. To act on the letters "
        "found only, open a group's letters and tick them; or run"
    )


def all_search_summary(search: Search, matched: Mapping[str, int], read: Mapping[str, int]) -> str:
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
