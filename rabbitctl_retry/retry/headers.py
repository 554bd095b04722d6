"""Pure. The headers rr reads and writes: the retry count, x-death, and copy hygiene.

* The retry header (``x-ruststream-retry-count`` by default) holds how many copies came
  before this one, as a decimal string (RustStream writes a long string; rr reads integers
  too). Absent or malformed counts as 0. One rule for every count rr reads (the retry
  header, ``x-delivery-count``, ``rr-replayed-count``, the counts in ``x-death``):
  :func:`count_value`.
* ``x-delivery-count`` is the quorum queue's count of returns (absent on a first delivery).
* ``x-death`` is RabbitMQ's dead-letter history, newest first, one entry per (queue, reason).
* A copy keeps the application headers and drops the broker's own: ``x-death``,
  ``x-first-death-*``, ``x-last-death-*``, ``x-delivery-count``, ``x-acquired-count`` and
  ``x-delay``. Since RabbitMQ 3.13 ``x-`` headers belong to the broker; a copy that kept
  ``x-death`` would be misread as history it never had.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from rabbitctl_retry.fields import FieldValue

DEFAULT_RETRY_HEADER = "x-ruststream-retry-count"
"""The retry header RustStream writes; rr's default, so both can share queues (a topology's
``[broker] retry_header`` names another)."""
DELIVERY_COUNT_HEADER = "x-delivery-count"
ACQUIRED_COUNT_HEADER = "x-acquired-count"
"""RabbitMQ 4.3's count of every time a quorum queue handed the message out (requeues by
``basic.nack`` included, which ``x-delivery-count`` no longer counts)."""
DELAY_HEADER = "x-delay"
ORIGIN_QUEUE_HEADER = "rr-origin-queue"
FAILED_AT_HEADER = "rr-failed-at"
ERROR_TYPE_HEADER = "rr-error-type"
ERROR_MESSAGE_HEADER = "rr-error-message"
HANDLER_HEADER = "rr-handler"
"""The handler whose last attempt failed (``module:function``), on rr's dead-letter copies."""
RR_DEATH_HEADERS = frozenset(
    {ORIGIN_QUEUE_HEADER, FAILED_AT_HEADER, ERROR_TYPE_HEADER, ERROR_MESSAGE_HEADER, HANDLER_HEADER}
)
"""What rr writes on a dead letter about where and why it failed."""
PUBLISHED_AT_HEADER = "x-ruststream-published-at"
"""When the message was published, in Unix milliseconds as ASCII decimal digits (a long
string), as RustStream's OpenTelemetry layer stamps it: the consumer's queue time is now minus
this (docs/reference/runtime.md, "Tracing and metrics")."""
TRACEPARENT_HEADER = "traceparent"
TRACESTATE_HEADER = "tracestate"
"""The W3C trace context headers, as OpenTelemetry propagates them over AMQP."""
REPLAYED_COUNT_HEADER = "rr-replayed-count"
REPLAYED_AT_HEADER = "rr-replayed-at"

BROKER_HEADERS = frozenset({"x-death", DELIVERY_COUNT_HEADER, ACQUIRED_COUNT_HEADER, DELAY_HEADER})
ROUTING_HEADERS = frozenset({"CC", "BCC"})
"""Sender-selected distribution: RabbitMQ routes a message to the queues these name as well
as to its routing key. A delivered message may still carry ``CC``; a copy rr makes must go to
its own destination only, so copies never carry them."""
BROKER_HEADER_PREFIXES = ("x-first-death-", "x-last-death-")


MAX_COUNT = 1_000_000_000
"""The largest count rr reads from a header. Counts are small (a message retried every
second for 30 years stays below it); anything larger is malformed."""


