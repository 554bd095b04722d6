"""OpenTelemetry for ``rr run`` and the copies rr publishes (docs/runtime.md, "Tracing and
metrics").

Nothing here imports ``opentelemetry`` at import time: :mod:`.switch` decides once, at
start-up, whether tracing is on (the extra installed and a tracer provider given or set), and
only then loads :mod:`.tracing`, the one module that imports it. ``trace_context.py`` reads a
W3C ``traceparent`` without it (``rr dlq inspect`` shows the trace id of every letter).
"""
