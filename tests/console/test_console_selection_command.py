"""The command line of a selection (#47, docs/reference/console.md, "A group's letters"): the page
of the letters ticked shows ``rr dlq replay QUEUE --topology T --url U --where group=G --where
ids=A,B`` (the password masked), and that line, run, moves exactly the letters selected
(every id counted on the broker, on RabbitMQ and on the emulator); a selection with a letter
without an id, or too long for one command line, says so instead of showing a wrong line; a
read-only console's search says what it can do."""

from __future__ import annotations

import html
import json
import re
import shlex
from pathlib import Path

import aiohttp
import pytest

from rabbitctl_retry.console.security import csrf_of
from rabbitctl_retry.console.selection import NoCommandLine, Selection, pick_value
from rabbitctl_retry.dlq.filters import IdsCondition, parse_where
from rabbitctl_retry.dlq.same_id import checksums
from rabbitctl_retry.transport.base import Delivery, Properties
from tests.backends import Backend
from tests.console.conftest import console_on
from tests.console.test_console_http import session, text_of
from tests.console.test_console_letters import one_group_of_eight
from tests.console.test_console_selection import boxes, group_of, plan_of, posted_picks
from tests.dlq.support import json_of, rr
from tests.observe import peek as read_all

URL = "amqp://ops:s3cret@broker.example:5672/%2F"
TOPOLOGY = "examples/refunds/topology.toml"
BY_PLACE = Delivery(
    body=b"{}",
    properties=Properties(),
    delivery_tag=1,
    redelivered=False,
    exchange="",
    routing_key="dead",
)
SHOWN_TARGET = f"--topology {TOPOLOGY} --url 'amqp://ops:******@broker.example:5672/%2F'"


async def selection_page(
    client: aiohttp.ClientSession, base: str, csrf: str, picks: list[str]
) -> str:
    fields = [("csrf", csrf), ("which", "checked")]
    return await posted_picks(client, f"{base}/selection", fields, picks)


def command_of(page: str) -> str:
    (command,) = re.findall(
        r'<p class="selection-command">[^<]*<br><code class="line">([^<]+)</code>', page
    )
    return html.unescape(command)


def without_target(words: list[str]) -> list[str]:
    """The line's words but ``--topology T`` and ``--url U`` (they name the console's broker,
    not the test's: rr() names the test's)."""
    kept: list[str] = []
    skip = False
    for word in words:
        if skip:
            skip = False
        elif word in ("--topology", "--url"):
            skip = True
        else:
            kept.append(word)
    return kept


async def test_the_selection_as_a_command_line_moves_exactly_those(
    backend: Backend, tmp_path: Path
) -> None:
    ids = await one_group_of_eight(backend)
    chosen = [ids[1], ids[4], ids[6]]
    async with (
        console_on(backend, tmp_path, urls=(URL,), topology_path=TOPOLOGY) as console,
        session(console) as client,
    ):
        csrf = csrf_of(console.token)
        group = await group_of(client, console)
        base = f"{console.base}/queues/dead/groups/{group}"
        _, letters = await text_of(client, f"{base}/letters")
        values = boxes(letters)
        page = await selection_page(client, base, csrf, [values[2], values[5], values[7]])
    assert "s3cret" not in page
    assert "The same retry on the command line (the password masked):" in page
    command = command_of(page)
    assert command == (
        f"rr dlq replay dead {SHOWN_TARGET} --where group={group} --where ids={','.join(chosen)}"
    )
    words = shlex.split(command)
    assert words[:2] == ["rr", "dlq"]
    result = await rr(backend, *without_target(words[1:]), "--yes", "-o", "json")
    assert result.exit_code == 0, result.output
    assert json_of(result)["replayed"] == len(chosen)
    moved = [d.properties.message_id for d in await read_all(backend, "refunds")]
    assert sorted(m or "(none)" for m in moved) == sorted(chosen)
    left = [d.properties.message_id for d in await read_all(backend, "dead")]
    assert left == [*(i for i in ids if i not in chosen), None]


async def test_a_letter_without_an_id_has_no_command_line(backend: Backend, tmp_path: Path) -> None:
    await one_group_of_eight(backend)
    async with console_on(backend, tmp_path) as console, session(console) as client:
        csrf = csrf_of(console.token)
        group = await group_of(client, console)
        base = f"{console.base}/queues/dead/groups/{group}"
        _, letters = await text_of(client, f"{base}/letters")
        values = boxes(letters)
        page = await selection_page(client, base, csrf, [values[1], values[8]])
        assert "--where ids=" not in page
        assert (
            "No command line does the same: 1 letter selected has no message id: a command "
            "line cannot name it (only this console can take it, by its place in the queue)"
        ) in page
        # without it, the line (no --topology or --url: the console was given none)
        page = await selection_page(client, base, csrf, [values[1]])
        assert command_of(page).startswith(f"rr dlq replay dead --where group={group} --where")


