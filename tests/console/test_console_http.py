"""rr console over HTTP (no browser), on RabbitMQ and on the emulator: the token, CSRF, host
and read-only rules; hostile names and headers escaped; a group retried and discarded and a
letter edited through the pages, checked on the broker by message id (docs/reference/console.md)."""

from __future__ import annotations

import asyncio
import dataclasses
import html
import json
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp

from rabbitctl_retry.console.security import csrf_of
from rabbitctl_retry.transport.base import Properties
from tests.backends import Backend
from tests.console.conftest import Console, console_on
from tests.dlq.support import (
    as_it_is,
    declare,
    fail_back,
    publish_all,
    rr,
    run_to_dead,
    synthesized,
)
from tests.observe import peek as read_all

PER_KIND = 10
VALUE_ERROR = "ValueError"
NOW = datetime.now(UTC).replace(microsecond=0)


BROWSER = {"Sec-Fetch-Site": "same-origin"}
"""What a browser sends with every request of the console's own pages."""


@asynccontextmanager
async def session(
    console: Console, *, login: bool = True, headers: dict[str, str] | None = None
) -> AsyncIterator[aiohttp.ClientSession]:
    """A browser's session: its cookie jar, and the ``Sec-Fetch-Site`` it sends (``headers``
    instead, as another page's requests would carry)."""
    async with aiohttp.ClientSession(
        cookie_jar=aiohttp.CookieJar(unsafe=True),
        timeout=aiohttp.ClientTimeout(total=60),
        headers=BROWSER if headers is None else headers,
    ) as client:
        if login:
            async with client.get(console.entry) as answer:
                assert answer.status == 200
        yield client


async def text_of(client: aiohttp.ClientSession, url: str, **kwargs: Any) -> tuple[int, str]:
    async with client.get(url, **kwargs) as answer:
        return answer.status, await answer.text()


async def post(
    client: aiohttp.ClientSession, url: str, data: dict[str, str], **kwargs: Any
) -> tuple[int, str, str]:
    async with client.post(url, data=data, allow_redirects=True, **kwargs) as answer:
        return answer.status, await answer.text(), str(answer.url)


def group_rows(page: str) -> dict[str, tuple[str, int]]:
    """group id -> (type, count), from the groups page."""
    rows = re.findall(
        r'<tr data-group="([^"]+)"><td class="id"[^>]*>[^<]+</td><td class="n"[^>]*>([\d,]+)</td>'
        r"<td[^>]*>([^<]*)</td>",
        page,
    )
    return {gid: (kind, int(n.replace(",", ""))) for gid, n, kind in rows}


async def wait_done(client: aiohttp.ClientSession, job_url: str) -> str:
    for _ in range(2000):
        status, page = await text_of(client, job_url)
        assert status == 200
        if 'data-state="running"' not in page:
            return page
        await asyncio.sleep(0.05)
    raise AssertionError(f"the run at {job_url} never ended")


async def test_every_request_needs_the_token(backend: Backend, tmp_path: Path) -> None:
    await declare(backend, "dead")
    async with console_on(backend, tmp_path) as console, aiohttp.ClientSession() as bare:
        for url in (f"{console.base}/", f"{console.base}/queues/dead/groups"):
            status, page = await text_of(bare, url)
            assert status == 401
            assert "dead" not in page
        status, _ = await text_of(bare, f"{console.base}/?token=wrong-token-0123456789")
        assert status == 401
        async with bare.get(console.entry, allow_redirects=False) as answer:
            assert answer.status == 303
            assert answer.headers["Location"] == "/"  # the token leaves the address bar
            cookie = answer.headers["Set-Cookie"]
            assert "HttpOnly" in cookie
            assert "SameSite=Strict" in cookie
        bearer = {"Authorization": f"Bearer {console.token}"}
        async with bare.get(f"{console.base}/", headers=bearer) as answer:
            assert answer.status == 200
            assert "script-src" not in answer.headers["Content-Security-Policy"]
            assert "default-src 'none'" in answer.headers["Content-Security-Policy"]
            assert answer.headers["X-Frame-Options"] == "DENY"
            assert 'data-queue="dead"' in await answer.text()
        # another site's name for 127.0.0.1 (DNS rebinding) is refused
        port = console.base.rsplit(":", 1)[1]
        foreign = {**bearer, "Host": f"rebind.example:{port}"}
        async with bare.get(f"{console.base}/", headers=foreign) as answer:
            assert answer.status == 421


