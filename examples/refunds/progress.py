"""What scripts/demo.sh waits on and shows of the real run, from what rr says (no sleeps):

  python progress.py export QUEUE          the messages of messages.jsonl for QUEUE, as
                                           rr publish --file reads them (docs/reference/dlq.md,
                                           "Export format")
  python progress.py ready PORT PID        wait until rr run's /healthz says consuming
  python progress.py ended SIM.json LOG    wait until every message of messages.jsonl ended
                                           in LOG (rr run --log-format json) as the emulator
                                           said it would (SIM.json: rr simulate -o json), the
                                           receipts it published are in refunds.receipts,
                                           and the example's other queues hold nothing
  python progress.py log LOG               the service's log lines, as text
  python progress.py receipts SIM.json OUT read (and ack) every receipt in refunds.receipts,
                                           count them against the emulator's, write their
                                           ids by message to OUT (JSON)
  python progress.py table SIM.json [LOG RECEIPTS.json]
                                           every message, where it ended and the receipt it
                                           published, on both
  python progress.py clean                 delete the example's queues, each only if empty

A message's end is its last decision in each queue it went through (rabbitctl_retry/
timeline.py): rr run logs every decision but an ack (docs/reference/runtime.md, "Logs"), and the
service logs its acks with the same fields (service.py). A refund paid also publishes a
receipt (an output, docs/reference/runtime.md, "Publishing"): rr simulate shows it under the ack
(``output`` rows), and on RabbitMQ it waits in refunds.receipts until ``receipts`` reads it.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

from rabbitctl_retry.dlq.jsonl import Record, record_line
from rabbitctl_retry.errors import NotFound
from rabbitctl_retry.simulation import parse_publish_file
from rabbitctl_retry.timeline import Step, ending_text, endings
from rabbitctl_retry.transport.clients import connect

HERE = Path(__file__).parent
MESSAGES = HERE / "messages.jsonl"
RECEIPTS = "refunds.receipts"
QUEUES = ["refunds", "refunds.retry", "refunds.dead", "payouts", "payouts.dead", RECEIPTS]
TIMEOUT_S = 60.0
"""How long the waits go on without the progress they wait for before the demo fails."""
POLL_S = 0.1
DECISIONS = {
    "retried",
    "requeued",
    "delayed",
    "dropped",
    "dead-lettered",
    "spent",
    "rejected to the queue's dead-letter route",
}
"""rr run's lines of a decision (docs/reference/runtime.md, "Logs")."""


def published() -> list[tuple[str, str]]:
    """(message id, queue) of every message the demo publishes, in order."""
    return [
        (str(message.message_id), message.queue)
        for message in parse_publish_file(MESSAGES.read_text(encoding="utf-8"), str(MESSAGES))
    ]


def export(queue: str) -> int:
    """Print the messages of messages.jsonl for ``queue`` as export lines: rr publish --file
    publishes them with their bodies and properties (content type, message id, persistent)."""
    for message in parse_publish_file(MESSAGES.read_text(encoding="utf-8"), str(MESSAGES)):
        if message.queue != queue:
            continue
        properties: dict[str, str | int] = {
            "content_type": "application/json" if message.is_json else "text/plain",
            "delivery_mode": 2,
        }
        if message.message_id is not None:
            properties["message_id"] = message.message_id
        print(record_line(Record(body=message.body, routing_key=queue, properties=properties)))
    return 0


def simulated_receipts(path: Path) -> dict[str, list[str]]:
    """The receipts each message published in rr simulate's JSON document (its ``output``
    rows), by the message's id."""
    receipts: dict[str, list[str]] = {}
    for event in json.loads(path.read_text(encoding="utf-8"))["events"]:
        output = event.get("output")
        if event["event"] == "output" and output is not None:
            receipts.setdefault(str(output["from_message_id"]), []).append(event["message_id"])
    return receipts


def simulated(path: Path) -> dict[str, str]:
    """Where each message ended in rr simulate's JSON document."""
    events = json.loads(path.read_text(encoding="utf-8"))["events"]
    steps = [
        Step(e["message_id"], e["queue"], e["event"], e["attempt"])
        for e in events
        if e["attempt"] is not None and e["message_id"] is not None
    ]
    return {message_id: ending_text(hops) for message_id, hops in endings(steps).items()}


