"""A group's letters page by page, a letter by its place, and the letters selected on it
(console/selection.py)."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

from aiohttp import web

from rabbitctl_retry.console.letter_list import MAX_PER_PAGE, PER_PAGE, GroupLetters
from rabbitctl_retry.console.reads import (
    letter_at,
    read_group_letters,
)
from rabbitctl_retry.console.routes.common import (
    counted_letters,
    not_found,
    nth_of,
    page_search,
    queue_of,
    read_gate,
    read_note,
    reads_of,
    respond,
    unread_note,
)
from rabbitctl_retry.console.routes.message import letter_view
from rabbitctl_retry.console.search import Matching
from rabbitctl_retry.console.selection import parse as parse_selection
from rabbitctl_retry.console.state import STATE
from rabbitctl_retry.console.views import base as html
from rabbitctl_retry.console.views import letters as letters_view
from rabbitctl_retry.console.views import message as message_view
from rabbitctl_retry.dlq.groups import parse_group_id
from rabbitctl_retry.errors import UsageError


async def group_letters(request: web.Request) -> web.Response:
    """One page of a group's letters (console/letter_list.py): every letter reachable."""
    state = request.app[STATE]
    queue = queue_of(request)
    group_id = request.match_info["group"]
    parsed = parse_group_id(group_id)
    if parsed is None:
        raise not_found("no such group: the groups page lists them")
    page_number = nth_of(request.query.get("page"), name="page")
    per_page = min(nth_of(request.query.get("per") or PER_PAGE, name="per"), MAX_PER_PAGE)
    search = page_search(request, html.letters_path(queue, group_id))
    if isinstance(search, web.Response):
        return search
    queue_state = await reads_of(request, queue)
    back = f"/queues/{html.path_part(queue)}/groups"
    gate = read_gate(request, queue_state, f"Letters of group {group_id}", back)
    if gate is not None:
        return gate
    matching = Matching(search, state.config.settings.wait_queues, datetime.now(UTC))
    listing = GroupLetters(
        group_id=group_id,
        dimensions=parsed[0],
        page=page_number,
        per_page=per_page,
        keep=matching.keep,
    )
    unread = await unread_note(state, queue)
    await read_group_letters(state.config.connect, queue, state.config.settings, listing)
    page = letters_view.group_letters_page(
        queue,
        listing,
        note=read_note(queue_state),
        unread=unread,
        search=search,
        searched=matching.read,
        read_only=state.config.read_only,
        csrf=state.csrf,
    )
    return respond(page)


async def position_page(request: web.Request) -> web.Response:
    """The letter at a position of the queue: how a letter without a message id is opened
    (shown, not edited or retried alone: its group's retry takes it)."""
    state = request.app[STATE]
    queue = queue_of(request)
    position = nth_of(request.match_info["position"], name="position")
    queue_state = await reads_of(request, queue)
    back = f"/queues/{html.path_part(queue)}/groups"
    gate = read_gate(request, queue_state, f"Letter #{position} of {queue}", back)
    if gate is not None:
        return gate
    letter, scan = await letter_at(state.config.connect, queue, position)
    if letter is None:
        raise not_found(f"{queue} holds {counted_letters(scan.read)}: none at #{position:,}")
    view = letter_view(queue, letter.properties.message_id or "", 1, position, letter, 0)
    view = dataclasses.replace(view, editable=None, not_editable=None, by_position=True)
    page = message_view.message_page(
        view, read_only=True, csrf=state.csrf, note=read_note(queue_state)
    )
    return respond(page)


async def selection(request: web.Request) -> web.Response:
    """The letters ticked on a group's letters page (or its whole page), and one form per
    action that plans it for them (console/selection.py): nothing is read or done here."""
    state = request.app[STATE]
    queue = queue_of(request)
    group_id = request.match_info["group"]
    if parse_group_id(group_id) is None:
        raise not_found("no such group: the groups page lists them")
    form = await request.post()
    field_name = "row" if form.get("which") == "page" else "pick"
    values = [str(value) for value in form.getall(field_name, [])]
    back = html.letters_path(queue, group_id)
    try:
        chosen = parse_selection(values)
    except UsageError as error:
        return respond(
            html.result_page("Nothing selected", [str(error)], back=back, error=True), 400
        )
    page = letters_view.selection_page(
        queue, group_id, chosen, csrf=state.csrf, target=state.config.target
    )
    return respond(page)
