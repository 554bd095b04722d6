"""Every letter reachable, and the record, in a real browser (Chromium, headless, Playwright):
a group's letters listed, a letter without an id opened by its place, one letter retried
unchanged from its page, the run's page and the runs page after a reload, at a desktop's
width and a phone's; then the broker read by message id and the audit log's line asserted
(docs/reference/console.md)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from rabbitctl_retry.console.audit import AuditLog
from tests.backends import Backend
from tests.console.conftest import Console, console_on
from tests.console.test_console_browser import PHONE, browser, page_width
from tests.console.test_console_letters import LETTERS, one_group_of_eight
from tests.observe import peek as read_all

__all__ = ["browser"]

DESKTOP = {"width": 1440, "height": 900}


async def letters_page(browser: Any, console: Console, viewport: dict[str, int]) -> Any:
    """A page of the browser at ``viewport`` (a phone's: touch, mobile) opened on the first
    group's letters of ``dead``, from the console's printed address."""
    phone = viewport is PHONE
    page = await browser.new_page(viewport=viewport, is_mobile=phone, has_touch=phone)
    await page.goto(console.entry)
    await page.click('tr[data-queue="dead"] a')
    await page.click("a.letters")
    await page.wait_for_selector("table.letters")
    return page


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
async def test_a_letter_found_in_its_group_and_retried_in_the_browser(
    backend: Backend, browser: object, tmp_path: Path, viewport: dict[str, int]
) -> None:
    ids = await one_group_of_eight(backend)
    chosen = ids[3]
    log = tmp_path / "audit.jsonl"
    audit = AuditLog("carol", open(os.devnull, "w"), log)  # noqa: SIM115 - closed below
    shots = os.environ.get("RR_CONSOLE_SCREENSHOTS")
    phone = viewport is PHONE
    async with console_on(backend, tmp_path, audit=audit) as console:
        page = await letters_page(browser, console, viewport)
        rows = page.locator("tr[data-position]")
        assert await rows.count() == LETTERS
        width = await page_width(page)
        assert width <= viewport["width"], f"the letters page is {width} px wide"
        if shots:
            name = "console-letters-phone.png" if phone else "console-letters.png"
            await page.screenshot(path=str(Path(shots) / name), full_page=True)
        # the letter without an id, by its place
        await page.click("text=(no id) #8")
        await page.wait_for_selector("p.no-id")
        assert await page.title() == "Letter #8 of dead - rr console"
        assert await page.locator("form").count() == 0
        await page.go_back()
        await page.wait_for_selector("table.letters")
        # a search: typed in the form, Enter, only the letter that says it is listed
        await page.fill('form.search input[name="text"]', "DECLINED 12")
        await page.press('form.search input[name="text"]', "Enter")
        await page.wait_for_selector("p.search-count")
        assert await rows.count() == 1
        assert await rows.locator("a").inner_text() == ids[6]
        assert "1 of the group's 8 dead letters read match" in await page.inner_text(
            "p.search-count"
        )
        command = await page.inner_text("p.search-command code")
        assert command.endswith("--where 'text=DECLINED 12'")
        await page.go_back()
        await page.wait_for_selector("table.letters")
        assert await rows.count() == LETTERS
        # one letter, retried unchanged from its page
        await page.click(f"text={chosen}")
        await page.wait_for_selector("form.retry")
        await page.click("form.retry button")
        await page.wait_for_selector('p.state[data-state="done"]', timeout=60_000)
        assert "replayed 1 of" in await page.inner_text("main")
        await page.reload()
        assert "replayed 1 of" in await page.inner_text("main")
        await page.click("header >> text=runs")
        await page.wait_for_selector("table.runs")
        await page.reload()
        run = page.locator("tr[data-run]")
        assert await run.count() == 1
        assert f"Retry {chosen} of dead" in await run.inner_text()
        await page.close()
    audit.close()
    (record,) = [json.loads(line) for line in log.read_text().splitlines()]
    assert (record["who"], record["action"], record["letters"]) == (
        "carol",
        "retry",
        f"message {chosen}",
    )
    assert record["report"]["replayed"] == 1
    (retried,) = await read_all(backend, "refunds")
    assert retried.properties.message_id == chosen
    left = [d.properties.message_id for d in await read_all(backend, "dead")]
    assert left == [*(i for i in ids if i != chosen), None]
