"""Count every message id: how often the handler saw it, and where it ended.

The load and fault tests publish messages with unique ids and a handler whose outcome is a
fixed function of (id, attempt), so the exact end of every message is known in advance:
how many handler calls, and whether it is acked or in the dead-letter queue. After the run
they compare, id by id:

* lost — neither acked by a handler call nor in the dead-letter queue nor still queued;
* duplicated — more handler calls than the plan, or in the dead-letter queue more than once,
  or both acked and dead-lettered.
"""

from __future__ import annotations

import asyncio
import zlib
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field

from rabbitctl_retry import Message, Outcome
from rabbitctl_retry.retry.outcome import Ack, AnyOutcome, Drop
from rabbitctl_retry.runtime.delays import PUBLISH_WINDOW
from rabbitctl_retry.runtime.service import RunOptions
from rabbitctl_retry.transport.base import Connection, Properties

Connect = Callable[[], Awaitable[Connection]]
OutcomeOf = Callable[[str, int], AnyOutcome]

DEAD_LETTER_WORKER_PREFETCH = 32
"""RabbitMQ's ``dead_letter_worker_consumer_prefetch`` default (3.10.8 and 4.0.5): how many
dead letters a quorum queue's at-least-once dead-letter worker has in flight at once. A stop
or crash of the node that leads a quorum wait queue makes its dead-letter worker move again
what it had not settled: up to this many delayed copies come back twice."""


def duplicate_window(
    *, interruptions: int, broker_stops: int = 0, memory_delays: bool = False
) -> int:
    """How many ids may get duplicated work (docs/explanation/guarantees.md, "Duplicates are
    possible"): the deliveries in flight (rr's default prefetch) at each interruption, with
    ``delay = "memory"`` also the delayed copies whose publish was under way (their confirm is
    lost with the connection, so rr publishes them again), and for each stop or crash of a node
    that leads a quorum wait queue, the copies its dead-letter worker moves again."""
    in_flight = RunOptions().prefetch + (PUBLISH_WINDOW if memory_delays else 0)
    return in_flight * interruptions + DEAD_LETTER_WORKER_PREFETCH * broker_stops


def mixed_outcome(message_id: str, attempt: int) -> AnyOutcome:
    """70 % ack, 20 % retry, 10 % retry_after(1 s): a fixed function of id and attempt."""
    roll = zlib.crc32(f"{message_id}/{attempt}".encode()) % 10
    if roll < 7:
        return Outcome.ack()
    if roll < 9:
        return Outcome.retry()
    return Outcome.retry_after(1)


def always_retry(message_id: str, attempt: int) -> AnyOutcome:
    return Outcome.retry()


def always_ack(message_id: str, attempt: int) -> AnyOutcome:
    return Outcome.ack()


def planned_end(message_id: str, max_attempts: int, outcome_of: OutcomeOf) -> tuple[int, str]:
    """(handler calls, ``"acked"`` | ``"dropped"`` | ``"dead"``) for one message."""
    for attempt in range(1, max_attempts + 1):
        outcome = outcome_of(message_id, attempt)
        if isinstance(outcome, Ack):
            return attempt, "acked"
        if isinstance(outcome, Drop):
            return attempt, "dropped"
    return max_attempts, "dead"


@dataclass
class Verdict:
    lost: list[str]
    extra_calls: dict[str, int]
    """id -> handler calls beyond the plan."""
    dead_twice: list[str]
    acked_and_dead: list[str]
    wrong_place: list[str]
    """Ended somewhere else than planned (e.g. acked where the plan says dead)."""
    fewer_calls: dict[str, int] = field(default_factory=dict)
    """id -> handler calls short of the plan (ended by a counted return, not a handler)."""

    @property
    def duplicates(self) -> int:
        return len(self.dead_twice) + len(self.acked_and_dead)

    def beyond_interruptions(self, *, interruptions: int, window: int) -> list[str]:
        """What breaks the bound docs/reference/runtime.md ("What is guaranteed") gives a run whose
        connection or consumer was cut ``interruptions`` times: nothing lost; every other
        difference from the plan (an attempt handled again, a dead letter twice, acked and
        dead, a counted return that ended a message early) only on deliveries in flight when
        it happened (``window``: the prefetch) and at most once per interruption."""
        problems = []
        if self.lost:
            problems.append(f"{len(self.lost)} lost: {self.lost[:5]}")
        disturbed = (
            set(self.extra_calls)
            | set(self.fewer_calls)
            | set(self.dead_twice)
            | set(self.acked_and_dead)
            | set(self.wrong_place)
        )
        if len(disturbed) > interruptions * window:
            problems.append(
                f"{len(disturbed)} ids differ from the plan, more than {interruptions} "
                f"interruption(s) x {window} in flight"
            )
        for what, counts in (("extra", self.extra_calls), ("missing", self.fewer_calls)):
            over = {i: n for i, n in counts.items() if n > interruptions}
            if over:
                problems.append(f"{what} handler calls beyond one per interruption: {over}")
        return problems

    def summary(self) -> str:
        return (
            f"lost {len(self.lost)} {self.lost[:5]}, extra handler calls "
            f"{sum(self.extra_calls.values())} on {len(self.extra_calls)} ids, dead twice "
            f"{len(self.dead_twice)}, acked and dead {len(self.acked_and_dead)}, wrong place "
            f"{len(self.wrong_place)} {self.wrong_place[:5]}"
        )


