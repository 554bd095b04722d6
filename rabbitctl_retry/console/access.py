"""The access middleware of ``rr console`` (console/security.py's rules): host, token, cookie,
CSRF, origin and read-only, the security headers on every answer, and a page of a queue kept
from reading it while a run moves its letters (console/jobs.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from urllib.parse import urlencode

from aiohttp import web
from multidict import MultiDictProxy

from rabbitctl_retry.console import security as sec
from rabbitctl_retry.console.jobs import BeingMoved
from rabbitctl_retry.console.listen import HTTP_LOG
from rabbitctl_retry.console.routes.common import respond
from rabbitctl_retry.console.state import STATE
from rabbitctl_retry.console.views import base as html
from rabbitctl_retry.errors import RrError, UsageError, censor_urls

READ_GROUPS = "read-groups"
READ_MESSAGE = "read-message"
READ_BODY = "read-body"
READ_LETTERS = "read-letters"
READ_POSITION = "read-position"
READ_ALL_GROUPS = "read-all-groups"
RUN_GROUP = "run-group"
READS = frozenset(
    {READ_GROUPS, READ_MESSAGE, READ_BODY, READ_LETTERS, READ_POSITION, READ_ALL_GROUPS}
)
"""The forms that only read a queue whose reads count (a read-only console takes them where
no letter can be dropped: console/routes/common.py ``read_gate``)."""


@web.middleware
async def access(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    """Host, token, CSRF and read-only checks; the security headers on every answer. The
    connection is busy meanwhile: it is not closed to make room (console/listen.py)."""
    busy = request.app[STATE].admission.busy
    busy.add(request.protocol)
    try:
        response = await _checked(request, handler)
    except web.HTTPException as error:  # a redirect, a 404: an answer too
        error.headers.update(sec.HEADERS)
        raise
    finally:
        busy.discard(request.protocol)
    response.headers.update(sec.HEADERS)
    return response


async def _checked(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    state = request.app[STATE]
    token = state.config.token
    reached = _reached(request)
    if not sec.host_allowed(request.headers.get("Host"), state.allowed, reached):
        return web.Response(status=421, text="rr console: unknown Host\n")
    given = request.query.get("token")
    if given is not None:
        if not sec.token_matches(given, token):
            return respond(html.token_page(wrong=True), 401)
        rest = [(k, v) for k, v in request.query.items() if k != "token"]
        # the path as sent (percent-encoded): a %0d%0a in it stays out of the header
        target = request.rel_url.raw_path + (f"?{urlencode(rest)}" if rest else "")
        response = web.Response(status=303, headers={"Location": target})
        response.set_cookie(
            sec.COOKIE, sec.cookie_of(token), httponly=True, samesite="Strict", path="/"
        )
        return response
    by_bearer = sec.token_matches(sec.bearer(request.headers.get("Authorization")), token)
    if not (by_bearer or sec.cookie_matches(request.cookies.get(sec.COOKIE), token)):
        return respond(html.token_page(), 401)
    if not by_bearer:
        refused = sec.fetch_site_refusal(request.headers.get("Sec-Fetch-Site"))
        if refused is not None:
            return respond(html.error_page(403, refused), 403)
    if request.method not in ("GET", "HEAD"):
        if state.config.read_only and request.match_info.route.name not in READS:
            return respond(html.error_page(403, "read-only console: no action"), 403)
        if not sec.origin_allowed(request.headers.get("Origin"), state.allowed, reached):
            return respond(html.error_page(403, "a form of another site"), 403)
        form = await _form(request)
        if form is None:
            response = respond(html.error_page(408, "the form did not all come in time"), 408)
            response.force_close()
            return response
        csrf = form.get("csrf")
        if not sec.csrf_matches(csrf if isinstance(csrf, str) else None, token):
            return respond(html.error_page(403, "the form's CSRF value is missing or wrong"), 403)
    try:
        queue = request.match_info.get("queue")
        if queue is None or request.match_info.route.name == RUN_GROUP:
            return await handler(request)
        # a page of a queue reads it: not while a run moves its letters (console/jobs.py)
        async with state.jobs.reading(queue):
            return await handler(request)
    except web.HTTPException:
        raise
    except BeingMoved as moved:
        return respond(_being_moved(moved), 409)
    except UsageError as error:
        return respond(html.error_page(400, censor_urls(str(error))), 400)
    except RrError as error:
        return respond(html.error_page(502, censor_urls(str(error))), 502)


async def _form(
    request: web.Request,
) -> MultiDictProxy[str | bytes | bytearray | web.FileField] | None:
    """The POST's form, or None when its body stops coming for ``idle_close_s``."""
    try:
        async with asyncio.timeout(request.app[STATE].config.idle_close_s):
            return await request.post()
    except TimeoutError:
        HTTP_LOG.warning(
            "a form from %s did not all come in time: answered 408", request.remote or "?"
        )
        return None


def _being_moved(moved: BeingMoved) -> str:
    job = moved.job
    return html.being_moved_page(
        moved.queue,
        job_id=job.id if job is not None else None,
        job_title=job.title if job is not None else None,
    )


def _reached(request: web.Request) -> str | None:
    """The address this request reached, for a console on every address (else None)."""
    if not request.app[STATE].any_address or request.transport is None:
        return None
    return sec.reached_host(request.transport.get_extra_info("sockname"))
