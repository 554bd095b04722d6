"""scripts/demo.sh tells one story (issue #29): its two parts, examples/refunds/demo_emulator.sh
and demo_rabbitmq.sh, run as the demo runs them (the venv's rr and python on PATH; the pip
install of demo.sh itself is left out), the second in a vhost of its own.

* Both publish examples/refunds/messages.jsonl, with its ids, and rr simulate's rows say them.
* rr simulate's footer says the run ended when nothing was left to happen.
* No attempt beyond a queue's max_attempts: a dead letter's attempt is the dead-letter queue's
  own, the retry header it carries is shown apart.
* The real run ends with every message at the end the emulator said, the example's queues
  empty, and a table of where each one ended; each dead-lettered line comes before the
  review handler's line of the same message.
* The refund paid publishes one receipt, on both: rr simulate shows it under its ack, the
  real run reads it from refunds.receipts (and so can delete the queue).
* The real run publishes messages.jsonl with rr publish (the demo has no publisher of its own).
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path
from types import ModuleType

import pytest

from tests.docs.test_examples import fresh_vhost

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "refunds"
QUEUES = ["refunds", "refunds.retry", "refunds.dead", "payouts", "payouts.dead", "refunds.receipts"]
TIMEOUT_S = 300


def messages() -> list[dict[str, object]]:
    lines = (EXAMPLE / "messages.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def environment(url: str | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env["COLUMNS"] = "200"
    env.pop("RR_URL", None)
    if url is not None:
        env["RR_URL"] = url
    return env


def run_part(script: str, work: Path, url: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(EXAMPLE / script), str(work)],
        env=environment(url),
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )


def test_the_demo_scripts_run_the_parts() -> None:
    demo = (REPO / "scripts" / "demo.sh").read_text(encoding="utf-8")
    assert '"$example/demo_emulator.sh" "$work"' in demo
    assert '"$example/demo_rabbitmq.sh" "$work"' in demo
    assert "sleep" not in demo
    # a password in $RR_URL is never printed (issue #48): the lines that name the broker
    # print $broker, the URL masked by the demo's own line
    said = [line for line in demo.splitlines() if line.lstrip().startswith("echo")]
    assert not [line for line in said if "RR_URL" in line]
    (masking,) = [line for line in demo.splitlines() if line.startswith("broker=")]
    shown = subprocess.run(
        ["bash", "-c", f"{masking}\necho $broker"],
        env=environment("amqp://shop:s3cret@mq.example:5672/prod"),
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert shown == "amqp://shop:******@mq.example:5672/prod"
    real = (EXAMPLE / "demo_rabbitmq.sh").read_text(encoding="utf-8")
    assert "sleep" not in real
    assert 'rr publish "$queue" --file' in real
    assert not (EXAMPLE / "publish.py").exists()


def test_the_emulator_part_publishes_the_list_with_its_ids(tmp_path: Path) -> None:
    done = run_part("demo_emulator.sh", tmp_path)
    assert done.returncode == 0, done.stderr
    document = json.loads((tmp_path / "simulated.json").read_text(encoding="utf-8"))
    events = document["events"]
    published = [(e["queue"], e["message_id"]) for e in events if e["event"] == "published"]
    assert published == [(m["queue"], m["message_id"]) for m in messages()]
    # every row names a message of the list, in the table too, or the receipt of one
    handled = {e["message_id"] for e in events if e["event"] != "output"}
    assert handled == {m["message_id"] for m in messages()}
    outputs = [(e["queue"], e["message_id"], e["output"]) for e in events if e["output"]]
    assert outputs == [
        (
            "refunds.receipts",
            "receipt-1",
            {
                "exchange": "",
                "routing_key": "refunds.receipts",
                "from_queue": "refunds",
                "from_message_id": "refunds-1",
            },
        )
    ]
    rows = [[cell.strip() for cell in line.split("│")] for line in done.stdout.splitlines()]
    labels = {row[2] for row in rows if len(row) == 8 and row[2] and row[2] != "message"}
    assert labels == {m["message_id"] for m in messages()} | {"receipt-1"}
    # the footer: the run ended when nothing was left to happen
    assert document["finished"] is True
    assert document["elapsed_s"] == document["last_event_s"]
    assert (
        f"simulated {document['elapsed_s']:g}s of virtual time: nothing was left to happen "
        "after it; messages left: refunds.receipts=1"
    ) in done.stdout
    # no attempt beyond the queue's max_attempts (a queue without one: its first attempt)
    topology = tomllib.loads((EXAMPLE / "topology.toml").read_text(encoding="utf-8"))
    for event in events:
        if event["attempt"] is not None:
            cap = topology["queues"].get(event["queue"], {}).get("max_attempts", 1)
            assert event["attempt"] <= cap, event
    dead = [e for e in events if e["queue"] == "refunds.dead"]
    assert [(e["attempt"], e["retry_count"], e["carried_retry_count"]) for e in dead] == [
        (1, None, 5),
        (1, None, 5),
    ]


def _progress() -> ModuleType:
    """examples/refunds/progress.py, the demo's own helper (read the queues as it does)."""
    spec = importlib.util.spec_from_file_location("refunds_progress", EXAMPLE / "progress.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.broker
def test_the_rabbitmq_part_ends_every_message_and_leaves_nothing(tmp_path: Path) -> None:
    emulated = run_part("demo_emulator.sh", tmp_path)
    assert emulated.returncode == 0, emulated.stderr
    with fresh_vhost("3.10") as url:
        done = run_part("demo_rabbitmq.sh", tmp_path, url)
        assert done.returncode == 0, done.stdout + done.stderr
        # every message ended and the example's queues are gone: nothing is left behind
        assert asyncio.run(_progress().depths(url)) == dict.fromkeys(QUEUES, None)
        assert "deleted the example's queues" in done.stdout
    ids = [str(m["message_id"]) for m in messages()]
    after = done.stdout.split("== where each message ended\n", 1)[1]
    table = after.split("\n\n== clean up\n", 1)[0].splitlines()
    assert [line.split()[0] for line in table[2:-1]] == ids
    assert all(line.rstrip().endswith("the same") for line in table[2:-1]), table
    assert table[-1] == f"the same {len(ids)} endings on the emulator and on RabbitMQ"
    (paid,) = [line for line in table[2:-1] if line.startswith("refunds-1 ")]
    assert "refunds: acked on attempt 1, receipt receipt-1" in paid
    # the receipt was read from refunds.receipts (so the queue could be deleted), once
    read = done.stdout.split("== the receipts in refunds.receipts", 1)[1].split("\n\n== ")[0]
    assert [line.split(":")[0].strip() for line in read.splitlines()[1:-1]] == ["receipt-1"]
    assert read.splitlines()[-1].strip().startswith("1 receipt(s) read and acked")
    # rr publish published each queue's messages of the list, every one confirmed
    refunds = sum(1 for m in messages() if m["queue"] == "refunds")
    payouts = len(ids) - refunds
    assert f"{refunds} message(s) to queue 'refunds': {refunds} confirmed" in done.stdout
    assert f"{payouts} message(s) to queue 'payouts': {payouts} confirmed" in done.stdout
    # each decision that sent a message to review is logged before the review's line
    lines = [
        json.loads(text)
        for text in (tmp_path / "run.log").read_text(encoding="utf-8").splitlines()
        if text.startswith("{")
    ]
    reviews = [line for line in lines if "needs a person" in line["event"]]
    assert len(reviews) == 4
    for review in reviews:
        index = lines.index(review)
        earlier = [
            line["event"]
            for line in lines[:index]
            if line.get("message_id") == review["message_id"] and line["logger"] == "rr.runtime"
        ]
        assert earlier, review
        assert earlier[-1] in (
            "dead-lettered",
            "dropped",
            "rejected to the queue's dead-letter route",
        )
