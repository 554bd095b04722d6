"""Throughput of `rr run` against raw aiormq (and FastStream), measured in the same run.

    python benchmarks/runtime.py [--messages 20000] [--prefetch 500] [--rounds 3] [--warmup 1]
                                 [--queue-types classic,quorum] [--loop asyncio|uvloop]
                                 [--timeout SECONDS] [--url URL]
                                 [--typed | --outputs N[,N...] | --tracing]

Shapes (one durable queue of each --queue-types, declared with the arguments rr's topology
gives it, persistent 200-byte JSON bodies, each message with its own message_id, repeated in
the body's "id", preloaded untimed):

* no-op        consume and ack every message
    - aiormq 1-ack     raw aiormq, one basic.ack per message
    - aiormq batched   raw aiormq, basic.ack(multiple=true) every 100 messages and the rest at
                       the end (what a consumer that coalesces acks can reach at best)
    - rr               `rr run` runtime, no-op async handler (acks coalesced where safe)
    - faststream       a FastStream subscriber doing the same (if `faststream[rabbit]` is
                       installed)
    - ceiling          raw pamqp frames over a blocking socket (benchmarks/wire.py), acks
                       coalesced like the batched case: what Python reaches at best
* retry path   consume, publish a copy to the dead-letter queue with a publisher confirm, then
               ack the original
    - aiormq 1-ack     raw aiormq: publish the copy on a confirm channel, await its confirm,
                       ack the original (one basic.ack per message)
    - aiormq batched   the same, but the originals are acked with basic.ack(multiple=true) each
                       time 100 more of them have a confirmed copy (only the prefix of delivery
                       tags whose copies are all confirmed, as rr does), and the rest at the end
    - rr               `rr run` with max_attempts = 1 and a dead-letter queue, handler returns
                       retry(): every message becomes one confirmed copy, then the ack
    - ceiling          raw pamqp frames over a blocking socket, the same frames as the batched
                       case, every read's answers written in one send

* typed (--typed, instead of the shapes above; docs/reference/handlers.md, "Typed messages")
    - rr Message       `rr run`, no-op async handler taking the Message (today's no-op case)
    - rr dataclass     the same handler taking the body decoded into a dataclass
    - rr pydantic      ... into a pydantic v2 model (if pydantic is installed)
    - rr msgspec       ... into a msgspec Struct (if msgspec is installed)
    - rr dict          ... into a dict
  and, in the same run, the per-message decode cost in microseconds: each handler's
  arguments built from one 200-byte delivery in a loop (no broker), less the Message case's.

* outputs (--outputs N[,N...], instead of the shapes above; docs/reference/runtime.md,
  "Publishing"): the handler acks and publishes N outputs per message, for 0 (always run: the
  reference) and every N given (--outputs 1,3: 0, 1 and 3 outputs), into a classic queue
  ``<queue>.out``
    - rr               `rr run`, an async handler taking ``Outputs`` that publishes N
                       outputs (the 200-byte body, ids derived by rr: ``output_id``); rr
                       publishes them mandatory on its confirm channel when the handler acks,
                       awaits their confirms, then acks the original
    - aiormq           raw aiormq doing the same by hand: consume, publish the N outputs
                       mandatory on a confirm channel (the same ids, the same properties),
                       await every confirm, then ack; originals acked with
                       basic.ack(multiple=true) as in the retry path's batched case
  and, from the median rates, each case's time per message and per output: (1/rate with N
  less 1/rate with 0) / N, in microseconds.

* tracing (--tracing, instead of the shapes above; docs/reference/runtime.md, "Tracing and
  metrics"): the rr cases of no-op and retry path (native client) without and with OpenTelemetry
  tracing on (an SDK tracer provider that records every span and exports none): the cost of
  a span per delivery and of the trace context and publish stamp on every copy.

Timed: from basic.consume to the moment every message is handled and every ack reached the
broker (a round trip on the consuming channel after the last ack; for rr and FastStream, their
own graceful stop).

Checked after every case of every round, warm-up included (untimed): once the case's
connection is closed (so anything it left unacked is back in its queue), the consumed queue
must be empty, the handler must have seen every message_id exactly once, on the retry path
the dead-letter queue must hold every message_id exactly once, and with --outputs the output
queue must hold every output id (N per message) exactly once. A case that times out
(--timeout, per case), raises, leaves messages behind, loses or duplicates some prints a FAILED
line with the counts, gets no rate in the table, and makes the script exit 1 at the end.

Rounds: --warmup rounds (not counted), then --rounds measured ones; the case order rotates by
one every round, so no case is always the first or last on a warm or cold broker. The table
shows the median rate of the measured rounds and the median of the per-round ratios against
the aiormq cases of the same shape (and FastStream for no-op) and the ceiling. --loop uvloop
runs the whole script, references included, on uvloop (what `rr run` uses where it is
installed; docs/reference/runtime.md, "Speed"). Needs a RabbitMQ (default
amqp://guest:guest@127.0.0.1:5672/); it creates and deletes its own queues. Speed is measured
here, never asserted in the test suite.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import json
import logging
import statistics
import sys
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

import aiormq
import wire
from pamqp import commands as spec

from rabbitctl_retry import Message, Outcome, Outputs
from rabbitctl_retry.runtime.handlers import Subscriber
from rabbitctl_retry.runtime.loader import HandlerSet
from rabbitctl_retry.runtime.outputs import output_id
from rabbitctl_retry.runtime.service import RunOptions, Service
from rabbitctl_retry.topology.expand import expand
from rabbitctl_retry.topology.load import load_text
from rabbitctl_retry.transport import clients
from rabbitctl_retry.transport.base import Connection
from rabbitctl_retry.transport.clients import ClientName


def make_body(message_id: str) -> bytes:
    """A 200-byte JSON body that carries the message id too (for FastStream's handler)."""
    head = json.dumps({"id": message_id, "card": "4111111111111111", "note": ""})
    return head.replace('"note": ""', f'"note": "{"x" * (200 - len(head))}"').encode()


BATCH = 100
"""Messages per basic.ack(multiple=true) in the batched baselines."""
CLOSE_TIMEOUT_S = 10.0
"""How long closing a case's connection (or stopping its service) may take after a failure."""
CHECK_TIMEOUT_S = 60.0
"""How long the untimed checks of one case may take."""
DEAD_LETTERS_IDLE_S = 5.0
"""How long the accounting waits for one more dead letter before it counts the missing ones
as lost (a quorum queue's at-least-once dead-lettering moves them in the background)."""

Shape = Literal["noop", "retry", "outputs"]


class Tally:
    """What one case's handler saw: every message_id and how often."""

    __slots__ = ("deliveries", "expected", "handled", "without_id")

    def __init__(self, expected: int) -> None:
        self.expected = expected
        self.handled: dict[str, int] = {}
        self.deliveries = 0
        self.without_id = 0

    def saw(self, message_id: str | None) -> bool:
        """Count one handled delivery; ``True`` when it completes the expected ids."""
        self.deliveries += 1
        if message_id is None:
            self.without_id += 1
            return False
        handled = self.handled
        times = handled.get(message_id, 0)
        handled[message_id] = times + 1
        return times == 0 and len(handled) == self.expected

    def saw_all(self, ids: Counter[str]) -> None:
        """Count deliveries another process or thread saw (``ids``: id -> how often)."""
        for message_id, times in ids.items():
            for _ in range(times):
                self.saw(message_id)


Case = Callable[[str, str, int, Tally], Awaitable[float]]
"""(url, queue, prefetch, tally) -> messages per second."""


async def close_quietly(connection: aiormq.abc.AbstractConnection) -> None:
    with contextlib.suppress(Exception):
        await asyncio.wait_for(connection.close(), CLOSE_TIMEOUT_S)


# ---------------------------------------------------------------- queues


def queue_arguments(topology: str) -> dict[str, dict[str, Any]]:
    """Queue name -> the arguments rr declares it with, for a topology's text."""
    return {q.name: dict(q.arguments) for q in expand(load_text(topology)).queues}


async def preload(
    url: str, queue: str, ids: list[str], arguments: dict[str, dict[str, Any]]
) -> None:
    """Declare every queue of ``arguments`` (as rr would) and fill ``queue`` with ``ids``."""
    connection = await aiormq.connect(url)
    try:
        channel = await connection.channel()
        for name, declared in arguments.items():
            await channel.queue_declare(name, durable=True, arguments=declared)
        for start in range(0, len(ids), 1000):
            await asyncio.gather(
                *(
                    channel.basic_publish(
                        make_body(id_),
                        routing_key=queue,
                        properties=spec.Basic.Properties(
                            delivery_mode=2, content_type="application/json", message_id=id_
                        ),
                    )
                    for id_ in ids[start : start + 1000]
                )
            )
        while (await channel.queue_declare(queue, passive=True)).message_count < len(ids):
            await asyncio.sleep(0.05)
    finally:
        await close_quietly(connection)


async def delete(url: str, *queues: str) -> None:
    connection = await aiormq.connect(url)
    try:
        channel = await connection.channel()
        for queue in queues:
            await channel.queue_delete(queue)
    finally:
        await close_quietly(connection)


async def drain(
    channel: aiormq.abc.AbstractChannel, queue: str, timeout_s: float
) -> tuple[int, Counter[str], int]:
    """Take every message of ``queue`` (no_ack); return the count the broker reported, the
    message ids taken (with how often each came) and how many taken had no id."""
    ready = (await channel.queue_declare(queue, passive=True)).message_count or 0
    ids: Counter[str] = Counter()
    without_id = 0
    if not ready:
        return 0, ids, 0
    taken = 0
    all_taken = asyncio.Event()

    async def on_message(message: aiormq.abc.DeliveredMessage) -> None:
        nonlocal taken, without_id
        taken += 1
        message_id = message.header.properties.message_id
        if message_id is None:
            without_id += 1
        else:
            ids[message_id] += 1
        if taken >= ready:
            all_taken.set()

    consume = await channel.basic_consume(queue, on_message, no_ack=True)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(all_taken.wait(), timeout_s)
    await channel.basic_cancel(consume.consumer_tag)
    return ready, ids, without_id


@dataclass
class Accounting:
    """Where the messages of one case ended."""

    shape: Shape
    expected: int
    handled_once: int = 0
    handled_again: int = 0
    """Deliveries of an id the handler had already seen (a message handled twice)."""
    left: int = 0
    """Messages still in the consumed queue once the case's connection was closed."""
    dead: int = 0
    dead_duplicates: int = 0
    lost: int = 0
    duplicates: int = 0
    unexpected: int = 0
    """Messages without an id, or with one this case never published."""
    consumers: int = 0
    """Consumers still on the consumed queue when the checks ran."""
    outputs_expected: int = 0
    """--outputs: the output ids the case had to publish (N per message)."""
    outputs_held: int = 0
    """Messages in the output queue afterwards."""
    outputs_missing: int = 0
    outputs_duplicates: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def describe(self) -> str:
        parts = [f"expected {self.expected}", f"handled {self.handled_once}"]
        if self.handled_again:
            parts[-1] += f" (+{self.handled_again} again)"
        if self.shape == "retry":
            parts.append(f"dead-letter queue {self.dead} ({self.dead_duplicates} duplicate)")
        if self.shape == "outputs":
            parts.append(
                f"outputs {self.outputs_held} of {self.outputs_expected} "
                f"({self.outputs_missing} missing, {self.outputs_duplicates} duplicate)"
            )
        parts += [f"left in queue {self.left}", f"lost {self.lost}"]
        parts.append(f"duplicated {self.duplicates}")
        if self.unexpected:
            parts.append(f"unexpected {self.unexpected}")
        if self.consumers:
            parts.append(f"{self.consumers} consumer(s) still attached")
        return ", ".join(parts)


async def account(
    url: str, shape: Shape, queue: str, ids: list[str], tally: Tally, outputs: int = 0
) -> Accounting:
    """Count, by message id, where every message of the case ended (after the case closed);
    ``outputs``: the outputs each message had to publish (the "outputs" shape)."""
    expected = set(ids)
    result = Accounting(shape=shape, expected=len(ids))
    held_outputs: tuple[int, Counter[str], int] = (0, Counter(), 0)
    connection = await aiormq.connect(url)
    try:
        channel = await connection.channel()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + CLOSE_TIMEOUT_S
        while True:  # the broker lets go of a closed connection's consumer (and requeues)
            result.consumers = (
                await channel.queue_declare(queue, passive=True)
            ).consumer_count or 0
            if not result.consumers or loop.time() > deadline:
                break
            await asyncio.sleep(0.05)
        ready, left, left_without_id = await drain(channel, queue, CHECK_TIMEOUT_S / 3)
        dead: Counter[str] = Counter()
        dead_without_id = 0
        dead_count = 0
        if shape == "retry":
            # A quorum queue dead-letters at least once, in the background: its dead letters
            # keep arriving after the case ended. Drain until every id is accounted for, or
            # none came for DEAD_LETTERS_IDLE_S.
            quiet_since = loop.time()
            while loop.time() - quiet_since < DEAD_LETTERS_IDLE_S:
                count, more, more_without_id = await drain(
                    channel, f"{queue}.dead", CHECK_TIMEOUT_S / 3
                )
                dead_count += count
                dead += more
                dead_without_id += more_without_id
                if not expected - dead.keys() - left.keys():
                    break
                if count:
                    quiet_since = loop.time()
                else:
                    await asyncio.sleep(0.1)
        if shape == "outputs":  # confirmed before their original's ack: all there by now
            held_outputs = await drain(channel, f"{queue}.out", CHECK_TIMEOUT_S / 3)
    finally:
        await close_quietly(connection)

    handled = tally.handled
    result.handled_once = len(handled.keys() & expected)
    result.handled_again = sum(times - 1 for times in handled.values())
    result.left = max(ready, left.total() + left_without_id)
    result.unexpected = (
        tally.without_id
        + left_without_id
        + dead_without_id
        + len((handled.keys() | left.keys() | dead.keys()) - expected)
    )
    if shape != "retry":
        # A handled (and acked) message is done; an unacked one is back in ``left``.
        result.lost = len(expected - handled.keys() - left.keys())
        result.duplicates = result.handled_again
    else:
        result.dead = max(dead_count, dead.total() + dead_without_id)
        result.dead_duplicates = sum(times - 1 for times in dead.values())
        result.lost = len(expected - dead.keys() - left.keys())
        # A copy in the dead-letter queue whose original is still there: it comes again.
        result.duplicates = result.dead_duplicates + len(dead.keys() & left.keys())

    problems = result.problems
    if result.consumers:
        problems.append("consumer still attached")
    if result.left:
        problems.append("messages left behind")
    if result.lost:
        problems.append("messages lost")
    if result.duplicates:
        problems.append("messages duplicated")
    if result.handled_again:
        problems.append("messages handled twice")
    if result.unexpected:
        problems.append("unexpected messages")
    if result.handled_once != len(expected):
        problems.append("not every message reached the handler")
    if shape == "retry" and result.dead != len(expected):
        problems.append("wrong dead-letter count")
    if shape == "outputs":
        check_outputs(result, queue, ids, outputs, held_outputs)
    return result


def check_outputs(
    result: Accounting,
    queue: str,
    ids: list[str],
    outputs: int,
    held: tuple[int, Counter[str], int],
) -> None:
    """The output queue must hold each of the ``outputs`` output ids of every message in
    ``ids`` exactly once, and nothing else (rr's derived ids; the aiormq case uses the same)."""
    ready, held_ids, without_id = held
    expected = {output_id(queue, id_, index) for id_ in ids for index in range(outputs)}
    result.outputs_expected = len(expected)
    result.outputs_held = max(ready, held_ids.total() + without_id)
    result.outputs_missing = len(expected - held_ids.keys())
    result.outputs_duplicates = sum(times - 1 for times in held_ids.values())
    result.unexpected += without_id + len(held_ids.keys() - expected)
    if result.outputs_missing:
        result.problems.append("outputs lost")
    if result.outputs_duplicates:
        result.problems.append("outputs duplicated")
    if without_id or held_ids.keys() - expected:
        result.problems.append("unexpected outputs")


# ---------------------------------------------------------------- no-op shape


def aiormq_noop(batch: int) -> Case:
    """Raw aiormq consumer; acks every message (``batch == 1``) or every ``batch`` messages."""

    async def run(url: str, queue: str, prefetch: int, tally: Tally) -> float:
        connection = await aiormq.connect(url)
        try:
            channel = await connection.channel()
            await channel.basic_qos(prefetch_count=prefetch)
            done = asyncio.Event()
            unacked = 0
            writing = 0  # acks handed to aiormq and not written yet
            complete = False

            async def on_message(message: aiormq.abc.DeliveredMessage) -> None:
                # No await before the ack: deliveries run in delivery-tag order, so this tag
                # is the highest one so far and multiple=true covers exactly the handled ones.
                nonlocal unacked, writing, complete
                last = tally.saw(message.header.properties.message_id)
                unacked += 1
                if unacked >= batch or last:
                    unacked = 0
                    writing += 1
                    await channel.basic_ack(message.delivery_tag, multiple=batch > 1)
                    writing -= 1
                complete = complete or last
                if complete and not writing:  # an earlier ack may still wait to be written
                    done.set()

            started = time.perf_counter()
            await channel.basic_consume(queue, on_message)
            await done.wait()
            await channel.basic_qos(prefetch_count=prefetch)  # a round trip: acks processed
            return tally.expected / (time.perf_counter() - started)
        finally:
            await close_quietly(connection)

    return run


def rr_run(
    topology: str,
    outcome: Callable[[], object],
    timeout_s: float,
    client: ClientName,
    typed: Any = None,
    outputs: int | None = None,
    traced: bool = False,
) -> Case:
    """The `rr run` runtime, in process, with a handler returning ``outcome()``, connected
    with ``client`` (RR_AMQP_CLIENT's choices: aiormq or rr's own, native). ``typed``: the
    handler takes the body decoded into that type (``typed_handler``), not the Message.
    ``outputs``: the handler takes the Message and its ``Outputs``, and publishes that many
    outputs to ``<queue>.out`` (``outputs_handler``). ``traced``: with tracing on, an
    OpenTelemetry SDK tracer provider whose spans go nowhere (``traced_provider``)."""

    async def run(url: str, queue: str, prefetch: int, tally: Tally) -> float:
        done = asyncio.Event()

        async def by_message(msg: Message) -> object:
            if tally.saw(msg.message_id):
                done.set()
            return outcome()

        def saw(message_id: str) -> object:
            if tally.saw(message_id):
                done.set()
            return outcome()

        handler: Callable[..., Any] = by_message
        if typed is not None:
            handler = typed_handler(typed, saw)
        elif outputs is not None:
            handler = outputs_handler(outputs, f"{queue}.out", saw)

        async def connect() -> Connection:
            return await clients.connect(url, environ={clients.ENV: client})

        service = Service(
            HandlerSet(module="bench", subscribers=(Subscriber(queue, handler, "bench"),)),
            topology=load_text(topology.format(q=queue)),
            connect=connect,
            options=RunOptions(prefetch=prefetch, shutdown_timeout_s=timeout_s),
            tracer_provider=traced_provider() if traced else None,
        )
        task = asyncio.ensure_future(service.run())
        try:
            await until(service.wait_ready(), task)
            started = time.perf_counter()
            await until(done.wait(), task)
            service.stop()  # graceful: the last acks are flushed before the connection closes
            await task
            return tally.expected / (time.perf_counter() - started)
        finally:
            if not task.done():  # timed out or failed: drop the connection, bounded
                task.cancel()
                await asyncio.wait({task}, timeout=CLOSE_TIMEOUT_S)

    return run


@dataclass
class BenchBody:
    """The benchmark's body as a dataclass (``make_body``)."""

    id: str
    card: str
    note: str


def typed_kinds() -> dict[str, Any]:
    """Case label -> the type its handler takes (``None``: the Message); pydantic and
    msgspec only when installed."""
    kinds: dict[str, Any] = {"Message": None, "dataclass": BenchBody}
    if importlib.util.find_spec("pydantic") is not None:
        import pydantic

        kinds["pydantic"] = pydantic.create_model(
            "BenchModel", id=(str, ...), card=(str, ...), note=(str, ...)
        )
    if importlib.util.find_spec("msgspec") is not None:
        import msgspec

        kinds["msgspec"] = msgspec.defstruct(
            "BenchStruct", [("id", str), ("card", str), ("note", str)]
        )
    kinds["dict"] = dict[str, Any]
    return kinds


def typed_handler(kind: Any, saw: Callable[[str], object]) -> Callable[..., Any]:
    """A no-op handler whose first parameter is annotated ``kind`` (set on the function, so
    rr reads the type itself, not a name)."""

    async def handler(body: Any) -> object:
        return saw(body["id"] if isinstance(body, dict) else body.id)

    handler.__annotations__ = {"body": kind, "return": object}
    return handler


def outputs_handler(
    outputs: int, target: str, saw: Callable[[str], object]
) -> Callable[[Message, Outputs], Awaitable[object]]:
    """A handler that publishes ``outputs`` copies of the body to queue ``target`` through
    its ``Outputs`` (rr gives them their ids: ``output_id``), then returns ``saw``'s outcome."""

    async def handler(msg: Message, out: Outputs) -> object:
        body = msg.body
        for _ in range(outputs):
            out.publish(body, to=target, content_type="application/json")
        return saw(msg.message_id or "")

    return handler


def decode_costs(kinds: dict[str, Any], rounds: int = 50_000) -> dict[str, float]:
    """Microseconds to build one handler call's arguments from one delivery of the benchmark
    body (rr's ``invocation_for``, as the consumer does), best of 5 runs of ``rounds``."""
    from rabbitctl_retry.runtime.invocation import invocation_for
    from rabbitctl_retry.transport.base import Delivery, Properties

    message = Message(
        Delivery(
            body=make_body("bench-1"),
            properties=Properties(content_type="application/json", message_id="bench-1"),
        ),
        "bench",
    )
    costs: dict[str, float] = {}
    for label, kind in kinds.items():

        async def plain(msg: Message) -> None: ...

        handler = plain if kind is None else typed_handler(kind, lambda _: None)
        arguments = invocation_for(handler, name=f"bench:{label}").arguments
        best = float("inf")
        for _ in range(5):
            started = time.perf_counter()
            for _ in range(rounds):
                arguments(message)
            best = min(best, (time.perf_counter() - started) / rounds)
        costs[label] = best * 1e6
    return costs


async def until(awaitable: Awaitable[Any], task: asyncio.Future[None]) -> None:
    """Await ``awaitable``; if ``task`` (the service) ends first, raise its error instead."""
    waiter = asyncio.ensure_future(awaitable)
    try:
        finished, _ = await asyncio.wait({waiter, task}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        if not waiter.done():
            waiter.cancel()
    if waiter in finished:
        waiter.result()
        return
    task.result()
    raise RuntimeError("rr run returned before every message was handled")


async def faststream_noop(url: str, queue: str, prefetch: int, tally: Tally) -> float:
    from faststream.rabbit import Channel, RabbitBroker, RabbitQueue

    broker = RabbitBroker(
        url,
        logger=None,
        log_level=logging.CRITICAL,
        default_channel=Channel(prefetch_count=prefetch),
    )
    done = asyncio.Event()

    # The id is read from the body: FastStream's Context("message") would cost it ~40%.
    @broker.subscriber(RabbitQueue(queue, durable=True))
    async def handle(body: dict[str, object]) -> None:
        if tally.saw(str(body["id"])):
            done.set()

    stopped = False
    try:
        await broker.connect()
        started = time.perf_counter()
        await broker.start()
        await done.wait()
        await broker.stop()
        stopped = True
        return tally.expected / (time.perf_counter() - started)
    finally:
        if not stopped:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(broker.stop(), CLOSE_TIMEOUT_S)


# ---------------------------------------------------------------- retry shape


Copies = Callable[[str, spec.Basic.Properties], list[tuple[str, spec.Basic.Properties]]]
"""(queue, a delivery's properties) -> what to publish for it: (routing key, properties)."""


def dead_letter_copy(
    queue: str, properties: spec.Basic.Properties
) -> list[tuple[str, spec.Basic.Properties]]:
    """The retry path: one copy to ``<queue>.dead``, as rr's last attempt makes it."""
    copied = spec.Basic.Properties(
        delivery_mode=2,
        content_type=properties.content_type,
        message_id=properties.message_id,
        headers={"x-ruststream-retry-count": "1"},
    )
    return [(f"{queue}.dead", copied)]


def output_copies(outputs: int) -> Copies:
    """--outputs: ``outputs`` copies to ``<queue>.out`` with rr's ids and properties for a
    handler's outputs (``output_id``; runtime/outgoing.py)."""

    def copies(
        queue: str, properties: spec.Basic.Properties
    ) -> list[tuple[str, spec.Basic.Properties]]:
        now = datetime.now(UTC).replace(microsecond=0)
        return [
            (
                f"{queue}.out",
                spec.Basic.Properties(
                    delivery_mode=2,
                    content_type="application/json",
                    message_id=output_id(queue, properties.message_id, index),
                    timestamp=now,
                ),
            )
            for index in range(outputs)
        ]

    return copies


def aiormq_retry(batch: int, copies: Copies = dead_letter_copy) -> Case:
    """Raw aiormq: the confirmed ``copies`` of each message (one to ``<queue>.dead`` on the
    retry path, the outputs with --outputs; all published at once, every confirm awaited),
    then the ack of the original, one by one (``batch == 1``) or with multiple=true for each
    ``batch`` more confirmed originals."""

    async def run(url: str, queue: str, prefetch: int, tally: Tally) -> float:
        connection = await aiormq.connect(url)
        try:
            consume = await connection.channel()
            confirm = await connection.channel(publisher_confirms=True)
            await consume.basic_qos(prefetch_count=prefetch)
            done = asyncio.Event()
            confirmed: set[int] = set()
            settled = 0  # every delivery tag up to this one has a confirmed copy
            acked = 0  # every delivery tag up to this one is acked
            writing = 0  # acks handed to aiormq and not written yet
            complete = False

            async def on_message(message: aiormq.abc.DeliveredMessage) -> None:
                nonlocal settled, acked, writing, complete
                properties = message.header.properties
                published = [
                    confirm.basic_publish(
                        message.body, routing_key=key, properties=copied, mandatory=True
                    )
                    for key, copied in copies(queue, properties)
                ]
                if len(published) == 1:  # the retry path: no gather for one
                    confirmations = [await published[0]]
                else:
                    confirmations = await asyncio.gather(*published)
                if not all(isinstance(answer, spec.Basic.Ack) for answer in confirmations):
                    return  # not confirmed: the original stays unacked (the checks say so)
                last = tally.saw(properties.message_id)
                writing += 1
                if batch == 1:
                    await consume.basic_ack(message.delivery_tag)
                else:
                    confirmed.add(message.delivery_tag)
                    while settled + 1 in confirmed:
                        settled += 1
                        confirmed.remove(settled)
                    if settled > acked and (settled - acked >= batch or settled == tally.expected):
                        acked = settled
                        await consume.basic_ack(settled, multiple=True)
                writing -= 1
                complete = complete or last
                if complete and not writing and (batch == 1 or acked == tally.expected):
                    done.set()  # every ack written (an earlier one may wait to be)

            started = time.perf_counter()
            await consume.basic_consume(queue, on_message)
            await done.wait()
            await consume.basic_qos(prefetch_count=prefetch)  # a round trip: acks processed
            return tally.expected / (time.perf_counter() - started)
        finally:
            await close_quietly(connection)

    return run


# ---------------------------------------------------------------- the ceiling


def wire_noop(batch: int) -> Case:
    """Raw pamqp over a socket (benchmarks/wire.py): consume, ack every ``batch``."""

    async def run(url: str, queue: str, prefetch: int, tally: Tally) -> float:
        result = await asyncio.to_thread(
            wire.consume_and_ack, url, queue, tally.expected, prefetch, batch
        )
        tally.saw_all(result.ids)
        return result.rate

    return run


def wire_retry(batch: int) -> Case:
    """Raw pamqp over a socket: a confirmed copy to ``<queue>.dead`` each, batched acks."""

    async def run(url: str, queue: str, prefetch: int, tally: Tally) -> float:
        result = await asyncio.to_thread(
            wire.consume_copy_and_ack,
            url,
            queue,
            f"{queue}.dead",
            tally.expected,
            prefetch,
            batch,
            {"x-ruststream-retry-count": "1"},
        )
        tally.saw_all(result.ids)
        return result.rate

    return run


# ---------------------------------------------------------------- runner

NOOP_1ACK = "no-op aiormq (1 ack/msg)"
NOOP_BATCHED = "no-op aiormq (batched acks)"
NOOP_FASTSTREAM = "no-op faststream"
RETRY_1ACK = "retry aiormq (confirm, 1 ack/msg)"
RETRY_BATCHED = "retry aiormq (confirm, batched acks)"
NOOP_CEILING = "no-op ceiling (pamqp, socket)"
RETRY_CEILING = "retry ceiling (pamqp, socket)"
REFERENCES: dict[Shape, tuple[str, str, str]] = {
    "noop": (NOOP_1ACK, NOOP_BATCHED, NOOP_CEILING),
    "retry": (RETRY_1ACK, RETRY_BATCHED, RETRY_CEILING),
}
QueueType = Literal["classic", "quorum"]


def topology(shape: Shape, queue_type: QueueType) -> str:
    """The case's topology, ``{q}`` standing for the queue's name."""
    text = f'[queues.{{q}}]\ntype = "{queue_type}"\n'
    if shape == "retry":
        text += 'max_attempts = 1\ndead_letter = "{q}.dead"\n'
    if shape == "outputs":
        text += '\n[queues."{q}.out"]\ntype = "classic"\n'
    return text


@dataclass(frozen=True)
class Entry:
    name: str
    shape: Shape
    run: Case | None
    """``None``: not installed."""
    outputs: int = 0
    """The outputs each message publishes (the "outputs" shape)."""


def typed_cases(timeout_s: float, queue_type: QueueType) -> list[Entry]:
    """--typed: the no-op rr run case with a handler taking each kind of type."""
    noop_topology = topology("noop", queue_type)
    return [
        Entry(
            f"no-op rr run {label} (native)",
            "noop",
            rr_run(noop_topology, lambda: None, timeout_s, "native", typed=kind),
        )
        for label, kind in typed_kinds().items()
    ]


def outputs_rr(outputs: int) -> str:
    return f"outputs {outputs} rr run (native)"


def outputs_aiormq(outputs: int) -> str:
    return f"outputs {outputs} aiormq (confirm, batched)"


def output_cases(
    timeout_s: float, prefetch: int, queue_type: QueueType, counts: list[int]
) -> list[Entry]:
    """--outputs: for each count of outputs per message, rr run and aiormq doing it by hand."""
    text = topology("outputs", queue_type)
    batch = min(BATCH, prefetch)
    entries: list[Entry] = []
    for outputs in counts:
        entries += [
            Entry(
                outputs_aiormq(outputs),
                "outputs",
                aiormq_retry(batch, output_copies(outputs)),
                outputs,
            ),
            Entry(
                outputs_rr(outputs),
                "outputs",
                rr_run(text, lambda: None, timeout_s, "native", outputs=outputs),
                outputs,
            ),
        ]
    return entries


def traced_provider() -> object:
    """An OpenTelemetry SDK tracer provider that records every span and exports none (the
    cost of rr's spans and propagation, not of an exporter: docs/reference/runtime.md, "Tracing and
    metrics")."""
    from opentelemetry.sdk.trace import TracerProvider

    return TracerProvider()


def traced_cases(timeout_s: float, queue_type: QueueType) -> list[Entry]:
    """--tracing: rr run (native) without and with tracing, no-op and retry path."""
    noop_topology = topology("noop", queue_type)
    retry_topology = topology("retry", queue_type)
    return [
        Entry("no-op rr run", "noop", rr_run(noop_topology, lambda: None, timeout_s, "native")),
        Entry(
            "no-op rr run traced",
            "noop",
            rr_run(noop_topology, lambda: None, timeout_s, "native", traced=True),
        ),
        Entry("retry rr run", "retry", rr_run(retry_topology, Outcome.retry, timeout_s, "native")),
        Entry(
            "retry rr run traced",
            "retry",
            rr_run(retry_topology, Outcome.retry, timeout_s, "native", traced=True),
        ),
    ]


def cases(timeout_s: float, prefetch: int, queue_type: QueueType) -> list[Entry]:
    noop_topology = topology("noop", queue_type)
    retry_topology = topology("retry", queue_type)
    batch = min(BATCH, prefetch)  # more unacked than the prefetch would never come
    has_faststream = importlib.util.find_spec("faststream") is not None
    return [
        Entry(NOOP_1ACK, "noop", aiormq_noop(1)),
        Entry(NOOP_BATCHED, "noop", aiormq_noop(batch)),
        Entry(
            "no-op rr run (aiormq)",
            "noop",
            rr_run(noop_topology, lambda: None, timeout_s, "aiormq"),
        ),
        Entry(
            "no-op rr run (native)",
            "noop",
            rr_run(noop_topology, lambda: None, timeout_s, "native"),
        ),
        Entry(NOOP_FASTSTREAM, "noop", faststream_noop if has_faststream else None),
        Entry(NOOP_CEILING, "noop", wire_noop(batch)),
        Entry(RETRY_1ACK, "retry", aiormq_retry(1)),
        Entry(RETRY_BATCHED, "retry", aiormq_retry(batch)),
        Entry(
            "retry rr run (aiormq)",
            "retry",
            rr_run(retry_topology, Outcome.retry, timeout_s, "aiormq"),
        ),
        Entry(
            "retry rr run (native)",
            "retry",
            rr_run(retry_topology, Outcome.retry, timeout_s, "native"),
        ),
        Entry(RETRY_CEILING, "retry", wire_retry(batch)),
    ]


async def run_case(
    url: str, case: Entry, count: int, prefetch: int, timeout_s: float, queue_type: QueueType
) -> tuple[float | None, str | None]:
    """One case on fresh queues: (its rate, None) or (None, why it failed)."""
    assert case.run is not None
    token = uuid.uuid4().hex[:8]
    queue = f"rr-bench-{token}"
    dead = f"{queue}.dead"
    ids = [f"{token}-{n}" for n in range(count)]
    tally = Tally(count)
    failure: str | None = None
    rate: float | None = None
    try:
        arguments = queue_arguments(topology(case.shape, queue_type).format(q=queue))
        await asyncio.wait_for(preload(url, queue, ids, arguments), timeout_s)
        started = time.perf_counter()
        try:
            rate = await asyncio.wait_for(case.run(url, queue, prefetch, tally), timeout_s)
        except TimeoutError:
            if time.perf_counter() - started < timeout_s:
                raise
            failure = f"timed out after {timeout_s:g} s"
        try:
            accounting = await asyncio.wait_for(
                account(url, case.shape, queue, ids, tally, case.outputs), CHECK_TIMEOUT_S
            )
        except Exception as error:
            return None, f"{failure or 'ran'}; the checks failed: {error!r}"
        if failure is None and accounting.ok:
            return rate, None
        reasons = ([failure] if failure else []) + accounting.problems
        return None, f"{'; '.join(reasons)}: {accounting.describe()}"
    except Exception as error:
        return None, f"raised {type(error).__name__}: {error}"
    finally:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(delete(url, queue, dead, f"{queue}.out"), CLOSE_TIMEOUT_S)


def rotated(items: list[Entry], by: int) -> list[Entry]:
    by %= len(items)
    return items[by:] + items[:by]


def median_ratio(rounds: Iterable[dict[str, float | None]], name: str, reference: str) -> str:
    ratios = [
        rates[name] / rates[reference]  # type: ignore[operator]
        for rates in rounds
        if rates.get(name) is not None and rates.get(reference) is not None
    ]
    return f"{statistics.median(ratios):.2f}" if ratios else "-"


def table(specs: list[Entry], measured: list[dict[str, float | None]]) -> None:
    runnable = [case for case in specs if case.run is not None]
    print(
        f"{'case':36} {'msg/s (median)':>15} {'x aiormq 1-ack':>15} "
        f"{'x aiormq batched':>17} {'x faststream':>13} {'x ceiling':>10}  checks"
    )
    for case in specs:
        if case.run is None:
            print(f"{case.name:36} {'not installed':>15}")
            continue
        rates_ok = [rates[case.name] for rates in measured if rates[case.name] is not None]
        failed = len(measured) - len(rates_ok)
        checks = f"{len(measured)}/{len(measured)} ok" if not failed else f"FAILED {failed}"
        if failed:
            checks += f"/{len(measured)}"
            print(f"{case.name:36} {'FAILED':>15} {'':>15} {'':>17} {'':>13} {'':>10}  {checks}")
            continue
        one_ack, batched, ceiling = REFERENCES[case.shape]
        versus_fs = ""
        if case.shape == "noop" and any(entry.name == NOOP_FASTSTREAM for entry in runnable):
            versus_fs = median_ratio(measured, case.name, NOOP_FASTSTREAM)
        print(
            f"{case.name:36} {statistics.median(rates_ok):15,.0f} "  # type: ignore[type-var]
            f"{median_ratio(measured, case.name, one_ack):>15} "
            f"{median_ratio(measured, case.name, batched):>17} {versus_fs:>13} "
            f"{median_ratio(measured, case.name, ceiling):>10}  {checks}"
        )
    print(
        "x aiormq 1-ack / batched / faststream / ceiling: median of the per-round ratios to "
        "that case of the same shape; each round's rates: "
    )
    print_rounds(measured)


def print_rounds(measured: list[dict[str, float | None]]) -> None:
    for number, rates in enumerate(measured, 1):
        shown = ", ".join(f"{name} {rate:,.0f}" for name, rate in rates.items() if rate)
        print(f"  round {number}: {shown}")


async def measure(
    args: argparse.Namespace, queue_type: QueueType, timeout_s: float, failures: list[str]
) -> None:
    """Every case on ``queue_type`` queues, warm-up and measured rounds; then its table."""
    if args.typed:
        specs = typed_cases(timeout_s, queue_type)
    elif args.outputs:
        specs = output_cases(timeout_s, args.prefetch, queue_type, args.outputs)
    elif args.tracing:
        specs = traced_cases(timeout_s, queue_type)
    else:
        specs = cases(timeout_s, args.prefetch, queue_type)
    runnable = [case for case in specs if case.run is not None]
    print(f"\n{queue_type} queues", flush=True)
    measured: list[dict[str, float | None]] = []
    for index in range(args.warmup + args.rounds):
        warmup = index < args.warmup
        label = "warm-up" if warmup else f"round {index - args.warmup + 1}/{args.rounds}"
        rates: dict[str, float | None] = {}
        for case in rotated(runnable, index):
            rate, failure = await run_case(
                args.url, case, args.messages, args.prefetch, timeout_s, queue_type
            )
            rates[case.name] = rate
            if failure is None:
                print(f"  {label:>11}  {case.name:36} {rate:>10,.0f} msg/s  ok", flush=True)
            else:
                line = f"FAILED {queue_type} {label}: {case.name}: {failure}"
                failures.append(line)
                print(line, flush=True)
        if not warmup:
            measured.append(rates)
    print()
    if args.outputs:
        outputs_table(args.outputs, measured)
        return
    if args.tracing:
        traced_table(measured)
        return
    table(specs, measured)
    if args.typed:
        typed_table(specs, measured)


def traced_table(measured: list[dict[str, float | None]]) -> None:
    """--tracing: each shape's median rates without and with tracing, their ratio and what
    tracing adds per message."""
    print(f"{'shape':8} {'off msg/s':>11} {'on msg/s':>10} {'on / off':>9} {'us/msg added':>13}")
    for shape in ("no-op", "retry"):
        off = median_rate(measured, f"{shape} rr run")
        on = median_rate(measured, f"{shape} rr run traced")
        if off is None or on is None:
            print(f"{shape:8} {'FAILED':>11}")
            continue
        ratio = median_ratio(measured, f"{shape} rr run traced", f"{shape} rr run")
        added_us = (1 / on - 1 / off) * 1e6
        print(f"{shape:8} {off:11,.0f} {on:10,.0f} {ratio:>9} {added_us:13.2f}")
    print("on / off: median of the per-round ratios; us/msg added: 1/rate on less 1/rate off")


def median_rate(measured: list[dict[str, float | None]], name: str) -> float | None:
    """The median of a case's rates, ``None`` when a round failed it."""
    rates = [rates[name] for rates in measured if rates.get(name)]
    if len(rates) < len(measured):
        return None
    return statistics.median(rates)  # type: ignore[type-var]


def per_output_us(rate: float | None, base: float | None, outputs: int) -> str:
    """Microseconds one output adds: (1/rate less 1/base) / outputs."""
    if rate is None or base is None or outputs == 0:
        return "-"
    return f"{(1 / rate - 1 / base) / outputs * 1e6:.1f}"


def outputs_table(counts: list[int], measured: list[dict[str, float | None]]) -> None:
    """--outputs: per count, both cases' median rates, rr's ratio, the time per message and
    what each output adds to it against no output."""
    print(
        f"{'outputs':>7} {'rr msg/s':>10} {'aiormq msg/s':>13} {'x aiormq':>9} "
        f"{'rr outputs/s':>13} {'rr us/msg':>10} {'rr us/output':>13} {'aiormq us/output':>17}"
    )
    rr_base = median_rate(measured, outputs_rr(0))
    aiormq_base = median_rate(measured, outputs_aiormq(0))
    for outputs in counts:
        rr = median_rate(measured, outputs_rr(outputs))
        by_hand = median_rate(measured, outputs_aiormq(outputs))
        shown = [f"{rate:,.0f}" if rate else "FAILED" for rate in (rr, by_hand)]
        ratio = median_ratio(measured, outputs_rr(outputs), outputs_aiormq(outputs))
        print(
            f"{outputs:>7} {shown[0]:>10} {shown[1]:>13} {ratio:>9} "
            f"{(rr or 0) * outputs:>13,.0f} {(1e6 / rr if rr else 0):>10.1f} "
            f"{per_output_us(rr, rr_base, outputs):>13} "
            f"{per_output_us(by_hand, aiormq_base, outputs):>17}"
        )
    print(
        "x aiormq: median of the per-round ratios; us/output: (1/rate less 1/rate with 0 "
        "outputs) / outputs, from the median rates; each round's rates:"
    )
    print_rounds(measured)


def typed_table(specs: list[Entry], measured: list[dict[str, float | None]]) -> None:
    """--typed: each kind's median rate, what it costs per message against the Message case
    (from the rates), and its decode cost measured in a loop without the broker."""
    costs = decode_costs(typed_kinds())
    base = next(case.name for case in specs if " Message " in case.name)
    print(
        f"\n{'handler takes':12} {'msg/s (median)':>15} {'us/msg vs Message':>18} "
        f"{'arguments us/msg':>17} {'decode us/msg':>14}"
    )
    for case, (label, cost) in zip(specs, costs.items(), strict=True):
        rates = [rates[case.name] for rates in measured if rates[case.name]]
        bases = [rates[base] for rates in measured if rates[base]]
        decode = cost - costs["Message"]
        if len(rates) < len(measured) or not bases:
            print(f"{label:12} {'FAILED':>15} {'':>18} {cost:17.2f} {decode:14.2f}")
            continue
        rate, base_rate = statistics.median(rates), statistics.median(bases)  # type: ignore[type-var]
        extra = (1 / rate - 1 / base_rate) * 1e6  # type: ignore[operator]
        print(f"{label:12} {rate:15,.0f} {extra:18.2f} {cost:17.2f} {decode:14.2f}")
    print(
        "us/msg vs Message: 1/rate less the Message case's (noisy: the broker dominates); "
        "arguments: one handler call's arguments built from one delivery, in a loop; decode: "
        "that less the Message case's"
    )


async def main(args: argparse.Namespace) -> int:
    timeout_s = args.timeout or max(30.0, args.messages * 0.002)
    logging.getLogger("rr").setLevel(logging.ERROR)  # no line per dead-lettered message
    loop = type(asyncio.get_running_loop())
    print(
        f"{args.messages} messages, prefetch {args.prefetch}, {args.warmup} warm-up + "
        f"{args.rounds} measured rounds (case order rotated each round), "
        f"timeout {timeout_s:g} s per case; durable queues, persistent 200-byte bodies; "
        f"batched acks: basic.ack(multiple=true) every {min(BATCH, args.prefetch)} messages; "
        f"event loop {loop.__module__}.{loop.__name__}",
        flush=True,
    )
    failures: list[str] = []
    for queue_type in args.queue_types:
        await measure(args, queue_type, timeout_s, failures)
    print()
    if failures:
        print(f"FAILED: {len(failures)} case run(s) did not account for every message:")
        for line in failures:
            print(f"  {line}")
        return 1
    print("checks: in every round every message ended where it should, once")
    return 0


def output_counts(text: str) -> list[int]:
    """``--outputs 1,3`` as [0, 1, 3]: the counts given, and 0, the reference."""
    try:
        counts = {int(part) for part in text.split(",") if part.strip()}
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of numbers: {text!r}") from None
    if any(count < 0 for count in counts):
        raise argparse.ArgumentTypeError("a count of outputs is 0 or more")
    return sorted(counts | {0})


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--prefetch", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=3, help="measured rounds")
    parser.add_argument("--warmup", type=int, default=1, help="rounds run first, not counted")
    parser.add_argument(
        "--queue-types",
        default="classic,quorum",
        type=lambda text: [part.strip() for part in text.split(",") if part.strip()],
        help="comma-separated: classic, quorum (default: both, one after the other)",
    )
    parser.add_argument("--loop", choices=("asyncio", "uvloop"), default="asyncio")
    parser.add_argument(
        "--timeout",
        type=float,
        default=None,
        help="seconds one case may take (default: 30, or 2 ms per message if more)",
    )
    parser.add_argument("--url", default="amqp://guest:guest@127.0.0.1:5672/")
    parser.add_argument(
        "--typed",
        action="store_true",
        help="no-op handlers taking the Message, a dataclass, a pydantic model, a msgspec "
        "Struct, a dict; with the per-message decode cost (docs/reference/handlers.md)",
    )
    parser.add_argument(
        "--outputs",
        type=output_counts,
        default=None,
        metavar="N[,N...]",
        help="handlers that ack and publish N outputs per message (0 always runs too), rr "
        "run against aiormq doing it by hand, with the cost per output (docs/reference/runtime.md)",
    )
    parser.add_argument(
        "--tracing",
        action="store_true",
        help="rr run without and with OpenTelemetry tracing (an SDK provider, no exporter), "
        'no-op and retry path (docs/reference/runtime.md, "Tracing and metrics")',
    )
    args = parser.parse_args()
    if sum(map(bool, (args.typed, args.outputs, args.tracing))) > 1:
        parser.error("--typed, --outputs and --tracing are separate runs: give one")
    if args.messages < 1 or args.rounds < 1 or args.warmup < 0 or args.prefetch < 1:
        parser.error("--messages, --rounds and --prefetch must be positive, --warmup >= 0")
    if not args.queue_types or set(args.queue_types) - {"classic", "quorum"}:
        parser.error("--queue-types takes classic, quorum or both")
    return args


if __name__ == "__main__":
    options = arguments()
    if options.loop == "uvloop":
        import uvloop

        sys.exit(uvloop.run(main(options)))
    sys.exit(asyncio.run(main(options)))
