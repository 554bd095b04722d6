"""``rr status`` (docs/reference/cli.md, "rr status"): depth, consumers, type and drift of each
queue, on RabbitMQ (a fresh vhost each) and on the emulator, with exact numbers."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from rabbitctl_retry.cli.status_render import NO_MANAGEMENT_LINE
from rabbitctl_retry.cli.topology_found import found_note
from rabbitctl_retry.transport.base import Properties
from tests.backends import Backend, EmulatorBackend, RabbitBackend
from tests.dlq.support import declare, publish_all, rr
from tests.runtime.conftest import backend

__all__ = ["backend"]

EXAMPLE = Path(__file__).parents[2] / "examples" / "refunds" / "topology.toml"


def rows(document: dict[str, object]) -> dict[str, tuple[object, ...]]:
    queues = document["queues"]
    assert isinstance(queues, list)
    return {
        q["name"]: (q["type"], q["present"], q["messages"], q["consumers"], q["matches"])
        for q in queues
    }


async def test_every_queue_of_the_file_with_its_numbers(backend: Backend) -> None:
    declared = await rr(backend, "declare", str(EXAMPLE))
    assert declared.exit_code == 0, declared.output
    await publish_all(backend, "refunds", [(b"r%d" % n, Properties()) for n in range(3)])
    await publish_all(backend, "payouts.dead", [(b"p", Properties())])
    connection = await backend.connect()
    channel = await connection.channel()

    async def hold(delivery: object) -> None:  # a consumer that never acks
        return None

    await channel.qos(1)
    await channel.consume("refunds", hold)  # takes one of the three, unacked
    try:
        result = await rr(backend, "status", "-t", str(EXAMPLE), "-o", "json")
    finally:
        await connection.close()

    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert rows(document) == {
        "refunds.dead": ("classic", True, 0, 0, True),
        "refunds": ("classic", True, 2, 1, True),  # ready messages: one is with the consumer
        "refunds.retry": ("classic", True, 0, 0, True),
        "payouts.dead": ("classic", True, 1, 0, True),
        "payouts": ("quorum", True, 0, 0, True),
        "refunds.receipts": ("classic", True, 0, 0, True),
    }
    assert document["ok"] is True


async def test_a_missing_queue_and_a_drifted_one_exit_1(backend: Backend) -> None:
    await declare(backend, "payouts", arguments={"x-queue-type": "quorum", "x-delivery-limit": 9})
    result = await rr(backend, "status", "-t", str(EXAMPLE), "elsewhere", "-o", "json")

    assert result.exit_code == 1, result.output
    document = json.loads(result.stdout)
    assert document["ok"] is False
    by_name = {q["name"]: q for q in document["queues"]}
    assert by_name["refunds"]["present"] is False
    assert by_name["payouts"]["matches"] is False
    assert "x-delivery-limit: file 4, broker 9" in by_name["payouts"]["differences"]
    assert by_name["elsewhere"] == {
        "name": "elsewhere",
        "type": None,
        "file_type": None,
        "role": None,
        "present": False,
        "locked": False,
        "messages": None,
        "unacked": None,
        "consumers": None,
        "prefetch": None,
        "publish_per_s": None,
        "deliver_per_s": None,
        "matches": None,
        "differences": None,
        "arguments": None,
        "consumers_not_rr": None,
    }

    table = await rr(backend, "status", "-t", str(EXAMPLE))
    assert table.exit_code == 1
    assert "differs: x-dead-letter-exchange" in table.stdout
    assert "not as expected" in table.stdout


async def test_nothing_to_show_is_a_usage_error(
    backend: Backend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No queue, no --topology, no topology.toml here and no management URL: the error
    names the three ways (docs/reference/cli.md, "rr status")."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("RR_MANAGEMENT_URL", raising=False)
    result = await rr(backend, "status")
    assert result.exit_code == 2
    assert result.stderr == (
        "rr: error: name the queues to show, give --topology, or give --management-url to "
        "list every queue of the vhost (or run it where a topology.toml is)\n"
    )


@pytest.mark.broker
async def test_watch_shows_it_again_until_ctrl_c(amqp_url: str) -> None:
    backend = RabbitBackend(amqp_url)
    backend.setup()
    try:
        await declare(backend, "watched")
        await publish_all(backend, "watched", [(b"w", Properties())])
        command = [sys.executable, "-m", "rabbitctl_retry", "status", "watched", "--watch", "0.5"]
        process = subprocess.Popen(
            [*command, "-o", "json", "--url", backend.url],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ},
        )
        assert process.stdout is not None
        lines = [process.stdout.readline() for _ in range(2)]  # two refreshes
        process.send_signal(signal.SIGINT)
        process.communicate(timeout=30)
        assert process.returncode == 0
        assert [json.loads(line)["queues"][0]["messages"] for line in lines] == [1, 1]
        times = [datetime.fromisoformat(json.loads(line)["read_at"]) for line in lines]
        assert times[0] < times[1]  # each reading with its own time, UTC
        assert all(time.utcoffset() == timedelta(0) for time in times)
    finally:
        await backend.close()


HEADING = re.compile(
    r"rr status at (\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z) \(every 0\.5 s; Ctrl-C ends\)"
)


@pytest.mark.broker
async def test_watch_into_a_pipe_prints_each_frame_after_the_last(amqp_url: str) -> None:
    """Written to a pipe, ``--watch`` clears nothing: each reading is printed after the last,
    under a heading with its time, and ends with an empty line (docs/reference/cli.md, "rr
    status")."""
    backend = RabbitBackend(amqp_url)
    backend.setup()
    try:
        await declare(backend, "watched")
        command = [sys.executable, "-m", "rabbitctl_retry", "status", "watched", "-w", "0.5"]
        process = subprocess.Popen(
            [*command, "--url", backend.url],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={key: value for key, value in os.environ.items() if key != "COLUMNS"},
        )
        assert process.stdout is not None
        lines: list[str] = []
        while sum(1 for line in lines if HEADING.fullmatch(line)) < 3:  # two whole frames
            line = process.stdout.readline()
            assert line, process.communicate(timeout=30)
            lines.append(line.rstrip("\n"))
        process.send_signal(signal.SIGINT)
        process.communicate(timeout=30)
        assert process.returncode == 0
    finally:
        await backend.close()

    frames = "\n".join(lines[:-2]).split(
        "\n\n"
    )  # without the third heading and the empty line before it
    assert len(frames) == 2
    times = []
    for index, frame in enumerate(frames):
        heading, *table = frame.split("\n")
        found = HEADING.fullmatch(heading)
        assert found is not None, heading
        times.append(datetime.fromisoformat(found.group(1)))
        assert [line.rstrip() for line in table] == [
            "queue   ┃ type    ┃ messages ┃ consumers ┃ state  ┃ role",
            "━━━━━━━━╇━━━━━━━━━╇━━━━━━━━━━╇━━━━━━━━━━━╇━━━━━━━━╇━━━━━",
            "watched │ classic │ 0        │ 0         │ exists │",
            "1 queue(s); ok",
            *([NO_MANAGEMENT_LINE] if index == 0 else []),  # said under the first reading
        ]
    assert times[0] < times[1]
    assert "\x1b" not in "".join(lines)  # nothing cleared


@pytest.mark.broker
async def test_watch_in_tsv_is_a_section_per_reading_under_its_time(amqp_url: str) -> None:
    """``-o tsv --watch``: each reading a section of its own, ``# `` and its heading, the
    header and the rows, an empty line; no count line, no management hint (docs/reference/cli.md,
    "Output formats")."""
    backend = RabbitBackend(amqp_url)
    backend.setup()
    try:
        await declare(backend, "watched")
        command = [sys.executable, "-m", "rabbitctl_retry", "status", "watched", "-w", "0.5"]
        process = subprocess.Popen(
            [*command, "-o", "tsv", "--url", backend.url],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert process.stdout is not None
        lines: list[str] = []
        while sum(1 for line in lines if line.startswith("# ")) < 3:  # two whole readings
            line = process.stdout.readline()
            assert line, process.communicate(timeout=30)
            lines.append(line.rstrip("\n"))
        process.send_signal(signal.SIGINT)
        process.communicate(timeout=30)
        assert process.returncode == 0
    finally:
        await backend.close()
    readings = [lines[:4], lines[4:8]]
    times = []
    for reading in readings:
        title, *rest = reading
        found = HEADING.fullmatch(title.removeprefix("# "))
        assert title.startswith("# "), title
        assert found is not None, title
        times.append(datetime.fromisoformat(found.group(1)))
        assert rest == [
            "queue\ttype\tmessages\tconsumers\tstate\trole",
            "watched\tclassic\t0\t0\texists\t",
            "",
        ]
    assert times[0] < times[1]


async def test_a_named_queue_shows_its_type_on_the_broker(backend: Backend) -> None:
    """Without a management URL, a queue outside the file shows its type as a re-declare
    probe learns it (classic, quorum, stream); ``?`` for an exclusive queue of another
    connection, whose type the broker will not tell; ``-`` for a missing one, which the
    probe does not make (docs/reference/cli.md, "rr status")."""
    emulated = isinstance(backend, EmulatorBackend)
    await declare(backend, "plain")
    await declare(backend, "votes", arguments={"x-queue-type": "quorum"})
    if not emulated:  # the emulator has no streams
        await declare(backend, "log", arguments={"x-queue-type": "stream"})
    owner = await backend.connect()
    await (await owner.channel()).queue_declare("private", exclusive=True)
    try:
        names = ["plain", "votes", *([] if emulated else ["log"]), "private", "gone"]
        result = await rr(backend, "status", *names, "-o", "json")
        table = await rr(backend, "status", *names)
    finally:
        await owner.close()

    assert result.exit_code == 1, result.output  # gone is missing
    types = {
        q["name"]: (q["type"], q["present"], q["locked"], q["messages"])
        for q in json.loads(result.stdout)["queues"]
    }
    assert types == {
        "plain": ("classic", True, False, 0),
        "votes": ("quorum", True, False, 0),
        **({} if emulated else {"log": ("stream", True, False, 0)}),
        "private": (None, True, True, None),  # the broker refuses every look at it
        "gone": (None, False, False, None),
    }
    assert "gone" not in await queue_names_of(backend, ["gone"])
    shown = [[text.strip() for text in line.split(" │ ")] for line in table_rows(table.stdout)]
    assert shown == [
        ["plain", "classic", "0", "0", "exists", ""],
        ["votes", "quorum", "0", "0", "exists", ""],
        *([] if emulated else [["log", "stream", "0", "0", "exists", ""]]),
        ["private", "?", "-", "-", "locked: exclusive to another connection", ""],
        ["gone", "-", "-", "-", "missing", ""],
    ]


async def test_with_nothing_named_the_topology_file_of_the_current_directory(
    backend: Backend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``rr status`` alone, where ``topology.toml`` is: the queues of that file, as with
    ``--topology topology.toml``, and a note on stderr that says so."""
    declared = await rr(backend, "declare", str(EXAMPLE))
    assert declared.exit_code == 0, declared.output
    (tmp_path / "topology.toml").write_text(EXAMPLE.read_text())
    monkeypatch.chdir(tmp_path)

    result = await rr(backend, "status", "-o", "json")
    given = await rr(backend, "status", "-t", "topology.toml", "-o", "json")

    assert result.exit_code == 0, result.output
    assert rows(json.loads(result.stdout)) == rows(json.loads(given.stdout))
    assert list(rows(json.loads(result.stdout))) == [
        "refunds.dead",
        "refunds",
        "refunds.retry",
        "payouts.dead",
        "payouts",
        "refunds.receipts",
    ]
    assert result.stderr == found_note() + "\n"
    assert given.stderr == ""


def table_rows(text: str) -> list[str]:
    """The rows of rr status's table (between the rule under the header and the count)."""
    lines = text.splitlines()
    start = next(index for index, line in enumerate(lines) if line.startswith("━"))
    end = next(index for index, line in enumerate(lines) if " queue(s); " in line)
    return lines[start + 1 : end]


async def queue_names_of(backend: Backend, names: list[str]) -> list[str]:
    """Which of ``names`` exist (a passive declare each, on a channel of its own)."""
    from rabbitctl_retry.ops.probe import queue_info

    connection = await backend.connect()
    try:
        return [name for name in names if await queue_info(connection, name) is not None]
    finally:
        await connection.close()
