"""The aiohttp application of ``rr console`` (docs/reference/console.md): its routes
(console/routes/), the access middleware (console/access.py), the depth sampler, and :func:`serve`.

Every broker action goes through the operations of the ``rr dlq`` commands (console/reads.py),
each on a connection of its own opened with the ``Connect`` the CLI hands over; the web server
runs on the same event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
import time
from collections import deque
from collections.abc import AsyncIterator, Callable

from aiohttp import web

from rabbitctl_retry.console import security as sec
from rabbitctl_retry.console.access import (
    READ_ALL_GROUPS,
    READ_BODY,
    READ_GROUPS,
    READ_LETTERS,
    READ_MESSAGE,
    READ_POSITION,
    RUN_GROUP,
    access,
)
from rabbitctl_retry.console.address import base_address, is_wildcard, listen_error
from rabbitctl_retry.console.jobs import Jobs
from rabbitctl_retry.console.listen import (
    Admission,
    ConsoleSite,
    quiet_http_log,
    server_options,
)
from rabbitctl_retry.console.reads import queue_states
from rabbitctl_retry.console.routes.edit import edit
from rabbitctl_retry.console.routes.groups import all_groups, groups
from rabbitctl_retry.console.routes.letters import group_letters, position_page, selection
from rabbitctl_retry.console.routes.message import body, message, retry_letter
from rabbitctl_retry.console.routes.plans import plan_group, run_group
from rabbitctl_retry.console.routes.queues import index, style
from rabbitctl_retry.console.routes.runs import job_page, runs_page
from rabbitctl_retry.console.state import STATE, ConsoleConfig, State
from rabbitctl_retry.errors import RrError

STOP_WAIT_S = 5.0
"""How long a stop waits for the depth sampler and for open requests."""
SAMPLES = 120
"""Depths kept per queue (at the default 5 s: the last 10 minutes)."""
MAX_FORM_BYTES = 4 * 1024 * 1024


async def _sample(app: web.Application) -> None:
    """Every ``sample_every_s``: each queue's depth, for the index page's lines."""
    state = app[STATE]
    while True:
        try:
            _, found = await queue_states(state.config.connect, state.config.queues)
        except RrError:
            found = []
        now = time.monotonic() - state.started
        for name, queue_state, _ in found:
            # while this console reads or moves a queue, its depth lacks the letters it holds:
            # no sample then (the line went to 0 on each of the console's own reads)
            if queue_state is not None and state.jobs.using(name) is None:
                kept = state.samples.setdefault(name, deque(maxlen=SAMPLES))
                kept.append((now, queue_state.message_count))
        await asyncio.sleep(state.config.sample_every_s)


async def _sampler(app: web.Application) -> AsyncIterator[None]:
    task = asyncio.ensure_future(_sample(app))
    yield
    task.cancel()
    # bounded: a reading cancelled in the middle of opening its connection must not hold the
    # console's stop (the connection's own close is bounded too)
    await asyncio.wait({task}, timeout=STOP_WAIT_S)
    await app[STATE].jobs.close()


def make_app(config: ConsoleConfig) -> web.Application:
    app = web.Application(middlewares=[access], client_max_size=MAX_FORM_BYTES)
    app[STATE] = State(
        config=config,
        jobs=Jobs(on_done=config.audit.write),
        allowed=sec.allowed_hosts(config.bind, config.port),
        admission=Admission(config.max_connections),
    )
    app.cleanup_ctx.append(_sampler)
    app.router.add_get("/", index)
    app.router.add_get("/static/console.css", style)
    app.router.add_get("/queues/{queue}/groups", groups)
    app.router.add_post("/queues/{queue}/groups", groups, name=READ_GROUPS)
    app.router.add_post("/queues/{queue}/groups/{group}/plan", plan_group)
    app.router.add_post("/queues/{queue}/groups/{group}/run", run_group, name=RUN_GROUP)
    app.router.add_post("/queues/{queue}/groups/{group}/selection", selection)
    app.router.add_get("/queues/{queue}/groups/{group}/letters", group_letters)
    app.router.add_post("/queues/{queue}/groups/{group}/letters", group_letters, name=READ_LETTERS)
    app.router.add_get("/queues/{queue}/positions/{position}", position_page)
    app.router.add_post("/queues/{queue}/positions/{position}", position_page, name=READ_POSITION)
    app.router.add_post("/queues/{queue}/messages/{message}/retry", retry_letter)
    app.router.add_get("/groups", all_groups)
    app.router.add_post("/groups", all_groups, name=READ_ALL_GROUPS)
    app.router.add_get("/jobs", runs_page)
    app.router.add_get("/jobs/{job}", job_page)
    app.router.add_get("/queues/{queue}/messages/{message}", message)
    app.router.add_post("/queues/{queue}/messages/{message}", message, name=READ_MESSAGE)
    app.router.add_get("/queues/{queue}/messages/{message}/body", body)
    app.router.add_post("/queues/{queue}/messages/{message}/body", body, name=READ_BODY)
    app.router.add_post("/queues/{queue}/messages/{message}/edit", edit)
    return app


async def serve(
    config: ConsoleConfig, started: Callable[[str], None], stop: asyncio.Event | None = None
) -> None:
    """Serve until SIGINT or SIGTERM (or ``stop`` is set); ``started`` is told the address
    (``http://127.0.0.1:8765``, without the token: the CLI says how to give it). A listen
    that fails is an rr error naming the address (console/address.py)."""
    app = make_app(config)
    quiet_http_log()
    runner = web.AppRunner(app, shutdown_timeout=STOP_WAIT_S, **server_options(config.idle_close_s))
    await runner.setup()
    site = ConsoleSite(runner, config.bind, config.port, app[STATE].admission)
    try:
        try:
            await site.start()
        except OSError as error:
            raise listen_error(config.bind, config.port, error) from None
        port = _bound_port(runner, config.port)
        app[STATE].allowed = sec.allowed_hosts(config.bind, port, (socket.gethostname(),))
        app[STATE].any_address = is_wildcard(config.bind)
        started(base_address(config.bind, port))
        if stop is None:
            stop = asyncio.Event()
            loop = asyncio.get_running_loop()
            for signum in (signal.SIGINT, signal.SIGTERM):
                with contextlib.suppress(NotImplementedError, RuntimeError):
                    loop.add_signal_handler(signum, stop.set)
        await stop.wait()
    finally:
        await runner.cleanup()


def _bound_port(runner: web.AppRunner, asked: int) -> int:
    for address in runner.addresses:
        if isinstance(address, tuple) and len(address) >= 2:
            return int(address[1])
    return asked


__all__ = ["ConsoleConfig", "make_app", "serve"]
