"""rr console in a real browser: Debian's Chromium, headless, driven by Playwright. An outage of
the refunds/payouts services is produced on RabbitMQ (and on the emulator), the test opens the
console with its token, finds the groups with their counts, retries one group at a limited
rate, edits one message and retries it, and then checks on the broker which queue holds every
message id (docs/reference/console.md).

``RR_CONSOLE_SCREENSHOTS=DIR`` writes the groups page and a message's page there (how the
pictures of docs/reference/console.md were made)."""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.backends import Backend
from tests.console.conftest import console_on
from tests.dlq.support import declare, publish_all, run_to_dead, synthesized
from tests.observe import peek as read_all

PER_KIND = 10
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

playwright_api = pytest.importorskip("playwright.async_api")


@pytest.fixture
async def browser() -> AsyncIterator[object]:
    if CHROMIUM is None:
        if os.environ.get("CI") == "true":
            pytest.fail("chromium is not installed (apt-get install chromium): CI must run this")
        pytest.skip("chromium is not installed (apt-get install chromium)")
    async with playwright_api.async_playwright() as driver:
        launched = await driver.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=["--no-sandbox"]
        )
        try:
            yield launched
        finally:
            await launched.close()


async def test_an_outage_is_sorted_out_in_the_browser(
    backend: Backend, browser: object, tmp_path: Path
) -> None:
    made = await run_to_dead(backend, PER_KIND)
    before = [d.properties.message_id for d in await read_all(backend, "dead")]
    declined = {m for n, m in enumerate(made.refunds) if n % 2}
    edited_id = made.refunds[0]
    shots = os.environ.get("RR_CONSOLE_SCREENSHOTS")
    async with console_on(backend, tmp_path) as console:
        page = await browser.new_page(viewport={"width": 1400, "height": 900})  # type: ignore[attr-defined]
        await page.goto(console.entry)
        # the queues: the depth of dead
        assert await page.inner_text('tr[data-queue="dead"] td.depth') == str(made.total)
        await page.click('tr[data-queue="dead"] a')
        # the groups, with their counts
        await page.wait_for_selector("table.groups")
        counts = {}
        for row in await page.query_selector_all("tr[data-group]"):
            cells = await row.query_selector_all("td")
            counts[await cells[2].inner_text()] = int(await cells[1].inner_text())
        assert counts == {
            "ValueError": len(declined),
            "(max_attempts)": PER_KIND - len(declined),
            "(delivery_limit)": PER_KIND,
            "(rejected)": PER_KIND,
        }
        if shots:
            await page.screenshot(path=str(Path(shots) / "console-groups.png"), full_page=True)
        # retry the ValueError group at 20 per second: the plan, then the run
        row = page.locator("tr[data-group]", has_text="ValueError")
        await row.locator('form.retry input[name="rate"]').fill("20")
        await row.locator('button[value="retry"]').click()
        plan = await page.inner_text("p.plan")
        assert f"{len(declined)} of {made.total} dead letters in dead would be retried" in plan
        assert "at most 20 per second" in plan
        await page.click("button.confirm")
        await page.wait_for_selector('p.state[data-state="done"]', timeout=180_000)
        report = await page.inner_text("main")
        assert f"replayed {len(declined)} of" in report
        # one message: its deaths, then an edit and a retry
        await page.goto(f"{console.base}/queues/dead/messages/{edited_id}")
        assert await page.inner_text("table.headers") != ""
        assert "rr-origin-queue" in await page.inner_text("table.headers")
        if shots:
            await page.screenshot(path=str(Path(shots) / "console-message.png"), full_page=True)
        text = await page.input_value("textarea")
        assert '"n": 0' in text
        await page.fill("textarea", re.sub(r'"n": 0', '"n": 0,\n  "fixed": true', text))
        await page.click('button[value="preview"]')
        assert '+  "fixed": true' in await page.inner_text("pre.diff")
        await page.click("button.confirm")
        assert f"edited copy of {edited_id} published to refunds" in await page.inner_text("main")
        await page.close()
    # on the broker: every id where it belongs
    refunds = {d.properties.message_id: d for d in await read_all(backend, "refunds")}
    assert set(refunds) == declined | {edited_id}
    assert b'"fixed": true' in refunds[edited_id].body
    assert "rr-edited-at" in (refunds[edited_id].properties.headers or {})
    assert [d.properties.message_id for d in await read_all(backend, "dead")] == [
        m for m in before if m not in declined and m != edited_id
    ]


LF_JSON = (
    b'\n{"amount": 10.10, "limit": 1e400, "rate": 1.00000000000000001,\n'
    b'  "k": 1, "k": 2, "note": "card declined"}\n'
)
CRLF_TEXT = b"refund 7\r\ncard declined\r\n\r\nmore\tto come"


