"""Pure. The names, units, attributes and buckets of the metrics ``rr run`` shares with
RustStream's OpenTelemetry layer, and what each of rr's decisions is in RustStream's
``outcome`` words (docs/reference/metrics.md, "Metrics").

Each instrument has its OpenTelemetry name (exported through a meter, telemetry/metrics.py)
and the name OpenTelemetry's Prometheus translation gives it (dots to underscores, the unit's
suffix, ``_total`` on counters), which the Prometheus page of ``rr run --metrics-port`` serves
(runtime/metrics.py) and the dashboard (dashboards/rr.json) queries.
"""

from __future__ import annotations

from dataclasses import dataclass

METER_NAME = "rabbitctl_retry"
"""The name of rr's meter (RustStream's is ``ruststream``)."""

DESTINATION = "messaging.destination.name"
SYSTEM = "messaging.system"
SYSTEM_RABBITMQ = "rabbitmq"
OUTCOME = "outcome"
ERROR_TYPE = "error.type"
ERROR_OTHER = "_OTHER"
"""``error.type`` of a publish that failed (returned, refused, cut or unencodable)."""
DIRECTION = "direction"
DIRECTION_PUBLISH = "publish"

DURATION_BUCKETS_S = (
    0.005,
    0.01,
    0.025,
    0.05,
    0.075,
    0.1,
    0.25,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
)
"""RustStream's bucket bounds of its duration and queue-time histograms, in seconds."""
SIZE_BUCKETS_BYTES = (
    0.0,
    5.0,
    10.0,
    25.0,
    50.0,
    75.0,
    100.0,
    250.0,
    500.0,
    750.0,
    1000.0,
    2500.0,
    5000.0,
    7500.0,
    10000.0,
)
"""The payload-size histogram's bounds, in bytes: OpenTelemetry's default bounds."""


@dataclass(frozen=True, slots=True)
class Instrument:
    """One metric: its OpenTelemetry name and unit, and its Prometheus name."""

    otel: str
    unit: str
    prometheus: str
    """The Prometheus name without the ``_total``/``_bucket`` suffix prometheus_client adds."""
    description: str


CONSUMED = Instrument(
    "messaging.client.consumed.messages",
    "{message}",
    "messaging_client_consumed_messages",
    "Deliveries rr run received, per queue (counted when the handler starts).",
)
PROCESS_DURATION = Instrument(
    "messaging.process.duration",
    "s",
    "messaging_process_duration_seconds",
    "From the handler's start to the decision carried out, per queue.",
)
PROCESSED = Instrument(
    "ruststream.messages.processed",
    "{message}",
    "ruststream_messages_processed",
    "Deliveries settled, per queue and outcome (ack, nack_requeue, nack_drop, retry_after).",
)
IN_FLIGHT = Instrument(
    "ruststream.messages.in_flight",
    "{message}",
    "ruststream_messages_in_flight",
    "Deliveries being handled now, per queue.",
)
QUEUE_TIME = Instrument(
    "ruststream.message.queue_time",
    "s",
    "ruststream_message_queue_time_seconds",
    "How long a delivery waited: its handler's start minus x-ruststream-published-at.",
)
DECODE_FAILURES = Instrument(
    "ruststream.messages.decode_failures",
    "{message}",
    "ruststream_messages_decode_failures",
    "Deliveries whose body did not decode into the handler's type.",
)
PANICS = Instrument(
    "ruststream.messages.panics",
    "{message}",
    "ruststream_messages_panics",
    "Handler calls that raised an exception (RustStream: a handler that panicked).",
)
SENT = Instrument(
    "messaging.client.sent.messages",
    "{message}",
    "messaging_client_sent_messages",
    "Messages rr published (copies, outputs, rr.Publisher); error.type=_OTHER when failed.",
)
OPERATION_DURATION = Instrument(
    "messaging.client.operation.duration",
    "s",
    "messaging_client_operation_duration_seconds",
    "How long one publish took (to the broker's confirm on a confirm channel).",
)
PAYLOAD_SIZE = Instrument(
    "ruststream.message.payload.size",
    "By",
    "ruststream_message_payload_size_bytes",
    "The body size of what rr published, direction=publish.",
)

INSTRUMENTS = (
    CONSUMED,
    PROCESS_DURATION,
    PROCESSED,
    IN_FLIGHT,
    QUEUE_TIME,
    DECODE_FAILURES,
    PANICS,
    SENT,
    OPERATION_DURATION,
    PAYLOAD_SIZE,
)

ACK = "ack"
NACK_REQUEUE = "nack_requeue"
NACK_DROP = "nack_drop"
RETRY_AFTER = "retry_after"

OUTCOME_OF_EVENT: dict[str, str] = {
    "acked": ACK,
    "retried": NACK_REQUEUE,
    "requeued": NACK_REQUEUE,
    "paused": NACK_REQUEUE,
    "delayed": RETRY_AFTER,
    "dead-lettered": NACK_DROP,
    "dropped": NACK_DROP,
    "spent": NACK_DROP,
}
"""rr's decision (``retry/policy.py``'s ``Event``, by its value: this module imports nothing,
so the metrics page, which starts before the runtime loads, stays light) -> RustStream's
``outcome`` (the table in
docs/reference/metrics.md, "Metrics"): a retry that requeues or copies to the queue, and a pause
(the message given back) -> ``nack_requeue``; a delay -> ``retry_after``; a dead letter, a drop and
a spent message (rejected at the cap without a dead-letter queue) -> ``nack_drop``."""


def outcome_of(event: str) -> str:
    """RustStream's ``outcome`` of rr's decision ``event`` (an ``Event``)."""
    return OUTCOME_OF_EVENT[event]