async def test_posts_need_the_csrf_value_and_the_consoles_origin(
    backend: Backend, tmp_path: Path
) -> None:
    made = await run_to_dead(backend, PER_KIND)
    before = [d.properties.message_id for d in await read_all(backend, "dead")]
    async with console_on(backend, tmp_path) as console, session(console) as client:
        _, page = await text_of(client, f"{console.base}/queues/dead/groups")
        group = next(g for g, (kind, _) in group_rows(page).items() if kind == VALUE_ERROR)
        run = f"{console.base}/queues/dead/groups/{group}/run"
        status, _, _ = await post(client, run, {"action": "discard"})
        assert status == 403
        status, _, _ = await post(client, run, {"action": "discard", "csrf": "0" * 64})
        assert status == 403
        good = {"action": "discard", "csrf": csrf_of(console.token)}
        status, _, _ = await post(client, run, good, headers={"Origin": "http://evil.example"})
        assert status == 403
    assert [d.properties.message_id for d in await read_all(backend, "dead")] == before
    assert made.total == len(before)


async def test_read_only_shows_no_action_and_refuses_every_post(
    backend: Backend, tmp_path: Path
) -> None:
    await run_to_dead(backend, PER_KIND)
    before = [d.properties.message_id for d in await read_all(backend, "dead")]
    async with (
        console_on(backend, tmp_path, read_only=True) as console,
        session(console) as client,
    ):
        _, page = await text_of(client, f"{console.base}/queues/dead/groups")
        assert '<form method="post"' not in page  # the search form (a GET) changes nothing
        assert page.count("<form") == 1
        assert '<form method="get" action="/queues/dead/groups" class="search"' in page
        group = next(iter(group_rows(page)))
        _, message = await text_of(client, f"{console.base}/queues/dead/messages/{before[0]}")
        assert "<form" not in message
        assert "<textarea" not in message
        data = {"action": "retry", "csrf": csrf_of(console.token)}
        status, _, _ = await post(client, f"{console.base}/queues/dead/groups/{group}/run", data)
        assert status == 403
    assert [d.properties.message_id for d in await read_all(backend, "dead")] == before


async def test_hostile_names_and_headers_are_shown_escaped(
    backend: Backend, tmp_path: Path
) -> None:
    # the AMQP client refuses a queue name with markup: the name here has what it allows
    # beyond ASCII letters (a path part quoted in links, escaped in text)
    queue = "dead:letters.é-ü"
    await declare(backend, queue)
    hostile = Properties(
        message_id='"><img src=x onerror=alert(1)>',
        content_type="text/html",
        headers={
            "rr-origin-queue": "refunds",
            "rr-error-type": "<script>alert('type')</script>",
            "rr-error-message": "</textarea><script>alert('message')</script>\x1b[31m",
            "x-<b>": "\u202e<i>",
        },
    )
    await publish_all(backend, queue, [(b"<script>alert('body')</script>", hostile)])
    async with (
        console_on(backend, tmp_path, queues=(queue,)) as console,
        session(console) as client,
    ):
        pages = []
        for path in ("/", "/queues/dead%3Aletters.%C3%A9-%C3%BC/groups"):
            status, page = await text_of(client, console.base + path)
            assert status == 200, page
            pages.append(page)
        link = re.search(r'href="(/queues/[^"]+/messages/[^"]+)"', pages[1])
        assert link is not None
        status, message = await text_of(client, console.base + link.group(1))
        assert status == 200, message
        pages.append(message)
    for page in pages:
        assert "<script>alert" not in page
        assert "<img src=x" not in page
        assert "<b>" not in page
        assert "\x1b" not in page
        assert "\u202e" not in page
    assert 'data-queue="dead:letters.é-ü"' in pages[0]
    assert 'href="/queues/dead%3Aletters.%C3%A9-%C3%BC/groups"' in pages[0]
    assert "&lt;script&gt;alert(&#x27;type&#x27;)&lt;/script&gt;" in pages[1]
    assert "&lt;script&gt;alert(&#x27;body&#x27;)&lt;/script&gt;" in pages[2]
    assert "\\x1b[31m" in pages[2]


