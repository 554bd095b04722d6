"""Every command that takes ``--topology`` finds ``./topology.toml`` the same way
(``cli/topology_found.py``; docs/reference/cli.md, "Where the broker is"): run where a
``topology.toml`` is, it says so first on stderr and works on that file's broker and vhost, as
with ``--topology ./topology.toml``; ``--no-topology`` goes without it (to the configuration
file's default broker here: another fresh vhost).

The proof of the vhost reached: the message ids of the queues of the file's vhost, read back
after each command, and the vhost the command names."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from typer.testing import CliRunner, Result

from rabbitctl_retry.cli import app
from rabbitctl_retry.cli.asyncapi import NO_TOPOLOGY
from rabbitctl_retry.cli.topology_found import found_note
from rabbitctl_retry.transport.base import Properties
from tests.backends import RabbitBackend
from tests.dlq.support import publish_all
from tests.observe import peek
from tests.shared_node import chosen_versions, require_broker

NOTE = found_note()
QUEUES = ("orders", "orders.dead", "other")
TOPOLOGY = """
[broker]
url = "{url}"

[queues.orders]
max_attempts = 3
dead_letter = "orders.dead"
delay = "dlx-ttl"

[queues."orders.dead"]

[queues.other]
"""

State = dict[str, list[str]]
"""The message ids of each of :data:`QUEUES`, sorted."""

BEFORE: State = {"orders": [], "orders.dead": ["d1", "d2"], "other": []}


@dataclass
class Place:
    """The test's folder (holding ``topology.toml`` for ``home``) and its two vhosts:
    ``home``, the file's, and ``elsewhere``, the configuration file's default broker."""

    folder: Path
    home: RabbitBackend
    elsewhere: RabbitBackend
    env: dict[str, str | None]


@pytest.fixture(params=chosen_versions())
async def place(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Place]:
    broker = require_broker(request.param)
    home, elsewhere = RabbitBackend(broker), RabbitBackend(broker)
    home.setup()
    elsewhere.setup()
    try:
        config = tmp_path / "config.toml"
        config.write_text(
            f'default = "elsewhere"\n\n[brokers.elsewhere]\nurl = "{elsewhere.url}"\n'
        )
        env: dict[str, str | None] = {
            "COLUMNS": "200",
            "RR_URL": None,
            "RR_BROKER": None,
            "RR_CONFIG": str(config),
        }
        (tmp_path / "topology.toml").write_text(TOPOLOGY.format(url=home.url))
        monkeypatch.chdir(tmp_path)
        runner = CliRunner(env=env)
        declared = await asyncio.to_thread(runner.invoke, app, ["declare", "topology.toml"])
        assert declared.exit_code == 0, declared.output
        dead = [
            (b"d%d" % n, Properties(message_id=f"d{n}", headers={"rr-origin-queue": "orders"}))
            for n in (1, 2)
        ]
        await publish_all(home, "orders.dead", dead)
        exported = await asyncio.to_thread(
            runner.invoke,
            app,
            ["dlq", "export", "orders.dead", "export.jsonl", "-t", "topology.toml", "-y"],
        )
        assert exported.exit_code == 0, exported.output
        assert await state(home) == BEFORE
        yield Place(tmp_path, home, elsewhere, env)
    finally:
        await home.close()
        await elsewhere.close()


async def state(backend: RabbitBackend) -> State:
    return {
        queue: sorted(
            str(delivery.properties.message_id) for delivery in await peek(backend, queue)
        )
        for queue in QUEUES
    }


async def rr(place: Place, *args: str) -> Result:
    runner = CliRunner(env=place.env)
    return await asyncio.to_thread(runner.invoke, app, list(args))


def moved(**queues: list[str]) -> State:
    return {**BEFORE, **{name.replace("_", "."): ids for name, ids in queues.items()}}


def ids_in(*ids: str) -> Callable[[Place, Result], None]:
    """The output names each of ``ids`` (what a reading command read)."""

    def check(place: Place, result: Result) -> None:
        for each in ids:
            assert f'"{each}"' in result.stdout or each in result.stdout, result.stdout

    return check


def exported_twice(place: Place, result: Result) -> None:
    lines = (place.folder / "again.jsonl").read_text().splitlines()
    assert sorted(json.loads(line)["properties"]["message_id"] for line in lines) == ["d1", "d2"]


def dead_letters_counted(place: Place, result: Result) -> None:
    assert json.loads(result.stdout)["queues"][0]["messages"] == 2, result.stdout


def doctor_on_home(place: Place, result: Result) -> None:
    assert place.home.vhost in json.loads(result.stdout)["server"]["url"], result.stdout


def nothing(place: Place, result: Result) -> None:
    return None


@dataclass(frozen=True)
class Case:
    args: tuple[str, ...]
    after: State
    check: Callable[[Place, Result], None] = nothing


CASES = {
    "status": Case(("status", "orders.dead", "-o", "json"), BEFORE, dead_letters_counted),
    "doctor": Case(("doctor", "-o", "json"), BEFORE, doctor_on_home),
    "dlq inspect": Case(
        ("dlq", "inspect", "orders.dead", "-o", "json"), BEFORE, ids_in("d1", "d2")
    ),
    "dlq export": Case(
        ("dlq", "export", "orders.dead", "again.jsonl", "-y"), BEFORE, exported_twice
    ),
    "dlq groups": Case(("dlq", "groups", "orders.dead", "-o", "json"), BEFORE),
    "dlq replay": Case(
        ("dlq", "replay", "orders.dead", "-y"), moved(orders=["d1", "d2"], orders_dead=[])
    ),
    "dlq move": Case(
        ("dlq", "move", "orders.dead", "--to", "other", "-y"),
        moved(orders_dead=[], other=["d1", "d2"]),
    ),
    "dlq purge": Case(("dlq", "purge", "orders.dead", "-y"), moved(orders_dead=[])),
    "dlq edit": Case(
        ("dlq", "edit", "orders.dead", "--id", "d1", "--set-header", "x-fixed=1", "-y"),
        moved(orders=["d1"], orders_dead=["d2"]),
    ),
    "dlq import": Case(
        ("dlq", "import", "export.jsonl", "--to", "other"), moved(other=["d1", "d2"])
    ),
    "publish": Case(("publish", "other", "--property", "message_id=p1"), moved(other=["p1"])),
}


@pytest.mark.broker
@pytest.mark.parametrize("name", CASES)
async def test_a_command_uses_the_found_file(place: Place, name: str) -> None:
    case = CASES[name]
    result = await rr(place, *case.args)

    assert result.exit_code == 0, result.output
    first, _, rest = result.stderr.partition("\n")
    assert first == NOTE  # first, and once
    assert NOTE not in rest
    assert NOTE not in result.stdout
    if "rr: on " in rest:  # a command that changes something names the file's vhost
        assert rest.startswith("rr: on "), rest
        assert place.home.vhost in rest.splitlines()[0], rest
    case.check(place, result)
    assert await state(place.home) == case.after


@pytest.mark.broker
@pytest.mark.parametrize("name", CASES)
async def test_no_topology_goes_without_it(place: Place, name: str) -> None:
    case = CASES[name]
    result = await rr(place, *case.args, "--no-topology")

    # the file's queues are not in the default broker's vhost: exit 1, but not doctor's
    assert result.exit_code == (0 if name == "doctor" else 1), result.output
    assert NOTE not in result.stderr
    assert place.home.vhost not in result.output
    if name != "status":  # its JSON names no vhost: orders.dead is missing, exit 1
        assert place.elsewhere.vhost in result.output, result.output
    if "rr: on " in result.stderr:
        assert place.elsewhere.vhost in result.stderr.splitlines()[0], result.stderr
    assert await state(place.home) == BEFORE


@pytest.mark.broker
@pytest.mark.parametrize("name", CASES)
async def test_a_file_and_no_topology_is_a_usage_error(place: Place, name: str) -> None:
    result = await rr(place, *CASES[name].args, "--no-topology", "-t", "topology.toml")

    assert result.exit_code == 2, result.output
    assert result.stderr == "rr: error: give --topology FILE or --no-topology, not both\n"
    assert await state(place.home) == BEFORE


async def test_an_invalid_found_file_says_it_was_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "topology.toml").write_text("[queues.orders]\nmax_attempts = 'three'\n")
    monkeypatch.chdir(tmp_path)
    result = CliRunner(env={"RR_URL": None}).invoke(app, ["dlq", "inspect", "orders.dead"])

    assert result.exit_code == 78, result.output
    note, error = result.stderr.splitlines()
    assert note == NOTE
    assert error.startswith("rr: error: ./topology.toml:2: queues.orders.max_attempts: ")
    assert error.endswith(
        "(the topology.toml found in the current directory; --no-topology to go without it)"
    )


SERVICE = """
from rabbitctl_retry import Outcome, subscriber


