"""Throughput of `rr migrate` against raw aiormq doing the same rebuild by hand, and what a
steady publisher sees while `rr migrate` runs.

    python benchmarks/migrate.py [--messages 20000] [--rounds 1] [--prefetch 500]
                                 [--steady-messages 5000] [--rate 200] [--attempts 3]
                                 [--url amqp://guest:guest@127.0.0.1:5672/]

The shape of docs/how-to/migrate-to-quorum.md, "Migrating a queue" (and
tests/faults/test_migrate_faults.py): a classic queue `jobs` (`max_attempts = 5`, a dead-letter
queue, `delay_tiers = ["10s"]`, bound to a direct exchange `events` with the routing key `job`)
holding N persistent 200-byte messages, each with its own message_id, preloaded untimed; the file
then says
`type = "quorum"`. Every name starts with a fresh prefix (`rr-bench-migrate-XXXXXXXX.`), so
the script touches no other queue of the broker; it deletes every queue and exchange it made.

Throughput (each round runs both cases, the order alternating by round, each on fresh queues):

* rr migrate       `python -m rabbitctl_retry migrate after.toml --yes --force -o json --url URL`
                   (`--force`: no management URL is given here, docs/reference/topology.md) as a
                   subprocess (what an operator runs): plan, the eight steps (hold, redirect,
                   drain, delete, declare, restore, refill, clean), the plan again. msg/s is
                   N / the command's wall time, the Python start and the planning included;
                   `steps s` is the part from the `hold` line on stderr to the exit
* raw aiormq       the same rebuild by hand, in this process: declare a holding queue, bind it
                   to `events`/`job` and unbind `jobs`, move every message `jobs` -> holding
                   (consume with the same prefetch, publish as it is on a confirm channel,
                   mandatory, ack after the confirm; pipelined as in benchmarks/dlq.py), delete
                   the (empty) wait queue and `jobs` with if-empty, declare both as quorum queues
                   with the arguments rr declares, bind `jobs` again and unbind the holding
                   queue, move every message back, delete the holding queue. msg/s is N / its
                   wall time

The table shows the median of the rounds and the median of the per-round ratios rr / raw.
After each case every id is read back from the rebuilt `jobs` (untimed): all N, once each,
and the rebuilt queue must accept a re-declare with the file's quorum arguments.

Unavailability: one more `rr migrate` on fresh queues (`--steady-messages` in `jobs`) per
publisher, while that publisher sends `--rate` messages a second, each with its own id,
persistent, `mandatory`, on a confirm channel (from 1 s before the command to 1 s after it):

* through events   published to the exchange `events` with the binding's key: rr moves the
                   binding to the holding queue and back, so nothing should be returned; a
                   message published in the instant between a bind and the matching unbind is
                   routed to both queues and counted as a duplicate
* by name          published to the default exchange with routing key `jobs`: a message
                   published while `jobs` does not exist (between `delete` and `declare`) is
                   returned to the publisher (it knows), but one routed to `jobs` in the
                   instant it is deleted is confirmed and lost (benchmarks/publish_by_name.py).
                   rr refuses such publishers when it can see them (`--management-url`), and
                   every run without it unless `--force` (given here); it stops the
                   drain when the queue keeps filling (`kept filling after 20 moves`) or the
                   if-empty delete finds a new message; so `rr migrate` is run up to
                   `--attempts` times while the publisher runs, then (if still not done) once
                   more with the publisher stopped, as the error text tells an operator to do

For each: the exit codes of the runs, `rr s` (the seconds of the runs made while it
published), published (confirmed or returned), returned, the window in seconds from the first
return to the last, then every id is read back from `jobs`: the
preloaded ones and every confirmed, not returned one must be there. It prints
`ids checked: N, lost: L, duplicated: D`; the script exits 1 when a message was lost or a
case failed. Speed is measured here, never asserted in the test suite.

Needs a RabbitMQ (default the local 3.10.8, amqp://guest:guest@127.0.0.1:5672/; the 4.3.6 one
is `--url amqp://guest:guest@127.0.0.1:5675/`). About 2 minutes with the defaults.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

import aiormq
from aiormq.exceptions import PublishError
from pamqp import commands as spec
from pamqp.common import FieldTable

from rabbitctl_retry.topology.expand import QueueEntity, expand
from rabbitctl_retry.topology.load import load_text
from rabbitctl_retry.topology.migration import holding_name

ROOT = Path(__file__).resolve().parent.parent
BODY = b'{"id": 1, "note": "' + b"x" * 178 + b'"}'  # 200 bytes

BEFORE = """
[exchanges."{p}.events"]
type = "direct"

