"""The W3C trace context in an AMQP header table: extracted from a delivery's headers
(a malformed ``traceparent`` is ignored: no parent), and injected, with the publish stamp, into
the headers of what rr publishes (docs/reference/runtime.md, "Tracing and metrics").

Loaded only when tracing is on (``telemetry/switch.py``): it imports OpenTelemetry.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from opentelemetry.context import Context
from opentelemetry.propagators.textmap import Getter
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from rabbitctl_retry.fields import FieldValue
from rabbitctl_retry.retry.headers import (
    PUBLISHED_AT_HEADER,
    TRACEPARENT_HEADER,
    TRACESTATE_HEADER,
)
from rabbitctl_retry.telemetry.trace_context import header_text

PROPAGATOR = TraceContextTextMapPropagator()
"""W3C trace context, as RustStream propagates it (``traceparent``, ``tracestate``)."""


class _HeaderGetter(Getter[Mapping[str, FieldValue]]):
    """A header's value as the propagator reads it: ASCII text only (a string or ASCII bytes
    up to 512 characters); anything else is absent."""

    def get(self, carrier: Mapping[str, FieldValue], key: str) -> list[str] | None:
        text = header_text(carrier.get(key))
        return None if text is None else [text]

    def keys(self, carrier: Mapping[str, FieldValue]) -> list[str]:
        return list(carrier)


_GETTER = _HeaderGetter()


def extract(headers: Mapping[str, FieldValue] | None) -> Context:
    """The trace context ``headers`` carry (an empty context when none or malformed: the span
    started in it is a new root). Never raises."""
    if not headers or TRACEPARENT_HEADER not in headers:
        return Context()
    try:
        return PROPAGATOR.extract(headers, context=Context(), getter=_GETTER)
    except Exception:  # a malformed header is no parent, whatever it holds
        return Context()


def now_ms() -> int:
    """Now in Unix milliseconds: the value of :data:`PUBLISHED_AT_HEADER`."""
    return time.time_ns() // 1_000_000


def inject(headers: Mapping[str, FieldValue] | None, context: Context) -> dict[str, FieldValue]:
    """``headers`` with the trace context of ``context`` (``traceparent``, ``tracestate``:
    those of the headers replaced) and a fresh publish stamp (Unix ms as decimal text). A
    context without a valid span keeps the headers' own trace context. The other headers
    stay as they are, in their order."""
    carrier: dict[str, str] = {}
    PROPAGATOR.inject(carrier, context=context)
    stamped: dict[str, FieldValue] = dict(headers) if headers else {}
    if TRACEPARENT_HEADER in carrier:
        stamped.pop(TRACESTATE_HEADER, None)
        stamped.update(carrier)
    stamped[PUBLISHED_AT_HEADER] = str(now_ms())
    return stamped
