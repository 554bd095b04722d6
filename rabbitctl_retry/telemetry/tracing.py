"""rr's spans (docs/reference/runtime.md, "Tracing and metrics"): a CONSUMER span per delivery of
``rr run``, child of the ``traceparent`` the message carries, current while the handler runs
and while its decision is carried out; a PRODUCER span per message ``rr.Publisher`` and
``rr publish`` send and per copy ``rr dlq replay`` and ``rr dlq move`` make; and the trace
context, with the publish stamp, on every copy rr publishes.

Loaded only when tracing is on (``telemetry/switch.py``): it imports OpenTelemetry.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, TracerProvider

from rabbitctl_retry.fields import FieldValue
from rabbitctl_retry.retry.headers import attempt_of, retry_count
from rabbitctl_retry.retry.outcome import Failure
from rabbitctl_retry.retry.policy import (
    AckAction,
    Decision,
    Event,
    GiveBackAction,
    RejectAction,
    RepublishAction,
    RetryPolicy,
    ScheduleAction,
)
from rabbitctl_retry.telemetry.propagation import extract, inject
from rabbitctl_retry.transport.base import Delivery, Properties

INSTRUMENTATION = "rabbitctl_retry"
DEAD_LETTERED_EVENT = "rr.dead_lettered"
"""The span event of a delivery whose decision dead-letters it (by rr's copy, or by the
server: a quorum queue at its delivery limit, or a reject its dead-letter route moves)."""

SYSTEM = {"messaging.system": "rabbitmq"}


def settle_frame(decision: Decision) -> str:
    """The frame that settles the delivery (``rr.settle``)."""
    match decision.action:
        case AckAction():
            return "basic.ack"
        case RejectAction():
            return "basic.reject"
        case GiveBackAction():
            return "basic.nack"
        case RepublishAction() | ScheduleAction():
            return "copy+ack"
    return type(decision.action).__name__  # pragma: no cover - every action is above


def dead_letter_attributes(decision: Decision) -> dict[str, str] | None:
    """The attributes of the ``rr.dead_lettered`` event of ``decision``, or ``None`` when it
    does not dead-letter the delivery: ``by = rr`` (rr publishes the dead-letter copy; the
    reason is the failure's type) or ``by = server`` (rr's reject leaves it to the queue's
    dead-letter route: ``delivery_limit`` for a quorum queue's requeue past its limit,
    ``rejected`` for a reject without requeue)."""
    target = decision.destination
    action = decision.action
    if target is None or decision.event not in (Event.DEAD_LETTERED, Event.DROPPED):
        return None
    if isinstance(action, RejectAction):
        reason = "delivery_limit" if action.requeue else "rejected"
        return {
            "rr.dead_letter.target": target,
            "rr.dead_letter.by": "server",
            "rr.dead_letter.reason": reason,
        }
    reason = decision.failure.type if decision.failure is not None else "dead_letter"
    return {
        "rr.dead_letter.target": target,
        "rr.dead_letter.by": "rr",
        "rr.dead_letter.reason": reason,
    }


def _failed(span: Span, failure_type: str, message: str) -> None:
    span.set_status(Status(StatusCode.ERROR, f"{failure_type}: {message}"))
    span.set_attributes({"error.type": failure_type, "exception.message": message})


class DeliverySpan:
    """The span of one delivery: what its handler and its decision come to."""

    __slots__ = ("span",)

    def __init__(self, span: Span) -> None:
        self.span = span

    def acked(self) -> None:
        """The hot path: the handler acked, the delivery is acked."""
        self.span.set_attributes({"rr.outcome": Event.ACKED.value, "rr.settle": "basic.ack"})

    def decided(self, decision: Decision) -> None:
        """What ``decide()`` made of the delivery."""
        span = self.span
        span.set_attributes(
            {"rr.outcome": decision.event.value, "rr.settle": settle_frame(decision)}
        )
        if decision.failure is not None:
            self.failed(decision.failure)
        dead_letter = dead_letter_attributes(decision)
        if dead_letter is not None:
            span.add_event(DEAD_LETTERED_EVENT, dead_letter)

    def failed(self, failure: Failure) -> None:
        _failed(self.span, failure.type, failure.message)

    def crashed(self, error: BaseException) -> None:
        """rr's own failure for this delivery (``runtime/give_up.py``)."""
        self.span.record_exception(error)
        _failed(self.span, type(error).__qualname__, str(error))


