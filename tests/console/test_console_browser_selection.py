"""Letters selected by hand, and the numbers while another reader holds letters, in a real
browser (Chromium, headless, Playwright) at a desktop's width and a phone's
(docs/reference/console.md): two letters of a group ticked (the command line that does the same
shown, and the page's picture, docs/images/console-selection.png, taken when RR_CONSOLE_SCREENSHOTS
names a directory), then three (one without an id: no command line names it) retried through
the plan, then the broker read by message id (exactly those moved, the others still in the
dead-letter queue, in order) and the audit log's line; and, with the management API (the
emulator's twin, RabbitMQ 4.3.6's), letters another channel holds said on the groups page and
the queues page, with the broker's numbers."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

from rabbitctl_retry.console.audit import AuditLog
from rabbitctl_retry.transport.base import Delivery
from tests.backends import Backend
from tests.console.conftest import console_on
from tests.console.test_console_browser import PHONE, browser, page_width
from tests.console.test_console_browser_letters import DESKTOP, letters_page
from tests.console.test_console_letters import one_group_of_eight
from tests.console.test_console_numbers import management_of
from tests.dlq.support import run_to_dead
from tests.observe import peek as read_all

__all__ = ["browser"]

HELD = 4
LOOKS = 120
"""Reloads of the groups page before the server's statistics (sampled every 5 s) must show
the letters held."""


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
async def test_letters_ticked_are_retried_in_the_browser(
    backend: Backend, browser: object, tmp_path: Path, viewport: dict[str, int]
) -> None:
    ids = await one_group_of_eight(backend)
    chosen = [ids[1], ids[5]]
    log = tmp_path / "audit.jsonl"
    audit = AuditLog("dana", open(os.devnull, "w"), log)  # noqa: SIM115 - closed below
    shots = os.environ.get("RR_CONSOLE_SCREENSHOTS")
    async with console_on(backend, tmp_path, audit=audit) as console:
        page = await letters_page(browser, console, viewport)
        letters = page.url
        width = await page_width(page)
        assert width <= viewport["width"], f"the letters page is {width} px wide"
        for look in range(2):
            await page.goto(letters)
            for message_id in chosen:
                await page.check(f'input[aria-label="select {message_id}"]')
            if look:
                await page.check('input[aria-label="select #8 (no id)"]')
            await page.click('button[value="checked"]')
            await page.wait_for_selector("p.selected")
            selected = await page.inner_text("p.selected")
            if look:
                assert f"id {chosen[0]}, id {chosen[1]}, #8 (no id)" in selected
                said = await page.inner_text("p.selection-command")
                assert "1 letter selected has no message id" in said
            else:
                # the same retry as a command line (tests/console/test_console_selection_command.py
                # runs it), and the page's picture
                assert f"id {chosen[0]}, id {chosen[1]}." in selected
                line = await page.inner_text("p.selection-command code.line")
                assert line.endswith(f"--where ids={chosen[0]},{chosen[1]}"), line
                width = await page_width(page)
                assert width <= viewport["width"], f"the selection page is {width} px wide"
                if shots and viewport is DESKTOP:
                    path = Path(shots) / "console-selection.png"
                    await page.screenshot(path=str(path), full_page=True)
                # Enter in the move's box plans a move, never the retry (a form per action)
                await page.fill('form.move input[name="to"]', "refunds")
                await page.press('form.move input[name="to"]', "Enter")
                await page.wait_for_selector("p.plan")
                assert "would be moved" in await page.inner_text("p.plan")
        await page.click("form.retry button")
        await page.wait_for_selector("p.plan")
        plan = await page.inner_text("p.plan")
        assert "3 of 8 dead letters in dead would be retried" in plan
        await page.click("button.confirm")
        await page.wait_for_selector('p.state[data-state="done"]', timeout=60_000)
        text = await page.inner_text("main")
        assert "3 of 3 copies confirmed" in text
        assert "replayed 3 of" in text
        await page.close()
    audit.close()
    (record,) = [json.loads(line) for line in log.read_text().splitlines()]
    assert record["action"] == "retry"
    assert record["letters"].startswith(f"letters id {chosen[0]}, id {chosen[1]}, #8 (no id)")
    assert record["report"]["replayed"] == 3
    moved = sorted(d.properties.message_id or "(none)" for d in await read_all(backend, "refunds"))
    assert moved == sorted([*chosen, "(none)"])
    left = [d.properties.message_id for d in await read_all(backend, "dead")]
    assert left == [i for i in ids if i not in chosen]


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
async def test_letters_held_by_another_reader_in_the_browser(
    backend: Backend, browser: object, tmp_path: Path, viewport: dict[str, int]
) -> None:
    management = management_of(backend)  # skips where the broker has no management API
    made = await run_to_dead(backend, 5)
    holder = await backend.connect()
    phone = viewport is PHONE
    try:
        channel = await holder.channel()
        held: list[Delivery] = []
        for _ in range(HELD):  # another reader's letters: taken, not given back
            delivery = await channel.get("dead")
            assert delivery is not None
            held.append(delivery)
        async with console_on(backend, tmp_path, management=management) as console:
            page = await browser.new_page(viewport=viewport, is_mobile=phone, has_touch=phone)  # type: ignore[attr-defined]
            await page.goto(console.entry)
            said = f"{HELD} letters held by another reader"
            for _ in range(LOOKS):
                await page.goto(f"{console.base}/queues/dead/groups")
                unread = await page.inner_text("p.unread")
                if said in unread:
                    break
                await asyncio.sleep(0.5)
            assert said in unread, unread
            read = made.total - HELD
            count = await page.inner_text("p.count")
            assert f"{read} dead letters read of {read} in dead" in count
            width = await page_width(page)
            assert width <= viewport["width"], f"the groups page is {width} px wide"
            await page.goto(f"{console.base}/")
            depth = await page.inner_text('tr[data-queue="dead"] td.depth')
            assert depth.splitlines()[0] == str(read)
            assert f"+ {said}" in depth
            await page.close()
        # the broker's numbers: what the page said
        (queue,) = [q for q in await management.queue_activity() if q.name == "dead"]
        assert queue.unacked == HELD
    finally:
        await holder.close()  # the letters go back
    assert len(await read_all(backend, "dead")) == made.total