@dataclass
class Ledger:
    """The handler's record, by message id."""

    outcome_of: OutcomeOf
    max_attempts: int
    calls: Counter[str] = field(default_factory=Counter)
    acked: Counter[str] = field(default_factory=Counter)
    """Handler calls that returned ack."""
    attempts: dict[str, list[int]] = field(default_factory=dict)
    handler_delay_s: float = 0.0
    ended_at: dict[str, float] = field(default_factory=dict)
    """id -> loop time its first call with a final outcome returned (an ack, a drop, or the
    last attempt's retry: rr then dead-letters it)."""

    def handler(self) -> Callable[[Message], Awaitable[AnyOutcome]]:
        async def handle(msg: Message) -> AnyOutcome:
            message_id = msg.properties.message_id or ""
            self.calls[message_id] += 1
            self.attempts.setdefault(message_id, []).append(msg.attempt)
            if self.handler_delay_s:
                await asyncio.sleep(self.handler_delay_s)
            outcome = self.outcome_of(message_id, msg.attempt)
            if isinstance(outcome, Ack):
                self.acked[message_id] += 1
            if isinstance(outcome, Ack | Drop) or msg.attempt >= self.max_attempts:
                self.ended_at.setdefault(message_id, asyncio.get_running_loop().time())
            return outcome

        return handle

    def ended_before(self, moment: float) -> set[str]:
        """The ids whose handler had returned their final outcome before ``moment``."""
        return {message_id for message_id, at in self.ended_at.items() if at < moment}

    def settled(self, ids: Iterable[str], dead: Counter[str]) -> int:
        """How many ``ids`` reached their planned end (acked by a handler, or dead)."""
        done = 0
        for message_id in ids:
            if self.acked[message_id] or dead[message_id]:
                done += 1
        return done

    def verdict(
        self, ids: Iterable[str], dead: Counter[str], queued: Counter[str] | None = None
    ) -> Verdict:
        queued = queued or Counter()
        lost: list[str] = []
        extra: dict[str, int] = {}
        fewer: dict[str, int] = {}
        dead_twice: list[str] = []
        acked_and_dead: list[str] = []
        wrong: list[str] = []
        for message_id in ids:
            calls, place = planned_end(message_id, self.max_attempts, self.outcome_of)
            is_acked = self.acked[message_id] > 0
            is_dead = dead[message_id] > 0
            if not is_acked and not is_dead and not queued[message_id]:
                lost.append(message_id)
            if self.calls[message_id] > calls:
                extra[message_id] = self.calls[message_id] - calls
            elif self.calls[message_id] < calls:
                fewer[message_id] = calls - self.calls[message_id]
            if dead[message_id] > 1:
                dead_twice.append(message_id)
            if is_acked and is_dead:
                acked_and_dead.append(message_id)
            if (place == "acked" and is_dead) or (place == "dead" and is_acked):
                wrong.append(message_id)
        return Verdict(lost, extra, dead_twice, acked_and_dead, wrong, fewer)


def message_ids(prefix: str, count: int) -> list[str]:
    return [f"{prefix}-{number:06d}" for number in range(count)]


async def publish_ids(
    connect: Connect, queue: str, ids: list[str], *, batch: int = 500, exchange: str = ""
) -> None:
    """Publish one persistent message per id (body = the id), with confirms, pipelined."""
    connection = await connect()
    try:
        channel = await connection.channel(confirms=True)
        for start in range(0, len(ids), batch):
            await asyncio.gather(
                *(
                    channel.publish(
                        message_id.encode(),
                        exchange=exchange,
                        routing_key=queue,
                        properties=Properties(message_id=message_id, delivery_mode=2),
                        mandatory=True,
                    )
                    for message_id in ids[start : start + batch]
                )
            )
    finally:
        await connection.close()


async def take_ids(connect: Connect, queue: str) -> Counter[str]:
    """Empty ``queue`` (basic.get + ack) and count its messages by id."""
    found: Counter[str] = Counter()
    connection = await connect()
    try:
        channel = await connection.channel()
        while (delivery := await channel.get(queue, no_ack=True)) is not None:
            found[delivery.properties.message_id or ""] += 1
    finally:
        await connection.close()
    return found


async def wait_progressing(
    done_count: Callable[[], Awaitable[int]],
    target: int,
    what: str,
    *,
    stall_s: float = 120.0,
    poll_s: float = 0.5,
) -> None:
    """Wait until ``done_count()`` reaches ``target``, for as long as it moves: fail only when
    it stayed the same for ``stall_s`` (a busy machine is slow, not stuck;
    docs/reference/testing.md, "On a busy machine")."""
    loop = asyncio.get_running_loop()
    last, since = -1, loop.time()
    while (count := await done_count()) < target:
        if count != last:
            last, since = count, loop.time()
        elif loop.time() - since > stall_s:
            raise AssertionError(
                f"waiting for {what}: stuck at {count} of {target} for {stall_s:g} s"
            )
        await asyncio.sleep(poll_s)


async def wait_until(
    predicate: Callable[[], Awaitable[bool]], what: str, *, timeout_s: float, poll_s: float = 0.2
) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not await predicate():
        if loop.time() > deadline:
            raise AssertionError(f"timed out after {timeout_s:g} s waiting for {what}")
        await asyncio.sleep(poll_s)
