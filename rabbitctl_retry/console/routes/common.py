"""What the console's handlers share: the answer as a page, the queue of the path, the read
gate (docs/reference/console.md, "Reading is free, or asked"), the search asked for, and what a page
says it could not read."""

from __future__ import annotations

import dataclasses

from aiohttp import web

from rabbitctl_retry.console.reads import (
    held_by_readers,
    queue_states,
)
from rabbitctl_retry.console.search import (
    Search,
    SearchError,
    search_of,
)
from rabbitctl_retry.console.state import STATE, State
from rabbitctl_retry.console.views import base as html
from rabbitctl_retry.dlq.read_cost import Cost
from rabbitctl_retry.errors import RrError, UsageError
from rabbitctl_retry.ops.probe import QueueState


def respond(text: str, status: int = 200) -> web.Response:
    return web.Response(text=text, status=status, content_type="text/html", charset="utf-8")


def not_found(text: str) -> web.HTTPNotFound:
    """A 404 as a page of the console, with its way back."""
    return web.HTTPNotFound(text=html.error_page(404, text), content_type="text/html")


def queue_of(request: web.Request) -> str:
    """The queue of the path: one the console was started for (others are refused)."""
    queue = request.match_info["queue"]
    if queue not in request.app[STATE].config.queues:
        raise not_found(f"{queue} is not a queue of this console")
    return queue


async def reads_of(request: web.Request, queue: str) -> QueueState:
    """``queue``'s state, with what a read costs its letters; an error page when it cannot
    be read."""
    _, found = await queue_states(request.app[STATE].config.connect, [queue])
    (_, queue_state, error) = found[0]
    if queue_state is None:
        raise RrError(error or f"{queue}: its state could not be read")
    return queue_state


def read_gate(
    request: web.Request, queue_state: QueueState, title: str, back: str
) -> web.Response | None:
    """None when this request may read the queue: a read that costs nothing (any request), or
    one asked for by the page's own form (a POST; ``access`` checked its CSRF value). Else the
    page that says what a read costs and asks, or says why a read-only console does not read
    it (docs/reference/console.md, "Reading is free, or asked")."""
    reads = queue_state.reads
    if reads.cost is Cost.FREE:
        return None
    read_only = request.app[STATE].config.read_only
    if request.method == "POST":
        if read_only and reads.can_drop:
            return respond(html.error_page(403, READ_ONLY_DROPS), 403)
        return None
    action = None if read_only and reads.can_drop else request.path_qs
    return respond(
        html.read_gate_page(
            title,
            why=reads.why,
            count=queue_state.message_count,
            can_drop=reads.can_drop,
            action=action,
            csrf=request.app[STATE].csrf,
            back=back,
        )
    )


READ_ONLY_DROPS = "read-only console: reading this queue can drop letters, so it is not read"


def page_search(request: web.Request, back: str) -> Search | web.Response:
    """The search the page's form asks for (console/search.py), or the 400 page that says
    why it cannot be run, with a way back to the page without it."""
    config = request.app[STATE].config
    try:
        found = search_of(request.query)
    except SearchError as error:
        page = html.result_page("Search not run", [str(error)], back=back, error=True)
        return respond(page, 400)
    return dataclasses.replace(found, target=config.target)


def read_note(queue_state: QueueState) -> str | None:
    reads = queue_state.reads
    return None if reads.cost is Cost.FREE else f"{reads.why}: this read counted one each"


async def unread_note(state: State, queue: str) -> str:
    """What a page that reads ``queue`` cannot see: the letters another reader holds (a
    colleague's ``rr dlq inspect``, another console, a consumer), counted by the management
    API when the console has one (docs/reference/console.md, "What the numbers count")."""
    held = await held_by_readers(state.config.management)
    if isinstance(held, str):
        return (
            f"the management API did not answer ({held}): letters another reader holds are "
            "not counted"
        )
    if held is None:
        return (
            "letters another reader holds now (rr dlq inspect, another console, a consumer) "
            "are not seen here; with --management-url the console counts them"
        )
    count = held.get(queue, 0)
    if not count:
        return "no letter was held by another reader (the management API's count)"
    return (
        f"{html.counted(count, 'letter')} held by another reader (rr dlq inspect, another "
        "console, a consumer) could not be read: the management API counts them; load the "
        "page again once they are given back"
    )


def counted_letters(count: int) -> str:
    return html.counted(count, "dead letter")


def nth_of(text: object, *, name: str = "n") -> int:
    try:
        nth = int(str(text or "1"))
    except ValueError:
        raise UsageError(f"{name}: give a number") from None
    if nth < 1:
        raise UsageError(f"{name}: at least 1")
    return nth
