"""OpenTelemetry for rr run: metrics (metrics.py) and traces, through the optional otel extra."""
