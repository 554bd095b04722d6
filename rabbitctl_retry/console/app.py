"""The aiohttp application of ``rr console`` (docs/console.md): routes, the access middleware
(console/security.py), the depth sampler, and :func:`serve`.

Every broker action goes through the operations of the ``rr dlq`` commands (console/reads.py),
each on a connection of its own opened with the ``Connect`` the CLI hands over; the web server
runs on the same event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import signal
import socket
import sys
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from aiohttp import web
from multidict import MultiDictProxy

from rabbitctl_retry.console import html
from rabbitctl_retry.console import security as sec
from rabbitctl_retry.console.address import base_address, is_wildcard, listen_error
from rabbitctl_retry.console.audit import DEFAULT_LABEL, AuditLog
from rabbitctl_retry.console.jobs import BeingMoved, Job, Jobs, new_job_id
from rabbitctl_retry.console.letter_list import MAX_PER_PAGE, PER_PAGE, GroupLetters
from rabbitctl_retry.console.limits import IDLE_CLOSE_S
from rabbitctl_retry.console.listen import (
    HTTP_LOG,
    Admission,
    ConsoleSite,
    quiet_http_log,
    server_options,
)
from rabbitctl_retry.console.reads import (
    Settings,
    dry_run,
    find_letter,
    group_chooser,
    group_run,
    held_by_readers,
    letter_at,
    pick_letter,
    queue_states,
    read_group_letters,
    read_groups,
    transfer,
)
from rabbitctl_retry.console.reads import run_group as run_on_engine
from rabbitctl_retry.console.search import (
    Matching,
    Search,
    SearchError,
    search_of,
    target_words,
)
from rabbitctl_retry.console.selection import Selection, SelectionPick
from rabbitctl_retry.console.selection import parse as parse_selection
from rabbitctl_retry.dlq.choice import Chooser
from rabbitctl_retry.dlq.edit import (
    EditRequest,
    body_problem,
    box_body,
    box_problem,
    box_size_problem,
    box_text_problem,
    diff_lines,
    sha256_hex,
)
from rabbitctl_retry.dlq.groups import Grouping, parse_group_id
from rabbitctl_retry.dlq.rate import parse_rate
from rabbitctl_retry.dlq.read_cost import Cost
from rabbitctl_retry.dlq.replay import ReplayPlan
from rabbitctl_retry.dlq.replay import choose as choose_replay
from rabbitctl_retry.dlq.report import (
    TransferKind,
    TransferOutcome,
    TransferReport,
    limit_reached,
    transfer_summary,
)
from rabbitctl_retry.dlq.same_id import Checksums, LetterPick, checksums
from rabbitctl_retry.errors import RrError, UsageError, censor_urls, write_failure
from rabbitctl_retry.ops import transfer as engine
from rabbitctl_retry.ops.edit import original_line, publish_edit
from rabbitctl_retry.ops.probe import Connect, QueueState
from rabbitctl_retry.ops.transfer import TransferOptions
from rabbitctl_retry.ops.transfers import TransferRun
from rabbitctl_retry.retry.headers import deaths
from rabbitctl_retry.transport.base import Delivery
from rabbitctl_retry.transport.management import ManagementApi

STOP_WAIT_S = 5.0
"""How long a stop waits for the depth sampler and for open requests."""
SAMPLES = 120
"""Depths kept per queue (at the default 5 s: the last 10 minutes)."""
MAX_FORM_BYTES = 4 * 1024 * 1024


@dataclass
class ConsoleConfig:
    connect: Connect
    queues: list[str]
    settings: Settings
    token: str
    read_only: bool = False
    bind: str = "127.0.0.1"
    port: int = 8765
    keep_dir: Path = Path(".")
    """Where an edit writes the original (an export line)."""
    sample_every_s: float = 5.0
    idle_close_s: float = IDLE_CLOSE_S
    """A connection without a whole request for this long is closed (console/limits.py)."""
    max_connections: int | None = None
    """Connections held at once (None: from the limit of open files, console/limits.py)."""
    audit: AuditLog = field(default_factory=lambda: AuditLog(DEFAULT_LABEL, sys.stderr))
    """The record of every action (console/audit.py)."""
    management: ManagementApi | None = None
    """The management API, when given: the pages count the letters other readers hold."""
    urls: tuple[str, ...] = ()
    """Each ``--url`` as given, repeated in a search's command line, masked."""
    topology_path: str | None = None
    """``--topology`` as given, repeated in a search's command line."""