def utc_stamp(moment: datetime) -> str:
    """``moment`` as ISO 8601 UTC with milliseconds, ``2024-05-01T10:00:00.123Z``: how rr
    writes times (``rr-failed-at``, ``rr-replayed-at``, log lines)."""
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def count_value(value: object, *, maximum: int = MAX_COUNT) -> int | None:
    """A count from a header value, or ``None`` when it is not a well-formed one.

    Well-formed: an integer (not a boolean) from 0 to ``maximum``, or that number
    written in ASCII digits (``"3"``, ``b"3"``; surrounding spaces allowed). Anything else is
    malformed — ``"²"`` (a digit to ``str.isdigit()`` but not to ``int()``), ``"-1"``,
    ``"1e3"``, 5,000 digits, a float, a table — and never raises.
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if 0 <= value <= maximum else None
    digits = len(str(maximum))
    if isinstance(value, bytes):
        if len(value) > digits + 64:
            return None
        try:
            value = value.decode("ascii")
        except UnicodeDecodeError:
            return None
    if not isinstance(value, str) or len(value) > digits + 64:
        return None
    text = value.strip()
    if not text or len(text) > digits or not (text.isascii() and text.isdigit()):
        return None
    number = int(text)
    return number if number <= maximum else None


MAX_UNIX_MS = 10**14
"""Later than any publish time rr will see (the year 5138); a larger stamp is malformed."""


def published_at_ms(headers: Mapping[str, FieldValue] | None) -> int | None:
    """The publish time stamped in :data:`PUBLISHED_AT_HEADER` (Unix milliseconds), or
    ``None`` when the header is absent or malformed (a foreign producer's message simply has
    no queue time)."""
    if not headers:
        return None
    return count_value(headers.get(PUBLISHED_AT_HEADER), maximum=MAX_UNIX_MS)


COUNT_HEADERS = (DELIVERY_COUNT_HEADER, ACQUIRED_COUNT_HEADER, REPLAYED_COUNT_HEADER)
"""Numeric headers rr reads besides the retry header (and the counts inside ``x-death``)."""


def malformed_counts(headers: Mapping[str, FieldValue] | None, retry_header: str) -> list[str]:
    """The numeric headers of ``headers`` that are present but malformed (they count 0)."""
    if not headers:
        return []
    found = [
        name
        for name in (retry_header, *COUNT_HEADERS)
        if name in headers and count_value(headers[name]) is None
    ]
    raw_deaths = headers.get("x-death")
    if isinstance(raw_deaths, list) and any(
        isinstance(entry, dict) and "count" in entry and count_value(entry["count"]) is None
        for entry in raw_deaths
    ):
        found.append("x-death")
    return found


def retry_count(headers: Mapping[str, FieldValue] | None, header: str) -> int:
    """The retry header's count; 0 when absent or malformed."""
    if not headers:
        return 0
    return count_value(headers.get(header)) or 0


def delivery_count(headers: Mapping[str, FieldValue] | None) -> int | None:
    """The quorum ``x-delivery-count``, or ``None`` (classic queues, first deliveries)."""
    if not headers:
        return None
    return count_value(headers.get(DELIVERY_COUNT_HEADER))


def acquired_count(headers: Mapping[str, FieldValue] | None) -> int | None:
    """RabbitMQ 4.3's ``x-acquired-count``, or ``None`` (older servers, classic queues, first
    deliveries). Information only: rr counts attempts by ``x-delivery-count``."""
    if not headers:
        return None
    return count_value(headers.get(ACQUIRED_COUNT_HEADER))


def counted_copies(headers: Mapping[str, FieldValue] | None, header: str, queue: str) -> int:
    """The copies that count as attempts of ``queue``: the retry header, unless the message
    is a dead letter of another queue (``rr-origin-queue`` names one): that queue's attempts
    are spent, and ``queue``'s start afresh (docs/explanation/attempts.md, "Attempts")."""
    if headers:
        origin = headers.get(ORIGIN_QUEUE_HEADER)
        if isinstance(origin, bytes):
            origin = origin.decode("utf-8", "replace")
        if isinstance(origin, str) and origin != queue:
            return 0
    return retry_count(headers, header)