async def test_a_selection_too_long_for_one_line_says_so(backend: Backend, tmp_path: Path) -> None:
    await one_group_of_eight(backend)
    long_ids = [f"{n:03d}-" + "z" * 196 for n in range(200)]  # 200 ids of 200 characters
    async with console_on(backend, tmp_path) as console, session(console) as client:
        csrf = csrf_of(console.token)
        group = await group_of(client, console)
        base = f"{console.base}/queues/dead/groups/{group}"
        picks = [pick_value(message_id=i) for i in long_ids]
        page = await selection_page(client, base, csrf, picks)
        assert "--where ids=" not in page
        assert (
            "No command line does the same: the selection is too long for one command line: "
            "200 ids make an ids= list of 40,203 characters; --where takes at most 32,768"
        ) in page
        comma = await selection_page(client, base, csrf, [pick_value(message_id="a,b")])
        assert "--where ids=" not in comma
        assert "holds a comma" in html.unescape(comma)


async def test_a_read_only_search_says_to_run_the_command_line(
    backend: Backend, tmp_path: Path
) -> None:
    ids = await one_group_of_eight(backend)
    async with (
        console_on(backend, tmp_path, read_only=True) as console,
        session(console) as client,
    ):
        group = await group_of(client, console)
        for path in (f"groups/{group}/letters", "groups"):
            status, page = await text_of(client, f"{console.base}/queues/dead/{path}?id={ids[2]}")
            assert status == 200, page
            assert "tick them" not in page
            assert "This console is read-only: it retries, moves and discards nothing" in page
            assert "rr dlq replay dead" in page


async def test_a_selections_discard_offers_the_export_of_those_letters(
    backend: Backend, tmp_path: Path
) -> None:
    ids = await one_group_of_eight(backend)
    chosen = [ids[0], ids[3]]
    async with console_on(backend, tmp_path) as console, session(console) as client:
        csrf = csrf_of(console.token)
        group = await group_of(client, console)
        base = f"{console.base}/queues/dead/groups/{group}"
        picks = [pick_value(message_id=i) for i in chosen]
        plan = html.unescape(await plan_of(client, base, csrf, "discard", picks))
        listed = f"ids={ids[0]},{ids[3]}"
        export = f"rr dlq export dead {group}.jsonl --where group={group} --where {listed}"
        assert f"To keep a copy first: <code>{export}</code>" in plan
        # with a letter without an id, the group's export, said as such
        _, letters = await text_of(client, f"{base}/letters")
        plan = await plan_of(client, base, csrf, "discard", [picks[0], boxes(letters)[8]])
        assert "(of the group's letters, the ones selected among them)" in plan
    words = shlex.split(export)
    words[4] = str(tmp_path / words[4])
    result = await rr(backend, *words[1:])
    assert result.exit_code == 0, result.output
    lines = (tmp_path / f"{group}.jsonl").read_text(encoding="utf-8").splitlines()
    exported = [json.loads(line)["properties"].get("message_id") for line in lines]
    assert exported == chosen
    assert len(await read_all(backend, "dead")) == len(ids) + 1  # export takes nothing


def test_the_line_of_a_selection_is_read_back_as_those_ids() -> None:
    # pure: Selection.command and Selection.expression (console/selection.py)
    ids = ("=first", "a b", "it's", "ünï")
    chosen = Selection(ids=ids)
    line = chosen.command("dead q", "tmoh-1", ("--url", "amqp://u:******@h/"), verb="replay")
    words = shlex.split(line)
    assert words[:6] == ["rr", "dlq", "replay", "dead q", "--url", "amqp://u:******@h/"]
    assert words[6:9] == ["--where", "group=tmoh-1", "--where"]
    assert words[9] == chosen.expression()
    assert parse_where(words[9]) == IdsCondition(frozenset(ids), text=words[9])
    for unnamed, said in (
        (Selection(ids=("a,b",)), "holds a comma"),
        (Selection(ids=(" a",)), "white space"),
        (Selection(ids=("a",), places=((3, checksums(BY_PLACE)),)), "1 letter selected has"),
    ):
        assert unnamed.expression() is None
        with pytest.raises(NoCommandLine, match=said):
            unnamed.command("dead", "tmoh-1")
