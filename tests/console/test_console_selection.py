"""Letters selected by hand on a group's letters page (docs/reference/console.md, "A group's
letters"): some ticked (a letter without an id among them, by its place), or a whole page, then the
plan and the run of a group action for those letters only, through the same operation; the
broker read by message id after, on RabbitMQ and on the emulator."""

from __future__ import annotations

import html
import io
import re
from pathlib import Path

import aiohttp

from rabbitctl_retry.console.audit import AuditLog
from rabbitctl_retry.console.security import csrf_of
from tests.backends import Backend
from tests.console.conftest import Console, console_on
from tests.console.test_console_http import group_rows, post, session, text_of, wait_done
from tests.console.test_console_letters import LETTERS, one_group_of_eight
from tests.observe import peek as read_all


def boxes(page: str) -> dict[int, str]:
    """position -> the value of its row's box, from a page of a group's letters."""
    found = re.findall(
        r'<tr data-position="(\d+)"><td class="pick"[^>]*><label class="pick">'
        r'<input type="checkbox" name="pick" value="([^"]+)"',
        page,
    )
    return {int(position): html.unescape(value) for position, value in found}


def hidden_picks(page: str) -> list[str]:
    """The selection a page's forms carry (hidden ``pick`` fields of its first form)."""
    form = page[page.index("<form") : page.index("</form>")]
    return [html.unescape(v) for v in re.findall(r'name="pick" value="([^"]+)"', form)]


async def plan_of(
    client: aiohttp.ClientSession, base: str, csrf: str, action: str, picks: list[str]
) -> str:
    """The plan page of ``action`` for the letters ``picks`` (their form values)."""
    fields = [("csrf", csrf), ("action", action), ("rate", "")]
    return await posted_picks(client, f"{base}/plan", fields, picks)


async def posted_picks(
    client: aiohttp.ClientSession, url: str, fields: list[tuple[str, str]], picks: list[str]
) -> str:
    """The page a form of ``fields`` and the letters ``picks`` posted to ``url`` answers
    (200: asserted)."""
    form = aiohttp.FormData(fields)
    for value in picks:
        form.add_field("pick", value)
    async with client.post(url, data=form) as answer:
        page = await answer.text()
        assert answer.status == 200, page
    return page


async def run_of(client: aiohttp.ClientSession, base: str, plan: str) -> str:
    """The page of the run a plan's confirm button starts, once it ended."""
    fields = re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)">', plan)
    run = aiohttp.FormData([(name, html.unescape(value)) for name, value in fields])
    async with client.post(f"{base}/run", data=run) as answer:
        job_url = str(answer.url)
    return await wait_done(client, job_url)


async def group_of(client: aiohttp.ClientSession, console: Console) -> str:
    _, page = await text_of(client, f"{console.base}/queues/dead/groups")
    ((group, _),) = group_rows(page).items()
    return group


async def test_letters_ticked_are_retried_and_no_other(backend: Backend, tmp_path: Path) -> None:
    ids = await one_group_of_eight(backend)
    stderr = io.StringIO()
    audit = AuditLog("carol", stderr)
    async with console_on(backend, tmp_path, audit=audit) as console, session(console) as client:
        csrf = csrf_of(console.token)
        group = await group_of(client, console)
        base = f"{console.base}/queues/dead/groups/{group}"
        _, page = await text_of(client, f"{base}/letters")
        values = boxes(page)
        assert sorted(values) == list(range(1, LETTERS + 1))
        assert "Select this page (8 letters)" in page
        ticked = [values[2], values[5], values[8]]  # ids[1], ids[4] and the one without an id
        status, chosen, _ = await post(
            client, f"{base}/selection", {"csrf": csrf, "which": "checked", "pick": ticked[0]}
        )
        assert status == 200, chosen
        data = aiohttp.FormData([("csrf", csrf), ("which", "checked")])
        for value in ticked:
            data.add_field("pick", value)
        async with client.post(f"{base}/selection", data=data) as answer:
            assert answer.status == 200
            chosen = await answer.text()
        assert f"letters id {ids[1]}, id {ids[4]}, #8 (no id)" in html.unescape(chosen)
        assert chosen.count("<form") == 3  # retry, move, discard: a form each
        picks = hidden_picks(chosen)
        assert picks == ticked
        plan = await plan_of(client, base, csrf, "retry", picks)
        assert "3 of 8 dead letters in dead would be retried" in plan
        done = await run_of(client, base, plan)
        assert 'data-state="done"' in done, done
        assert 'data-confirmed="3"' in done
        assert "3 of 3 copies confirmed" in done
    moved = await read_all(backend, "refunds")
    assert sorted(d.properties.message_id or "(none)" for d in moved) == sorted(
        [ids[1], ids[4], "(none)"]
    )
    left = [d.properties.message_id for d in await read_all(backend, "dead")]
    assert left == [i for n, i in enumerate(ids) if n not in (1, 4)]
    said = stderr.getvalue().splitlines()[-1]
    assert said.startswith(
        f"rr console: carol: retry letters id {ids[1]}, id {ids[4]}, #8 (no id) (group {group})"
        " of dead: replayed 3 of"
    ), said


async def test_a_whole_page_discarded(backend: Backend, tmp_path: Path) -> None:
    ids = await one_group_of_eight(backend)
    async with console_on(backend, tmp_path) as console, session(console) as client:
        csrf = csrf_of(console.token)
        group = await group_of(client, console)
        base = f"{console.base}/queues/dead/groups/{group}"
        _, page = await text_of(client, f"{base}/letters?per=3&page=2")
        rows = re.findall(r'name="row" value="([^"]+)"', page)
        assert len(rows) == 3
        data = aiohttp.FormData([("csrf", csrf), ("which", "page")])
        for value in rows:
            data.add_field("row", html.unescape(value))
        async with client.post(f"{base}/selection", data=data) as answer:
            chosen = await answer.text()
        assert f"letters id {ids[3]}, id {ids[4]}, id {ids[5]}" in html.unescape(chosen)
        plan = await plan_of(client, base, csrf, "discard", hidden_picks(chosen))
        assert "3 of 8 dead letters in dead would be discarded" in plan
        assert "rr dlq export dead" in plan  # the export offered first
        done = await run_of(client, base, plan)
        assert "3 of 3 discarded" in done, done
        # nothing ticked: said, and nothing done
        status, page, _ = await post(client, f"{base}/selection", {"csrf": csrf})
        assert status == 400
        assert "no letter was selected" in page
    left = [d.properties.message_id for d in await read_all(backend, "dead")]
    assert left == [*ids[:3], *ids[6:], None]


async def test_read_only_has_no_boxes(backend: Backend, tmp_path: Path) -> None:
    await one_group_of_eight(backend)
    async with (
        console_on(backend, tmp_path, read_only=True) as console,
        session(console) as client,
    ):
        group = await group_of(client, console)
        _, page = await text_of(client, f"{console.base}/queues/dead/groups/{group}/letters")
        assert 'type="checkbox"' not in page
        assert boxes(page) == {}