[queues."{p}.jobs"]
max_attempts = 5
dead_letter = "{p}.jobs.dead"
delay_tiers = ["10s"]
bindings = [{{ exchange = "{p}.events", routing_key = "job" }}]
"""

AFTER = BEFORE.replace("max_attempts = 5", 'max_attempts = 5\ntype = "quorum"')


@dataclass(frozen=True)
class Names:
    """The names of one case's queues and exchange."""

    prefix: str

    @property
    def jobs(self) -> str:
        return f"{self.prefix}.jobs"

    @property
    def wait(self) -> str:
        return f"{self.prefix}.jobs.retry.10s"

    @property
    def events(self) -> str:
        return f"{self.prefix}.events"

    @property
    def raw_holding(self) -> str:
        return f"{self.prefix}.jobs.raw-holding"

    @property
    def queues(self) -> list[str]:
        """Every queue a case may leave, the holding ones first."""
        return [
            holding_name(self.wait),
            holding_name(self.jobs),
            self.raw_holding,
            self.wait,
            self.jobs,
            f"{self.prefix}.jobs.dead",
        ]


def fresh() -> Names:
    return Names(f"rr-bench-migrate-{uuid.uuid4().hex[:8]}")


def quorum_entities(names: Names) -> dict[str, QueueEntity]:
    """The queues as the AFTER file declares them (what the raw rebuild copies by hand)."""
    desired = expand(load_text(AFTER.format(p=names.prefix)))
    return {queue.name: queue for queue in desired.queues}


def table(entity: QueueEntity) -> FieldTable:
    """The queue's arguments as aiormq takes them."""
    return cast("FieldTable", dict(entity.arguments))


# ---------------------------------------------------------------- rr as a subprocess


@dataclass
class RrRun:
    code: int
    wall_s: float
    steps_s: float
    """From the ``hold`` line on stderr to the exit (nan when no step began)."""
    stderr: str
    stdout: str


async def rr(directory: Path, url: str, *args: str) -> RrRun:
    """``python -m rabbitctl_retry ARGS --url URL`` in ``directory``; stderr read as it
    comes, so the start of the first step is timed."""
    environment = dict(os.environ)
    environment["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(ROOT), environment.get("PYTHONPATH")])
    )
    for variable in ("RR_URL", "RR_MANAGEMENT_URL"):
        environment.pop(variable, None)
    started = time.perf_counter()
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "rabbitctl_retry",
        *args,
        "--url",
        url,
        cwd=directory,
        env=environment,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert process.stdout is not None
    assert process.stderr is not None
    hold_at = float("nan")
    lines: list[str] = []

    async def read_stderr(stream: asyncio.StreamReader) -> None:
        nonlocal hold_at
        async for raw in stream:
            line = raw.decode(errors="replace")
            if line.endswith(": hold\n") and hold_at != hold_at:
                hold_at = time.perf_counter()
            lines.append(line)

    stdout, _, code = await asyncio.gather(
        process.stdout.read(), read_stderr(process.stderr), process.wait()
    )
    ended = time.perf_counter()
    return RrRun(
        code=code,
        wall_s=ended - started,
        steps_s=ended - hold_at,
        stderr="".join(lines),
        stdout=stdout.decode(errors="replace"),
    )


def write_files(directory: Path, names: Names) -> None:
    (directory / "before.toml").write_text(BEFORE.format(p=names.prefix))
    (directory / "after.toml").write_text(AFTER.format(p=names.prefix))


async def prepare(url: str, directory: Path, names: Names, count: int) -> list[str]:
    """`rr declare before.toml`, then ``count`` messages in ``jobs`` (untimed)."""
    write_files(directory, names)
    declared = await rr(directory, url, "declare", "before.toml")
    if declared.code != 0:
        raise SystemExit(f"rr declare failed ({declared.code}):\n{declared.stderr}")
    ids = [f"m-{number}" for number in range(count)]
    connection = await aiormq.connect(url)
    channel = await connection.channel(publisher_confirms=True)
    for start in range(0, count, 1000):
        await asyncio.gather(
            *(
                channel.basic_publish(
                    BODY,
                    routing_key=names.jobs,
                    properties=spec.Basic.Properties(delivery_mode=2, message_id=message_id),
                    mandatory=True,
                )
                for message_id in ids[start : start + 1000]
            )
        )
    await connection.close()
    return ids