async def test_a_group_retried_and_another_discarded_through_the_pages(
    backend: Backend, tmp_path: Path
) -> None:
    made = await run_to_dead(backend, PER_KIND)
    await declare(backend, "parked")
    before = [d.properties.message_id for d in await read_all(backend, "dead")]
    odd = {m for n, m in enumerate(made.refunds) if n % 2}
    csrf = {"csrf": ""}
    async with console_on(backend, tmp_path) as console, session(console) as client:
        csrf["csrf"] = csrf_of(console.token)
        _, page = await text_of(client, f"{console.base}/queues/dead/groups")
        rows = group_rows(page)
        assert sorted(rows.values()) == sorted(
            [
                (VALUE_ERROR, len(odd)),
                ("(max_attempts)", PER_KIND - len(odd)),
                ("(delivery_limit)", PER_KIND),
                ("(rejected)", PER_KIND),
            ]
        )
        retried = next(g for g, (kind, _) in rows.items() if kind == VALUE_ERROR)
        base = f"{console.base}/queues/dead/groups/{retried}"
        paced = {"action": "retry", "rate": "50", "ramp": "0.2", **csrf}
        status, plan, _ = await post(client, f"{base}/plan", paced)
        assert status == 200, plan
        assert (
            f"{len(odd)} of {made.total} dead letters in dead would be retried at most 50 per "
            "second, reached over 0.2 s"
        ) in plan
        assert '<input type="hidden" name="ramp" value="0.2">' in plan
        assert f"<li>{len(odd)} to refunds</li>" in plan
        assert [d.properties.message_id for d in await read_all(backend, "dead")] == before
        status, _, job_url = await post(client, f"{base}/run", paced)
        assert "/jobs/" in job_url
        done = await wait_done(client, job_url)
        assert f"replayed {len(odd)} of" in done
        discarded = next(g for g, (kind, _) in rows.items() if kind == "(rejected)")
        _, _, job_url = await post(
            client,
            f"{console.base}/queues/dead/groups/{discarded}/run",
            {"action": "discard", **csrf},
        )
        assert "purged 10 of" in await wait_done(client, job_url)
        moved = next(g for g, (kind, _) in rows.items() if kind == "(delivery_limit)")
        move = f"{console.base}/queues/dead/groups/{moved}"
        status, plan, _ = await post(
            client, f"{move}/plan", {"action": "move", "to": "parked", **csrf}
        )
        assert f"<li>{PER_KIND} to parked</li>" in plan
        _, _, job_url = await post(
            client, f"{move}/run", {"action": "move", "to": "parked", **csrf}
        )
        assert f"moved {PER_KIND} of" in await wait_done(client, job_url)
        status, refused, _ = await post(
            client, f"{move}/plan", {"action": "move", "to": "dead", **csrf}
        )
        assert status == 400, refused
        status, refused, _ = await post(
            client, f"{move}/plan", {"action": "retry", "rate": "fast", **csrf}
        )
        assert status == 400, refused
        assert "rate &#x27;fast&#x27;: give the messages per second" in refused
        assert "--rate" not in refused
        for form, error in (
            ({"ramp": "60"}, "give the ramp a rate to climb to"),
            ({"rate": "5", "ramp": "0"}, "ramp &#x27;0&#x27;: give the seconds"),
        ):
            status, refused, _ = await post(
                client, f"{move}/plan", {"action": "retry", **form, **csrf}
            )
            assert status == 400, refused
            assert error in refused
            assert "--ramp" not in refused
        assert "back to the queues" in refused
    assert sorted(d.properties.message_id or "" for d in await read_all(backend, "refunds")) == (
        sorted(odd)
    )
    parked = [d.properties.message_id for d in await read_all(backend, "parked")]
    assert sorted(m or "" for m in parked) == sorted(made.payouts)
    assert [d.properties.message_id for d in await read_all(backend, "dead")] == [
        m for m in before if m not in odd and m not in made.waited and m not in made.payouts
    ]


