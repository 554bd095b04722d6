"""Every letter reachable in the console (docs/reference/console.md, "A group's letters"): a group's
letters page by page, a letter without a message id opened by its place, one letter retried
unchanged (and not when it changed since the page), checked on the broker by message id, on
RabbitMQ and on the emulator."""

from __future__ import annotations

import dataclasses
import html
import io
import re
from datetime import UTC, datetime
from pathlib import Path

from rabbitctl_retry.console.audit import AuditLog
from rabbitctl_retry.console.security import csrf_of
from rabbitctl_retry.transport.base import Properties
from tests.backends import Backend
from tests.console.conftest import console_on
from tests.console.test_console_http import group_rows, post, session, text_of, wait_done
from tests.dlq.support import declare, publish_all, synthesized
from tests.observe import peek as read_all

LETTERS = 8
"""Seven letters of one group with ids, and one without (the last)."""


async def one_group_of_eight(backend: Backend) -> list[str]:
    """Eight ``rr`` dead letters of one group in ``dead`` (origin refunds); the ids of the
    first seven (the eighth has none)."""
    await declare(backend, "dead")
    await declare(backend, "refunds")
    now = datetime.now(UTC)
    letters: list[tuple[bytes, Properties]] = [synthesized("rr", 2 * n, now) for n in range(7)]
    body, properties = synthesized("rr", 14, now)
    letters.append((body, dataclasses.replace(properties, message_id=None)))
    await publish_all(backend, "dead", letters)
    return [p.message_id or "" for _, p in letters[:7]]


def rows_of(page: str) -> list[tuple[int, str]]:
    """(position, what its link says), from a page of a group's letters."""
    found = re.findall(
        r'<tr data-position="(\d+)">.*?<td data-label="message"><a [^>]*>([^<]+)</a>', page
    )
    return [(int(position), html.unescape(text)) for position, text in found]


async def test_a_groups_letters_page_by_page_and_one_without_an_id(
    backend: Backend, tmp_path: Path
) -> None:
    ids = await one_group_of_eight(backend)
    async with console_on(backend, tmp_path) as console, session(console) as client:
        _, page = await text_of(client, f"{console.base}/queues/dead/groups")
        ((group, (_, count)),) = group_rows(page).items()
        assert count == LETTERS
        assert "all 8 letters" in page
        shown: list[tuple[int, str]] = []
        url = f"{console.base}/queues/dead/groups/{group}/letters?per=3"
        for number in (1, 2, 3):
            status, page = await text_of(client, url)
            assert status == 200, page
            assert f"page {number} of 3" in page
            shown += rows_of(page)
            found = re.search(r'<a rel="next" href="([^"]+)"', page)
            if number < 3:
                assert found is not None
                url = console.base + html.unescape(found[1])
            else:
                assert found is None
                assert '<a rel="prev"' in page
        assert [position for position, _ in shown] == list(range(1, LETTERS + 1))
        assert [text for _, text in shown] == [*ids, "(no id) #8"]
        assert "7-8 of 8 letters in group" in page
        status, letter = await text_of(client, f"{console.base}/queues/dead/positions/8")
        assert status == 200, letter
        assert "Letter #8 of dead" in letter
        assert "This letter has no message id" in letter
        assert "&quot;n&quot;: 14" in letter  # its body
        assert "<form" not in letter  # shown only
        status, missing = await text_of(client, f"{console.base}/queues/dead/positions/9")
        assert status == 404
        assert "none at #9" in missing
    assert len(await read_all(backend, "dead")) == LETTERS  # reading took nothing


async def test_one_letter_retried_unchanged(backend: Backend, tmp_path: Path) -> None:
    ids = await one_group_of_eight(backend)
    before = await read_all(backend, "dead")
    chosen = ids[3]
    stderr = io.StringIO()
    audit = AuditLog("bob", stderr)
    async with console_on(backend, tmp_path, audit=audit) as console, session(console) as client:
        csrf = csrf_of(console.token)
        _, page = await text_of(client, f"{console.base}/queues/dead/messages/{chosen}")
        assert "Retry this letter unchanged" in page
        letter = re.search(r'name="letter" value="([^"]+)"', page)
        assert letter is not None
        retry = f"{console.base}/queues/dead/messages/{chosen}/retry"
        # a form made on another letter (a stale page): nothing is retried
        stale = {"csrf": csrf, "n": "1", "letter": letter[1].replace("a", "b").replace("0", "1")}
        _, _, job_url = await post(client, retry, stale)
        refused = await wait_done(client, job_url)
        assert 'data-state="failed"' in refused
        assert "not the one read" in html.unescape(refused)
        _, _, job_url = await post(client, retry, {"csrf": csrf, "n": "1", "letter": letter[1]})
        done = await wait_done(client, job_url)
        assert 'data-state="done"' in done
        assert "replayed 1 of" in done
        assert "--limit" not in done
    (retried,) = await read_all(backend, "refunds")
    assert retried.properties.message_id == chosen
    original = next(d for d in before if d.properties.message_id == chosen)
    assert retried.body == original.body
    assert retried.properties.headers is not None
    assert retried.properties.headers["rr-replayed-count"] in (1, "1", b"1")
    after = [d.properties.message_id for d in await read_all(backend, "dead")]
    assert after == [d.properties.message_id for d in before if d.properties.message_id != chosen]
    said = stderr.getvalue().splitlines()
    assert said[-1].startswith(f"rr console: bob: retry message {chosen} of dead: replayed 1 of")


async def test_the_groups_of_every_queue_in_one_table(backend: Backend, tmp_path: Path) -> None:
    await declare(backend, "dead")
    await declare(backend, "dead2")
    now = datetime.now(UTC)
    await publish_all(backend, "dead", [synthesized("rr", 2 * n, now) for n in range(3)])
    await publish_all(backend, "dead2", [synthesized("rr", 2 * n, now) for n in range(3, 5)])
    await publish_all(backend, "dead2", [synthesized("server", 1, now)])
    async with (
        console_on(backend, tmp_path, queues=("dead", "dead2")) as console,
        session(console) as client,
    ):
        _, index = await text_of(client, f"{console.base}/")
        assert 'href="/groups"' in index
        status, page = await text_of(client, f"{console.base}/groups")
        assert status == 200, page
    assert "2 groups of 6 dead letters read: dead (3), dead2 (3)" in page
    rows = group_rows(page)
    assert sorted(rows.values()) == [("(delivery_limit)", 1), ("ValueError", 5)]
    shared = next(g for g, (kind, _) in rows.items() if kind == "ValueError")
    row = page[page.index(f'<tr data-group="{shared}">') :]
    row = row[: row.index("</tr>")]
    assert f'href="/queues/dead/groups/{shared}/letters">dead</a> (3)' in row
    assert f'href="/queues/dead2/groups/{shared}/letters">dead2</a> (2)' in row
    assert len(await read_all(backend, "dead")) == 3  # reading took nothing
    assert len(await read_all(backend, "dead2")) == 3