async def test_one_word_changed_in_the_browser_publishes_every_other_byte(
    backend: Backend, browser: object, tmp_path: Path
) -> None:
    """A body the browser's edit box carries (a first line break, numbers a parser would round,
    a duplicate key; CRLF line breaks, a tab, no final newline), one word changed in Chromium:
    the diff shows that line, and the copy is the original but for that word."""
    await declare(backend, "dead", "refunds")
    letters = []
    for n, (body, content_type) in enumerate(
        [(LF_JSON, "application/json"), (CRLF_TEXT, "text/plain")]
    ):
        _, properties = synthesized("rr", 2 * n, datetime.now(UTC))
        letters.append((body, dataclasses.replace(properties, content_type=content_type)))
    await publish_all(backend, "dead", letters)
    ids = [str(properties.message_id) for _, properties in letters]
    async with console_on(backend, tmp_path) as console:
        page = await browser.new_page()  # type: ignore[attr-defined]
        await page.goto(console.entry)
        for letter_id in ids:
            await page.goto(f"{console.base}/queues/dead/messages/{letter_id}")
            text = await page.input_value("textarea")
            await page.fill("textarea", text.replace("declined", "accepted"))
            await page.click('button[value="preview"]')
            diff = (await page.inner_text("pre.diff")).splitlines()
            changed = [line for line in diff[2:] if line[:1] in "-+"]
            assert len(changed) == 2, diff
            assert changed[1] == changed[0].replace("-", "+", 1).replace("declined", "accepted")
            await page.click("button.confirm")
            main = await page.inner_text("main")
            assert f"edited copy of {letter_id} published to refunds" in main
        await page.close()
    copies = {d.properties.message_id: d.body for d in await read_all(backend, "refunds")}
    assert copies == {
        ids[0]: LF_JSON.replace(b"declined", b"accepted"),
        ids[1]: CRLF_TEXT.replace(b"declined", b"accepted"),
    }
    assert await read_all(backend, "dead") == []


PHONE = {"width": 390, "height": 844}


async def page_width(page: Any) -> int:
    """How wide the page lays out, once its stylesheet is in: a selector can show up before
    the page's ``load`` (on a busy machine the stylesheet came later, and the bare table
    measured 723 px on a phone)."""
    await page.wait_for_load_state("load")
    width: int = await page.evaluate("document.documentElement.scrollWidth")
    return width


async def test_on_a_phone_and_with_the_keyboard(
    backend: Backend, browser: object, tmp_path: Path
) -> None:
    """At 390x844 the pages fit the screen (no sideways scroll) with the actions stacked
    apart; Enter in the move box plans a move (never the form's first action); the plan of a
    move to a queue that refuses some letters says so and offers to move the others; the
    broker holds every id where it was (a plan moves nothing)."""
    made = await run_to_dead(backend, PER_KIND)
    before = [d.properties.message_id for d in await read_all(backend, "dead")]
    shots = os.environ.get("RR_CONSOLE_SCREENSHOTS")
    async with console_on(backend, tmp_path) as console:
        page = await browser.new_page(viewport=PHONE, is_mobile=True, has_touch=True)  # type: ignore[attr-defined]
        await page.goto(console.entry)
        await page.click('tr[data-queue="dead"] a')
        await page.wait_for_selector("table.groups")
        width = await page_width(page)
        assert width <= PHONE["width"], f"the groups page is {width} px wide on a phone"
        row = page.locator("tr[data-group]", has_text="ValueError")
        retry = await row.locator('button[value="retry"]').bounding_box()
        discard = await row.locator('button[value="discard"]').bounding_box()
        assert retry is not None
        assert discard is not None
        # stacked, and far apart: more than a finger's width (about 10 mm, 38 px) between them
        assert discard["y"] - (retry["y"] + retry["height"]) > 38
        assert "danger" in (
            await row.locator('button[value="discard"]').get_attribute("class") or ""
        )
        if shots:
            await page.screenshot(
                path=str(Path(shots) / "console-groups-phone.png"), full_page=True
            )
        # Enter in the move box: a move's plan, to the queue typed
        await row.locator('form.move input[name="to"]').fill("refunds")
        await row.locator('form.move input[name="to"]').press("Enter")
        await page.wait_for_selector("p.plan")
        assert "would be moved" in await page.inner_text("p.plan")
        assert await page.title() == f"Move group {await _group_id(page)} - rr console"
        # a move to a queue that does not exist: every letter would fail, nothing is offered
        await page.go_back()
        await page.wait_for_selector("table.groups")
        row = page.locator("tr[data-group]", has_text="ValueError")
        await row.locator('form.move input[name="to"]').fill("no-such-queue")
        await row.locator('form.move button[value="move"]').click()
        await page.wait_for_selector("p.plan")
        main = await page.inner_text("main")
        assert "would fail and stay in dead" in main
        assert await page.locator("button.confirm").count() == 0
        assert "Nothing would be moved." in main
        # a page that is not there: a way back
        await page.goto(f"{console.base}/queues/no-such-queue/groups")
        await page.click("text=back to the queues")
        await page.wait_for_selector("tr[data-queue]")
        await page.close()
    assert [d.properties.message_id for d in await read_all(backend, "dead")] == before
    assert made.total == len(before)


async def _group_id(page: object) -> str:
    title: str = await page.title()  # type: ignore[attr-defined]
    return title.split(" - ")[0].rsplit(" ", 1)[-1]
