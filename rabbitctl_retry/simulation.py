"""``rr simulate``: the same run on the built-in emulator, on a virtual clock, as a timeline.

The topology is declared on an emulated RabbitMQ exactly as ``rr declare`` would, the
handlers run in the ``rr run`` runtime unchanged, the given messages are published, and the
virtual clock moves from one due timer (a TTL expiry, a delayed message, an in-memory retry)
to the next until nothing is left to happen or the horizon is reached. Each step becomes a
row: virtual time, queue, event, attempt and the headers that matter; a handler's outputs,
once confirmed, are rows of their own (``output``) right under the ack of the delivery that
published them.

A run can never hang (docs/reference/runtime.md, "rr simulate"): a message that goes back to its
queue at once, again and again (a handler that fails on a queue without ``max_attempts``), keeps
the clock from moving, so the run stops once one message was handled
:data:`MAX_HANDLINGS_PER_INSTANT` times at one virtual instant, or after
:data:`MAX_HANDLINGS` handlings in all, with :class:`SimulationLooped` naming the queue and
the message. A handler call that has not returned after :data:`HANDLER_TIMEOUT_S` seconds of
real time stops it too (the virtual clock cannot move while a handler runs, and what a
handler awaits in a simulation may never come): :class:`SimulationLooped` names the handler,
the queue and the message.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import time
from collections import Counter
from collections.abc import Coroutine, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from rabbitctl_retry.emulator.events import DeadLettered, Dropped, Published, Returned
from rabbitctl_retry.errors import RrError
from rabbitctl_retry.retry.policy import Decision
from rabbitctl_retry.runtime import handler_context
from rabbitctl_retry.runtime.handlers import Subscriber
from rabbitctl_retry.runtime.loader import HandlerSet
from rabbitctl_retry.runtime.outgoing import Outgoing
from rabbitctl_retry.testing import TestBroker, release_for
from rabbitctl_retry.timeline import carried_text, counts_of
from rabbitctl_retry.topology.model import Topology
from rabbitctl_retry.transport.base import Delivery, Properties


@dataclass(frozen=True, slots=True)
class TimelineRow:
    time_s: float
    """Virtual seconds since the simulation started."""
    queue: str
    event: str
    attempt: int | None = None
    retry_count: int | None = None
    delivery_count: int | None = None
    detail: str = ""
    message_id: str | None = None
    carried_retry_count: int | None = None
    """A dead letter's retry header: the attempts of ``origin_queue``, not of ``queue``
    (docs/explanation/attempts.md, "Attempts"); never in ``retry_count``."""
    origin_queue: str | None = None
    output: OutputOrigin | None = None
    """An ``output`` row's: what published it and where it went (``queue`` is where it
    went: the queue, or the exchange)."""


@dataclass(frozen=True, slots=True)
class OutputOrigin:
    """Where a handler's output went, and the delivery whose handler published it."""

    exchange: str
    routing_key: str
    from_queue: str
    from_message_id: str | None


@dataclass(frozen=True, slots=True)
class Publish:
    """One message to publish: ``body`` to ``queue``, as JSON or as text, with its id (None:
    ``m`` and its place among the messages, ``m1``, ``m2``, ...)."""

    queue: str
    body: bytes
    is_json: bool
    message_id: str | None = None


@dataclass(slots=True)
class Simulation:
    rows: list[TimelineRow] = field(default_factory=list)
    queues: dict[str, int] = field(default_factory=dict)
    """Messages left in each queue at the end."""
    elapsed_s: float = 0.0
    """The virtual time simulated: until nothing was left to happen, else ``--for``."""
    last_event_s: float = 0.0
    """The virtual time of the last row."""
    finished: bool = False
    """Nothing was left to happen (no timer due) when the run ended."""


MAX_HANDLINGS_PER_INSTANT = 1000
"""One message handled this many times with the clock standing still: it loops."""
MAX_HANDLINGS = 1_000_000
"""Handlings in one run, all messages together."""


