"""rr simulate: the refunds example on the emulator, as a timeline with exact numbers."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rabbitctl_retry.cli import app

EXAMPLE = Path(__file__).parents[2] / "examples" / "refunds"
runner = CliRunner(env={"COLUMNS": "200"})


def simulate(*publishes: str, horizon: str = "1h") -> dict[str, object]:
    args = ["simulate", str(EXAMPLE / "topology.toml"), str(EXAMPLE / "service.py")]
    for publish in publishes:
        args += ["--publish", publish]
    result = runner.invoke(app, [*args, "--for", horizon, "--output", "json"])
    assert result.exit_code == 0, result.output
    document: dict[str, object] = json.loads(result.stdout)
    return document


def rows(document: dict[str, object], queue: str) -> list[tuple[float, str, int | None]]:
    events = document["events"]
    assert isinstance(events, list)
    return [(e["time_s"], e["event"], e["retry_count"]) for e in events if e["queue"] == queue]


def test_a_busy_refund_waits_its_backoff_four_times_then_is_dead_lettered() -> None:
    document = simulate('refunds={"id": 1, "card": "busy"}')
    assert rows(document, "refunds") == [
        (0.0, "published", None),
        (0.0, "delayed", None),
        (2.0, "delayed", 1),
        (4.0, "delayed", 2),
        (6.0, "delayed", 3),
        (8.0, "dead-lettered", 4),
    ]
    # its first attempt there: the retry header it carries counted refunds' attempts
    # (docs/explanation/attempts.md, "Attempts"), shown apart, not as this queue's retries
    dead = [e for e in document["events"] if e["queue"] == "refunds.dead"]  # type: ignore[union-attr]
    assert [
        (e["event"], e["attempt"], e["retry_count"], e["carried_retry_count"], e["origin_queue"])
        for e in dead
    ] == [("acked", 1, None, 5, "refunds")]
    assert document["finished"] is True
    assert document["elapsed_s"] == 8.0  # nothing left to happen: not the default --for 1h
    assert document["last_event_s"] == 8.0
    assert all(count == 0 for count in document["queues"].values())  # type: ignore[union-attr]


def test_the_table_shows_a_carried_retry_header_apart_from_the_attempt() -> None:
    args = ["simulate", str(EXAMPLE / "topology.toml"), str(EXAMPLE / "service.py")]
    table = runner.invoke(app, [*args, "-p", 'refunds={"id": 2, "card": "unavailable"}'])
    assert table.exit_code == 0, table.output
    table_rows = [[cell.strip() for cell in line.split("│")] for line in table.stdout.splitlines()]
    (cells,) = [cells for cells in table_rows if cells[1:2] == ["refunds.dead"]]
    # time, queue, message, event, attempt, retry, x-dc, detail
    assert cells[1:] == [
        "refunds.dead",
        "m1",
        "acked",
        "1",
        "",
        "",
        "(carried retry 5 from refunds)",
    ]
    assert "simulated 0s of virtual time: nothing was left to happen after it" in table.stdout


def test_an_unavailable_payout_is_moved_by_the_server_after_five_deliveries() -> None:
    document = simulate('payouts={"id": 2, "card": "unavailable"}')
    events = [e for e in document["events"] if e["queue"] == "payouts"]  # type: ignore[union-attr]
    assert [(e["event"], e["attempt"], e["delivery_count"]) for e in events] == [
        ("published", None, None),
        ("retried", 1, None),
        ("retried", 2, 1),
        ("retried", 3, 2),
        ("retried", 4, 3),
        ("dead-lettered", 5, 4),
        ("server dead-lettered (delivery_limit)", None, None),
    ]


def test_the_horizon_stops_the_clock() -> None:
    document = simulate('refunds={"id": 1, "card": "busy"}', horizon="5s")
    assert document["finished"] is False
    assert document["elapsed_s"] == 5.0  # what --for asked, not the last event
    assert document["last_event_s"] == 4.0
    assert document["queues"]["refunds.retry"] == 1  # type: ignore[index]
    table = runner.invoke(
        app,
        [
            "simulate",
            str(EXAMPLE / "topology.toml"),
            str(EXAMPLE / "service.py"),
            "-p",
            'refunds={"id": 1, "card": "busy"}',
            "--for",
            "5s",
        ],
    )
    assert (
        "simulated 5s of virtual time and stopped with timers still due (last event at 4s); "
        "messages left: refunds.retry=1"
    ) in table.stdout


def test_every_row_names_its_message() -> None:
    document = simulate('refunds={"id": 1, "card": "busy"}', 'payouts={"id": 2}')
    events = document["events"]
    assert isinstance(events, list)
    assert {e["message_id"] for e in events if e["queue"] == "refunds"} == {"m1"}
    assert {e["message_id"] for e in events if e["queue"] == "payouts"} == {"m2"}


def test_a_message_that_loops_at_one_instant_stops_the_run() -> None:
    """refunds.dead has no max_attempts and its handler fails on a body that is not JSON: the
    message goes back at once, forever, at virtual time 0 (the clock never moves)."""
    args = ["simulate", str(EXAMPLE / "topology.toml"), str(EXAMPLE / "service.py")]
    result = runner.invoke(app, [*args, "--publish", "refunds=not json"])
    assert result.exit_code == 1, result.output
    assert result.stderr == (
        "rr: error: rr simulate stopped: message 'm1' on queue 'refunds.dead' was handled "
        "1,000 times at virtual time 0s: it goes back to 'refunds.dead' at once, every time, "
        "so the clock never moves (a handler that fails on a queue without max_attempts does "
        "that)\n"
    )


def test_a_publish_file_gives_each_message_its_id(tmp_path: Path) -> None:
    messages = tmp_path / "messages.jsonl"
    messages.write_text(
        '{"queue": "refunds", "message_id": "refunds-7", "body": {"id": 7, "card": "4111"}}\n'
        "\n"
        '{"queue": "payouts", "body": {"id": 8, "card": "4111"}}\n',
        encoding="utf-8",
    )
    args = ["simulate", str(EXAMPLE / "topology.toml"), str(EXAMPLE / "service.py")]
    result = runner.invoke(
        app,
        [
            *args,
            "--publish-file",
            str(messages),
            "-p",
            'payouts={"id": 9, "card": "4111"}',
            "-o",
            "json",
        ],
    )
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    published = [
        (e["queue"], e["message_id"]) for e in document["events"] if e["event"] == "published"
    ]
    # the file's first, in order; a message without an id gets m and its place
    assert published == [("refunds", "refunds-7"), ("payouts", "m2"), ("payouts", "m3")]
    acked = [(e["queue"], e["message_id"]) for e in document["events"] if e["event"] == "acked"]
    assert acked == [("refunds", "refunds-7"), ("payouts", "m2"), ("payouts", "m3")]


@pytest.mark.parametrize(
    ("line", "says"),
    [
        ("not json", "line 1 is not JSON"),
        ('{"queue": "refunds"}', "line 1: body is missing"),
        ('{"queue": "", "body": 1}', "line 1: queue must be a queue's name"),
        ('{"queue": "q", "message_id": 7, "body": 1}', "message_id must be a non-empty string"),
        ('{"queue": "q", "body": 1, "id": 1}', 'each line is {"queue"'),
    ],
)
def test_a_bad_publish_file_is_a_usage_error(tmp_path: Path, line: str, says: str) -> None:
    messages = tmp_path / "messages.jsonl"
    messages.write_text(line + "\n", encoding="utf-8")
    args = ["simulate", str(EXAMPLE / "topology.toml"), str(EXAMPLE / "service.py")]
    result = runner.invoke(app, [*args, "--publish-file", str(messages)])
    assert result.exit_code == 2, result.output
    assert says in result.stderr
    assert str(messages) in result.stderr


def test_bad_publish_spec_is_a_usage_error() -> None:
    result = runner.invoke(
        app,
        ["simulate", str(EXAMPLE / "topology.toml"), str(EXAMPLE / "service.py"), "-p", "nobody"],
    )
    assert result.exit_code == 2
    assert "QUEUE=BODY" in result.stderr


HANGING = {
    "async": "import asyncio\n@subscriber('work')\nasync def stuck(msg):\n"
    "    await asyncio.Event().wait()\n",
    "sync": "import time\n@subscriber('work')\ndef stuck(msg):\n    time.sleep(3600)\n",
}


@pytest.mark.parametrize("kind", ["async", "sync"])
def test_a_handler_that_never_returns_stops_the_run(tmp_path: Path, kind: str) -> None:
    """The virtual clock waits for a handler: one awaiting what never comes (or a thread that
    sleeps for an hour) kept rr simulate running for good. Now it stops after
    --handler-timeout, names the handler, and the process ends (a thread is not waited for)."""
    (tmp_path / "topo.toml").write_text("[queues.work]\n")
    (tmp_path / "h_hang.py").write_text("from rabbitctl_retry import subscriber\n" + HANGING[kind])
    command = [sys.executable, "-m", "rabbitctl_retry", "simulate", "topo.toml", "h_hang.py"]
    command += ["--publish", "work=x", "--handler-timeout", "1s"]
    done = subprocess.run(
        command, cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 1, done.stderr
    assert "handler h_hang:stuck has not returned for message 'm1' on queue 'work'" in done.stderr
    assert "Traceback" not in done.stderr


CHAIN = """
[queues.jobs]
type = "{kind}"
max_attempts = 3
dead_letter = "jobs.second"

