"""A queue's groups page and the groups of every queue (``/groups``), each with its search."""

from __future__ import annotations

from datetime import UTC, datetime

from aiohttp import web

from rabbitctl_retry.console.jobs import BeingMoved
from rabbitctl_retry.console.reads import read_groups
from rabbitctl_retry.console.routes.common import (
    page_search,
    queue_of,
    read_gate,
    read_note,
    reads_of,
    respond,
    unread_note,
)
from rabbitctl_retry.console.search import Matching
from rabbitctl_retry.console.state import STATE
from rabbitctl_retry.console.views import base as html
from rabbitctl_retry.console.views import groups as groups_view
from rabbitctl_retry.dlq.groups import Grouping
from rabbitctl_retry.dlq.read_cost import Cost


async def groups(request: web.Request) -> web.Response:
    state = request.app[STATE]
    queue = queue_of(request)
    search = page_search(request, f"/queues/{html.path_part(queue)}/groups")
    if isinstance(search, web.Response):
        return search
    queue_state = await reads_of(request, queue)
    gate = read_gate(request, queue_state, f"Groups of {queue}", "/")
    if gate is not None:
        return gate
    unread = await unread_note(state, queue)
    now = datetime.now(UTC)
    matching = Matching(search, state.config.settings.wait_queues, now)
    grouping, scan = await read_groups(
        state.config.connect, queue, state.config.settings, now, keep=matching.keep
    )
    return respond(
        groups_view.groups_page(
            queue,
            grouping.ranked(),
            read=grouping.count,
            in_queue=scan.in_queue,
            ungrouped=grouping.ungrouped,
            read_only=state.config.read_only,
            csrf=state.csrf,
            note=read_note(queue_state),
            unread=unread,
            search=search,
            searched=matching.read,
        )
    )


async def all_groups(request: web.Request) -> web.Response:
    """The groups of every queue of the console in one table (a group's id is the same in
    every queue: ``rr dlq groups Q1 Q2 ...``); each queue read in its turn, as its own page
    reads it, and one that a run moves now is said, not read."""
    state = request.app[STATE]
    queues = state.config.queues
    search = page_search(request, "/groups")
    if isinstance(search, web.Response):
        return search
    states = [await reads_of(request, queue) for queue in queues]
    counting = [q for q in states if q.reads.cost is not Cost.FREE]
    if counting:
        gate = read_gate(request, counting[0], "Groups of every queue", "/")
        if gate is not None:
            return gate
    grouping = Grouping()
    read: dict[str, int] = {}
    searched: dict[str, int] = {}
    notes: list[str] = []
    for queue in queues:
        matching = Matching(search, state.config.settings.wait_queues, datetime.now(UTC))
        try:
            async with state.jobs.reading(queue):
                before = grouping.count
                await read_groups(
                    state.config.connect,
                    queue,
                    state.config.settings,
                    matching.now,
                    grouping,
                    keep=matching.keep,
                )
                read[queue] = grouping.count - before
                searched[queue] = matching.read
        except BeingMoved:
            notes.append(f"{queue}: a run of this console is moving its letters; not read")
    notes += [f"{q.name}: {q.reads.why}: this read counted one each" for q in counting]
    page = groups_view.all_groups_page(
        grouping.ranked(), read=read, notes=notes, search=search, searched=searched
    )
    return respond(page)