HANDLER_TIMEOUT_S = 30.0
"""Real seconds a handler call may take before the run stops."""


@dataclass(frozen=True, slots=True)
class _Call:
    started_s: float
    """``time.monotonic()`` when it started."""
    subscriber: Subscriber
    message_id: str | None
    task: asyncio.Future[Any] | None
    """An async handler's own task (cancelled when the run stops); None for a sync one."""


class HandlerWatch:
    """The handler calls under way, to stop a run on one that never returns."""

    def __init__(self) -> None:
        self._calls: dict[int, _Call] = {}
        self._keys = itertools.count()
        self._refusing = False

    @property
    def threads_running(self) -> int:
        """Sync handler calls still running (Python cannot stop their threads)."""
        return sum(1 for call in list(self._calls.values()) if call.task is None)

    def watched(self, handlers: HandlerSet) -> HandlerSet:
        return replace(handlers, subscribers=tuple(map(self._watched, handlers.subscribers)))

    def _watched(self, item: Subscriber) -> Subscriber:
        handler, calls, keys = item.handler, self._calls, self._keys
        if item.is_async:

            async def call_async(*arguments: Any) -> Any:
                self._refuse_when_stopped()
                key = next(keys)
                task = asyncio.ensure_future(handler(*arguments))  # type: ignore[arg-type]
                calls[key] = _Call(time.monotonic(), item, _message_id(), task)
                try:
                    return await task
                finally:
                    calls.pop(key, None)

            return replace(item, handler=call_async)

        def call_sync(*arguments: Any) -> Any:
            self._refuse_when_stopped()
            key = next(keys)
            calls[key] = _Call(time.monotonic(), item, _message_id(), None)
            try:
                return handler(*arguments)
            finally:
                calls.pop(key, None)

        return replace(item, handler=call_sync)

    def overdue(self, timeout_s: float) -> str | None:
        """Why the run must stop, if a call has run longer than ``timeout_s``."""
        now_s = time.monotonic()
        for call in list(self._calls.values()):
            if now_s - call.started_s > timeout_s:
                shown = repr(call.message_id) if call.message_id is not None else "(no id)"
                return (
                    f"handler {call.subscriber.name} has not returned for message {shown} on "
                    f"queue {call.subscriber.queue!r} after {timeout_s:g} s of real time: the "
                    "virtual clock cannot move while it runs (what does it wait for?)"
                )
        return None

    def stop(self) -> None:
        """The run stops on a call that never returns: cancel the async calls under way (a
        sync one cannot be stopped), and let no handler start again."""
        self._refusing = True
        for call in list(self._calls.values()):
            if call.task is not None:
                call.task.cancel()

    def _refuse_when_stopped(self) -> None:
        if self._refusing:
            raise RuntimeError("rr simulate stopped: no handler runs any more")


def _message_id() -> str | None:
    """The message id of the delivery whose handler call this is."""
    call = handler_context.current.get()
    return call.message_id if call is not None else None


class SimulationLooped(RrError):
    """The run was stopped: a message loops at one virtual instant, or too much happened.
    Carries the timeline so far (exit 1)."""

    def __init__(self, message: str, partial: Simulation) -> None:
        super().__init__(message)
        self.partial = partial


@dataclass(slots=True)
class LoopGuard:
    """Counts handlings; says why the run must stop, or None (pure)."""

    per_instant: int = MAX_HANDLINGS_PER_INSTANT
    total: int = MAX_HANDLINGS
    _instant_s: float | None = None
    _at_instant: Counter[tuple[str, str | None]] = field(default_factory=Counter)
    _handled: int = 0

    def note(self, time_s: float, queue: str, message_id: str | None) -> str | None:
        self._handled += 1
        if time_s != self._instant_s:
            self._instant_s = time_s
            self._at_instant.clear()
        self._at_instant[queue, message_id] += 1
        if self._at_instant[queue, message_id] >= self.per_instant:
            shown = repr(message_id) if message_id is not None else "without a message id"
            return (
                f"message {shown} on queue {queue!r} was handled {self.per_instant:,} times at "
                f"virtual time {time_s:g}s: it goes back to {queue!r} at once, every time, so "
                "the clock never moves (a handler that fails on a queue without max_attempts "
                "does that)"
            )
        if self._handled >= self.total:
            return (
                f"{self.total:,} handlings by virtual time {time_s:g}s: stopped (a shorter "
                "--for or fewer messages simulate less)"
            )
        return None