async def test_a_letter_shown_edited_and_retried(backend: Backend, tmp_path: Path) -> None:
    made = await run_to_dead(backend, PER_KIND)
    target = made.refunds[0]
    async with console_on(backend, tmp_path) as console, session(console) as client:
        status, page = await text_of(client, f"{console.base}/queues/dead/messages/{target}")
        assert status == 200, page
        assert '<table class="timeline">' in page
        assert "<th>rr-origin-queue</th><td>refunds</td>" in page
        assert "<textarea" in page
        url = f"{console.base}/queues/dead/messages/{target}/edit"
        form = form_of(page)  # the body as it is, one line
        assert form["body"] == '{"kind": "refund", "n": 0, "origin": "refunds"}'
        form["body"] = form["body"].replace("}", ',\r\n  "fixed": true}')
        csrf = {"csrf": csrf_of(console.token)}
        status, preview, _ = await post(client, url, {**form, **csrf, "step": "preview"})
        assert status == 200, preview
        assert changed_lines(preview) == [
            '-{"kind": "refund", "n": 0, "origin": "refunds"}',
            "\\ No newline at end of file",
            '+{"kind": "refund", "n": 0, "origin": "refunds",',
            '+  "fixed": true}',
            "\\ No newline at end of file",
        ]
        # a body that is no JSON any more: refused, in the page's words
        broken = {**form_of(page), **csrf, "step": "preview", "body": '{"kind": '}
        status, refused, _ = await post(client, url, broken)
        assert "the edited body is not JSON" in html.unescape(refused)
        assert "tick “publish a body that no longer parses" in html.unescape(refused)
        assert "--force" not in refused
        assert await read_all(backend, "refunds") == []
        status, result, _ = await post(client, url, {**form_of(preview), **csrf, "step": "publish"})
        assert status == 200, result
        assert f"edited copy of {target} published to refunds" in result
        assert "stopped early" not in result  # one letter edited: no limit of the user's
        assert "--" not in html.unescape(re.sub(r"<[^>]+>", "", result))
    (copy,) = await read_all(backend, "refunds")
    assert copy.properties.message_id == target
    assert copy.body == b'{"kind": "refund", "n": 0, "origin": "refunds",\n  "fixed": true}'
    headers = copy.properties.headers or {}
    assert "rr-edited-at" in headers
    assert "rr-original-body-sha256" in headers
    assert target not in {d.properties.message_id for d in await read_all(backend, "dead")}
    (kept,) = tmp_path.glob("rr-edit-dead-refund-0-*.jsonl")
    assert json.loads(kept.read_text())["properties"]["message_id"] == target


# ----------------------------------------- an edit: the letter shown, the bytes as written


def form_of(page: str, action_end: str = "/edit") -> dict[str, str]:
    """The fields of the page's form whose action ends with ``action_end``, as a browser
    submits them (HTML's rules: the parser turns CRLF and CR into LF and drops the line break
    right after <textarea>; a submitted form sends every line break as CRLF)."""
    found = re.search(rf'<form method="post" action="[^"]*{action_end}">(.*?)</form>', page, re.S)
    assert found is not None, page
    source = found.group(1)
    fields = {
        m.group(1): html.unescape(m.group(2))
        for m in re.finditer(r'<input type="hidden" name="([^"]+)" value="([^"]*)">', source)
    }
    box = re.search(r"<textarea[^>]*>(.*?)</textarea>", source, re.S)
    if box is not None:
        fields["body"] = html.unescape(box.group(1))
    parsed = {k: re.sub(r"\r\n|\r", "\n", v) for k, v in fields.items()}
    if box is not None:
        parsed["body"] = parsed["body"].removeprefix("\n")
    return {k: v.replace("\n", "\r\n") for k, v in parsed.items()}