def attempt_of(headers: Mapping[str, FieldValue] | None, header: str, queue: str) -> int:
    """``1 + copies counted in queue + x-delivery-count``: every delivery counts, the first
    is 1 (:func:`counted_copies`)."""
    return 1 + counted_copies(headers, header, queue) + (delivery_count(headers) or 0)


def is_broker_header(name: str) -> bool:
    return name in BROKER_HEADERS or name.startswith(BROKER_HEADER_PREFIXES)


def without_routing_headers(
    headers: Mapping[str, FieldValue] | None,
) -> dict[str, FieldValue]:
    """``headers`` without the sender-selected distribution headers ``CC`` and ``BCC``: a
    copy that carried them would reach the queues they name too (every copy rr publishes:
    retries, dead letters, replays, moves, imports)."""
    return {name: value for name, value in (headers or {}).items() if name not in ROUTING_HEADERS}


def copy_headers(
    headers: Mapping[str, FieldValue] | None,
    updates: Mapping[str, FieldValue],
    *,
    remove: frozenset[str] = frozenset(),
) -> dict[str, FieldValue]:
    """The headers of a copy: the application headers (not the broker's, not ``CC`` /
    ``BCC``), minus ``remove``, plus ``updates``."""
    result: dict[str, FieldValue] = {
        name: value
        for name, value in (headers or {}).items()
        if not is_broker_header(name) and name not in ROUTING_HEADERS and name not in remove
    }
    result.update(updates)
    return result


@dataclass(frozen=True, slots=True)
class Death:
    """One ``x-death`` entry: ``count`` times dead-lettered from ``queue`` for ``reason``."""

    queue: str
    reason: str
    count: int
    exchange: str
    routing_keys: tuple[str, ...]
    time: datetime | None = None
    original_expiration: str | None = None


def _text(value: object) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value if isinstance(value, str) else ""


def x_death_well_formed(headers: Mapping[str, FieldValue] | None) -> bool:
    """``x-death`` is absent or shaped as RabbitMQ writes it: a list of tables, each with a
    text ``queue`` and ``reason``, an integer ``count``, no two for the same queue, reason and
    exchange. RabbitMQ 3.x crashes its dead-lettering on other shapes (docs/reference/runtime.md,
    "Malformed messages"), so rr never hands it such a message to dead-letter."""
    raw = (headers or {}).get("x-death")
    if raw is None:
        return True
    if not isinstance(raw, list):
        return False
    seen: set[tuple[str, str, object]] = set()
    for entry in raw:
        if not isinstance(entry, dict):
            return False
        queue, reason, count = entry.get("queue"), entry.get("reason"), entry.get("count")
        if not isinstance(queue, str) or not isinstance(reason, str):
            return False
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            return False
        exchange = entry.get("exchange")
        if exchange is not None and not isinstance(exchange, str):
            return False
        keys = entry.get("routing-keys")
        if keys is not None and not (
            isinstance(keys, list) and all(isinstance(key, str) for key in keys)
        ):
            return False
        key = (queue, reason, exchange)
        if key in seen:
            return False
        seen.add(key)
    return True


def deaths(headers: Mapping[str, FieldValue] | None) -> tuple[Death, ...]:
    """The parsed ``x-death`` history, newest first; malformed entries are skipped."""
    raw = (headers or {}).get("x-death")
    if not isinstance(raw, list):
        return ()
    parsed = []
    for entry in raw:
        if not isinstance(entry, dict):
            continue
        keys = entry.get("routing-keys")
        expiration = entry.get("original-expiration")
        time = entry.get("time")
        parsed.append(
            Death(
                queue=_text(entry.get("queue")),
                reason=_text(entry.get("reason")),
                count=count_value(entry.get("count")) or 0,
                exchange=_text(entry.get("exchange")),
                routing_keys=tuple(_text(key) for key in keys) if isinstance(keys, list) else (),
                time=time if isinstance(time, datetime) else None,
                original_expiration=_text(expiration) if expiration is not None else None,
            )
        )
    return tuple(parsed)