def parse_publish(spec: str) -> Publish:
    """``QUEUE=BODY`` -> the message: a JSON object or array is sent as JSON
    (``application/json``), anything else (``null``, ``NaN``, ``1e400``, text) as text, and
    either way byte for byte as given."""
    queue, sep, body = spec.partition("=")
    if not sep or not queue:
        raise ValueError(f"--publish takes QUEUE=BODY, not {spec!r}")
    return Publish(queue, body.encode(), _is_json_document(body))


def parse_publish_file(text: str, name: str = "the file") -> list[Publish]:
    """``--publish-file``'s JSON Lines (docs/reference/runtime.md, "rr simulate"): one object a
    line,
    ``{"queue": Q, "message_id": ID, "body": B}`` (``message_id`` optional; blank lines
    skipped). A body that is an object or an array is sent as JSON (``json.dumps``), a string
    as its text, anything else as its JSON text."""
    messages = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{name}, line {number}"
        try:
            entry = json.loads(line, parse_constant=_refuse_constant)
        except (ValueError, RecursionError) as error:
            raise ValueError(f"{where} is not JSON: {error}") from None
        if not isinstance(entry, dict) or set(entry) - {"queue", "message_id", "body"}:
            raise ValueError(
                f'{where}: each line is {{"queue": ..., "message_id": ..., "body": ...}}'
            )
        queue, message_id = entry.get("queue"), entry.get("message_id")
        if not isinstance(queue, str) or not queue:
            raise ValueError(f"{where}: queue must be a queue's name")
        if message_id is not None and (not isinstance(message_id, str) or not message_id):
            raise ValueError(f"{where}: message_id must be a non-empty string")
        if "body" not in entry:
            raise ValueError(f"{where}: body is missing")
        body = entry["body"]
        is_json = isinstance(body, dict | list)
        data = body if isinstance(body, str) else json.dumps(body)
        messages.append(Publish(queue, data.encode(), is_json, message_id))
    return messages


def _is_json_document(text: str) -> bool:
    if not text.lstrip().startswith(("{", "[")):
        return False
    try:
        json.loads(text, parse_constant=_refuse_constant)
    except (ValueError, RecursionError):
        return False
    return True


def _refuse_constant(name: str) -> object:
    raise ValueError(f"{name} is not JSON")


async def simulate(
    topology: Topology,
    handlers: HandlerSet,
    publishes: Sequence[Publish],
    *,
    horizon_s: float,
    watch: HandlerWatch | None = None,
    handler_timeout_s: float = HANDLER_TIMEOUT_S,
    server_version: str | None = None,
    state: object | None = None,
) -> Simulation:
    """Run ``handlers`` on ``topology`` in the emulator for up to ``horizon_s`` virtual s
    (``watch``: the handler calls, seen from outside; a call longer than
    ``handler_timeout_s`` real seconds stops the run), as ``server_version`` behaves
    (default: :func:`~rabbitctl_retry.testing.release_for` the topology). ``state``: the
    service's state, given; then no startup or shutdown hook runs (docs/how-to/test-a-service.md,
    "Testing handlers")."""
    watch = watch or HandlerWatch()
    handlers = watch.watched(handlers)
    release = server_version or release_for(topology)
    async with TestBroker(topology, server_version=release) as broker:
        run = _Run(broker, topology.broker.retry_header, state)
        watcher = asyncio.ensure_future(run.watching(watch, handler_timeout_s))
        try:
            await _until_done_or_stuck(run.steps(handlers, publishes, horizon_s), run.stuck)
        finally:
            watcher.cancel()
        await run.finish(horizon_s)
    if run.looped:
        raise SimulationLooped(f"rr simulate stopped: {run.looped[0]}", run.result)
    return run.result