def changed_lines(preview: str) -> list[str]:
    diff = re.search(r'<pre class="diff">(.*?)</pre>', preview, re.S)
    assert diff is not None, preview
    return [
        line
        for line in html.unescape(diff.group(1)).splitlines()
        if line.startswith(("-", "+", "\\")) and not line.startswith(("--- ", "+++ "))
    ]


async def letters_with(backend: Backend, bodies: list[tuple[bytes, str]]) -> list[str]:
    """``dead`` holding one of rr's dead letters per (body, content type), from refunds."""
    await declare(backend, "dead", "refunds")
    letters = []
    for n, (body, content_type) in enumerate(bodies):
        _, properties = synthesized("rr", 2 * n, NOW)
        letters.append((body, dataclasses.replace(properties, content_type=content_type)))
    await publish_all(backend, "dead", letters)
    return [str(properties.message_id) for _, properties in letters]


LF_JSON = (
    b'\n{"amount": 10.10, "limit": 1e400, "rate": 1.00000000000000001,\n'
    b'  "k": 1, "k": 2, "note": "card declined"}\n'
)
CRLF_TEXT = b"refund 7\r\ncard declined\r\n\r\nmore\tto come"


async def test_one_word_changed_in_the_box_publishes_every_other_byte(
    backend: Backend, tmp_path: Path
) -> None:
    ids = await letters_with(backend, [(LF_JSON, "application/json"), (CRLF_TEXT, "text/plain")])
    async with console_on(backend, tmp_path) as console, session(console) as client:
        for letter_id in ids:
            status, page = await text_of(client, f"{console.base}/queues/dead/messages/{letter_id}")
            assert status == 200, page
            form = form_of(page)
            form["body"] = form["body"].replace("declined", "accepted")
            url = f"{console.base}/queues/dead/messages/{letter_id}/edit"
            csrf = {"csrf": csrf_of(console.token)}
            status, preview, _ = await post(client, url, {**form, **csrf, "step": "preview"})
            assert status == 200, preview
            # one line, as it is (a context line may say it has no final newline)
            (removed, added) = [line for line in changed_lines(preview) if line[0] in "-+"]
            assert removed.startswith("-"), preview
            assert "declined" in removed, preview
            assert added == "+" + removed[1:].replace("declined", "accepted")
            publish = form_of(preview)
            status, result, _ = await post(client, url, {**publish, **csrf, "step": "publish"})
            assert status == 200, result
            assert f"edited copy of {letter_id} published to refunds" in result
    copies = {d.properties.message_id: d.body for d in await read_all(backend, "refunds")}
    assert copies == {
        ids[0]: LF_JSON.replace(b"declined", b"accepted"),
        ids[1]: CRLF_TEXT.replace(b"declined", b"accepted"),
    }


async def test_a_body_the_box_cannot_carry_is_not_edited_in_the_browser(
    backend: Backend, tmp_path: Path
) -> None:
    bodies = [
        b"a lone\rcarriage return",
        b"mixed\r\nline\nbreaks",
        b"a NUL \x00 byte",
        b"an escape \x1b[31m",
    ]
    ids = await letters_with(backend, [(body, "text/plain") for body in bodies])
    before = as_it_is(await read_all(backend, "dead"))
    async with console_on(backend, tmp_path) as console, session(console) as client:
        for letter_id in ids:
            status, page = await text_of(client, f"{console.base}/queues/dead/messages/{letter_id}")
            assert status == 200, page
            assert "<textarea" not in page
            assert f"rr dlq edit dead --id {letter_id} --body FILE" in page
            # a form made by hand is refused all the same
            letter = re.search(r'name="letter" value="([^"]*)"', page)
            shown = {"n": "1", "letter": letter.group(1) if letter else "", "body": "edited"}
            url = f"{console.base}/queues/dead/messages/{letter_id}/edit"
            for step in ("preview", "publish"):
                data = {**shown, "csrf": csrf_of(console.token), "step": step}
                status, answer, _ = await post(client, url, data)
                assert status == 400, answer
    assert as_it_is(await read_all(backend, "dead")) == before
    assert await read_all(backend, "refunds") == []
    assert list(tmp_path.glob("rr-edit-*")) == []