class Tracing:
    """rr's tracer and propagation, on one tracer provider (module doc)."""

    __slots__ = ("_tracer",)

    def __init__(self, provider: object) -> None:
        from rabbitctl_retry import __version__

        assert isinstance(provider, TracerProvider)
        self._tracer = provider.get_tracer(INSTRUMENTATION, __version__)

    # -- propagation ----------------------------------------------------------------------

    @staticmethod
    def current() -> Context:
        """The current context: captured when a copy is published later (an in-memory delay)."""
        return otel_context.get_current()

    @staticmethod
    def stamp(
        headers: Mapping[str, FieldValue] | None, context: object | None = None
    ) -> dict[str, FieldValue]:
        """``headers`` with the trace context of ``context`` (else the current one) and a
        fresh publish stamp (``telemetry/propagation.py``)."""
        chosen = context if isinstance(context, Context) else otel_context.get_current()
        return inject(headers, chosen)

    def stamp_properties(self, properties: Properties, context: object | None = None) -> Properties:
        return dataclasses.replace(properties, headers=self.stamp(properties.headers, context))

    # -- spans ----------------------------------------------------------------------------

    @contextmanager
    def delivery(self, policy: RetryPolicy, delivery: Delivery) -> Iterator[DeliverySpan]:
        """The CONSUMER span of ``delivery`` from ``policy.queue``, current inside the block,
        ended at its end."""
        properties = delivery.properties
        headers = properties.headers
        attributes: dict[str, str | int] = {
            **SYSTEM,
            "messaging.destination.name": policy.queue,
            "messaging.operation.type": "process",
            "messaging.operation.name": "process",
            "messaging.rabbitmq.message.delivery_tag": delivery.delivery_tag,
            "messaging.rabbitmq.destination.routing_key": delivery.routing_key,
            "messaging.message.body.size": len(delivery.body),
            "rr.attempt": attempt_of(headers, policy.retry_header, policy.queue),
            "rr.retry_count": retry_count(headers, policy.retry_header),
        }
        if properties.message_id is not None:
            attributes["messaging.message.id"] = properties.message_id
        span = self._tracer.start_span(
            f"{policy.queue} process",
            context=extract(headers),
            kind=SpanKind.CONSUMER,
            attributes=attributes,
        )
        with trace.use_span(
            span, end_on_exit=True, record_exception=False, set_status_on_exception=False
        ):
            yield DeliverySpan(span)

    @contextmanager
    def producing(
        self,
        destination: str,
        *,
        message_id: str | None = None,
        parent: Mapping[str, FieldValue] | None = None,
        context: object | None = None,
        operation: str = "publish",
    ) -> Iterator[Span]:
        """A PRODUCER span ``<destination> publish``, current inside the block: a child of
        the current span; with ``parent``, of the trace context those headers carry (a
        replayed letter's span is a child of its failure's); with ``context``, of that
        captured context."""
        attributes: dict[str, str] = {
            **SYSTEM,
            "messaging.destination.name": destination,
            "messaging.operation.type": "send",
            "messaging.operation.name": operation,
        }
        if message_id is not None:
            attributes["messaging.message.id"] = message_id
        span = self._tracer.start_span(
            f"{destination} {operation}",
            context=extract(parent)
            if parent is not None
            else context
            if isinstance(context, Context)
            else None,
            kind=SpanKind.PRODUCER,
            attributes=attributes,
        )
        with trace.use_span(span, end_on_exit=True):
            yield span
