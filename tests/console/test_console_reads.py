"""What the console reads, and when (docs/reference/console.md, "Reading is free, or asked"): no GET
changes anything; a queue whose reads count toward a delivery limit is read only by the page's
own form, and never by a read-only console; another page of the machine cannot make it read;
a group moved from the console goes through the guard of ``rr dlq move``. Every letter is
counted on the broker afterwards."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from rabbitctl_retry.transport.base import Delivery
from tests.backends import Backend
from tests.console.conftest import Console, console_on
from tests.console.test_console_http import group_rows, post, session, text_of, wait_done
from tests.dlq.support import declare, publish_all, rr, synthesized
from tests.observe import peek
from tests.shared_node import BROKERS

NOW = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)
LETTERS = [synthesized("rr", 2 * n, NOW) for n in range(5)]
IDS = [properties.message_id for _, properties in LETTERS]
LIMITED = {"x-queue-type": "quorum", "x-delivery-limit": 3}
"""A quorum dead-letter queue declared elsewhere with a limit of 3: before RabbitMQ 4.3 the
4th read of a letter would dead-letter (here: drop) it."""


def free_to_read(backend: Backend) -> bool:
    return BROKERS[backend.version].server_version.nack_returns_uncounted


def delivery_counts(letters: list[Delivery]) -> list[Any]:
    return [(letter.properties.headers or {}).get("x-delivery-count") for letter in letters]


async def limited_queue(backend: Backend) -> None:
    await declare(backend, "dead", arguments=LIMITED)
    await publish_all(backend, "dead", LETTERS)


def message_url(console: Console, message_id: str | None) -> str:
    return f"{console.base}/queues/dead/messages/{message_id}"


async def test_25_views_of_a_read_only_console_keep_every_letter(
    backend: Backend, tmp_path: Path
) -> None:
    """The reported loss: a read-only console's message page read the whole queue on every
    view, and a limited quorum queue lost its letters after a few. Now: free on 4.3 (the page
    reads, nothing counts); elsewhere the page says why it does not read, and offers no form."""
    await limited_queue(backend)
    async with console_on(backend, tmp_path, read_only=True) as console, session(console) as client:
        for view in range(25):
            url = message_url(console, IDS[view % 5])
            status, page = await text_of(client, url)
            assert status == 200, page
            if free_to_read(backend):
                assert f"Message {IDS[view % 5]}" in page
                assert '<pre class="body">' in page
            else:
                assert 'data-reads="spends"' in page
                assert "it is not read" in page
                assert "<form" not in page
        groups_status, groups_page = await text_of(client, f"{console.base}/queues/dead/groups")
        assert groups_status == 200
        assert ('<form method="post"' in groups_page) is False  # a search form is a GET
        # the read form, posted anyway: refused where a read can drop a letter
        refused, _, _ = await post(client, message_url(console, IDS[0]), {"read": "1"})
        assert refused == 403
    left = await peek(backend, "dead")
    # every letter, exactly once (a message page stops reading at its letter: a quorum queue
    # may then hold them rotated, docs/reference/dlq.md "Inspecting without taking")
    assert sorted(letter.properties.message_id or "" for letter in left) == sorted(IDS)
    assert all(count in (None, 0) for count in delivery_counts(left))


async def test_a_counted_read_happens_only_when_asked(backend: Backend, tmp_path: Path) -> None:
    await limited_queue(backend)
    async with console_on(backend, tmp_path) as console, session(console) as client:
        status, page = await text_of(client, message_url(console, IDS[2]))
        assert status == 200
        if free_to_read(backend):
            assert '<pre class="body">' in page
            return
        assert 'data-reads="spends"' in page
        assert "its x-delivery-limit = 3" in page or "it has x-delivery-limit = 3" in page
        form = re.search(r'<form method="post" action="([^"]+)">', page)
        assert form is not None
        csrf = re.search(r'name="csrf" value="([^"]+)"', page)
        assert csrf is not None
        asked, shown, _ = await post(
            client, f"{console.base}{form.group(1)}", {"csrf": csrf.group(1), "read": "1"}
        )
        assert asked == 200, shown
        assert f"Message {IDS[2]}" in shown
    left = await peek(backend, "dead")
    # every letter, exactly once (a message page stops reading at its letter: a quorum queue
    # may then hold them rotated, docs/reference/dlq.md "Inspecting without taking")
    assert sorted(letter.properties.message_id or "" for letter in left) == sorted(IDS)
    # the one read that was asked for counted once on each letter it read
    assert all(count in (1, 2) for count in delivery_counts(left))


@pytest.mark.parametrize(
    "headers",
    [
        {"Sec-Fetch-Site": "same-site"},  # a page of another port of 127.0.0.1
        {"Sec-Fetch-Site": "cross-site"},
        {},  # a browser that does not say
    ],
    ids=["same-site", "cross-site", "unsaid"],
)
async def test_another_page_cannot_make_it_read(
    backend: Backend, tmp_path: Path, headers: dict[str, str]
) -> None:
    await declare(backend, "dead")
    await publish_all(backend, "dead", LETTERS)
    async with console_on(backend, tmp_path) as console:
        async with session(console) as browser:
            cookies = browser.cookie_jar
            async with aiohttp.ClientSession(cookie_jar=cookies, headers=headers) as other:
                for url in (f"{console.base}/queues/dead/groups", message_url(console, IDS[0])):
                    status, page = await text_of(other, url)
                    assert status == 403, page
                    assert "dead letters read" not in page
        bearer = {"Authorization": f"Bearer {console.token}"}
        async with aiohttp.ClientSession(headers=bearer) as script:
            status, page = await text_of(script, f"{console.base}/queues/dead/groups")
            assert status == 200, page
            assert "5 dead letters read of 5" in page


async def test_a_group_moved_to_a_queue_that_drops_is_refused(
    backend: Backend, tmp_path: Path
) -> None:
    """The console's move goes through ``rr dlq move``'s guard: a target with x-max-length = 2
    (and RabbitMQ's default drop-head) would confirm 10 copies and keep 2."""
    letters = [synthesized("rr", 2 * n, NOW) for n in range(10)]
    await declare(backend, "dead")
    await declare(backend, "parked", arguments={"x-max-length": 2})
    await publish_all(backend, "dead", letters)
    async with console_on(backend, tmp_path) as console, session(console) as client:
        status, page = await text_of(client, f"{console.base}/queues/dead/groups")
        assert status == 200
        ((group_id, (_, count)),) = group_rows(page).items()
        assert count == 10
        csrf = re.search(r'name="csrf" value="([^"]+)"', page)
        assert csrf is not None
        form = {"csrf": csrf.group(1), "action": "move", "to": "parked", "rate": ""}
        base = f"{console.base}/queues/dead/groups/{group_id}"
        planned, plan_page, _ = await post(client, f"{base}/plan", form)
        assert planned == 400, plan_page
        assert "&#x27;parked&#x27; has x-max-length = 2" in plan_page
        assert "nothing was moved" in plan_page
        # the run itself, posted without the plan: refused the same way
        ran, job_page, job_url = await post(client, f"{base}/run", form)
        assert ran == 200
        done = await wait_done(client, job_url)
        assert "x-max-length = 2" in done
        assert 'data-state="failed"' in done, job_page
    assert [d.properties.message_id for d in await peek(backend, "dead")] == [
        p.message_id for _, p in letters
    ]
    assert await peek(backend, "parked") == []


async def test_25_reads_of_a_dead_letter_queue_rr_declared(
    backend: Backend, tmp_path: Path
) -> None:
    """A quorum dead-letter queue rr declares has no limit (-1 on 4.x): a read-only console
    reads it 25 times (asked on a server where a read counts, at once on 4.3) and every letter
    stays, in order."""
    topology = tmp_path / "topology.toml"
    topology.write_text(
        '[queues.payouts]\ntype = "quorum"\nmax_attempts = 5\ndead_letter = "dead"\n\n'
        '[queues.dead]\ntype = "quorum"\n'
    )
    declared = await rr(backend, "declare", str(topology))
    assert declared.exit_code == 0, declared.output
    await publish_all(backend, "dead", LETTERS)
    async with console_on(backend, tmp_path, read_only=True) as console, session(console) as client:
        for view in range(25):
            url = message_url(console, IDS[view % 5])
            if free_to_read(backend):
                status, page = await text_of(client, url)
            else:  # counted, but nothing can be dropped: a read-only console reads it if asked
                _, gate = await text_of(client, url)
                assert 'data-reads="counted"' in gate
                csrf = re.search(r'name="csrf" value="([^"]+)"', gate)
                assert csrf is not None
                status, page, _ = await post(client, url, {"csrf": csrf.group(1), "read": "1"})
            assert status == 200, page
            assert f"Message {IDS[view % 5]}" in page
    left = await peek(backend, "dead")
    # every letter, exactly once (a message page stops reading at its letter: a quorum queue
    # may then hold them rotated, docs/reference/dlq.md "Inspecting without taking")
    assert sorted(letter.properties.message_id or "" for letter in left) == sorted(IDS)
    if not free_to_read(backend):
        assert all(count in (25, 26) for count in delivery_counts(left))