[queues."jobs.second"]
type = "{kind}"
max_attempts = 3
dead_letter = "jobs.dead"

[queues."jobs.dead"]
"""

CHAIN_HANDLERS = """
from rabbitctl_retry import Outcome, subscriber


@subscriber("jobs")
async def first(msg):
    return Outcome.retry()


@subscriber("jobs.second")
async def second(msg):
    return Outcome.retry()
"""


@pytest.mark.parametrize("kind", ["classic", "quorum"])
def test_a_chain_gives_each_queue_its_own_attempts(tmp_path: Path, kind: str) -> None:
    (tmp_path / "chain.toml").write_text(CHAIN.format(kind=kind))
    (tmp_path / "chain_handlers.py").write_text(CHAIN_HANDLERS)
    args = ["simulate", str(tmp_path / "chain.toml"), str(tmp_path / "chain_handlers.py")]
    result = runner.invoke(app, [*args, "--publish", "jobs=x", "--output", "json"])
    assert result.exit_code == 0, result.output
    handled = [
        (event["queue"], event["attempt"])
        for event in json.loads(result.stdout)["events"]
        if event["attempt"] is not None
    ]
    assert handled == [(queue, n) for queue in ("jobs", "jobs.second") for n in (1, 2, 3)]


SERVER_DELAY_TOPOLOGY = """
[queues.jobs]
type = "quorum"
max_attempts = 4
dead_letter = "jobs.dead"
delay = "server"
delay_min = "1s"
delay_max = "5s"
"""

ALWAYS_LATER = """
from rabbitctl_retry import Message, Outcome, subscriber

