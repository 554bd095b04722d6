"""OpenTelemetry for ``rr run`` and what rr publishes (docs/reference/runtime.md, "Tracing and
metrics"): traces and metrics, through the optional ``otel`` extra.

Nothing here imports ``opentelemetry`` at import time: :mod:`.switch` decides once, at
start-up, whether tracing is on (the extra installed and a tracer provider given or set), and
only then loads :mod:`.tracing`, the one tracing module that imports it; :mod:`.metrics`
records the shared metric names (:mod:`.names`) through a meter provider, likewise only when
one is given or set. ``trace_context.py`` reads a W3C ``traceparent`` without it (``rr dlq
inspect`` shows the trace id of every letter).
"""
