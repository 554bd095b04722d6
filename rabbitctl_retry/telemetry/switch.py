"""Whether rr traces, decided once at start-up (docs/reference/runtime.md, "Tracing and metrics").

On when the ``otel`` extra is importable and a tracer provider is either given (``Service(...,
tracer_provider=...)``, ``TestBroker(..., tracer_provider=...)``, ``rr.Publisher(...,
tracer_provider=...)``) or set process-wide (``opentelemetry-instrument rr run ...``, or the
user's own module calling ``trace.set_tracer_provider``). The API's default (a proxy that
makes no spans) is off, and ``RR_OTEL=off`` is off whatever else is set. Off imports nothing:
``opentelemetry`` is looked up in :data:`sys.modules` (a provider can only have been set by
code that imported it) and :mod:`.tracing` is loaded only when on.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rabbitctl_retry.telemetry.tracing import Tracing

SWITCH_ENV = "RR_OTEL"
"""``off`` (or ``0``, ``false``, ``no``) turns rr's telemetry off."""
_OFF = frozenset({"off", "0", "false", "no"})
_DEFAULT_PROVIDERS = frozenset({"ProxyTracerProvider", "NoOpTracerProvider"})
"""The API's own providers: no SDK behind them, no spans."""


def forced_off() -> bool:
    """``RR_OTEL=off``."""
    return os.environ.get(SWITCH_ENV, "").strip().lower() in _OFF


def global_provider() -> object | None:
    """The process-wide tracer provider, if code already imported OpenTelemetry and set one
    (not the API's default proxy)."""
    trace_module = sys.modules.get("opentelemetry.trace")
    if trace_module is None:
        return None
    provider: object = trace_module.get_tracer_provider()
    if type(provider).__name__ in _DEFAULT_PROVIDERS:
        return None
    return provider


def tracing_for(tracer_provider: object | None = None) -> Tracing | None:
    """rr's tracing with ``tracer_provider`` (else the process-wide one), or ``None`` when
    tracing is off (module doc)."""
    if forced_off():
        return None
    provider = tracer_provider if tracer_provider is not None else global_provider()
    if provider is None:
        return None
    try:
        from rabbitctl_retry.telemetry.tracing import Tracing
    except ImportError:  # pragma: no cover - a provider given without the extra installed
        return None
    return Tracing(provider)