@subscriber("jobs")
async def jobs(msg: Message):
    return Outcome.retry_after(30)
"""


def _server_delay_files(tmp_path: Path) -> list[str]:
    (tmp_path / "topology.toml").write_text(SERVER_DELAY_TOPOLOGY)
    (tmp_path / "jobs.py").write_text(ALWAYS_LATER)
    return ["simulate", str(tmp_path / "topology.toml"), str(tmp_path / "jobs.py"), "-p", "jobs=x"]


def test_delay_server_waits_the_servers_schedule_on_4_3_by_default(tmp_path: Path) -> None:
    """retry_after(30) on a queue that waits on the server: 1 s, 2 s, 3 s (RabbitMQ 4.3's
    min(1 s x count, 5 s)), then the server's limit dead-letters it; emulated as 4.3.6
    without being asked (docs/explanation/attempts.md, "The quorum queue waits")."""
    result = runner.invoke(app, [*_server_delay_files(tmp_path), "--output", "json"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert [
        (e["time_s"], e["event"], e["attempt"], e["delivery_count"], e["detail"])
        for e in document["events"]
    ] == [
        (0.0, "published", None, None, None),
        (0.0, "delayed", 1, None, "-> jobs in 1s"),
        (1.0, "delayed", 2, 1, "-> jobs in 2s"),
        (3.0, "delayed", 3, 2, "-> jobs in 3s"),
        (6.0, "dead-lettered", 4, 3, "-> jobs.dead"),
        (6.0, "server dead-lettered (delivery_limit)", None, None, "-> jobs.dead"),
    ]
    assert document["queues"] == {"jobs": 0, "jobs.dead": 1}


def test_delay_server_on_an_older_release_is_refused(tmp_path: Path) -> None:
    args = _server_delay_files(tmp_path)
    older = runner.invoke(app, [*args, "--server-version", "4.0.5"])
    assert older.exit_code == 1
    assert 'delay = "server" needs RabbitMQ 4.3 or later' in older.output
    assert "this server is 4.0.5" in older.output
    unknown = runner.invoke(app, [*args, "--server-version", "4.2"])
    assert unknown.exit_code == 2
    assert "--server-version must be one of 3.10.8, 4.0.5, 4.3.6, not '4.2'" in unknown.output
