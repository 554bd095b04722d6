"""rr simulate shows a handler's outputs in its timeline, each under the ack of the delivery
that published it, in the table, in TSV and in JSON, escaped as every other field
(docs/reference/runtime.md, "rr simulate")."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from rabbitctl_retry.cli import app
from tests.runtime.test_testbroker_outputs import TOPOLOGY

runner = CliRunner(env={"COLUMNS": "250"})


HANDLERS = """
from rabbitctl_retry import Message, Outcome, Outputs, subscriber


@subscriber("work")
async def work(msg: Message, out: Outputs) -> Outcome:
    out.publish({"order": msg.message_id}, to="receipts", message_id="r\\x1b[31m-" + msg.message_id)
    out.publish(b"done", exchange="events", routing_key="refund.done")
    if msg.json().get("late") and msg.attempt == 1:
        return Outcome.retry("not yet")
    if msg.json().get("never"):
        return Outcome.retry("never")
    return Outcome.ack()
"""


def run(tmp_path: Path, output: str) -> str:
    (tmp_path / "topology.toml").write_text(TOPOLOGY)
    (tmp_path / "outputs_handlers.py").write_text(HANDLERS)
    result = runner.invoke(
        app,
        [
            "simulate",
            str(tmp_path / "topology.toml"),
            str(tmp_path / "outputs_handlers.py"),
            "-p",
            'work={"late": true}',
            "-p",
            'work={"never": true}',
            "--output",
            output,
        ],
    )
    assert result.exit_code == 0, result.output
    return result.stdout


def test_json_shows_each_output_under_the_ack_that_published_it(tmp_path: Path) -> None:
    document = json.loads(run(tmp_path, "json"))
    events = document["events"]
    m1 = [(e["queue"], e["message_id"], e["event"], e["attempt"]) for e in events[:5]]
    assert m1 == [
        ("work", "m1", "published", None),
        ("work", "m1", "retried", 1),  # its outputs were dropped unsent
        ("work", "m1", "acked", 2),
        ("receipts", "r\x1b[31m-m1", "output", None),
        ("events", events[4]["message_id"], "output", None),
    ]
    receipt, event = events[3], events[4]
    assert receipt["output"] == {
        "exchange": "",
        "routing_key": "receipts",
        "from_queue": "work",
        "from_message_id": "m1",
    }
    assert receipt["detail"] == "published by m1 in work"
    assert event["output"] == {
        "exchange": "events",
        "routing_key": "refund.done",
        "from_queue": "work",
        "from_message_id": "m1",
    }
    assert event["detail"] == "published by m1 in work (routing key refund.done)"
    # m2 never acks: no output row
    assert [e["event"] for e in events].count("output") == 2
    assert all(e["output"] is None for e in events if e["event"] != "output")
    assert document["queues"]["receipts"] == 1
    assert document["queues"]["audit"] == 1
    assert document["queues"]["work.dead"] == 1


def test_json_text_escapes_an_outputs_control_characters(tmp_path: Path) -> None:
    text = run(tmp_path, "json")
    assert "\x1b" not in text
    assert '"r\\u001b[31m-m1"' in text


def test_the_table_shows_the_outputs_escaped(tmp_path: Path) -> None:
    text = run(tmp_path, "table")
    assert "\x1b" not in text
    rows = [[cell.strip() for cell in line.split("│")] for line in text.splitlines()]
    outputs = [cells[1:4] + cells[7:] for cells in rows if cells[3:4] == ["output"]]
    assert outputs == [
        ["receipts", "r\\x1b[31m-m1", "output", "published by m1 in work"],
        [
            "events",
            outputs[1][1],
            "output",
            "published by m1 in work (routing key refund.done)",
        ],
    ]


def test_tsv_shows_the_outputs_escaped(tmp_path: Path) -> None:
    lines = run(tmp_path, "tsv").splitlines()
    assert "\x1b" not in "\n".join(lines)
    outputs = [line.split("\t") for line in lines if "\toutput\t" in line]
    assert [fields[1:] for fields in outputs] == [
        ["receipts", "r\\x1b[31m-m1", "output", "", "", "", "published by m1 in work"],
        [
            "events",
            outputs[1][2],
            "output",
            "",
            "",
            "",
            "published by m1 in work (routing key refund.done)",
        ],
    ]
    acked = lines.index(next(line for line in lines if "\tacked\t2\t" in line))
    assert lines[acked + 1].split("\t")[:2] == outputs[0][:2]  # right under its ack