def log_lines(path: Path) -> list[dict[str, object]]:
    lines = []
    for text in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            line = json.loads(text)
        except ValueError:
            continue  # not one of rr's lines
        if isinstance(line, dict):
            lines.append(line)
    return lines


def real(path: Path) -> dict[str, str]:
    """Where each message ended, from rr run's JSON log lines and the service's."""
    steps = []
    for line in log_lines(path):
        ours = line.get("logger") == "rr.example.refunds" and "outcome" in line
        if not ours and not (line.get("logger") == "rr.runtime" and line["event"] in DECISIONS):
            continue
        attempt = line.get("attempt")
        if not isinstance(attempt, int):
            continue
        steps.append(
            Step(str(line["message_id"]), str(line["queue"]), str(line["outcome"]), attempt)
        )
    return {message_id: ending_text(hops) for message_id, hops in endings(steps).items()}


def broker_url() -> str:
    return os.environ.get("RR_URL", "amqp://guest:guest@localhost:5672/")


async def depths(url: str | None = None) -> dict[str, int | None]:
    """Messages ready in each queue of the example (None: missing), by passive declares."""
    connection = await connect(url or broker_url())
    found: dict[str, int | None] = {}
    try:
        for queue in QUEUES:
            channel = await connection.channel()
            try:
                found[queue] = (await channel.queue_declare(queue, passive=True)).message_count
            except NotFound:
                found[queue] = None
                continue
            await channel.close()
    finally:
        await connection.close()
    return found


def until(check: Callable[[], str], what: str) -> int:
    """Check again every POLL_S until ``check()`` says "" (done); exit 1 with its last answer
    when TIMEOUT_S pass without it."""
    deadline_s = time.monotonic() + TIMEOUT_S
    while (missing := check()) != "":
        if time.monotonic() > deadline_s:
            print(f"demo: {what}: still {missing} after {TIMEOUT_S:g} s", file=sys.stderr)
            return 1
        time.sleep(POLL_S)
    return 0


def ready(port: int, pid: int) -> int:
    def check() -> str:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            raise SystemExit("demo: rr run exited before it consumed") from None
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1) as r:
                return "" if r.status == 200 else f"{r.status}"
        except urllib.error.HTTPError as error:
            return f"{error.code} {error.read().decode(errors='replace').strip()}"
        except OSError as error:
            return f"no answer ({error})"

    return until(check, "rr run's /healthz")


def ended(simulation: Path, log: Path) -> int:
    expected = simulated(simulation)

    receipts = sum(len(ids) for ids in simulated_receipts(simulation).values())

    def check() -> str:
        seen = real(log)
        late = [m for m, _ in published() if seen.get(m) != expected.get(m)]
        if late:
            return "waiting for " + ", ".join(late)
        found = asyncio.run(depths())
        if found[RECEIPTS] != receipts:
            return f"{found[RECEIPTS]} receipt(s) in {RECEIPTS}, not {receipts}"
        left = {q: n for q, n in found.items() if n and q != RECEIPTS}
        return f"messages in {left}" if left else ""

    return until(check, "every message at its end")


def show_log(log: Path) -> int:
    for text in log.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            line = json.loads(text)
        except ValueError:
            line = None
        if not isinstance(line, dict):
            print(f"  {text}")  # not one of rr run's JSON lines (rr: error: ...)
            continue
        fields = " ".join(
            f"{k}={v}" for k, v in line.items() if k not in ("time", "level", "logger", "event")
        )
        print(f"  {line['level']:7} {line['logger']} {line['event']} {fields}".rstrip())
    return 0


async def read_receipts() -> list[tuple[str | None, dict[str, object]]]:
    """Every receipt in refunds.receipts, in order, read and acked (the queue is empty
    after): (message id, body)."""
    connection = await connect(broker_url())
    receipts = []
    try:
        channel = await connection.channel()
        while (delivery := await channel.get(RECEIPTS)) is not None:
            receipts.append((delivery.properties.message_id, json.loads(delivery.body)))
            await channel.ack(delivery.delivery_tag)
        await channel.close()
    finally:
        await connection.close()
    return receipts