async def cleanup(url: str, names: Names) -> None:
    connection = await aiormq.connect(url)
    channel = await connection.channel()
    for queue in names.queues:
        await channel.queue_delete(queue)  # a missing queue is no error
    await channel.exchange_delete(names.events)
    await connection.close()


async def read_back(url: str, names: Names, timeout_s: float = 120.0) -> Counter[str]:
    """Every message_id in ``jobs`` (taken, no ack needed: the queue is deleted next), and
    a check that the queue is what the AFTER file declares (a re-declare is accepted)."""
    connection = await aiormq.connect(url)
    channel = await connection.channel()
    entity = quorum_entities(names)[names.jobs]
    await channel.queue_declare(
        names.jobs, durable=entity.durable, arguments=table(entity)
    )  # 406 PRECONDITION_FAILED if the rebuild left another queue
    count = (await channel.queue_declare(names.jobs, passive=True)).message_count or 0
    seen: Counter[str] = Counter()
    done = asyncio.Event()
    if count == 0:
        done.set()

    async def on_message(message: aiormq.abc.DeliveredMessage) -> None:
        seen[message.header.properties.message_id or ""] += 1
        if seen.total() >= count:
            done.set()

    await channel.basic_qos(prefetch_count=2000)
    await channel.basic_consume(names.jobs, on_message, no_ack=True)
    await asyncio.wait_for(done.wait(), timeout_s)
    await asyncio.sleep(0.2)  # anything beyond the depth seen (none expected) comes in too
    await connection.close()
    return seen


# ---------------------------------------------------------------- raw aiormq by hand


async def move(
    connection: aiormq.abc.AbstractConnection, source: str, target: str, prefetch: int
) -> int:
    """Every message of ``source`` to ``target``: consume, publish as it is (mandatory) with
    a confirm, ack after the confirm; callbacks run at once, so publishes are pipelined."""
    consume = await connection.channel()
    confirm = await connection.channel(publisher_confirms=True)
    count = (await consume.queue_declare(source, passive=True)).message_count or 0
    if count:
        await consume.basic_qos(prefetch_count=prefetch)
        done = asyncio.Event()
        moved = 0

        async def on_message(message: aiormq.abc.DeliveredMessage) -> None:
            nonlocal moved
            await confirm.basic_publish(
                message.body,
                routing_key=target,
                properties=message.header.properties,
                mandatory=True,
            )
            assert message.delivery_tag is not None
            await consume.basic_ack(message.delivery_tag)
            moved += 1
            if moved == count:
                done.set()

        ok = await consume.basic_consume(source, on_message)
        await done.wait()
        assert ok.consumer_tag is not None
        await consume.basic_cancel(ok.consumer_tag)
        await consume.basic_qos(prefetch_count=prefetch)  # a round trip after the last ack
    await consume.close()
    await confirm.close()
    return count


async def raw_migrate(url: str, names: Names, prefetch: int) -> float:
    """The rebuild by hand (see the module docstring); returns its wall time."""
    entities = quorum_entities(names)
    connection = await aiormq.connect(url)
    channel = await connection.channel()
    started = time.perf_counter()
    await channel.queue_declare(names.raw_holding, durable=True)
    await channel.queue_bind(names.raw_holding, names.events, routing_key="job")
    await channel.queue_unbind(names.jobs, names.events, routing_key="job")
    await move(connection, names.jobs, names.raw_holding, prefetch)
    for queue in (names.wait, names.jobs):
        await channel.queue_delete(queue, if_empty=True)
    for queue in (names.jobs, names.wait):
        entity = entities[queue]
        await channel.queue_declare(queue, durable=entity.durable, arguments=table(entity))
    await channel.queue_bind(names.jobs, names.events, routing_key="job")
    await channel.queue_unbind(names.raw_holding, names.events, routing_key="job")
    await move(connection, names.raw_holding, names.jobs, prefetch)
    await channel.queue_delete(names.raw_holding, if_empty=True)
    elapsed = time.perf_counter() - started
    await connection.close()
    return elapsed


