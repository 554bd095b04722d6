"""What scripts/demo.sh waits on and shows of the real run, from what rr says (no sleeps):

  python progress.py ready PORT PID        wait until rr run's /healthz says consuming
  python progress.py ended SIM.json LOG    wait until every message of messages.jsonl ended
                                           in LOG (rr run --log-format json) as the emulator
                                           said it would (SIM.json: rr simulate -o json), and
                                           the example's queues hold nothing
  python progress.py log LOG               the service's log lines, as text
  python progress.py table SIM.json [LOG]  every message and where it ended, on both
  python progress.py clean                 delete the example's queues, each only if empty

A message's end is its last decision in each queue it went through (rabbitctl_retry/
timeline.py): rr run logs every decision but an ack (docs/runtime.md, "Logs"), and the
service logs its acks with the same fields (service.py).
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

from rabbitctl_retry.errors import NotFound
from rabbitctl_retry.simulation import parse_publish_file
from rabbitctl_retry.timeline import Step, ending_text, endings
from rabbitctl_retry.transport.clients import connect

HERE = Path(__file__).parent
MESSAGES = HERE / "messages.jsonl"
QUEUES = ["refunds", "refunds.retry", "refunds.dead", "payouts", "payouts.dead"]
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
"""rr run's lines of a decision (docs/runtime.md, "Logs")."""


def published() -> list[tuple[str, str]]:
    """(message id, queue) of every message the demo publishes, in order."""
    return [
        (str(message.message_id), message.queue)
        for message in parse_publish_file(MESSAGES.read_text(encoding="utf-8"), str(MESSAGES))
    ]


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

    def check() -> str:
        seen = real(log)
        late = [m for m, _ in published() if seen.get(m) != expected.get(m)]
        if late:
            return "waiting for " + ", ".join(late)
        left = {q: n for q, n in asyncio.run(depths()).items() if n}
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


def table(simulation: Path, log: Path | None) -> int:
    """Print where each message ended; with ``log``, exit 1 when the two runs differ."""
    on_emulator = simulated(simulation)
    heading = ["message", "where it ended on the emulator (rr simulate)"]
    rows = [[m, on_emulator.get(m, "not handled")] for m, _ in published()]
    differ = []
    if log is not None:
        on_rabbitmq = real(log)
        heading.append("on RabbitMQ (rr run)")
        for row in rows:
            ending = on_rabbitmq.get(row[0], "not handled")
            row.append("the same" if ending == row[1] else ending)
            if ending != row[1]:
                differ.append(row[0])
    rows.insert(0, heading)
    widths = [max(len(row[i]) for row in rows) for i in range(len(heading))]
    for number, row in enumerate(rows):
        print(
            "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        )
        if number == 0:
            print("  ".join("-" * width for width in widths))
    if log is None:
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
        case ["table", simulation]:
            return table(Path(simulation), None)
        case ["table", simulation, log]:
            return table(Path(simulation), Path(log))
        case ["clean"]:
            return clean()
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
