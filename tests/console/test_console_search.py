"""The console's search (docs/reference/console.md, "Search"): on a queue's groups page and on a
group's letters page, by text and failure time, with the counts and the command line that selects
the same letters; that command run with the CLI finds the same ids. On RabbitMQ and the emulator."""

from __future__ import annotations

import html
import re
import shlex
from datetime import UTC, datetime
from pathlib import Path

from rabbitctl_retry.fields import FieldValue
from rabbitctl_retry.transport.base import Properties
from tests.backends import Backend
from tests.console.conftest import console_on
from tests.console.test_console_http import group_rows, session, text_of
from tests.console.test_console_letters import rows_of
from tests.dlq.support import declare, json_of, publish_all, rr, synthesized
from tests.observe import peek as read_all

NUMBERS = range(0, 20, 2)
"""Ten of rr's dead letters from refunds, failed 0, 2, ... 18 minutes ago."""
TIMED_OUT = (0, 4, 8, 12)
"""Failed with a TimeoutError (their own group)."""
SAYS_TIMEOUT = (2, 6)
"""Failed with a ValueError, and say "Timeout" in their body."""
SEARCH = "?text=timeout&age=%3C9m"


async def published(backend: Backend) -> dict[int, str]:
    await declare(backend, "dead", "refunds")
    now = datetime.now(UTC)
    made: list[tuple[bytes, Properties]] = []
    for number in NUMBERS:
        body, properties = synthesized("rr", number, now)
        headers: dict[str, FieldValue] = dict(properties.headers or {})
        if number in TIMED_OUT:
            headers["rr-error-type"] = "TimeoutError"
        if number in SAYS_TIMEOUT:
            body = b'{"upstream": "Gateway Timeout"}'
        made.append((body, Properties(message_id=properties.message_id, headers=headers)))
    await publish_all(backend, "dead", made)
    return {number: f"s-rr-{number}" for number in NUMBERS}


def command_of(page: str) -> str:
    found = re.search(r"The same letters on the command line: <code>([^<]+)</code>", page)
    assert found is not None, page
    return html.unescape(found[1])


async def ids_by_cli(backend: Backend, command: str) -> list[str]:
    words = shlex.split(command)
    assert words[:3] == ["rr", "dlq", "inspect"]
    result = await rr(backend, *words[1:], "-o", "json")
    assert result.exit_code == 0, result.output
    return [m["message_id"] for m in json_of(result)["messages"]]


async def test_search_on_the_groups_and_letters_pages(backend: Backend, tmp_path: Path) -> None:
    ids = await published(backend)
    wanted = {0, 2, 4, 6, 8}  # "timeout" somewhere, and under 9 minutes old
    async with console_on(backend, tmp_path) as console, session(console) as client:
        status, page = await text_of(client, f"{console.base}/queues/dead/groups{SEARCH}")
        assert status == 200, page
        assert "5 of 10 dead letters read match text=timeout, age&lt;9m" in page
        rows = group_rows(page)
        assert sorted(rows.values()) == [("TimeoutError", 3), ("ValueError", 2)]
        command = command_of(page)
        assert command == "rr dlq inspect dead --where text=timeout --where 'age<9m'"
        assert sorted(await ids_by_cli(backend, command)) == sorted(ids[n] for n in wanted)
        assert "rr dlq replay dead --where text=timeout --where &#x27;age&lt;9m&#x27;" in page

        (timeouts,) = (gid for gid, (kind, _) in rows.items() if kind == "TimeoutError")
        link = f"/queues/dead/groups/{timeouts}/letters?text=timeout&amp;age=%3C9m"
        assert f'href="{link}"' in page
        status, letters = await text_of(client, console.base + html.unescape(link))
        assert status == 200, letters
        assert "3 of the group's 4 dead letters read match" in letters
        assert [text for _, text in rows_of(letters)] == [ids[0], ids[4], ids[8]]
        command = command_of(letters)
        assert command == (
            f"rr dlq inspect dead --where group={timeouts} --where text=timeout --where 'age<9m'"
        )
        assert await ids_by_cli(backend, command) == [ids[0], ids[4], ids[8]]

        by_id = f"{console.base}/queues/dead/groups/{timeouts}/letters?id={ids[12]}"
        status, one = await text_of(client, by_id)
        assert status == 200, one
        assert [text for _, text in rows_of(one)] == [ids[12]]
    # a search reads, never takes: every letter is still there, in order
    assert [d.properties.message_id for d in await read_all(backend, "dead")] == list(ids.values())


async def test_a_search_that_cannot_run_is_a_400_page_with_a_way_back(
    backend: Backend, tmp_path: Path
) -> None:
    await published(backend)
    async with console_on(backend, tmp_path) as console, session(console) as client:
        for query, said in (
            ("?age=soon", "the age &#x27;soon&#x27;: start with &lt; or &gt;"),
            ("?age=%3Esoon", "is not a time"),
            ("?text=%3Cb%3E", "cannot start with =, !, &lt; or &gt;"),
            ("?text=" + "w" * 257, "at most 256 are searched for"),
        ):
            status, page = await text_of(client, f"{console.base}/queues/dead/groups{query}")
            assert status == 400, (query, page)
            assert said in page
            assert "--where" not in page
            assert '<a href="/queues/dead/groups">back</a>' in page


async def test_search_on_the_groups_of_every_queue(backend: Backend, tmp_path: Path) -> None:
    ids = await published(backend)
    await declare(backend, "dead2")
    now = datetime.now(UTC)
    body, properties = synthesized("rr", 30, now)
    headers: dict[str, FieldValue] = {**(properties.headers or {}), "rr-error-type": "TimeoutError"}
    await publish_all(backend, "dead2", [(body, Properties(message_id="d2-1", headers=headers))])
    url = "amqp://ops:s3cret@broker.example:5672/%2F"
    async with (
        console_on(
            backend,
            tmp_path,
            queues=("dead", "dead2"),
            urls=(url,),
            topology_path="examples/refunds/topology.toml",
        ) as console,
        session(console) as client,
    ):
        _, index = await text_of(client, f"{console.base}/groups")
        assert 'action="/groups" class="search"' in index
        status, page = await text_of(client, f"{console.base}/groups?text=timeout")
        assert status == 200, page
    assert "s3cret" not in page
    assert "7 of 11 dead letters read match text=timeout" in page
    rows = group_rows(page)
    assert sorted(rows.values()) == [("TimeoutError", 5), ("ValueError", 2)]
    commands = [html.unescape(c) for c in re.findall(r"<li><code>([^<]+)</code></li>", page)]
    target = "--topology examples/refunds/topology.toml --url 'amqp://ops:******@broker.example"
    assert commands == [
        f"rr dlq inspect dead {target}:5672/%2F' --where text=timeout",
        f"rr dlq inspect dead2 {target}:5672/%2F' --where text=timeout",
    ]
    # the same letters by the CLI (on the test's broker: the shown target aside)
    found = await ids_by_cli(backend, "rr dlq inspect dead --where text=timeout")
    assert sorted(found) == sorted(ids[n] for n in (*TIMED_OUT, *SAYS_TIMEOUT))
