"""The queues page (``/``) and the style sheet."""

from __future__ import annotations

from aiohttp import web

from rabbitctl_retry.console.reads import (
    held_by_readers,
    queue_states,
)
from rabbitctl_retry.console.routes.common import respond
from rabbitctl_retry.console.state import STATE
from rabbitctl_retry.console.views import queues as queues_view
from rabbitctl_retry.console.views import style as style_view
from rabbitctl_retry.errors import censor_urls


async def index(request: web.Request) -> web.Response:
    state = request.app[STATE]
    server, found = await queue_states(state.config.connect, state.config.queues)
    held = await held_by_readers(state.config.management)
    counts = held if isinstance(held, dict) else {}
    rows = [
        queues_view.QueueRow(
            name=name,
            depth=queue_state.message_count if queue_state else None,
            quorum=queue_state.quorum if queue_state else None,
            samples=tuple(state.samples.get(name, ())),
            error=censor_urls(error) if error else None,
            reads=queue_state.reads.cost.value if queue_state else "",
            held=counts.get(name),
            using=state.jobs.using(name),
        )
        for name, queue_state, error in found
    ]
    return respond(queues_view.index_page(rows, read_only=state.config.read_only, server=server))


async def style(request: web.Request) -> web.Response:
    return web.Response(text=style_view.STYLE, content_type="text/css")