def receipts(simulation: Path, out: Path) -> int:
    """Read the receipts, print them, write their ids by the id of the refund message that
    published each (the body's refund is the message's id in messages.jsonl) to ``out``;
    exit 1 when they are not the emulator's."""
    by_refund = {
        json.loads(message.body)["id"]: str(message.message_id)
        for message in parse_publish_file(MESSAGES.read_text(encoding="utf-8"), str(MESSAGES))
        if message.queue == "refunds"
    }
    found: dict[str, list[str]] = {}
    read = asyncio.run(read_receipts())
    for message_id, body in read:
        origin = by_refund.get(body.get("refund"), "an unknown refund")
        print(f"  {message_id}: {json.dumps(body)} (published by {origin})")
        found.setdefault(origin, []).append(str(message_id))
    out.write_text(json.dumps(found), encoding="utf-8")
    expected = simulated_receipts(simulation)
    if found != expected:
        print(f"  the emulator published {expected}, RabbitMQ {found}")
        return 1
    print(f"  {len(read)} receipt(s) read and acked: the ones the emulator published")
    return 0


def ending(hops: str, receipt_ids: list[str] | None) -> str:
    """Where a message ended, and the receipt it published if it did."""
    if not receipt_ids:
        return hops
    return f"{hops}, receipt {', '.join(receipt_ids)}"


def table(simulation: Path, log: Path | None, receipts_file: Path | None = None) -> int:
    """Print where each message ended (with its receipt); with ``log`` and
    ``receipts_file``, exit 1 when the two runs differ."""
    emulated, emulated_receipts = simulated(simulation), simulated_receipts(simulation)
    on_emulator = {
        m: ending(emulated.get(m, "not handled"), emulated_receipts.get(m)) for m, _ in published()
    }
    heading = ["message", "where it ended on the emulator (rr simulate)"]
    rows = [[m, on_emulator[m]] for m, _ in published()]
    differ = []
    if log is not None and receipts_file is not None:
        seen = real(log)
        seen_receipts = json.loads(receipts_file.read_text(encoding="utf-8"))
        on_rabbitmq = {
            m: ending(seen.get(m, "not handled"), seen_receipts.get(m)) for m, _ in published()
        }
        heading.append("on RabbitMQ (rr run)")
        for row in rows:
            there = on_rabbitmq[row[0]]
            row.append("the same" if there == row[1] else there)
            if there != row[1]:
                differ.append(row[0])
    rows.insert(0, heading)
    widths = [max(len(row[i]) for row in rows) for i in range(len(heading))]
    for number, row in enumerate(rows):
        print(
            "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        )
        if number == 0:
            print("  ".join("-" * width for width in widths))
    if log is None or receipts_file is None:
        return 0
    if differ:
        print(f"the two runs differ for {', '.join(differ)}")
        return 1
    print(f"the same {len(rows) - 1} endings on the emulator and on RabbitMQ")
    return 0


async def delete_empty_queues() -> list[str]:
    """Delete each queue of the example that holds no message (the service stopped: nothing
    is in flight); the queues kept because they hold messages. (Quorum queues refuse
    ``if_empty``, so the count is read first.)"""
    found = await depths()
    connection = await connect(broker_url())
    try:
        channel = await connection.channel()
        for queue, count in found.items():
            if count == 0:
                await channel.queue_delete(queue)
        await channel.close()
    finally:
        await connection.close()
    return [queue for queue, count in found.items() if count]


def clean() -> int:
    kept = asyncio.run(delete_empty_queues())
    if kept:
        print(f"kept {', '.join(kept)}: not empty (nothing is deleted with messages in it)")
        return 1
    print(f"deleted the example's queues ({', '.join(QUEUES)}): the broker is as it was")
    return 0


def main(argv: list[str]) -> int:
    match argv:
        case ["ready", port, pid]:
            return ready(int(port), int(pid))
        case ["ended", simulation, log]:
            return ended(Path(simulation), Path(log))
        case ["log", log]:
            return show_log(Path(log))
        case ["export", queue]:
            return export(queue)
        case ["receipts", simulation, out]:
            return receipts(Path(simulation), Path(out))
        case ["table", simulation]:
            return table(Path(simulation), None)
        case ["table", simulation, log, receipts_file]:
            return table(Path(simulation), Path(log), Path(receipts_file))
        case ["clean"]:
            return clean()
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