# ---------------------------------------------------------------- throughput


@dataclass
class Timing:
    wall_s: float
    steps_s: float = float("nan")


async def case_rr(url: str, directory: Path, names: Names, prefetch: int) -> Timing:
    run = await rr(directory, url, "migrate", "after.toml", "--yes", "--force", "-o", "json")
    if run.code != 0:
        raise RuntimeError(f"rr migrate exited {run.code}:\n{run.stderr[-2000:]}")
    return Timing(run.wall_s, run.steps_s)


async def case_raw(url: str, directory: Path, names: Names, prefetch: int) -> Timing:
    return Timing(await raw_migrate(url, names, prefetch))


Case = Callable[[str, Path, Names, int], Awaitable[Timing]]
CASES: dict[str, Case] = {"rr migrate": case_rr, "raw aiormq": case_raw}


def check(ids: list[str], seen: Counter[str]) -> tuple[int, int]:
    """(lost, duplicated): ids of ``ids`` never seen, and extra copies of the others."""
    lost = sum(1 for message_id in ids if seen[message_id] == 0)
    duplicated = sum(seen[message_id] - 1 for message_id in ids if seen[message_id] > 1)
    return lost, duplicated


async def one_round(url: str, count: int, prefetch: int, order: list[str]) -> dict[str, Timing]:
    timings: dict[str, Timing] = {}
    for name in order:
        names = fresh()
        with tempfile.TemporaryDirectory(prefix="rr-bench-migrate-") as directory:
            try:
                ids = await prepare(url, Path(directory), names, count)
                timings[name] = await CASES[name](url, Path(directory), names, prefetch)
                lost, duplicated = check(ids, await read_back(url, names))
                if lost or duplicated:
                    raise RuntimeError(f"{name}: {lost} lost, {duplicated} duplicated")
            finally:
                await cleanup(url, names)
    return timings


# ---------------------------------------------------------------- unavailability


@dataclass
class Publisher:
    """Publishes ``{tag}-N`` at a steady rate, mandatory, with confirms; keeps the confirmed
    ids and the returned ones with when each came back."""

    url: str
    exchange: str
    routing_key: str
    rate: float
    tag: str
    confirmed: list[str] = field(default_factory=list)
    returned: list[tuple[str, float]] = field(default_factory=list)
    stop: asyncio.Event = field(default_factory=asyncio.Event)

    async def run(self) -> None:
        connection = await aiormq.connect(self.url)
        channel = await connection.channel(publisher_confirms=True)
        number = 0
        next_at = time.perf_counter()
        try:
            while not self.stop.is_set():
                message_id = f"{self.tag}-{number}"
                number += 1
                try:
                    await channel.basic_publish(
                        BODY,
                        exchange=self.exchange,
                        routing_key=self.routing_key,
                        properties=spec.Basic.Properties(delivery_mode=2, message_id=message_id),
                        mandatory=True,
                    )
                    self.confirmed.append(message_id)
                except PublishError:
                    self.returned.append((message_id, time.perf_counter()))
                next_at += 1 / self.rate
                await asyncio.sleep(max(0.0, next_at - time.perf_counter()))
        finally:
            await connection.close()


@dataclass
class Outage:
    publisher: str
    codes: list[int]
    last_error: str
    published: int
    returned: int
    window_s: float
    checked: int
    lost: int
    duplicated: int
    wall_s: float