@dataclass
class State:
    config: ConsoleConfig
    jobs: Jobs = field(default_factory=Jobs)
    allowed: frozenset[str] = frozenset()
    any_address: bool = False
    """Listening on every address (``--bind 0.0.0.0`` or ``::``): a request may name the
    address it reached (console/security.py)."""
    started: float = field(default_factory=time.monotonic)
    samples: dict[str, deque[tuple[float, int]]] = field(default_factory=dict)
    admission: Admission = field(default_factory=Admission)

    @property
    def csrf(self) -> str:
        return sec.csrf_of(self.config.token)


STATE = web.AppKey("state", State)

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
no letter can be dropped: ``_gate``)."""


def _page(text: str, status: int = 200) -> web.Response:
    return web.Response(text=text, status=status, content_type="text/html", charset="utf-8")


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
            return _page(html.token_page(wrong=True), 401)
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
        return _page(html.token_page(), 401)
    if not by_bearer:
        refused = sec.fetch_site_refusal(request.headers.get("Sec-Fetch-Site"))
        if refused is not None:
            return _page(html.error_page(403, refused), 403)
    if request.method not in ("GET", "HEAD"):
        if state.config.read_only and request.match_info.route.name not in READS:
            return _page(html.error_page(403, "read-only console: no action"), 403)
        if not sec.origin_allowed(request.headers.get("Origin"), state.allowed, reached):
            return _page(html.error_page(403, "a form of another site"), 403)
        form = await _form(request)
        if form is None:
            response = _page(html.error_page(408, "the form did not all come in time"), 408)
            response.force_close()
            return response
        csrf = form.get("csrf")
        if not sec.csrf_matches(csrf if isinstance(csrf, str) else None, token):
            return _page(html.error_page(403, "the form's CSRF value is missing or wrong"), 403)
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
        return _page(_being_moved(moved), 409)
    except UsageError as error:
        return _page(html.error_page(400, censor_urls(str(error))), 400)
    except RrError as error:
        return _page(html.error_page(502, censor_urls(str(error))), 502)


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


def _not_found(text: str) -> web.HTTPNotFound:
    """A 404 as a page of the console, with its way back."""
    return web.HTTPNotFound(text=html.error_page(404, text), content_type="text/html")


def _queue(request: web.Request) -> str:
    """The queue of the path: one the console was started for (others are refused)."""
    queue = request.match_info["queue"]
    if queue not in request.app[STATE].config.queues:
        raise _not_found(f"{queue} is not a queue of this console")
    return queue


# --------------------------------------------------------------------------- pages


async def index(request: web.Request) -> web.Response:
    state = request.app[STATE]
    server, found = await queue_states(state.config.connect, state.config.queues)
    held = await held_by_readers(state.config.management)
    counts = held if isinstance(held, dict) else {}
    rows = [
        html.QueueRow(
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
    return _page(html.index_page(rows, read_only=state.config.read_only, server=server))


async def style(request: web.Request) -> web.Response:
    return web.Response(text=html.STYLE, content_type="text/css")


async def _reads_of(request: web.Request, queue: str) -> QueueState:
    """``queue``'s state, with what a read costs its letters; an error page when it cannot
    be read."""
    _, found = await queue_states(request.app[STATE].config.connect, [queue])
    (_, queue_state, error) = found[0]
    if queue_state is None:
        raise RrError(error or f"{queue}: its state could not be read")
    return queue_state


def _gate(
    request: web.Request, queue_state: QueueState, title: str, back: str
) -> web.Response | None:
    """None when this request may read the queue: a read that costs nothing (any request), or
    one asked for by the page's own form (a POST; ``access`` checked its CSRF value). Else the
    page that says what a read costs and asks, or says why a read-only console does not read
    it (docs/console.md, "Reading is free, or asked")."""
    reads = queue_state.reads
    if reads.cost is Cost.FREE:
        return None
    read_only = request.app[STATE].config.read_only
    if request.method == "POST":
        if read_only and reads.can_drop:
            return _page(html.error_page(403, READ_ONLY_DROPS), 403)
        return None
    action = None if read_only and reads.can_drop else request.path_qs
    return _page(
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


def _search(request: web.Request, back: str) -> Search | web.Response:
    """The search the page's form asks for (console/search.py), or the 400 page that says
    why it cannot be run, with a way back to the page without it."""
    config = request.app[STATE].config
    try:
        found = search_of(request.query)
    except SearchError as error:
        page = html.result_page("Search not run", [str(error)], back=back, error=True)
        return _page(page, 400)
    return dataclasses.replace(found, target=target_words(config.urls, config.topology_path))


async def groups(request: web.Request) -> web.Response:
    state = request.app[STATE]
    queue = _queue(request)
    search = _search(request, f"/queues/{html.path_part(queue)}/groups")
    if isinstance(search, web.Response):
        return search
    queue_state = await _reads_of(request, queue)
    gate = _gate(request, queue_state, f"Groups of {queue}", "/")
    if gate is not None:
        return gate
    unread = await _unread_note(state, queue)
    now = datetime.now(UTC)
    matching = Matching(search, state.config.settings.wait_queues, now)
    grouping, scan = await read_groups(
        state.config.connect, queue, state.config.settings, now, keep=matching.keep
    )
    return _page(
        html.groups_page(
            queue,
            grouping.ranked(),
            read=grouping.count,
            in_queue=scan.in_queue,
            ungrouped=grouping.ungrouped,
            read_only=state.config.read_only,
            csrf=state.csrf,
            note=_read_note(queue_state),
            unread=unread,
            search=search,
            searched=matching.read,
        )
    )


@dataclass(frozen=True)
class GroupForm:
    queue: str
    group_id: str
    action: str
    """``retry``, ``move`` or ``discard``."""
    rate_text: str
    rate: float | None
    to: str
    selection: Selection | None = None
    """Letters chosen by hand (console/selection.py); None: the whole group."""
    expect: int | None = None
    """How many the plan said would go (the run's progress bar ends there)."""

    def options(self, **given: Any) -> TransferOptions:
        """The engine's options: with a selection, every other letter is skipped."""
        only = self.selection.pick() if self.selection is not None else None
        return TransferOptions(only=only, **given)


async def group_letters(request: web.Request) -> web.Response:
    """One page of a group's letters (console/letter_list.py): every letter reachable."""
    state = request.app[STATE]
    queue = _queue(request)
    group_id = request.match_info["group"]
    parsed = parse_group_id(group_id)
    if parsed is None:
        raise _not_found("no such group: the groups page lists them")
    page_number = _nth(request.query.get("page"), name="page")
    per_page = min(_nth(request.query.get("per") or PER_PAGE, name="per"), MAX_PER_PAGE)
    search = _search(request, html.letters_path(queue, group_id))
    if isinstance(search, web.Response):
        return search
    queue_state = await _reads_of(request, queue)
    back = f"/queues/{html.path_part(queue)}/groups"
    gate = _gate(request, queue_state, f"Letters of group {group_id}", back)
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
    unread = await _unread_note(state, queue)
    await read_group_letters(state.config.connect, queue, state.config.settings, listing)
    page = html.group_letters_page(
        queue,
        listing,
        note=_read_note(queue_state),
        unread=unread,
        search=search,
        searched=matching.read,
        read_only=state.config.read_only,
        csrf=state.csrf,
    )
    return _page(page)


def _read_note(queue_state: QueueState) -> str | None:
    reads = queue_state.reads
    return None if reads.cost is Cost.FREE else f"{reads.why}: this read counted one each"


async def _unread_note(state: State, queue: str) -> str:
    """What a page that reads ``queue`` cannot see: the letters another reader holds (a
    colleague's ``rr dlq inspect``, another console, a consumer), counted by the management
    API when the console has one (docs/console.md, "What the numbers count")."""
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


async def position_page(request: web.Request) -> web.Response:
    """The letter at a position of the queue: how a letter without a message id is opened
    (shown, not edited or retried alone: its group's retry takes it)."""
    state = request.app[STATE]
    queue = _queue(request)
    position = _nth(request.match_info["position"], name="position")
    queue_state = await _reads_of(request, queue)
    back = f"/queues/{html.path_part(queue)}/groups"
    gate = _gate(request, queue_state, f"Letter #{position} of {queue}", back)
    if gate is not None:
        return gate
    letter, scan = await letter_at(state.config.connect, queue, position)
    if letter is None:
        raise _not_found(f"{queue} holds {counted_letters(scan.read)}: none at #{position:,}")
    view = _message_view(queue, letter.properties.message_id or "", 1, position, letter, 0)
    view = dataclasses.replace(view, editable=None, not_editable=None, by_position=True)
    page = html.message_page(view, read_only=True, csrf=state.csrf, note=_read_note(queue_state))
    return _page(page)


def counted_letters(count: int) -> str:
    return html.counted(count, "dead letter")


def _one_letter_replay(state: State, queue: str) -> ReplayPlan:
    """The replay of one letter of ``queue`` to its origin (a retry unchanged, an edit)."""
    return ReplayPlan(
        source=queue,
        run_id=engine.new_run_id(),
        retry_header=state.config.settings.retry_header,
        wait_queues=state.config.settings.wait_queues,
    )


async def retry_letter(request: web.Request) -> web.Response:
    """The letter the page showed, retried unchanged: ``rr dlq replay`` of that one letter
    (only if it is still the letter shown, dlq/same_id.py), as a run of its own."""
    state = request.app[STATE]
    queue = _queue(request)
    message_id = request.match_info["message"]
    asked = await _edit_form(request)
    plan = _one_letter_replay(state, queue)
    pick: LetterPick[Delivery] = LetterPick(message_id, asked.nth, asked.shown)

    async def work(job: Job) -> TransferReport | None:
        options = TransferOptions(limit=1, only=pick, stop=job.stop, confirmed=job.confirm)
        chooser = partial(choose_replay, plan)
        report = await transfer(
            state.config.connect, queue, chooser, TransferKind.REPLAY, options, job
        )
        if report.stopped == limit_reached(1):  # the one letter: no limit the user gave
            report = dataclasses.replace(report, stopped=None)
        changed = pick.refused(report)
        if changed is not None:
            job.error = changed
        return report

    job = Job(
        id=new_job_id(),
        title=f"Retry {message_id} of {queue}",
        queue=queue,
        action="retry",
        letters=f"message {message_id}",
        expected=1,
    )
    state.jobs.start(job, work)
    raise web.HTTPSeeOther(location=f"/jobs/{job.id}")


async def all_groups(request: web.Request) -> web.Response:
    """The groups of every queue of the console in one table (a group's id is the same in
    every queue: ``rr dlq groups Q1 Q2 ...``); each queue read in its turn, as its own page
    reads it, and one that a run moves now is said, not read."""
    state = request.app[STATE]
    queues = state.config.queues
    search = _search(request, "/groups")
    if isinstance(search, web.Response):
        return search
    states = [await _reads_of(request, queue) for queue in queues]
    counting = [q for q in states if q.reads.cost is not Cost.FREE]
    if counting:
        gate = _gate(request, counting[0], "Groups of every queue", "/")
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
    page = html.all_groups_page(
        grouping.ranked(), read=read, notes=notes, search=search, searched=searched
    )
    return _page(page)


async def selection(request: web.Request) -> web.Response:
    """The letters ticked on a group's letters page (or its whole page), and one form per
    action that plans it for them (console/selection.py): nothing is read or done here."""
    state = request.app[STATE]
    queue = _queue(request)
    group_id = request.match_info["group"]
    if parse_group_id(group_id) is None:
        raise _not_found("no such group: the groups page lists them")
    form = await request.post()
    field_name = "row" if form.get("which") == "page" else "pick"
    values = [str(value) for value in form.getall(field_name, [])]
    back = html.letters_path(queue, group_id)
    try:
        chosen = parse_selection(values)
    except UsageError as error:
        return _page(html.result_page("Nothing selected", [str(error)], back=back, error=True), 400)
    return _page(html.selection_page(queue, group_id, chosen, csrf=state.csrf))


async def _group_form(request: web.Request) -> GroupForm:
    queue = _queue(request)
    form = await request.post()
    action = str(form.get("action", ""))
    if action not in ("retry", "move", "discard"):
        raise UsageError("choose retry, move or discard")
    rate_text = str(form.get("rate", "")).strip()
    picks = [str(value) for value in form.getall("pick", [])]
    expect = str(form.get("expect", ""))
    return GroupForm(
        queue=queue,
        group_id=request.match_info["group"],
        action=action,
        rate_text=rate_text,
        rate=parse_rate(rate_text, field="rate") if rate_text else None,
        to=str(form.get("to", "")).strip() if action == "move" else "",
        selection=parse_selection(picks) if picks else None,
        expect=int(expect) if expect.isdigit() else None,
    )


def _group_run(state: State, asked: GroupForm, options: TransferOptions) -> TransferRun:
    choose, kind = group_chooser(
        asked.queue, asked.group_id, asked.action, state.config.settings, asked.to
    )
    return group_run(asked.queue, choose, kind, options, to=asked.to)


async def plan_group(request: web.Request) -> web.Response:
    state = request.app[STATE]
    asked = await _group_form(request)
    queue = asked.queue
    report = await dry_run(state.config.connect, _group_run(state, asked, asked.options()))
    if report is None:
        raise UsageError(f"{queue}: nothing was read")
    sent = [r for r in report.results if r.outcome is TransferOutcome.SENT]
    targets: dict[str, int] = {}
    for result in sent:
        if result.to:
            targets[result.to] = targets.get(result.to, 0) + 1
    failing = [r for r in report.results if r.outcome is TransferOutcome.FAILED]
    plan = html.Plan(
        queue=queue,
        group_id=asked.group_id,
        action=asked.action,
        rate=asked.rate_text,
        to=asked.to,
        would=len(sent),
        read=report.examined,
        targets=targets,
        failing=len(failing),
        reasons=sorted({r.reason for r in failing if r.reason}),
        picks=asked.selection.values() if asked.selection else (),
        selected=asked.selection.letters() if asked.selection else "",
    )
    return _page(html.plan_page(plan, csrf=state.csrf))


async def run_group(request: web.Request) -> web.Response:
    state = request.app[STATE]
    asked = await _group_form(request)
    queue = asked.queue
    # refused at once (a target that drops what it takes, a wrong id), as the plan is
    _group_run(state, asked, TransferOptions())

    async def work(job: Job) -> TransferReport | None:
        options = asked.options(rate_per_s=asked.rate, stop=job.stop, confirmed=job.confirm)
        report = await run_on_engine(
            state.config.connect, _group_run(state, asked, options), job, job.stop
        )
        if isinstance(options.only, SelectionPick) and report is not None:
            job.notes = options.only.missing()
        return report

    chosen = asked.selection
    which = f"{chosen.letters()} of group" if chosen else "group"
    job = Job(
        id=new_job_id(),
        title=f"{asked.action.capitalize()} {which} {asked.group_id} of {queue}",
        queue=queue,
        action=asked.action,
        letters=f"{chosen.letters()} (group {asked.group_id})"
        if chosen
        else f"group {asked.group_id}",
        to=asked.to if asked.action == "move" else None,
        expected=asked.expect,
    )
    state.jobs.start(job, work)
    raise web.HTTPSeeOther(location=f"/jobs/{job.id}")


async def job_page(request: web.Request) -> web.Response:
    job = request.app[STATE].jobs.get(request.match_info["job"])
    if job is None:
        raise _not_found("no such run (runs are kept while the console runs)")
    return _page(html.job_page(_job_view(job)))


def _job_view(job: Job) -> html.JobView:
    return html.JobView(
        id=job.id,
        title=job.title,
        queue=job.queue,
        running=job.running,
        examined=job.examined,
        total=job.total,
        lines=job.lines,
        error=job.error,
        started_at=job.started_at,
        stopped=job.stopped_by_the_console,
        confirmed=job.confirmed,
        expected=job.expected,
        action=job.action,
    )


async def runs_page(request: web.Request) -> web.Response:
    """Every action of this console, newest first (the last 100 runs)."""
    jobs = request.app[STATE].jobs.all()
    return _page(html.runs_page([_job_view(job) for job in jobs]))


def _nth(text: object, *, name: str = "n") -> int:
    try:
        nth = int(str(text or "1"))
    except ValueError:
        raise UsageError(f"{name}: give a number") from None
    if nth < 1:
        raise UsageError(f"{name}: at least 1")
    return nth


async def _letter(request: web.Request, nth: int) -> tuple[str, str, Delivery, int, int]:
    state = request.app[STATE]
    queue = _queue(request)
    message_id = request.match_info["message"]
    found = await find_letter(state.config.connect, queue, message_id, nth)
    if found.letter is None:
        raise _not_found(f"no message with this id in {queue} ({found.read:,} read)")
    return queue, message_id, found.letter, found.position, found.count


async def message(request: web.Request) -> web.Response:
    state = request.app[STATE]
    nth = _nth(request.query.get("n"))
    queue_state = await _reads_of(request, _queue(request))
    back = f"/queues/{html.path_part(queue_state.name)}/groups"
    gate = _gate(request, queue_state, f"Message {request.match_info['message']}", back)
    if gate is not None:
        return gate
    queue, message_id, letter, position, count = await _letter(request, nth)
    view = _message_view(queue, message_id, nth, position, letter, count - 1)
    reads = queue_state.reads
    note = (
        None
        if reads.cost is Cost.FREE
        else f"{reads.why}: this read counted one each, and so does each of the forms below"
    )
    return _page(
        html.message_page(view, read_only=state.config.read_only, csrf=state.csrf, note=note)
    )


def _message_view(
    queue: str, message_id: str, nth: int, position: int, letter: Delivery, others: int
) -> html.MessageView:
    properties = letter.properties
    not_editable = box_problem(letter.body)
    return html.MessageView(
        queue=queue,
        message_id=message_id,
        nth=nth,
        position=position,
        properties={
            "content_type": properties.content_type,
            "content_encoding": properties.content_encoding,
            "correlation_id": properties.correlation_id,
            "delivery_mode": properties.delivery_mode,
            "timestamp": properties.timestamp,
            "type": properties.type,
            "app_id": properties.app_id,
            "routing_key": letter.routing_key,
            "exchange": letter.exchange or "(default)",
        },
        headers=properties.headers or {},
        deaths=deaths(properties.headers),
        body=letter.body,
        editable=letter.body.decode("utf-8") if not_editable is None else None,
        others=others,
        not_editable=not_editable,
        checksums=str(checksums(letter)),
    )


async def body(request: web.Request) -> web.StreamResponse:
    """The whole body of a letter, as a file: read as the message page reads it (the same
    gate: a read that counts is asked first)."""
    nth = _nth(request.query.get("n"))
    queue_state = await _reads_of(request, _queue(request))
    message_id = request.match_info["message"]
    back = html.message_path(queue_state.name, message_id, nth)
    gate = _gate(request, queue_state, f"Body of {message_id}", back)
    if gate is not None:
        return gate
    queue, message_id, letter, _, _ = await _letter(request, nth)
    name = html.body_file_name(queue, message_id, nth)
    return web.Response(
        body=letter.body,
        content_type="application/octet-stream",
        headers={"Content-Disposition": f'attachment; filename="{name}"'},
    )


@dataclass(frozen=True)
class EditForm:
    """What an edit form sent (the message page's, then the preview's)."""

    nth: int
    shown: Checksums
    """What the letter on the page was: only that letter is edited."""
    text: str
    """The edit box's text (the preview's: the body it showed)."""
    force: bool
    publish: bool
    edited: str
    """The preview's SHA-256 of the body it showed ("" before)."""


async def _edit_form(request: web.Request) -> EditForm:
    form = await request.post()
    shown = Checksums.parse(str(form.get("letter", "")))
    if shown is None:
        raise UsageError(
            "the form does not say which letter it was made on: open the message again"
        )
    return EditForm(
        nth=_nth(form.get("n")),
        shown=shown,
        text=str(form.get("body", "")),
        force=form.get("force") == "1",
        publish=form.get("step") == "publish",
        edited=str(form.get("edited", "")),
    )


def _not_shown(queue: str, message_id: str, pick: LetterPick[Delivery], back: str) -> str:
    return html.result_page(
        "Not the letter shown",
        [
            f"{message_id} in {queue}: {pick.problem()}",
            "nothing was published and no letter removed; open the message again to see it "
            "as it is now",
        ],
        back=back,
        error=True,
    )


async def edit(request: web.Request) -> web.Response:
    """Show the change (``step=preview``) or publish it: both only for the letter the page
    showed (its place among the letters with its id and its checksums, dlq/same_id.py), and
    the body exactly as the box sent it, line breaks written as the original's (dlq/edit.py
    ``box_body``; docs/console.md)."""
    state = request.app[STATE]
    queue = _queue(request)
    message_id = request.match_info["message"]
    asked = await _edit_form(request)
    back = html.message_path(queue, message_id, asked.nth)
    pick: LetterPick[Delivery] = LetterPick(message_id, asked.nth, asked.shown)
    await pick_letter(state.config.connect, queue, pick)
    if pick.letter is None:
        return _page(_not_shown(queue, message_id, pick, back), 409)
    letter = pick.letter
    before = letter.body
    refusal = box_problem(before) or box_text_problem(asked.text)
    if refusal is not None:
        command = html.edit_command(queue, message_id, asked.nth)
        lines = [f"this body cannot be edited here: {refusal}; edit it with {command}"]
        return _page(html.result_page("Not editable here", lines, back=back, error=True), 400)
    after = box_body(before, asked.text)
    if (too_large := box_size_problem(after, edited=True)) is not None:
        command = html.edit_command(queue, message_id, asked.nth)
        lines = [f"this body cannot be edited here: {too_large}; edit it with {command}"]
        return _page(html.result_page("Not editable here", lines, back=back, error=True), 400)
    problem = body_problem(letter.properties.content_type, before, after, force=html.FORCE_BOX)
    if not asked.publish:
        return _page(
            html.edit_preview_page(
                queue,
                message_id,
                nth=asked.nth,
                checksums=str(asked.shown),
                diff=diff_lines(before, after),
                body=after.decode("utf-8"),
                edited=sha256_hex(after),
                force=asked.force,
                problem=problem,
                changed=after != before,
                csrf=state.csrf,
            )
        )
    if asked.edited != sha256_hex(after):
        lines = ["the body sent back is not the one the change showed; nothing was published"]
        return _page(html.result_page("Refused", lines, back=back, error=True), 400)
    if after == before:
        return _page(html.result_page("Nothing changed", ["nothing was published"], back=back))
    if problem is not None and not asked.force:
        return _page(html.result_page("Refused", [problem], back=back, error=True), 400)
    request_ = EditRequest(body=after, original_sha256=sha256_hex(before))
    plan = _one_letter_replay(state, queue)
    # a fresh look in the run that publishes and acks: the letter is checked on the very
    # delivery the run acks (a colleague may have changed it since the look above)
    taking: LetterPick[Delivery] = LetterPick(message_id, asked.nth, asked.shown)

    def keep() -> Path:
        try:
            return _keep_original(state.config.keep_dir, queue, message_id, letter)
        except OSError as error:
            raise _NotKept(error) from None

    async def publish(choose: Chooser, options: TransferOptions) -> TransferReport:
        job = Job(id="edit", title="edit", queue=queue)
        return await transfer(
            state.config.connect, queue, choose, TransferKind.REPLAY, options, job
        )

    try:
        done = await publish_edit(taking, plan, request_, keep=keep, transfer=publish)
    except _NotKept as not_kept:  # nothing was published
        error = not_kept.error
        return _page(_not_kept(state.config.keep_dir, queue, message_id, error, back), 500)
    if done.changed is not None:
        return _page(_not_shown(queue, message_id, taking, back), 409)
    published, kept = done.published, done.kept
    _record_edit(state, queue, message_id, done.report, published)
    lines = [
        *transfer_summary(done.report).splitlines(),
        (
            f"edited copy of {message_id} published to {done.to}; the original is in {kept}"
            if published
            else f"nothing was published; the dead letter stays (its original: {kept})"
        ),
    ]
    return _page(
        html.result_page(
            "Edited and retried" if published else "Not published",
            lines,
            back=f"/queues/{html.path_part(queue)}/groups",
            error=not published,
        ),
        200 if published else 409,
    )


def _record_edit(
    state: State, queue: str, message_id: str, report: TransferReport, published: bool
) -> None:
    """An edit, kept among the runs and told to the record (console/audit.py)."""
    job = Job(
        id=new_job_id(),
        title=f"Edit and retry {message_id} of {queue}",
        queue=queue,
        action="edit",
        letters=f"message {message_id}",
        examined=report.examined,
        total=report.examined,
    )
    lines = transfer_summary(report).splitlines()
    if not published:
        lines.append("nothing was published; the dead letter stays")
    state.jobs.record(job, report, lines)


class _NotKept(Exception):
    """The original of an edit could not be written (nothing was published)."""

    def __init__(self, error: OSError) -> None:
        super().__init__(str(error))
        self.error = error


def _keep_original(directory: Path, queue: str, message_id: str, letter: Delivery) -> Path:
    """The original as one export line, synced, before anything is published (an OSError
    when it cannot be written: no file is left half written)."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
    safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in f"{queue}-{message_id}")
    path = directory / f"rr-edit-{safe[:120]}-{stamp}.jsonl"
    with path.open("x", encoding="utf-8") as out:
        try:
            out.write(original_line(letter))
            out.flush()
            os.fsync(out.fileno())
        except OSError:
            path.unlink(missing_ok=True)
            raise
    return path


def _not_kept(directory: Path, queue: str, message_id: str, error: OSError, back: str) -> str:
    """The page of an edit whose original could not be kept: nothing was published (the
    original is written first, docs/console.md "What each page does")."""
    said = write_failure(error, f"--keep-dir {directory}")
    HTTP_LOG.warning("an edit of %s in %s was not published: %s", message_id, queue, said)
    return html.result_page(
        "Not published",
        [
            f"{message_id} in {queue}: the original could not be kept: {said}",
            "nothing was published and no letter removed: the dead letter stays in the queue",
            "give rr console a --keep-dir it can write, then edit again",
        ],
        back=back,
        error=True,
    )


# --------------------------------------------------------------------------- the app


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