class _Run:
    """One simulation under way: the timeline it writes as the broker and the handlers act,
    and why it stopped, if it did."""

    def __init__(self, broker: TestBroker, retry_header: str, state: object | None) -> None:
        self.broker = broker
        self.state = state
        self.retry_header = retry_header
        self.result = Simulation()
        self.start_s: float = broker.clock.now_s
        self.seen_events = len(broker.history)
        self.message_ids: dict[int, str | None] = {}
        """The emulator's message numbers -> message ids."""
        self.guard = LoopGuard()
        self.looped: list[str] = []
        self.stuck = asyncio.Event()
        self.outputs: dict[int, list[TimelineRow]] = {}
        """The output rows of a delivery (by ``id``), until the row of its ack."""

    def _now_s(self) -> float:
        """Virtual seconds since the run started."""
        now_s: float = self.broker.clock.now_s
        return now_s - self.start_s

    def drain(self) -> None:
        """What the broker did on its own during the last step, after that step's rows."""
        events = self.broker.history
        for event in events[self.seen_events :]:
            if isinstance(event, Published):
                self.message_ids[event.message] = event.message_id
            row = _server_row(event, self.start_s, self.message_ids)
            if row is not None:
                self.result.rows.append(row)
        self.seen_events = len(events)

    def on_decision(self, queue: str, delivery: Delivery, decision: Decision) -> None:
        """rr run's decision on a delivery: its row, and whether the message loops."""
        if self.stuck.is_set():
            return
        self.drain()
        self.result.rows.append(
            _decision_row(self._now_s(), queue, delivery, decision, self.retry_header)
        )
        self.result.rows.extend(self.outputs.pop(id(delivery), ()))
        problem = self.guard.note(self._now_s(), queue, delivery.properties.message_id)
        if problem is not None:
            self.looped.append(problem)
            self.stuck.set()

    def on_outputs(self, queue: str, delivery: Delivery, outputs: tuple[Outgoing, ...]) -> None:
        """A delivery's outputs, all confirmed: shown under the row of its ack, which
        :meth:`on_decision` writes next."""
        self.outputs[id(delivery)] = [
            _output_row(self._now_s(), queue, delivery, output) for output in outputs
        ]

    async def steps(
        self, handlers: HandlerSet, publishes: Sequence[Publish], horizon_s: float
    ) -> None:
        """Start rr run, publish the messages, then move the clock from one due timer to
        the next until nothing is due or the horizon is reached."""
        broker = self.broker
        await broker.run(
            handlers,
            listener=self.on_decision,
            on_outputs=self.on_outputs,
            shutdown_timeout_s=1.0,
            state=self.state,
        )
        self.drain()
        for number, message in enumerate(publishes, start=1):
            await self._publish(message, message.message_id or f"m{number}")
        end_s = self.start_s + horizon_s
        while (due := broker.clock.next_due_s()) is not None and due <= end_s:
            await broker.advance(max(0.0, due - broker.clock.now_s))
            self.drain()
        self.result.finished = broker.clock.next_due_s() is None

    async def _publish(self, message: Publish, message_id: str) -> None:
        self.result.rows.append(
            TimelineRow(
                time_s=self._now_s(),
                queue=message.queue,
                event="published",
                message_id=message_id,
            )
        )
        content_type = "application/json" if message.is_json else "text/plain"
        properties = Properties(content_type=content_type, delivery_mode=2, message_id=message_id)
        await self.broker.publish(message.queue, message.body, properties=properties)
        self.drain()

    async def watching(self, watch: HandlerWatch, handler_timeout_s: float) -> None:
        """Stop the run on a handler call that has not returned in ``handler_timeout_s``."""
        while (problem := watch.overdue(handler_timeout_s)) is None:
            await asyncio.sleep(min(0.1, handler_timeout_s / 10))
        self.looped.append(problem)
        self.stuck.set()
        watch.stop()
        self.broker.emulator.cancel_callbacks()  # a delivery waiting on a thread never ends

    async def finish(self, horizon_s: float) -> None:
        """The run's times, the broker stopped, and what each queue holds at the end."""
        result = self.result
        # Nothing left to happen: the run ends there, not at --for (docs/reference/runtime.md).
        stopped_early = self.looped or result.finished
        result.elapsed_s = self._now_s() if stopped_early else horizon_s
        result.last_event_s = result.rows[-1].time_s if result.rows else 0.0
        await self.broker.stop()
        for name in self.broker.emulator.queue_names():
            result.queues[name] = self.broker.emulator.queue(name).ready