@subscriber("orders")
async def handle(msg):
    return Outcome.ack()
"""


def run_service(place: Place, *args: str) -> subprocess.Popen[str]:
    (place.folder / "orders_service.py").write_text(SERVICE, encoding="utf-8")
    env = {key: value for key, value in {**os.environ, **place.env}.items() if value is not None}
    command = [sys.executable, "-m", "rabbitctl_retry", "run", "orders_service", *args]
    return subprocess.Popen(
        [*command, "--log-format", "json"],
        cwd=place.folder,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


@pytest.mark.broker
async def test_rr_run_consumes_on_the_found_files_vhost(place: Place) -> None:
    await publish_all(place.home, "orders", [(b"o", Properties(message_id="o1"))])
    process = run_service(place)
    try:
        assert process.stderr is not None
        assert process.stderr.readline() == NOTE + "\n"
        events: list[Any] = []
        while "consuming" not in events:
            line = process.stderr.readline()
            assert line, process.communicate()
            events.append(json.loads(line)["event"])
        await place.home.until(
            lambda: _empty(place.home, "orders"), "rr run took o1 from orders on the file's vhost"
        )
        process.send_signal(signal.SIGTERM)
        assert process.wait(60) == 0
    finally:
        if process.poll() is None:
            process.kill()
        process.communicate()


@pytest.mark.broker
async def test_rr_run_with_workers_says_it_once(place: Place) -> None:
    process = run_service(place, "--workers", "2")
    try:
        assert process.stderr is not None
        lines: list[str] = []
        while sum('"consuming"' in line for line in lines) < 2:
            line = process.stderr.readline()
            assert line, "".join(lines) + process.communicate()[1]
            lines.append(line)
        process.send_signal(signal.SIGTERM)
        _, rest = process.communicate(timeout=60)
        assert process.returncode == 0, rest
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert lines[0] == NOTE + "\n"
    assert NOTE not in "".join(lines[1:]) + rest


async def _empty(backend: RabbitBackend, queue: str) -> bool:
    return not await peek(backend, queue)


@pytest.mark.broker
async def test_rr_run_with_no_topology_goes_to_the_default_broker(place: Place) -> None:
    process = run_service(place, "--no-topology")
    _, stderr = process.communicate(timeout=60)

    assert process.returncode == 1, stderr  # orders is not in that vhost
    assert NOTE not in stderr
    assert place.elsewhere.vhost in stderr
    assert place.home.vhost not in stderr


def start_console(place: Place, *args: str) -> tuple[subprocess.Popen[str], str, str]:
    """``rr console orders.dead`` in the test's folder until it listens: the process, what it
    printed on stderr before, and its address with the token."""
    env = {key: value for key, value in {**os.environ, **place.env}.items() if value is not None}
    command = [sys.executable, "-m", "rabbitctl_retry", "console", "orders.dead", "--port", "0"]
    process = subprocess.Popen(
        [*command, *args],
        cwd=place.folder,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert process.stderr is not None
    before = ""
    while not (line := process.stderr.readline()).startswith("rr console: "):
        assert line, before + process.communicate()[1]
        before += line
    found = re.search(r"http://\S+", line)
    assert found is not None, line
    return process, before, found.group(0)


async def page_of(entry: str) -> str:
    async with (
        aiohttp.ClientSession(
            cookie_jar=aiohttp.CookieJar(unsafe=True), headers={"Sec-Fetch-Site": "same-origin"}
        ) as client,
        client.get(entry) as answer,
    ):
        assert answer.status == 200
        return await answer.text()


@pytest.mark.broker
@pytest.mark.parametrize("opt_out", [False, True])
async def test_rr_console_reads_the_found_files_vhost(place: Place, opt_out: bool) -> None:
    process, before, entry = start_console(place, *(["--no-topology"] if opt_out else []))
    try:
        page = await page_of(entry)
    finally:
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=60)
    assert before == ("" if opt_out else NOTE + "\n")
    if opt_out:  # the default broker's vhost, which has no orders.dead
        assert f"no queue &#x27;orders.dead&#x27; in vhost &#x27;{place.elsewhere.vhost}" in page
    else:  # the file's vhost, with its 2 dead letters
        assert '<tr data-queue="orders.dead"><td>orders.dead</td><td>classic</td>' in page
        assert '<td class="depth">2</td>' in page
    assert await state(place.home) == BEFORE


ASYNCAPI_SERVICE = """
from rabbitctl_retry import Outcome, subscriber


@subscriber("orders")
async def handle(msg):
    return Outcome.ack()
"""


def test_rr_asyncapi_takes_the_found_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "found_asyncapi_service.py").write_text(ASYNCAPI_SERVICE, encoding="utf-8")
    (tmp_path / "topology.toml").write_text(
        TOPOLOGY.format(url="amqp://guest@mq.internal:5672/found")
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    runner = CliRunner(env={"RR_URL": None})

    found = runner.invoke(app, ["asyncapi", "found_asyncapi_service", "-o", "json"])
    given = runner.invoke(
        app, ["asyncapi", "found_asyncapi_service", "-o", "json", "-t", "topology.toml"]
    )
    (tmp_path / "topology.toml").unlink()
    none = runner.invoke(app, ["asyncapi", "found_asyncapi_service"])

    assert found.exit_code == 0, found.output
    assert found.stderr == NOTE + "\n"
    assert found.stdout == given.stdout
    assert "mq.internal" in found.stdout
    assert given.stderr == ""
    assert none.exit_code == 2, none.output
    assert none.stderr == f"rr: error: {NO_TOPOLOGY}\n"
