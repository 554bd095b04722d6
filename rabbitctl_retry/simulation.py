"""``rr simulate``: the same run on the built-in emulator, on a virtual clock, as a timeline.

The topology is declared on an emulated RabbitMQ exactly as ``rr declare`` would, the
handlers run in the ``rr run`` runtime unchanged, the given messages are published, and the
virtual clock moves from one due timer (a TTL expiry, a delayed message, an in-memory retry)
to the next until nothing is left to happen or the horizon is reached. Each step becomes a
row: virtual time, queue, event, attempt and the headers that matter.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field

from rabbitctl_retry.emulator.events import DeadLettered, Dropped, Returned
from rabbitctl_retry.retry.headers import delivery_count, retry_count
from rabbitctl_retry.retry.policy import Decision
from rabbitctl_retry.runtime.loader import HandlerSet
from rabbitctl_retry.testing import TestBroker
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


@dataclass(slots=True)
class Simulation:
    rows: list[TimelineRow] = field(default_factory=list)
    queues: dict[str, int] = field(default_factory=dict)
    """Messages left in each queue at the end."""
    elapsed_s: float = 0.0


def parse_publish(spec: str) -> tuple[str, bytes, bool]:
    """``QUEUE=BODY`` -> (queue, body, is_json): a JSON object or array is sent as JSON
    (``application/json``), anything else (``null``, ``NaN``, ``1e400``, text) as text, and
    either way byte for byte as given."""
    queue, sep, body = spec.partition("=")
    if not sep or not queue:
        raise ValueError(f"--publish takes QUEUE=BODY, not {spec!r}")
    return queue, body.encode(), _is_json_document(body)


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
    publishes: Sequence[tuple[str, bytes, bool]],
    *,
    horizon_s: float,
) -> Simulation:
    """Run ``handlers`` on ``topology`` in the emulator for up to ``horizon_s`` virtual s."""
    result = Simulation()
    async with TestBroker(topology) as broker:
        start_s = broker.clock.now_s
        first_event = len(broker.history)

        seen_events = first_event

        def drain() -> None:
            # What the broker did on its own during the last step, after that step's rows.
            nonlocal seen_events
            events = broker.history
            for event in events[seen_events:]:
                row = _server_row(event, start_s)
                if row is not None:
                    result.rows.append(row)
            seen_events = len(events)

        def on_decision(queue: str, delivery: Delivery, decision: Decision) -> None:
            drain()
            headers = delivery.properties.headers
            detail = ""
            if decision.destination:
                detail = f"-> {decision.destination}"
            if decision.delay_ms:
                detail += f" in {decision.delay_ms / 1000:g}s"
            if decision.failure is not None:
                detail += f" ({decision.failure.type}: {decision.failure.message})"
            result.rows.append(
                TimelineRow(
                    time_s=broker.clock.now_s - start_s,
                    queue=queue,
                    event=decision.event.value,
                    attempt=decision.attempt,
                    retry_count=retry_count(headers, topology.broker.retry_header) or None,
                    delivery_count=delivery_count(headers),
                    detail=detail.strip(),
                    message_id=delivery.properties.message_id,
                )
            )

        await broker.run(handlers, listener=on_decision)
        drain()
        for queue, body, is_json in publishes:
            result.rows.append(
                TimelineRow(time_s=broker.clock.now_s - start_s, queue=queue, event="published")
            )
            content_type = "application/json" if is_json else "text/plain"
            await broker.publish(
                queue, body, properties=Properties(content_type=content_type, delivery_mode=2)
            )
            drain()
        end_s = start_s + horizon_s
        while (due := broker.clock.next_due_s()) is not None and due <= end_s:
            await broker.advance(max(0.0, due - broker.clock.now_s))
            drain()
        result.elapsed_s = broker.clock.now_s - start_s
        await broker.stop()
        for name in broker.emulator.queue_names():
            result.queues[name] = broker.emulator.queue(name).ready
    return result


def _server_row(event: object, start_s: float) -> TimelineRow | None:
    """What the broker did on its own: dead-lettering, dropping, returning."""
    match event:
        case DeadLettered():
            target = ", ".join(event.to_queues) or "nowhere"
            return TimelineRow(
                time_s=event.at_s - start_s,
                queue=event.from_queue,
                event=f"server dead-lettered ({event.reason})",
                detail=f"-> {target}",
            )
        case Dropped():
            return TimelineRow(
                time_s=event.at_s - start_s,
                queue=event.queue,
                event=f"server dropped ({event.cause})",
            )
        case Returned():
            return TimelineRow(
                time_s=event.at_s - start_s,
                queue=event.routing_key,
                event="returned (unroutable)",
            )
    return None