async def test_a_letter_changed_since_the_page_was_read_is_not_published(
    backend: Backend, tmp_path: Path
) -> None:
    """The page is read and the change shown; meanwhile a colleague fixes the same letter with
    rr dlq edit, and its copy fails back into the queue: Publish refuses, and the queue holds
    the colleague's fix as it was."""
    ids = await letters_with(
        backend, [(b'{"n": %d, "card": "4111"}' % n, "application/json") for n in range(3)]
    )
    target = ids[1]
    fix = tmp_path / "fix.json"
    fix.write_bytes(b'{"n": 1, "card": "4242"}')
    keep_dir = tmp_path / "console"
    keep_dir.mkdir()
    async with console_on(backend, keep_dir) as console, session(console) as client:
        _, page = await text_of(client, f"{console.base}/queues/dead/messages/{target}")
        form = form_of(page)
        form["body"] = form["body"].replace("4111", "5555")
        url = f"{console.base}/queues/dead/messages/{target}/edit"
        csrf = {"csrf": csrf_of(console.token)}
        status, preview, _ = await post(client, url, {**form, **csrf, "step": "preview"})
        assert status == 200, preview
        colleague = await rr(
            backend, "dlq", "edit", "dead", "--id", target, "--body", str(fix),
            "--keep", str(tmp_path / "colleague.jsonl"), "--yes",
        )  # fmt: skip
        assert colleague.exit_code == 0, colleague.output
        await fail_back(backend, "refunds", "dead")
        held = as_it_is(await read_all(backend, "dead"))
        status, result, _ = await post(client, url, {**form_of(preview), **csrf, "step": "publish"})
        assert status == 409, result
        assert "Not the letter shown" in result
        assert "its body and headers changed since" in result
    assert as_it_is(await read_all(backend, "dead")) == held
    assert [body for m, body, _ in held if m == target] == [fix.read_bytes()]
    assert await read_all(backend, "refunds") == []
    assert list(keep_dir.iterdir()) == []


async def test_of_two_letters_with_one_id_only_the_one_shown_is_published(
    backend: Backend, tmp_path: Path
) -> None:
    """The page shows the first of two letters with one id; a colleague takes that one: the
    second, now the first with the id, is not edited in its place."""
    await declare(backend, "dead", "refunds")
    first, second = synthesized("rr", 0, NOW), synthesized("rr", 2, NOW)
    twin = (b'{"twin": 2}', dataclasses.replace(second[1], message_id="s-rr-0"))
    await publish_all(backend, "dead", [first, twin])
    keep_dir = tmp_path / "console"
    keep_dir.mkdir()
    async with console_on(backend, keep_dir) as console, session(console) as client:
        _, page = await text_of(client, f"{console.base}/queues/dead/messages/s-rr-0")
        assert "(1 more with this id)" in page
        form = form_of(page)
        form["body"] = form["body"].replace('"n": 0', '"n": 100')
        url = f"{console.base}/queues/dead/messages/s-rr-0/edit"
        csrf = {"csrf": csrf_of(console.token)}
        status, preview, _ = await post(client, url, {**form, **csrf, "step": "preview"})
        assert status == 200, preview
        body = tmp_path / "b"
        body.write_bytes(b'{"taken": true}')
        colleague = await rr(
            backend, "dlq", "edit", "dead", "--id", "s-rr-0", "--position", "1",
            "--body", str(body), "--keep", str(tmp_path / "c.jsonl"), "--yes",
        )  # fmt: skip
        assert colleague.exit_code == 0, colleague.output
        status, result, _ = await post(client, url, {**form_of(preview), **csrf, "step": "publish"})
        assert status == 409, result
    (left,) = await read_all(backend, "dead")
    assert left.body == b'{"twin": 2}'
    assert [d.body for d in await read_all(backend, "refunds")] == [b'{"taken": true}']
    assert list(keep_dir.iterdir()) == []