async def unavailability(url: str, count: int, rate: float, attempts: int, by_name: bool) -> Outage:
    names = fresh()
    with tempfile.TemporaryDirectory(prefix="rr-bench-migrate-") as name:
        directory = Path(name)
        try:
            ids = await prepare(url, directory, names, count)
            publisher = Publisher(
                url,
                exchange="" if by_name else names.events,
                routing_key=names.jobs if by_name else "job",
                rate=rate,
                tag="name" if by_name else "exchange",
            )
            publishing = asyncio.ensure_future(publisher.run())
            await asyncio.sleep(1.0)  # the publisher is steady before the command starts
            codes: list[int] = []
            last_error = ""
            started = time.perf_counter()
            try:
                for _ in range(attempts if by_name else 1):
                    run = await rr(
                        directory, url, "migrate", "after.toml", "--yes", "--force", "-o", "json"
                    )
                    codes.append(run.code)
                    if run.code == 0:
                        break
                    errors = [line for line in run.stderr.splitlines() if "error" in line]
                    last_error = errors[-1] if errors else run.stderr.strip()[-200:]
                wall_s = time.perf_counter() - started
                await asyncio.sleep(1.0)  # publishing goes on after the rebuild
            finally:
                publisher.stop.set()
                await publishing
            if codes[-1] != 0:  # finish it with the publisher stopped, as rr's error says
                run = await rr(
                    directory, url, "migrate", "after.toml", "--yes", "--force", "-o", "json"
                )
                codes.append(run.code)
            expected = ids + publisher.confirmed
            seen = await read_back(url, names)
            lost, duplicated = check(expected, seen)
            times = [at for _, at in publisher.returned]
            return Outage(
                publisher="by name (default exchange)" if by_name else "through events",
                codes=codes,
                last_error=last_error,
                published=len(publisher.confirmed) + len(publisher.returned),
                returned=len(publisher.returned),
                window_s=(max(times) - min(times)) if times else 0.0,
                checked=len(expected),
                lost=lost,
                duplicated=duplicated,
                wall_s=wall_s,
            )
        finally:
            await cleanup(url, names)


# ---------------------------------------------------------------- main


async def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument(
        "--steady-messages", type=int, default=5_000, help="in the queue, publisher runs"
    )
    parser.add_argument("--prefetch", type=int, default=500, help="of the raw moves")
    parser.add_argument("--rate", type=float, default=200.0, help="publisher, messages/s")
    parser.add_argument(
        "--attempts", type=int, default=3, help="rr migrate runs while publishing by name"
    )
    parser.add_argument("--url", default="amqp://guest:guest@127.0.0.1:5672/")
    args = parser.parse_args()
    count: int = args.messages
    steady: int = args.steady_messages
    names = list(CASES)
    rounds: list[dict[str, Timing]] = []
    for number in range(args.rounds):
        order = names if number % 2 == 0 else names[::-1]
        rounds.append(await one_round(args.url, count, args.prefetch, order))
    outages = [
        await unavailability(args.url, steady, args.rate, args.attempts, by_name=False),
        await unavailability(args.url, steady, args.rate, args.attempts, by_name=True),
    ]

    print(
        f"{count:,} messages (persistent, 200 bytes) in a classic queue with a 10s delay tier, "
        f"rebuilt as quorum queues; {args.rounds} rounds; {args.url}"
    )
    print(f"{'case':12} {'wall s':>8} {'steps s':>8} {'msg/s':>8} {'x raw':>6}  msg/s per round")
    for name in names:
        walls = [r[name].wall_s for r in rounds]
        steps = [r[name].steps_s for r in rounds]
        ratio = statistics.median(r["raw aiormq"].wall_s / r[name].wall_s for r in rounds)
        each = " ".join(f"{count / wall:,.0f}" for wall in walls)
        step_text = "-" if name == "raw aiormq" else f"{statistics.median(steps):.2f}"
        print(
            f"{name:12} {statistics.median(walls):8.2f} {step_text:>8} "
            f"{count / statistics.median(walls):8,.0f} {ratio:6.2f}  {each}"
        )
    print()
    print(
        f"rr migrate with a publisher at {args.rate:.0f} msg/s (mandatory, confirms), "
        f"{steady:,} messages in the queue"
    )
    print(
        f"{'publisher':28} {'rr exit codes':>13} {'rr s':>6} {'published':>9} "
        f"{'returned':>8} {'window s':>8}"
    )
    failed = False
    for outage in outages:
        codes = ",".join(str(code) for code in outage.codes)
        print(
            f"{outage.publisher:28} {codes:>13} {outage.wall_s:6.1f} {outage.published:9,} "
            f"{outage.returned:8,} {outage.window_s:8.3f}"
        )
        if outage.last_error:
            print(f"  last error while publishing: {outage.last_error}")
        print(
            f"  ids checked: {outage.checked:,}, lost: {outage.lost}, "
            f"duplicated: {outage.duplicated}"
        )
        failed = failed or outage.lost > 0 or outage.codes[-1] != 0
    if failed:
        print("FAILED: a message was lost or rr migrate did not finish", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