def _decision_row(
    time_s: float, queue: str, delivery: Delivery, decision: Decision, retry_header: str
) -> TimelineRow:
    """rr run's decision on ``delivery`` from ``queue``, as a row."""
    counts = counts_of(delivery.properties.headers, retry_header, queue)
    detail = ""
    if decision.destination:
        detail = f"-> {decision.destination}"
    if decision.delay_ms:
        detail += f" in {decision.delay_ms / 1000:g}s"
    if decision.failure is not None:
        detail += f" ({decision.failure.type}: {decision.failure.message})"
    if counts.carried_retry_count is not None:
        detail += f" ({carried_text(counts)})"
    return TimelineRow(
        time_s=time_s,
        queue=queue,
        event=decision.event.value,
        attempt=decision.attempt,
        retry_count=counts.retry_count,
        delivery_count=counts.delivery_count,
        detail=detail.strip(),
        message_id=delivery.properties.message_id,
        carried_retry_count=counts.carried_retry_count,
        origin_queue=counts.origin_queue,
    )


def _output_row(time_s: float, queue: str, delivery: Delivery, output: Outgoing) -> TimelineRow:
    """An output of ``delivery`` from ``queue``, confirmed, as a row."""
    origin = OutputOrigin(
        exchange=output.exchange,
        routing_key=output.routing_key,
        from_queue=queue,
        from_message_id=delivery.properties.message_id,
    )
    source = origin.from_message_id if origin.from_message_id is not None else "(no id)"
    detail = f"published by {source} in {queue}"
    if output.exchange:
        detail += f" (routing key {output.routing_key})"
    return TimelineRow(
        time_s=time_s,
        queue=output.destination,
        event="output",
        detail=detail,
        message_id=output.properties.message_id,
        output=origin,
    )


async def _until_done_or_stuck(steps: Coroutine[Any, Any, None], stuck: asyncio.Event) -> None:
    """Run ``steps``; if ``stuck`` is set first, cancel them (the broker is stopped next)."""
    task = asyncio.ensure_future(steps)
    waiter = asyncio.ensure_future(stuck.wait())
    try:
        await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiter.cancel()
    if not task.done():
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        return
    task.result()


def _server_row(
    event: object, start_s: float, message_ids: Mapping[int, str | None]
) -> TimelineRow | None:
    """What the broker did on its own: dead-lettering, dropping, returning."""
    match event:
        case DeadLettered():
            queue, what = event.from_queue, f"server dead-lettered ({event.reason})"
            detail = f"-> {', '.join(event.to_queues) or 'nowhere'}"
        case Dropped():
            queue, what, detail = event.queue, f"server dropped ({event.cause})", ""
        case Returned():
            return TimelineRow(
                time_s=event.at_s - start_s,
                queue=event.routing_key,
                event="returned (unroutable)",
            )
        case _:
            return None
    return TimelineRow(
        time_s=event.at_s - start_s,
        queue=queue,
        event=what,
        detail=detail,
        message_id=message_ids.get(event.message),
    )
