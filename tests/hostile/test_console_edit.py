"""The console's message page and edit against hostile letters and a hostile machine
(docs/reference/console.md): a body far past what a page shows is cut at 64 KiB in the page, with a
note and a download link for the whole of it, and never put in the edit box (an edit of it is
refused, nothing published); a keep-dir that cannot be written when Publish is pressed
answers a clear page, nothing published, the letter still in the queue. On RabbitMQ (a fresh
vhost of each server) and on the emulator."""

from __future__ import annotations

import re
from pathlib import Path

from rabbitctl_retry.console.security import csrf_of
from tests.backends import Backend
from tests.console.conftest import console_on
from tests.console.test_console_http import form_of, letters_with, post, session, text_of
from tests.dlq.support import as_it_is
from tests.observe import peek as read_all

BIG = b'{"note": "' + b"0123456789abcdef" * 16384 + b'"}'
"""A JSON body of 256 KiB: four times what a page shows."""
SHOWN = 64 * 1024


async def test_a_large_body_is_cut_in_the_page_and_downloaded_whole(
    backend: Backend, tmp_path: Path
) -> None:
    (letter_id,) = await letters_with(backend, [(BIG, "application/json")])
    before = as_it_is(await read_all(backend, "dead"))
    async with console_on(backend, tmp_path) as console, session(console) as client:
        page_url = f"{console.base}/queues/dead/messages/{letter_id}"
        status, page = await text_of(client, page_url)
        assert status == 200, page[:500]
        assert "<textarea" not in page  # the box never holds a cut body
        assert len(page) < 2 * SHOWN  # the first 64 KiB, not the whole body
        assert f"{len(BIG) - SHOWN:,} more bytes not shown" in page
        assert "more than the 64 KiB the box holds" in page
        link = re.search(r'<a class="download" href="([^"]+)">', page)
        assert link is not None, page[-2000:]
        async with client.get(f"{console.base}{link.group(1)}") as answer:
            assert answer.status == 200
            assert "attachment" in answer.headers["Content-Disposition"]
            assert await answer.read() == BIG
        # a form made by hand for it is refused: nothing cut is ever published as whole
        letter = re.search(r'name="letter" value="([^"]*)"', page)
        shown = {"n": "1", "letter": letter.group(1) if letter else "", "body": "{}"}
        for step in ("preview", "publish"):
            data = {**shown, "csrf": csrf_of(console.token), "step": step}
            status, answer_page, _ = await post(client, f"{page_url}/edit", data)
            assert status == 400, answer_page[:500]
    assert as_it_is(await read_all(backend, "dead")) == before
    assert await read_all(backend, "refunds") == []


async def test_an_edited_body_past_the_box_is_refused(backend: Backend, tmp_path: Path) -> None:
    (letter_id,) = await letters_with(backend, [(b'{"n": 1}', "application/json")])
    before = as_it_is(await read_all(backend, "dead"))
    async with console_on(backend, tmp_path) as console, session(console) as client:
        page_url = f"{console.base}/queues/dead/messages/{letter_id}"
        _, page = await text_of(client, page_url)
        form = form_of(page)
        form["body"] = BIG.decode()
        data = {**form, "csrf": csrf_of(console.token), "step": "preview"}
        status, answer, _ = await post(client, f"{page_url}/edit", data)
        assert status == 400, answer[:500]
        assert "more than the 64 KiB the box holds" in answer
    assert as_it_is(await read_all(backend, "dead")) == before


async def test_a_keep_dir_that_cannot_be_written_publishes_nothing(
    backend: Backend, tmp_path: Path
) -> None:
    (letter_id,) = await letters_with(backend, [(b'{"n": 1}', "application/json")])
    before = as_it_is(await read_all(backend, "dead"))
    keep_dir = tmp_path / "keep"
    keep_dir.mkdir()
    async with console_on(backend, keep_dir) as console, session(console) as client:
        page_url = f"{console.base}/queues/dead/messages/{letter_id}"
        _, page = await text_of(client, page_url)
        form = form_of(page)
        form["body"] = '{"n": 2}'
        csrf = {"csrf": csrf_of(console.token)}
        status, preview, _ = await post(
            client, f"{page_url}/edit", {**form, **csrf, "step": "preview"}
        )
        assert status == 200, preview
        keep_dir.rmdir()  # gone before Publish (root writes through any mode: a missing one)
        publish = {**form_of(preview), **csrf, "step": "publish"}
        status, result, _ = await post(client, f"{page_url}/edit", publish)
        assert status == 500, result
        assert "the original could not be kept" in result
        assert "nothing was published" in result
        assert "Traceback" not in result
    assert as_it_is(await read_all(backend, "dead")) == before
    assert await read_all(backend, "refunds") == []
